/**
 * OpenCode (`opencode-ai`): `opencode run --pure --format json -m <provider>/<model> "<prompt>"`.
 *
 * - Endpoint: with `base_url`, a provider "autolab" in OPENCODE_CONFIG_CONTENT on
 *   `@ai-sdk/openai-compatible` (chat completions; OpenCode bundles that package, nothing is
 *   installed at run time), `options.baseURL` and the key read from an environment variable
 *   (`{env:…}`), and `-m autolab/<model>`. Without `base_url`, OpenCode's built-in providers
 *   with the host's keys (`model: anthropic/claude-sonnet-4-5`).
 * - Scope: the `permission` config denies every tool (`"*": "deny"`: no bash, webfetch, task,
 *   skill, todo) but read, glob, grep and list, and allows `edit` (which covers OpenCode's edit
 *   and write tools) only on the editable files, by their paths relative to OpenCode's
 *   worktree (the git root; `/` outside git). Paths outside the working directory are denied
 *   (`external_directory`). The model sees the refusal and can correct itself.
 *   OPENCODE_DISABLE_PROJECT_CONFIG ignores a project's opencode.json and .opencode/ so they
 *   cannot widen this; formatters and LSP servers are off (a formatter would rewrite the file).
 * - Offline: models.dev fetch, auto-update, sharing and LSP downloads are off, and the isolated
 *   config directory is seeded as if `@opencode-ai/plugin` were installed there (OpenCode
 *   otherwise runs `npm install` of it in every config directory at start, from the registry).
 * - `max_turns` → the build agent's `steps`.
 * - Summary: the final text's JSON block.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { AgentFailure } from "../../../core/agent-failure.ts";
import { AutolabError } from "../../../core/errors.ts";
import type { CliOutput, CliPreset, ParsedOutput, PresetInput } from "../preset.ts";

/** Name of the provider autolab configures for `base_url`. */
export const OPENCODE_PROVIDER = "autolab";
/** Variable through which the config reads the key (`{env:…}`). */
const KEY_VAR = "AUTOLAB_OPENCODE_API_KEY";

const preset: CliPreset = {
  backend: "opencode",
  executable: "opencode",
  install: "npm install -g opencode-ai@1.18.33",
  docs: "https://opencode.ai/docs/cli/",
  endpoints: [
    "https://api.anthropic.com",
    "https://api.openai.com",
    "https://generativelanguage.googleapis.com",
    "https://openrouter.ai",
  ],
  hostKeys: "all",
  validate(config) {
    if (!config.model) {
      throw new AutolabError(
        "AGENT_CONFIG_INVALID",
        "agent backend opencode needs a model: the id the endpoint serves with base_url, else provider/model.",
        "Add it to program.md, e.g. agent: { backend: opencode, base_url: http://127.0.0.1:8000/v1, model: qwen2.5-coder } or agent: { backend: opencode, model: anthropic/claude-sonnet-4-5 }",
      );
    }
    if (config.baseUrl && config.provider && config.provider !== "openai-compatible") {
      throw new AutolabError(
        "AGENT_CONFIG_INVALID",
        `agent backend opencode with a base_url speaks OpenAI chat completions; provider ${config.provider} is not possible.`,
        "Remove agent.provider (a hosted Anthropic or OpenAI model needs no base_url: model: anthropic/claude-sonnet-4-5).",
      );
    }
  },
  invocation(input: PresetInput) {
    const { config, home } = input;
    seedConfigDir(join(home, ".config", "opencode"));
    const model = config.baseUrl ? `${OPENCODE_PROVIDER}/${config.model}` : (config.model ?? "");
    const args = ["run", "--pure", "--format", "json", "--model", model, ...config.args, input.prompt];
    return {
      args,
      env: {
        OPENCODE_CONFIG_CONTENT: JSON.stringify(opencodeConfig(input)),
        OPENCODE_DISABLE_PROJECT_CONFIG: "1",
        OPENCODE_DISABLE_MODELS_FETCH: "1",
        OPENCODE_DISABLE_AUTOUPDATE: "1",
        OPENCODE_DISABLE_SHARE: "1",
        OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
        OPENCODE_DISABLE_CLAUDE_CODE: "1",
        OPENCODE_DISABLE_EXTERNAL_SKILLS: "1",
        ...(config.baseUrl && input.apiKey ? { [KEY_VAR]: input.apiKey } : {}),
      },
    };
  },
  parse: parseOpencodeJson,
};

