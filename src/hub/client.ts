/**
 * A contributor's side of the hub's HTTP API (docs/hub.md "The hub's API"): the identity kept
 * on this machine, and one small call per route. Every refusal of the hub comes back as
 * `HUB_REFUSED` with the hub's own code and message (untrusted text: shown through safeText by
 * the CLI); a hub that does not answer is `HUB_UNREACHABLE`. Nothing here decides anything: the
 * hub's gates and verifiers do.
 */
import { createPrivateKey, type KeyObject, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { chmod, mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { AutolabError } from "../core/errors.ts";
import type { SignedClaim } from "./claim.ts";
import { generateIdentity, keyIdOf, parsePublicKey } from "./identity.ts";

/** What GET /api/program says: the one program the hub serves and its terms. */
export interface HubProgram {
  name?: string;
  rootCommit: string;
  head: string;
  /** The head's value as the verifiers measured it; null until one verification measured the root. */
  headValue: number | null;
  hardwareClass: string;
  budgetS: number;
  objective: { metric: string; direction: "minimize" | "maximize" };
  editable: string[];
  protected: string[];
  seedsMin: number;
  limits: { bundleBytes: number; claimBytes: number };
}

export interface ClaimState {
  id: string;
  kind: "frontier" | "finding";
  status: string;
  reason?: string;
  recordedValue?: number;
  claimedValue?: number;
}

export interface HubEvent {
  seq: number;
  kind: string;
  payload: Record<string, unknown>;
  at?: string;
}

/** The contributor's identity on one hub, as kept in its file (mode 0600). */
export interface StoredIdentity {
  hub: string;
  publicKey: string;
  keyId: string;
  /** PKCS#8 PEM of the Ed25519 private key: never leaves this machine. */
  privateKeyPem: string;
  /** The hub's bearer token (from POST /api/register). */
  token?: string;
}

export interface LoadedIdentity extends StoredIdentity {
  privateKey: KeyObject;
}

/** Where the identity for `hubUrl` lives by default: $XDG_CONFIG_HOME/autolab/hub/<host>_<port>.json. */
export function identityPath(hubUrl: string, env: NodeJS.ProcessEnv = process.env): string {
  const u = new URL(hubUrl);
  const port = u.port || (u.protocol === "https:" ? "443" : "80");
  const base = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), ".config");
  return join(base, "autolab", "hub", `${u.hostname.replace(/[^A-Za-z0-9.-]/g, "_")}_${port}.json`);
}

/** Reads the identity at `path`, or makes a new key pair there (not yet registered). */
export async function loadOrCreateIdentity(path: string, hubUrl: string): Promise<LoadedIdentity> {
  if (existsSync(path)) {
    let stored: StoredIdentity;
    try {
      stored = JSON.parse(await readFile(path, "utf8")) as StoredIdentity;
      const key = parsePublicKey(stored.publicKey);
      if (!key.ok) throw new Error(key.reason);
      if (key.value.keyId !== stored.keyId) throw new Error("its keyId is not its public key's");
      return { ...stored, privateKey: createPrivateKey(stored.privateKeyPem) };
    } catch (err) {
      throw new AutolabError(
        "HUB_IDENTITY_INVALID",
        `the hub identity file ${path} cannot be used: ${(err as Error).message}`,
        "Move it aside to make a new identity (a new identity starts with no reputation), or pass --identity <file> with a good one.",
      );
    }
  }
  const id = generateIdentity();
  const stored: StoredIdentity = {
    hub: hubUrl,
    publicKey: id.publicKey,
    keyId: keyIdOf(Buffer.from(id.publicKey, "base64url")),
    privateKeyPem: id.privateKey.export({ format: "pem", type: "pkcs8" }).toString(),
  };
  await saveIdentity(path, stored);
  return { ...stored, privateKey: id.privateKey };
}

