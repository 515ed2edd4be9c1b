/**
 * Gemini CLI (`@google/gemini-cli`): `gemini -p "<prompt>" --skip-trust -o json --approval-mode auto_edit`.
 *
 * - Endpoint: `base_url` → GOOGLE_GEMINI_BASE_URL (a server or proxy speaking the Gemini API,
 *   `/v1beta/models/<model>:streamGenerateContent`), the key from `api_key_env` (a placeholder
 *   otherwise) as GEMINI_API_KEY, and `security.auth.selectedType = "gemini-api-key"` in
 *   `$HOME/.gemini/settings.json` (without it the CLI wants an interactive login). Without
 *   `base_url`, the host's GEMINI_API_KEY / GOOGLE_API_KEY.
 * - Scope: `tools.core` offers read_file, replace, write_file, glob, grep_search and
 *   list_directory only (no shell, no web fetch, no subagents), and a policy file (`--policy`,
 *   user tier: above the project's own `.gemini/policies`) denies replace and write_file
 *   except on the editable files, by an `argsPattern` on `file_path`. The model sees the
 *   denial and can correct itself. Gemini's file tools refuse paths outside the workspace (the
 *   worktree).
 * - Nothing leaves for Google: usage statistics (Clearcut), telemetry and update checks off.
 * - `max_turns` → settings `model.maxSessionTurns`.
 * - Summary: the final answer's JSON block (Gemini CLI has no schema option in -p mode).
 * - Gemini retries a failing API up to 10 times (minutes); a settings file named by
 *   GEMINI_CLI_SYSTEM_SETTINGS_PATH in `agent.env` overrides any of the settings written here,
 *   e.g. `{"general": {"maxAttempts": 2}}`.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { AgentFailure } from "../../../core/agent-failure.ts";
import { AutolabError } from "../../../core/errors.ts";
import type { CliOutput, CliPreset, ParsedOutput, PresetInput } from "../preset.ts";

/** The only tools the model is offered. */
export const GEMINI_TOOLS = ["read_file", "replace", "write_file", "glob", "grep_search", "list_directory"];

const preset: CliPreset = {
  backend: "gemini",
  executable: "gemini",
  install: "npm install -g @google/gemini-cli@0.61.0",
  docs: "https://github.com/google-gemini/gemini-cli",
  endpoints: [
    "https://generativelanguage.googleapis.com",
    "https://cloudcode-pa.googleapis.com",
    "https://oauth2.googleapis.com",
  ],
  hostKeys: ["GEMINI_API_KEY", "GOOGLE_API_KEY"],
  validate(config) {
    if (config.baseUrl && !config.model) {
      throw new AutolabError(
        "AGENT_CONFIG_INVALID",
        "agent backend gemini with a base_url needs a model (the id the endpoint serves).",
        "Add it to program.md, e.g. agent: { backend: gemini, base_url: http://127.0.0.1:4000, model: gemini-2.5-flash }",
      );
    }
    if (config.provider && config.provider !== "openai-compatible") {
      throw new AutolabError(
        "AGENT_CONFIG_INVALID",
        `agent backend gemini speaks the Gemini API only; provider ${config.provider} is not possible.`,
        "Remove agent.provider; for an OpenAI-compatible or Anthropic endpoint use the qwen, opencode, codex or claude backend.",
      );
    }
  },
  invocation(input: PresetInput) {
    const { config, home } = input;
    const dir = join(home, ".gemini");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "settings.json"), JSON.stringify(geminiSettings(config.maxTurns), null, 2));
    const policy = join(dir, "autolab-policy.toml");
    writeFileSync(policy, geminiPolicy(input.ctx.worktree, input.editable));
    const args = [
      "-p",
      input.prompt,
      "--skip-trust",
      "--output-format",
      "json",
      "--approval-mode",
      "auto_edit",
      "--policy",
      policy,
      ...(config.model ? ["--model", config.model] : []),
      ...config.args,
    ];
    const env: Record<string, string> = {};
    if (config.baseUrl)
      env.GOOGLE_GEMINI_BASE_URL = config.baseUrl.replace(/\/+$/, "").replace(/\/v1(beta)?$/, "");
    if (input.apiKey) env.GEMINI_API_KEY = input.apiKey;
    return { args, env };
  },
  parse: parseGeminiJson,
};