export default preset;

/** OPENCODE_CONFIG_CONTENT for one proposal. */
export function opencodeConfig(
  input: Pick<PresetInput, "config" | "ctx" | "editable">,
): Record<string, unknown> {
  const { config } = input;
  // OpenCode matches `edit` patterns against the path relative to its worktree: the git root
  // of the working directory (the run's worktree), or "/" outside git. Both forms are allowed.
  const patterns = [
    ...new Set(input.editable.flatMap((p) => [relative(input.ctx.worktree, p), p.replace(/^\/+/, "")])),
  ];
  return {
    $schema: "https://opencode.ai/config.json",
    autoupdate: false,
    share: "disabled",
    formatter: false,
    lsp: false,
    ...(config.baseUrl
      ? {
          provider: {
            [OPENCODE_PROVIDER]: {
              npm: "@ai-sdk/openai-compatible",
              name: "autolab",
              options: { baseURL: config.baseUrl.replace(/\/+$/, ""), apiKey: `{env:${KEY_VAR}}` },
              models: { [config.model ?? ""]: { name: config.model } },
            },
          },
          small_model: `${OPENCODE_PROVIDER}/${config.model}`,
        }
      : {}),
    permission: {
      "*": "deny",
      read: "allow",
      glob: "allow",
      grep: "allow",
      list: "allow",
      edit: { "*": "deny", ...Object.fromEntries(patterns.map((p) => [p, "allow"])) },
      external_directory: "deny",
    },
    ...(config.maxTurns ? { agent: { build: { steps: config.maxTurns } } } : {}),
  };
}

/**
 * OpenCode installs `@opencode-ai/plugin` into each config directory at start (from the npm
 * registry) unless it finds node_modules there and the package both in package.json and in
 * package-lock.json. Plugins are not used (`--pure`), so the record of an install is enough.
 */
function seedConfigDir(dir: string): void {
  mkdirSync(join(dir, "node_modules"), { recursive: true });
  const deps = { "@opencode-ai/plugin": "*" };
  writeFileSync(join(dir, "package.json"), JSON.stringify({ dependencies: deps }, null, 2));
  writeFileSync(
    join(dir, "package-lock.json"),
    JSON.stringify({ lockfileVersion: 3, packages: { "": { dependencies: deps } } }, null, 2),
  );
}

interface OpencodeEvent {
  type?: string;
  part?: {
    type?: string;
    text?: string;
    tokens?: {
      input?: number;
      output?: number;
      reasoning?: number;
      cache?: { read?: number; write?: number };
    };
    cost?: number;
  };
  error?: { name?: string; data?: { message?: string; statusCode?: number } };
}

/**
 * Reads `opencode run --format json` (JSONL): text parts (the final text is the last step's),
 * usage and cost from step_finish, and an error event (an API failure; OpenCode may still exit 0).
 */
export function parseOpencodeJson(out: CliOutput): ParsedOutput {
  let records = 0;
  let input = 0;
  let output = 0;
  let cost = 0;
  let stepText: string[] = [];
  let lastText = "";
  let error: string | undefined;
  for (const line of out.stdout.split("\n")) {
    if (!line.trim()) continue;
    let e: OpencodeEvent;
    try {
      e = JSON.parse(line);
    } catch {
      continue;
    }
    records++;
    if (e.type === "step_start") stepText = [];
    else if (e.type === "text" && typeof e.part?.text === "string") {
      stepText.push(e.part.text);
      lastText = stepText.join("\n");
    } else if (e.type === "step_finish") {
      const t = e.part?.tokens;
      input += (t?.input ?? 0) + (t?.cache?.read ?? 0) + (t?.cache?.write ?? 0);
      output += (t?.output ?? 0) + (t?.reasoning ?? 0);
      cost += e.part?.cost ?? 0;
    } else if (e.type === "error") {
      const status = e.error?.data?.statusCode;
      const message = e.error?.data?.message ?? e.error?.name ?? "error";
      error = status ? `API error (HTTP ${status}): ${message}` : message;
    }
  }
  if (records === 0) {
    if (out.exitCode !== 0) return {};
    throw new AgentFailure(
      "garbage",
      "opencode printed no JSON events (expected --format json output)",
      out.stdout.slice(-2000),
    );
  }
  const usage = { inputTokens: input, outputTokens: output, costUsd: cost };
  return { ...(lastText ? { text: lastText } : {}), ...(error ? { error } : {}), usage };
}
