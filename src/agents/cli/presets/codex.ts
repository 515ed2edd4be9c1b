/**
 * Codex CLI (`@openai/codex`): `codex exec --json --ephemeral … "<prompt>"`.
 *
 * - Endpoint: with `base_url`, a custom provider "autolab" given with `-c model_providers.autolab.…`
 *   (`wire_api = "responses"`: Codex speaks only the OpenAI Responses API to custom providers);
 *   the key is read by Codex from the environment variable named in `env_key`, never put on
 *   the command line. Without `base_url`, Codex's built-in OpenAI provider and the host's
 *   OPENAI_API_KEY / CODEX_API_KEY. `CODEX_HOME` is the isolated home's `.codex`, so no login,
 *   config, session or trusted project of the user's is seen.
 * - Scope: `--sandbox workspace-write`: the shell commands Codex runs may write the worktree
 *   (and the temp directory) only, without network. Codex cannot be limited to single files (a
 *   writable root must be a directory), and with a model it does not know it edits through shell
 *   commands rather than apply_patch: an edit of another file of the worktree is left to the
 *   loop's scope check. Reads are not limited. In autolab's sandbox (`ctx.sandbox`) Codex's own
 *   is off (`danger-full-access`): autolab's confines Codex and its commands to the editable
 *   files (and new files next to them, for edits by rename), with the network Codex has anyway.
 * - Nothing leaves for OpenAI's servers: `features.plugins=false` (the curated-plugin sync
 *   contacts GitHub and chatgpt.com), `analytics.enabled=false` and `otel.metrics_exporter="none"`
 *   (metrics to ab.chatgpt.com), `web_search="disabled"`.
 * - Summary: the final message's JSON block; with OpenAI itself (no `base_url`, or
 *   `provider: openai` for an endpoint that forwards to it) also `--output-schema` (the final
 *   message must be the summary JSON). Not with other endpoints: a server that enforces a
 *   schema by guided decoding (vLLM, Ollama) would apply it to every turn and the model could
 *   no longer call tools.
 * - No turn limit: `max_turns` is ignored; the harness's timeout applies.
 * - A failing API: Codex's own message ("We're currently experiencing high demand") hides the
 *   status; `RUST_LOG` makes Codex log each HTTP response's status on stderr, and the parser
 *   adds the last failing one to the error.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { AgentFailure } from "../../../core/agent-failure.ts";
import { AutolabError } from "../../../core/errors.ts";
import { probeSandbox } from "../../../runner/sandbox.ts";
import type { CliOutput, CliPreset, ParsedOutput, PresetInput } from "../preset.ts";

/** Name of the custom model provider autolab configures for `base_url`. */
export const CODEX_PROVIDER = "autolab";
/** Variable through which Codex reads the key of the custom provider (`env_key`). */
const KEY_VAR = "AUTOLAB_CODEX_API_KEY";
/** Errors only, plus one line per HTTP response (method, URL, status): the status of a failing API call. */
const RUST_LOG = "error,codex_http_client::client=debug";

const preset: CliPreset = {
  backend: "codex",
  executable: "codex",
  install: "npm install -g @openai/codex@0.169.0",
  docs: "https://developers.openai.com/codex/cli",
  endpoints: ["https://api.openai.com", "https://chatgpt.com"],
  hostKeys: ["OPENAI_API_KEY", "CODEX_API_KEY"],
  // Its shell commands may edit by rename (`sed -i`, `perl -pi`).
  sandboxEdits: "replace",
  validate(config) {
    if (config.baseUrl && !config.model) {
      throw new AutolabError(
        "AGENT_CONFIG_INVALID",
        "agent backend codex with a base_url needs a model (the id the endpoint serves).",
        "Add it to program.md, e.g. agent: { backend: codex, base_url: http://127.0.0.1:8000/v1, model: gpt-oss-20b }",
      );
    }
    if (config.provider === "anthropic") {
      throw new AutolabError(
        "AGENT_CONFIG_INVALID",
        "agent backend codex speaks the OpenAI Responses API only; provider anthropic is not possible.",
        "Remove agent.provider, and give a base_url that serves /v1/responses (vLLM, Ollama, LiteLLM, OpenAI).",
      );
    }
  },
  invocation(input: PresetInput) {
    const { config, home } = input;
    const codexHome = join(home, ".codex");
    mkdirSync(codexHome, { recursive: true });
    // Only OpenAI itself (no base_url, or provider openai) is known to honour an output schema
    // on the final message alone; a local server that enforces it by guided decoding would
    // constrain every turn, tool calls included.
    const schemaFile = join(codexHome, "autolab-summary.schema.json");
    const useSchema = !config.baseUrl || config.provider === "openai";
    if (useSchema) writeFileSync(schemaFile, JSON.stringify(input.summarySchema, null, 2));
    const set = (key: string, value: string | boolean) => ["-c", `${key}=${toml(value)}`];
    const p = `model_providers.${CODEX_PROVIDER}`;
    const args = [
      "exec",
      "--skip-git-repo-check",
      "--ephemeral",
      "--json",
      "--sandbox",
      // Inside autolab's sandbox, Codex's own (a nested bubblewrap) cannot make its mount points
      // in the read-only worktree, and autolab's is the stricter one: it alone confines the
      // commands Codex runs (docs/agents.md "Sandbox").
      // Unsandboxed on a machine with bubblewrap (`sandbox: off`), Codex's own sandbox fails to
      // start its helper through the system's bwrap ("execvp codex-linux-sandbox: No such file"),
      // so every command it runs would fail: the loop's scope check is then the only limit.
      input.ctx.sandbox || probeSandbox().ok ? "danger-full-access" : "workspace-write",
      ...(useSchema ? ["--output-schema", schemaFile] : []),
      ...set("features.plugins", false),
      ...set("web_search", "disabled"),
      ...set("analytics.enabled", false),
      ...set("otel.metrics_exporter", "none"),
      ...(config.baseUrl
        ? [
            ...set("model_provider", CODEX_PROVIDER),
            ...set(`${p}.name`, "autolab"),
            ...set(`${p}.base_url`, config.baseUrl.replace(/\/+$/, "")),
            ...set(`${p}.env_key`, KEY_VAR),
            ...set(`${p}.wire_api`, "responses"),
          ]
        : []),
      ...(config.model ? ["--model", config.model] : []),
      ...config.args,
      input.prompt,
    ];
    const env: Record<string, string> = { CODEX_HOME: codexHome, RUST_LOG };
    if (input.apiKey) {
      if (config.baseUrl) env[KEY_VAR] = input.apiKey;
      else env.CODEX_API_KEY = input.apiKey;
    } else if (!config.baseUrl && !process.env.CODEX_API_KEY && process.env.OPENAI_API_KEY) {
      // `codex exec` takes an API key from CODEX_API_KEY (a login would live in the isolated home).
      env.CODEX_API_KEY = process.env.OPENAI_API_KEY;
    }
    return { args, env };
  },
  parse: parseCodexJson,
};