/** Writes the identity atomically, readable only by its owner. */
export async function saveIdentity(path: string, stored: StoredIdentity): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${randomBytes(4).toString("hex")}.tmp`;
  await writeFile(tmp, `${JSON.stringify(stored, null, 2)}\n`, { mode: 0o600 });
  await chmod(tmp, 0o600);
  await rename(tmp, path);
}

interface Problem {
  status: number;
  code: string;
  message: string;
}

/** A refusal the caller may handle (a duplicate, an unknown parent) before it becomes an error. */
export class HubRefused extends Error {
  readonly status: number;
  readonly code: string;
  constructor(p: Problem, what: string) {
    super(`the hub refused ${what}: ${p.code} (${p.status}): ${p.message}`);
    this.status = p.status;
    this.code = p.code;
  }
  toAutolabError(): AutolabError {
    return new AutolabError(
      "HUB_REFUSED",
      this.message,
      "The hub's reason says what to change; `autolab contribute` prints every claim it sent and its answer.",
    );
  }
}

export class HubClient {
  readonly base: string;
  readonly #timeoutMs: number;

  constructor(hubUrl: string, timeoutMs = 60_000) {
    let u: URL;
    try {
      u = new URL(hubUrl);
    } catch {
      throw new AutolabError(
        "HUB_URL_INVALID",
        `--hub ${JSON.stringify(hubUrl)} is not a URL.`,
        "Give the hub's address, e.g. --hub http://127.0.0.1:7878",
      );
    }
    if (u.protocol !== "http:" && u.protocol !== "https:") {
      throw new AutolabError(
        "HUB_URL_INVALID",
        `--hub ${JSON.stringify(hubUrl)} is not an http(s):// URL.`,
        "Give the hub's address, e.g. --hub http://127.0.0.1:7878",
      );
    }
    this.base = u.toString().replace(/\/+$/, "");
    this.#timeoutMs = timeoutMs;
  }

  async #call(method: string, path: string, what: string, init: RequestInit = {}): Promise<Response> {
    let res: Response;
    try {
      res = await fetch(`${this.base}${path}`, {
        ...init,
        method,
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
    } catch (err) {
      const c = (err as { cause?: { code?: string; message?: string } }).cause;
      const cause = c?.code ?? c?.message ?? (err as Error).message;
      throw new AutolabError(
        "HUB_UNREACHABLE",
        `the hub at ${this.base} did not answer ${what} (${cause}).`,
        'Check the address and that `autolab hub` runs there (GET /api/health answers {"ok":true}).',
      );
    }
    if (res.ok) return res;
    let p: Problem = { status: res.status, code: `http_${res.status}`, message: res.statusText };
    try {
      const body = (await res.json()) as { error?: { code?: unknown; message?: unknown } };
      if (body?.error) {
        p = {
          status: res.status,
          code: String(body.error.code ?? p.code).slice(0, 64),
          message: String(body.error.message ?? "").slice(0, 2000),
        };
      }
    } catch {
      // Not JSON: the status line says enough.
    }
    throw new HubRefused(p, what);
  }

  async #json<T>(method: string, path: string, what: string, init: RequestInit = {}): Promise<T> {
    const res = await this.#call(method, path, what, init);
    return (await res.json()) as T;
  }

  program(): Promise<HubProgram> {
    return this.#json("GET", "/api/program", "the program");
  }

  register(publicKey: string): Promise<{ keyId: string; token: string }> {
    return this.#json("POST", "/api/register", "the registration", {
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ publicKey }),
    });
  }

  async bundle(commit: string): Promise<Buffer> {
    const res = await this.#call("GET", `/api/bundle/${commit}`, `the bundle of ${commit.slice(0, 12)}`);
    return Buffer.from(await res.arrayBuffer());
  }

  putBundle(token: string, sha256: string, data: Buffer): Promise<{ sha256: string; size: number }> {
    return this.#json("PUT", `/api/bundles/${sha256}`, `bundle ${sha256.slice(0, 12)}`, {
      headers: { authorization: `Bearer ${token}`, "content-type": "application/octet-stream" },
      body: new Uint8Array(data),
    });
  }

  postClaim(token: string, signed: SignedClaim): Promise<ClaimState> {
    return this.#json("POST", "/api/claims", "the claim", {
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(signed),
    });
  }

  claim(id: string): Promise<ClaimState> {
    return this.#json("GET", `/api/claims/${id}`, `claim ${id.slice(0, 12)}`);
  }

  findings(after = 0): Promise<{ events: HubEvent[] }> {
    return this.#json("GET", `/api/findings?after=${after}`, "the findings");
  }
}
