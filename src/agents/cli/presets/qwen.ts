/**
 * Qwen Code (`@qwen-code/qwen-code`): `qwen "<prompt>" -o json --approval-mode default …`.
 *
 * - Endpoint: `--auth-type openai` (chat completions; `openai-responses` with provider openai,
 *   `anthropic` with provider anthropic) and, with `base_url`, `--openai-base-url` (or
 *   ANTHROPIC_BASE_URL); the key goes in OPENAI_API_KEY / ANTHROPIC_API_KEY in the environment,
 *   never on the command line. Without `base_url`, the host's OPENAI_API_KEY (and
 *   OPENAI_BASE_URL: DashScope, OpenRouter, …) or DASHSCOPE_API_KEY.
 * - Scope: approval mode `default` with `permissions.allow` granting `Edit(//<abs path>)` for
 *   each editable file (Qwen's rules cover edit and write_file). Anything else that needs an
 *   approval — an edit of another file, a read outside the worktree — is declined, since
 *   headless Qwen cannot ask; the model sees the refusal. (`auto-edit` would approve every
 *   edit.) `--exclude-tools` removes the shell, web fetch, subagents, skills and the other
 *   tools an edit does not need.
 * - Nothing leaves for Alibaba: usage statistics (Aliyun RUM), telemetry and auto-update off.
 * - `max_turns` → `--max-session-turns`.
 * - Summary: the final answer's JSON block. (`--json-schema` is not used: when the model ends
 *   with text instead of calling its `structured_output` tool, Qwen exits 1 and the summary
 *   in that text would be lost.)
 * - Qwen retries a failing API (5xx, 429) 7 times with backoff, about 75 s, and that is not
 *   configurable: a dead endpoint costs that much per proposal.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { AgentFailure } from "../../../core/agent-failure.ts";
import type { CliOutput, CliPreset, ParsedOutput, PresetInput } from "../preset.ts";

/** Tools removed from the model's view: everything beyond reading and editing files. */
export const QWEN_EXCLUDED_TOOLS = [
  "run_shell_command",
  "monitor",
  "web_fetch",
  "web_search",
  "agent",
  "list_agents",
  "send_message",
  "skill",
  "notebook_edit",
  "tool_search",
  "tool_call",
  "get_goal",
  "update_goal",
  "cron_create",
  "cron_list",
  "cron_delete",
  "loop_wakeup",
  "task_stop",
  "enter_worktree",
  "exit_worktree",
  "record_artifact",
  "report_findings",
  "read_mcp_resource",
  "zoom_image",
];

const AUTH_OF: Record<string, string> = {
  "openai-compatible": "openai",
  openai: "openai-responses",
  anthropic: "anthropic",
};

const preset: CliPreset = {
  backend: "qwen",
  executable: "qwen",
  install: "npm install -g @qwen-code/qwen-code@0.24.4",
  docs: "https://github.com/QwenLM/qwen-code",
  endpoints: [
    "https://dashscope.aliyuncs.com",
    "https://dashscope-intl.aliyuncs.com",
    "https://chat.qwen.ai",
  ],
  hostKeys: ["OPENAI_API_KEY", "DASHSCOPE_API_KEY", "ANTHROPIC_API_KEY"],
  // edit and write_file go through atomicWriteFile: a temporary file next to the file, renamed over it.
  sandboxEdits: "replace",
  invocation(input: PresetInput) {
    const { config, home } = input;
    const dir = join(home, ".qwen");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "settings.json"), JSON.stringify(qwenSettings(input.editable), null, 2));
    const auth = AUTH_OF[config.provider ?? "openai-compatible"] ?? "openai";
    const anthropic = auth === "anthropic";
    const args = [
      // The prompt is the positional query; it comes first so no variadic flag can swallow it.
      input.prompt,
      "--output-format",
      "json",
      "--approval-mode",
      "default",
      "--exclude-tools",
      QWEN_EXCLUDED_TOOLS.join(","),
      "--chat-recording",
      "false",
      "--auth-type",
      auth,
      ...(config.baseUrl && !anthropic ? ["--openai-base-url", config.baseUrl.replace(/\/+$/, "")] : []),
      ...(config.model ? ["--model", config.model] : []),
      ...(config.maxTurns ? ["--max-session-turns", String(config.maxTurns)] : []),
      ...config.args,
    ];
    const env: Record<string, string> = {};
    if (anthropic) {
      if (config.baseUrl) env.ANTHROPIC_BASE_URL = config.baseUrl.replace(/\/+$/, "").replace(/\/v1$/, "");
      if (input.apiKey) env.ANTHROPIC_API_KEY = input.apiKey;
    } else if (input.apiKey) env.OPENAI_API_KEY = input.apiKey;
    return { args, env };
  },
  parse: parseQwenJson,
};

