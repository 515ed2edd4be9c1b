/**
 * Secrets out of recorded text (docs/security.md "Secrets are never recorded"). Generic: it knows
 * environment variables, key shapes and text, nothing of runs or notebooks. Two kinds of finding:
 *
 * - values: the values of environment variables named like credentials (`*_API_KEY`, `*_TOKEN`,
 *   `*_SECRET`, `*_PASSWORD`, …) and of any variable registered with `registerSecretName` (the
 *   key a researcher is handed under another name: program.md's `agent.api_key_env`), each
 *   replaced by `[redacted:NAME]` wherever it occurs;
 * - shapes: text that looks like a key whoever holds it — `sk-…`/`sk-ant-…`, `AKIA…`, `ghp_…`/
 *   `github_pat_…`, `xox[bpars]-…`, PEM private key blocks, `Bearer <token>`, a URL's password,
 *   and a long high-entropy token right after `key`/`token`/`secret`/`password` and `=` or `:` —
 *   replaced by `[redacted:key]`.
 *
 * Cheap on the common path: values are found with `includes`, shapes with one regular expression
 * behind a pre-test for the few substrings every shape contains. Normal text stays as it is: git
 * shas, UUIDs, sha256 digests, base64 of ordinary length and numbers match no shape.
 */

/** Variable names that hold credentials (agents/cli/env.ts keeps such variables from agents too). */
export const SECRET_NAME =
  /(_API_KEY|_APIKEY|_TOKEN|_SECRET|_SECRET_KEY|_SECRET_ACCESS_KEY|_ACCESS_KEY_ID|_PASSWORD|_PASSWD)$/i;
/**
 * Credentials by exact name. A database address (AUTOLAB_DB, DATABASE_URL) is not one: it is
 * shown and recorded as where the notebook lives; a password in it is caught by its shape.
 */
const SECRET_NAMES = new Set(["PGPASSWORD", "PASSWORD", "TOKEN", "SECRET"]);

/** Values shorter than this are not redacted by value (a `1` or `true` would wreck every text). */
export const MIN_SECRET_LENGTH = 8;

export function isSecretName(name: string): boolean {
  if (name === "AUTOLAB_TRIAL_TOKEN") return false;
  return SECRET_NAME.test(name) || SECRET_NAMES.has(name.toUpperCase());
}

/** The secret values of an environment: variable name → value (values too short left out). */
export function secretValuesOf(
  env: NodeJS.ProcessEnv,
  extraNames: Iterable<string> = [],
): Map<string, string> {
  const out = new Map<string, string>();
  const extra = new Set(extraNames);
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined || v.trim().length < MIN_SECRET_LENGTH) continue;
    if (isSecretName(k) || extra.has(k)) out.set(k, v.trim());
  }
  return out;
}

const KEY = "[redacted:key]";
// A PEM private key block; one cut short (a log's tail, a truncated text) goes up to where its
// base64 body (with whitespace or JSON's escaped newlines) ends, never past a quote or a brace:
// redacting must not break the JSON a secret sits in.
const PEM_BLOCK =
  /-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|(?:[A-Za-z0-9+/=\s]|\\[nr])*)/g;
