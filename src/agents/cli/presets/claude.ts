/**
 * Claude Code (`@anthropic-ai/claude-code`): `claude -p "<prompt>" --output-format json`.
 *
 * - Endpoint: `base_url` → ANTHROPIC_BASE_URL (without a trailing /v1: Claude Code adds it) and
 *   the key from `api_key_env` (a placeholder otherwise) as ANTHROPIC_API_KEY. Without
 *   `base_url`, the host's ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN / CLAUDE_CODE_OAUTH_TOKEN
 *   and ANTHROPIC_BASE_URL pass through.
 * - Scope: `--permission-mode dontAsk` (never prompts, also as root: whatever is not allowed is
 *   denied), `--tools Read,Edit,Write,Glob,Grep` (no Bash), and `--allowedTools` granting Edit and
 *   Write on the editable files only (`Edit(//abs/path)`). `--restricted` ignores the user's and
 *   the project's settings files, so a project's .claude/settings.json cannot widen that.
 * - Summary: `--json-schema` → `structured_output`, else the final text's JSON block.
 * - `max_turns` → `--max-turns`.
 */
import { AgentFailure } from "../../../core/agent-failure.ts";
import type { CliOutput, CliPreset, ParsedOutput, PresetInput } from "../preset.ts";

const preset: CliPreset = {
  backend: "claude",
  executable: "claude",
  install: "npm install -g @anthropic-ai/claude-code@2.1.330",
  endpoints: ["https://api.anthropic.com"],
  hostKeys: ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"],
  // Edit and Write write a temporary file next to the file and rename it over it.
  sandboxEdits: "replace",
  invocation(input: PresetInput) {
    const { config } = input;
    const allowed = [
      "Read",
      "Glob",
      "Grep",
      ...input.editable.flatMap((p) => [`Edit(/${p})`, `Write(/${p})`]),
    ];
    const args = [
      // The prompt comes first: the variadic flags below would swallow it.
      "-p",
      input.prompt,
      "--output-format",
      "json",
      "--restricted",
      "--strict-mcp-config",
      "--no-session-persistence",
      "--permission-mode",
      "dontAsk",
      "--permission-prompts",
      "none",
      "--tools",
      "Read,Edit,Write,Glob,Grep",
      "--allowedTools",
      ...allowed,
      "--json-schema",
      JSON.stringify(input.summarySchema),
      ...(config.model ? ["--model", config.model] : []),
      ...(config.maxTurns ? ["--max-turns", String(config.maxTurns)] : []),
      ...config.args,
    ];
    const env: Record<string, string> = {
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      DISABLE_AUTOUPDATER: "1",
      DISABLE_TELEMETRY: "1",
      DISABLE_ERROR_REPORTING: "1",
    };
    if (config.baseUrl) env.ANTHROPIC_BASE_URL = config.baseUrl.replace(/\/+$/, "").replace(/\/v1$/, "");
    if (input.apiKey) env.ANTHROPIC_API_KEY = input.apiKey;
    if (config.baseUrl && config.model) {
      // Background work (titles, summaries) goes to the same model instead of a Haiku the endpoint lacks.
      env.ANTHROPIC_DEFAULT_HAIKU_MODEL = config.model;
      env.ANTHROPIC_SMALL_FAST_MODEL = config.model;
    }
    return { args, env };
  },
  parse: parseClaudeJson,
};

export default preset;

interface ClaudeResult {
  type?: string;
  subtype?: string;
  is_error?: boolean;
  result?: string;
  structured_output?: unknown;
  total_cost_usd?: number;
  api_error_status?: number | null;
  usage?: {
    input_tokens?: number;
    output_tokens?: number;
    cache_creation_input_tokens?: number;
    cache_read_input_tokens?: number;
  };
}

/** Reads the one JSON object of `--output-format json` (the last line that parses, to be tolerant of noise). */
export function parseClaudeJson(out: CliOutput): ParsedOutput {
  let r: ClaudeResult | undefined;
  for (const line of out.stdout.trim().split("\n").reverse()) {
    try {
      const v = JSON.parse(line) as ClaudeResult;
      if (v && typeof v === "object" && v.type === "result") {
        r = v;
        break;
      }
    } catch {}
  }
  if (!r) {
    if (out.exitCode !== 0) return {};
    throw new AgentFailure(
      "garbage",
      "claude printed no result object (expected --output-format json)",
      out.stdout.slice(-2000),
    );
  }
  const u = r.usage ?? {};
  const usage = {
    inputTokens:
      (u.input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0) + (u.cache_read_input_tokens ?? 0),
    outputTokens: u.output_tokens ?? 0,
    ...(r.total_cost_usd !== undefined ? { costUsd: r.total_cost_usd } : {}),
  };
  if (r.is_error) {
    // subtype names the limit that ended the run (error_max_turns, …); API failures say "success".
    const what = r.api_error_status
      ? `API error (HTTP ${r.api_error_status})`
      : r.subtype && r.subtype !== "success"
        ? r.subtype
        : "error";
    return { error: `${what}: ${r.result ?? ""}`.trim(), usage };
  }
  return {
    ...(typeof r.result === "string" ? { text: r.result } : {}),
    ...(r.structured_output !== undefined && r.structured_output !== null
      ? { structured: r.structured_output }
      : {}),
    usage,
  };
}