export default preset;

/** A TOML value for `-c key=value` (Codex parses the value as TOML). */
function toml(v: string | boolean): string {
  return typeof v === "boolean" ? String(v) : JSON.stringify(v);
}

interface CodexEvent {
  type?: string;
  item?: { type?: string; text?: string; message?: string };
  usage?: { input_tokens?: number; cached_input_tokens?: number; output_tokens?: number };
  error?: { message?: string };
  message?: string;
}

/**
 * Reads `codex exec --json` (JSONL): the last agent message, token usage of the turns, and a
 * failed turn (with the HTTP status Codex logged on stderr, which its own message leaves out).
 */
export function parseCodexJson(out: CliOutput): ParsedOutput {
  let records = 0;
  let text: string | undefined;
  let input = 0;
  let output = 0;
  let completed = false;
  let failed: string | undefined;
  let lastError: string | undefined;
  for (const line of out.stdout.split("\n")) {
    if (!line.trim()) continue;
    let e: CodexEvent;
    try {
      e = JSON.parse(line);
    } catch {
      continue;
    }
    records++;
    if (e.type === "item.completed" && e.item?.type === "agent_message" && typeof e.item.text === "string") {
      text = e.item.text;
    } else if (e.type === "turn.completed") {
      completed = true;
      input += e.usage?.input_tokens ?? 0;
      output += e.usage?.output_tokens ?? 0;
    } else if (e.type === "turn.failed") {
      failed = e.error?.message ?? "the turn failed";
    } else if (e.type === "error" && typeof e.message === "string") {
      lastError = e.message;
    }
  }
  if (records === 0) {
    if (out.exitCode !== 0) return {};
    throw new AgentFailure(
      "garbage",
      "codex printed no JSON events (expected codex exec --json output)",
      out.stdout.slice(-2000),
    );
  }
  const usage = { inputTokens: input, outputTokens: output };
  const problem = failed ?? (completed ? undefined : lastError);
  if (problem) {
    const status = lastFailingStatus(out.stderr);
    return { error: status ? `API error (${status}): ${problem}` : problem, usage };
  }
  const structured = text === undefined ? undefined : parseObject(text);
  return {
    ...(text !== undefined ? { text } : {}),
    ...(structured !== undefined ? { structured } : {}),
    usage,
  };
}

/** The last non-2xx status Codex's HTTP client logged (`… status=500 Internal Server Error …`), e.g. "HTTP 500 Internal Server Error". */
function lastFailingStatus(stderr: string): string | undefined {
  let found: string | undefined;
  for (const m of stderr.matchAll(/\bstatus=(\d{3})((?: (?![a-z_]+=)[A-Za-z][A-Za-z-]*)*)/g)) {
    const code = Number(m[1]);
    if (code >= 300) found = `HTTP ${code}${m[2] ?? ""}`;
  }
  return found;
}

function parseObject(s: string): unknown {
  try {
    const v = JSON.parse(s.trim());
    return v && typeof v === "object" && !Array.isArray(v) ? v : undefined;
  } catch {
    return undefined;
  }
}