export default preset;

/** `$HOME/.qwen/settings.json` for one proposal. */
export function qwenSettings(editable: string[]): Record<string, unknown> {
  return {
    // `//` marks an absolute path in Qwen's permission rules (as in Claude Code's).
    permissions: { allow: editable.map((p) => `Edit(/${p})`) },
    privacy: { usageStatisticsEnabled: false },
    telemetry: { enabled: false },
    general: { enableAutoUpdate: false },
    ide: { enabled: false },
  };
}

interface QwenResult {
  type?: string;
  subtype?: string;
  is_error?: boolean;
  result?: string;
  error?: { message?: string };
  usage?: { input_tokens?: number; output_tokens?: number; cache_read_input_tokens?: number };
  message?: { content?: { type?: string; text?: string }[] | string };
}

/**
 * Reads `-o json`: an array of messages ending with a `result` object (Claude Code's shape):
 * the final text, usage, and an error (`is_error`, e.g. "[API Error: 500 …]" after Qwen's
 * retries). A result that is itself a JSON object (`--json-schema` in agent.args) is the
 * structured summary.
 */
export function parseQwenJson(out: CliOutput): ParsedOutput {
  const all = tryParse(out.stdout.trim());
  const items = (
    Array.isArray(all)
      ? all
      : out.stdout
          .split("\n")
          .map((l) => tryParse(l.trim()))
          .flatMap((v) => (Array.isArray(v) ? v : [v]))
  ).filter((v): v is QwenResult => !!v && typeof v === "object");
  const r = items.findLast((v) => v.type === "result");
  if (!r) {
    if (out.exitCode !== 0) return {};
    throw new AgentFailure(
      "garbage",
      "qwen printed no result object (expected -o json output)",
      out.stdout.slice(-2000),
    );
  }
  const u = r.usage ?? {};
  const usage = {
    inputTokens: (u.input_tokens ?? 0) + (u.cache_read_input_tokens ?? 0),
    outputTokens: u.output_tokens ?? 0,
  };
  const lastText = items
    .filter((v) => v.type === "assistant")
    .map(textOf)
    .findLast((t) => t.trim() !== "");
  if (r.is_error) {
    const message = r.error?.message ?? r.result ?? "";
    return {
      error: `${r.subtype && r.subtype !== "success" ? r.subtype : "error"}: ${message}`.trim(),
      usage,
    };
  }
  const text = typeof r.result === "string" ? r.result : lastText;
  const structured = text === undefined ? undefined : tryParse(text.trim());
  return {
    ...(text !== undefined ? { text } : {}),
    ...(structured && typeof structured === "object" && !Array.isArray(structured) ? { structured } : {}),
    usage,
  };
}

function textOf(m: QwenResult): string {
  const c = m.message?.content;
  if (typeof c === "string") return c;
  return (c ?? [])
    .filter((b) => b.type === "text")
    .map((b) => b.text ?? "")
    .join("\n");
}

function tryParse(s: string): unknown {
  if (!s) return undefined;
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}
