import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { AutolabError } from "../../core/errors.ts";
import { registerSecretName } from "../../core/secrets.ts";
import type { AgentConfig } from "../../core/types.ts";
import type { CliPreset } from "./preset.ts";

/** Variable names that look like credentials: never passed to an agent CLI unless its preset asks for them. */
const CREDENTIAL =
  /(_API_KEY|_APIKEY|_TOKEN|_SECRET|_SECRET_KEY|_SECRET_ACCESS_KEY|_ACCESS_KEY_ID|_PASSWORD)$/i;

/** Database credentials by name (the notebook's address may carry a password: docs/distributed.md). */
const DATABASE_SECRETS = new Set(["PGPASSWORD", "PGPASSFILE", "PGSERVICEFILE", "AUTOLAB_DB", "DATABASE_URL"]);

export function isCredentialVar(name: string): boolean {
  return CREDENTIAL.test(name) || DATABASE_SECRETS.has(name.toUpperCase());
}

/** Placeholder key for local endpoints (vLLM, Ollama, a proxy) that ignore it but whose clients insist on one. */
export const PLACEHOLDER_KEY = "autolab-no-key";

/**
 * The API key for the CLI: from `api_key_env` when set (missing → AutolabError before the run
 * starts), a placeholder when only `base_url` is set, otherwise undefined (the CLI uses the host
 * credentials its preset lets through).
 */
export function resolveApiKey(config: AgentConfig, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (config.apiKeyEnv) {
    // Its value is a secret whatever the variable's name: never recorded (src/core/secrets.ts).
    registerSecretName(config.apiKeyEnv);
    const v = env[config.apiKeyEnv];
    if (!v) {
      throw new AutolabError(
        "AGENT_API_KEY_MISSING",
        `program.md agent.api_key_env names ${config.apiKeyEnv}, but that environment variable is not set.`,
        `Export it (export ${config.apiKeyEnv}=…) before \`autolab run\`, or remove api_key_env.`,
      );
    }
    return v;
  }
  return config.baseUrl ? PLACEHOLDER_KEY : undefined;
}

/** What passes from the host into a sandboxed agent besides its keys: the basics, the proxy and TLS settings a model endpoint may need. */
const SANDBOX_BASE_ENV = [
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "LANG",
  "LANGUAGE",
  "TZ",
  "TERM",
  "SHELL",
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "NO_PROXY",
  "ALL_PROXY",
  "http_proxy",
  "https_proxy",
  "no_proxy",
  "all_proxy",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "NODE_EXTRA_CA_CERTS",
  "REQUESTS_CA_BUNDLE",
  "CURL_CA_BUNDLE",
];

/** Model API keys by convention (`ANTHROPIC_API_KEY`, `OPENROUTER_API_KEY`, …): what `hostKeys: "all"` means in a sandbox. */
const MODEL_KEY = /(_API_KEY|_APIKEY)$/i;

export interface AgentEnvOptions {
  /**
   * The agent runs in a sandbox whose environment is exactly this one: build it from a short
   * list instead of the whole host environment. Passes the basics (PATH, locale, proxies, CA
   * bundles) and, without `base_url`, the preset's host keys — for `hostKeys: "all"` only
   * variables named like model API keys (`*_API_KEY`) — and endpoint settings (`*_BASE_URL`).
   * Nothing else of the host's (program.md's `sandbox.env` is for trials); `agent.env` adds
   * what a CLI needs. TMPDIR is the sandbox's private /tmp.
   */
  sandboxed?: boolean;
}

/**
 * The environment of one agent CLI run: the host's, minus credentials (a local or proxy
 * `base_url` never sees the host's real keys; without one, only the keys the preset names pass),
 * with HOME and the XDG directories pointed at `home` when the preset isolates it, then the
 * preset's variables, then program.md's `agent.env` (which wins). Sandboxed, the host's part is
 * an allowlist instead (see AgentEnvOptions.sandboxed).
 */
export function agentEnv(
  preset: CliPreset,
  config: AgentConfig,
  home: string | undefined,
  presetEnv: Record<string, string>,
  host: NodeJS.ProcessEnv = process.env,
  opts: AgentEnvOptions = {},
): Record<string, string> {
  const sandboxed = opts.sandboxed;
  const keep =
    config.baseUrl || preset.hostKeys === "none"
      ? () => false
      : preset.hostKeys === "all"
        ? sandboxed
          ? (name: string) => MODEL_KEY.test(name)
          : () => true
        : (name: string) => (preset.hostKeys as readonly string[]).includes(name);
  const passes = (k: string): boolean => {
    if (!sandboxed) return !isCredentialVar(k) || keep(k);
    if (SANDBOX_BASE_ENV.includes(k) || k.startsWith("LC_")) return true;
    if (isCredentialVar(k)) return keep(k);
    // Which endpoint a vendor's CLI talks to (ANTHROPIC_BASE_URL, OPENAI_BASE_URL): no secret.
    return !config.baseUrl && k.endsWith("_BASE_URL");
  };
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(host)) {
    if (v === undefined || !passes(k)) continue;
    env[k] = v;
  }
  // A test runner's or the harness's own markers are not the agent's business.
  delete env.AUTOLAB_CRASH_AT;
  if (sandboxed) env.TMPDIR = "/tmp";
  if (home) {
    env.HOME = home;
    env.USERPROFILE = home;
    for (const [k, dir] of [
      ["XDG_CONFIG_HOME", ".config"],
      ["XDG_DATA_HOME", ".local/share"],
      ["XDG_STATE_HOME", ".local/state"],
      ["XDG_CACHE_HOME", ".cache"],
    ] as const) {
      env[k] = join(home, dir);
      mkdirSync(env[k], { recursive: true });
    }
  }
  return { ...env, ...presetEnv, ...config.env };
}