export default preset;

/** `$HOME/.gemini/settings.json` for one proposal. */
export function geminiSettings(maxTurns: number | undefined): Record<string, unknown> {
  return {
    security: { auth: { selectedType: "gemini-api-key" } },
    ...(maxTurns ? { model: { maxSessionTurns: maxTurns } } : {}),
    tools: { core: GEMINI_TOOLS },
    privacy: { usageStatisticsEnabled: false },
    telemetry: { enabled: false },
    general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
    experimental: { enableAgents: false },
    skills: { enabled: false },
  };
}

/**
 * The policy (Gemini CLI policy engine, TOML) that keeps edits in the editable files: a deny
 * of replace/write_file, and a higher-priority allow per editable file. Gemini matches
 * `argsPattern` against the arguments as stable JSON with each top-level `"key":value` wrapped
 * in NUL characters, so the pattern names the file_path exactly, absolute or relative to the
 * worktree. Priorities sit above the CLI's own `tools.core` allow rules (user tier + 0.25).
 */
export function geminiPolicy(worktree: string, editable: string[]): string {
  const paths = [
    ...new Set(editable.flatMap((p) => [p, relative(worktree, p), `./${relative(worktree, p)}`])),
  ];
  const tomlString = (s: string) => JSON.stringify(s);
  const lines = [
    "# Written by autolab for one proposal: edits only in the editable files.",
    "[[rule]]",
    'toolName = ["replace", "write_file"]',
    'decision = "deny"',
    "priority = 500",
    `denyMessage = ${tomlString(`autolab: only these files may be changed: ${editable.join(", ")}`)}`,
    "",
  ];
  for (const p of paths) {
    lines.push(
      "[[rule]]",
      'toolName = ["replace", "write_file"]',
      `argsPattern = ${tomlString(`\u0000${escapeRegex(`"file_path":${JSON.stringify(p)}`)}\u0000`)}`,
      'decision = "allow"',
      "priority = 600",
      "",
    );
  }
  return lines.join("\n");
}

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}

interface GeminiResult {
  response?: string;
  stats?: {
    models?: Record<string, { tokens?: { prompt?: number; input?: number; candidates?: number } }>;
  };
  error?: { type?: string; message?: string; code?: number | string };
}

/**
 * Reads `-o json`: one object with `response` and `stats`, or `error`. On failure Gemini CLI
 * prints that object on stderr and nothing on stdout.
 */
export function parseGeminiJson(out: CliOutput): ParsedOutput {
  const r = lastObject(out.stdout) ?? lastObject(out.stderr, (v) => "error" in v);
  if (!r) {
    if (out.exitCode !== 0) return {};
    throw new AgentFailure(
      "garbage",
      "gemini printed no result object (expected -o json output)",
      out.stdout.slice(-2000),
    );
  }
  let input = 0;
  let output = 0;
  for (const m of Object.values(r.stats?.models ?? {})) {
    input += m.tokens?.prompt ?? m.tokens?.input ?? 0;
    output += m.tokens?.candidates ?? 0;
  }
  const usage = { inputTokens: input, outputTokens: output };
  if (r.error) {
    const code = Number(r.error.code);
    const what = code >= 400 && code < 600 ? `API error (HTTP ${code})` : (r.error.type ?? "error");
    return { error: `${what}: ${r.error.message ?? ""}`.trim(), usage };
  }
  return { ...(typeof r.response === "string" ? { text: r.response } : {}), usage };
}

/** The last top-level JSON object in `text` (Gemini pretty-prints it over many lines, after any log lines). */
function lastObject(text: string, accept: (v: object) => boolean = () => true): GeminiResult | undefined {
  const whole = tryObject(text.trim());
  if (whole && accept(whole)) return whole;
  // A pretty-printed object starts with a line that is exactly "{".
  const starts = [...text.matchAll(/^\{\s*$/gm)].map((m) => m.index ?? 0).reverse();
  for (const s of starts) {
    const v = tryObject(text.slice(s).trim());
    if (v && accept(v)) return v;
  }
  return undefined;
}

function tryObject(s: string): GeminiResult | undefined {
  try {
    const v = JSON.parse(s);
    return v && typeof v === "object" && !Array.isArray(v) ? (v as GeminiResult) : undefined;
  } catch {
    return undefined;
  }
}