const SHAPES = new RegExp(
  [
    // OpenAI / Anthropic style: sk-…, sk-proj-…, sk-ant-api03-…
    String.raw`(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]{20,}`,
    // AWS access key ids.
    String.raw`(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])`,
    // GitHub tokens.
    String.raw`(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{30,}`,
    String.raw`(?<![A-Za-z0-9_])github_pat_[A-Za-z0-9_]{22,}`,
    // Slack tokens.
    String.raw`(?<![A-Za-z0-9_-])xox[abeprs]-[A-Za-z0-9-]{10,}`,
  ].join("|"),
  "g",
);
// `Bearer <token>`: the token goes, the word stays.
const BEARER = /(\bBearer\s+)([A-Za-z0-9._~+/-]{16,}=*)/gi;
// A URL's password: scheme://user:PASSWORD@host. (No quote or backslash is ever taken, in any
// expression here: a JSON string's escapes must survive the replacement.)
const URL_PASSWORD = /(:\/\/[^\s:/@"'\\]+:)([^\s@/"'\\]+)(@)/g;
// A token after a word naming a secret and `=` or `:` (JSON and YAML quotes allowed around):
// `OPENAI_API_KEY=…` (the match starts at KEY), `"token": "…"`, `password: …` — not `monkey=…`
// (a letter before the word). AUTOLAB_TRIAL_TOKEN is no credential: the opaque id the runner
// reaps a trial's processes by (src/runner/process-tree.ts), which the trial itself may print.
const ASSIGNED =
  /((?<![A-Za-z])(?<!TRIAL_)(?:key|token|secret|password|passwd|pwd)(?:\\?["'])?\s*[:=]\s*(?:\\?["'])?)([^\s"'`,;)}\]\\]{12,})/gi;
// Cheap gates: each expression runs only on text that holds what every one of its matches holds.
const HAS_SHAPE = /sk-|AKIA|ASIA|gh[pousr]_|github_pat_|xox/;
const HAS_BEARER = /bearer/i;
const HAS_ASSIGNED = /(?:key|token|secret|password|passwd|pwd)(?:\\?["'])?\s*[:=]/i;
// All the gates in one pass: the common text (no finding) costs one scan.
const ANY =
  /sk-|akia|asia|gh[pousr]_|github_pat_|xox|bearer|:\/\/|private key|(?:key|token|secret|password|passwd|pwd)(?:\\?["'])?\s*[:=]/i;

/** Bits per character of `s` (Shannon entropy of its character counts). */
function entropy(s: string): number {
  const counts = new Map<string, number>();
  for (const c of s) counts.set(c, (counts.get(c) ?? 0) + 1);
  let h = 0;
  for (const n of counts.values()) {
    const p = n / s.length;
    h -= p * Math.log2(p);
  }
  return h;
}

/**
 * Whether a value after `token=` looks like a key: long, random-looking (≥ 3 bits a character),
 * not a plain number, not a word, and not a git sha or sha256 digest (40 or 64 hex digits, which
 * the harness records by the thousand: a protected file's hash under a file named `api_token`).
 */
function looksLikeKey(v: string): boolean {
  if (v.startsWith("[redacted:")) return false;
  if (/^[0-9a-f]{40}$|^[0-9a-f]{64}$/i.test(v)) return false;
  if (/^[-+]?[\d.,_eE]+$/.test(v)) return false;
  if (/^[a-z_-]+$/i.test(v)) return false;
  if (/^[./~]/.test(v)) return false;
  return entropy(v) >= 3;
}

/**
 * The key-shaped parts of `text` replaced by `[redacted:key]`; `found` (when given) collects
 * the replaced substrings.
 */
export function redactKeyShapes(text: string, found?: string[]): string {
  const hit = (s: string) => {
    found?.push(s);
    return KEY;
  };
  if (!ANY.test(text)) return text;
  let t = text;
  if (t.includes("PRIVATE KEY")) t = t.replace(PEM_BLOCK, hit);
  if (HAS_SHAPE.test(t)) t = t.replace(SHAPES, hit);
  if (HAS_BEARER.test(t))
    t = t.replace(BEARER, (m, lead: string, tok: string) => (looksLikeKey(tok) ? `${lead}${hit(tok)}` : m));
  if (t.includes("://") && t.includes("@"))
    // A password already masked (`***`, as viewers show database addresses) is left as it is.
    t = t.replace(URL_PASSWORD, (m, lead: string, pw: string, at: string) =>
      /^\*+$/.test(pw) ? m : `${lead}${hit(pw)}${at}`,
    );
  if (HAS_ASSIGNED.test(t))
    // A value already redacted (`key=[redacted:NAME]`) is not redacted again.
    t = t.replace(ASSIGNED, (m, lead: string, v: string) =>
      !v.includes("redacted:") && looksLikeKey(v) ? `${lead}${hit(v)}` : m,
    );
  return t;
}

/** A redactor over a fixed set of secret values (name → value) and the key shapes. */
export class SecretRedactor {
  // Longest first, so a value that contains another is replaced whole.
  readonly #values: Array<[string, string]>;

  constructor(values: ReadonlyMap<string, string> = new Map()) {
    this.#values = [...values].sort((a, b) => b[1].length - a[1].length);
  }

  /** Whether any value is known (else only shapes are redacted). */
  get size(): number {
    return this.#values.length;
  }

  /** `text` with the values and key shapes replaced; `found` (when given) collects what was replaced. */
  redact(text: string, found?: string[]): string {
    if (!text) return text;
    let t = text;
    for (const [name, value] of this.#values) {
      if (!t.includes(value)) continue;
      found?.push(value);
      t = t.split(value).join(`[redacted:${name}]`);
    }
    return redactKeyShapes(t, found);
  }

  /** The secrets in `text` (values and key-shaped substrings), without repeats. */
  find(text: string): string[] {
    const found: string[] = [];
    this.redact(text, found);
    return [...new Set(found)];
  }

  /** Every string in a JSON-like value redacted (a copy; the input is not changed). */
  redactDeep<T>(value: T): T {
    if (typeof value === "string") return this.redact(value) as T;
    if (Array.isArray(value)) return value.map((v) => this.redactDeep(v)) as T;
    if (value !== null && typeof value === "object") {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) out[k] = this.redactDeep(v);
      return out as T;
    }
    return value;
  }
}

// ---------------------------------------------------------------------------------------------
// The process's redactor: the secrets of this process's environment.

const registered = new Set<string>();
let current: SecretRedactor | undefined;

/**
 * Names a variable whose value is a secret though its name does not say so (a key handed to a
 * researcher under `agent.api_key_env: MY_KEY`). The process's redactor is rebuilt.
 */
export function registerSecretName(name: string): void {
  if (registered.has(name)) return;
  registered.add(name);
  current = undefined;
}

/**
 * Reads the environment again (the redactor is built from it once, at first use): a caller that
 * changed process.env (a run started with other keys) calls this.
 */
export function refreshSecrets(): void {
  current = undefined;
}

/** This process's redactor (built from process.env and the registered names at first use). */
export function secretRedactor(): SecretRedactor {
  current ??= new SecretRedactor(secretValuesOf(process.env, registered));
  return current;
}

/** `text` without this process's secret values and without key-shaped tokens. */
export function redactSecrets(text: string): string {
  return secretRedactor().redact(text);
}

/** Every string of a JSON-like value through redactSecrets. */
export function redactSecretsDeep<T>(value: T): T {
  return secretRedactor().redactDeep(value);
}

/**
 * A streaming redactor for a log written in chunks: text is redacted a line at a time, so a
 * secret split across two chunks is still found; a partial line waits for its end (at most
 * `maxPending` characters, then it is redacted as it is). A PEM private key block is dropped
 * from its BEGIN line to its END line whatever the chunks.
 */
export class SecretLineStream {
  #pending = "";
  #inPem = false;
  readonly #maxPending: number;
  readonly #redactor: () => SecretRedactor;

  constructor(opts: { maxPending?: number; redactor?: () => SecretRedactor } = {}) {
    this.#maxPending = opts.maxPending ?? 64 * 1024;
    this.#redactor = opts.redactor ?? secretRedactor;
  }

  /** Takes a chunk; returns the redacted text ready to be written (whole lines). */
  push(chunk: string): string {
    this.#pending += chunk;
    const nl = this.#pending.lastIndexOf("\n");
    if (nl === -1) {
      if (this.#pending.length < this.#maxPending) return "";
      return this.flush();
    }
    const ready = this.#pending.slice(0, nl + 1);
    this.#pending = this.#pending.slice(nl + 1);
    return this.#lines(ready);
  }

  /** Everything still pending, redacted (the end of the log). */
  flush(): string {
    const rest = this.#pending;
    this.#pending = "";
    return rest ? this.#lines(rest) : "";
  }

  #lines(text: string): string {
    if (!this.#inPem && !text.includes("PRIVATE KEY")) return this.#redactor().redact(text);
    const out: string[] = [];
    for (const line of text.split(/(?<=\n)/)) {
      if (this.#inPem) {
        if (/-----END[A-Z0-9 ]*PRIVATE KEY/.test(line)) {
          this.#inPem = false;
          out.push(line.slice(line.lastIndexOf("-----") + 5));
        }
        continue;
      }
      const begin = /-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----/.exec(line);
      if (begin && !/-----END[A-Z0-9 ]*PRIVATE KEY/.test(line)) {
        this.#inPem = true;
        out.push(`${this.#redactor().redact(line.slice(0, begin.index))}${KEY}\n`);
        continue;
      }
      out.push(this.#redactor().redact(line));
    }
    return out.join("");
  }
}
