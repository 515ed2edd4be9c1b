/**
 * pi (`@earendil-works/pi-coding-agent`): `pi --mode json -p "<prompt>"`.
 *
 * - Endpoint: with `base_url`, a provider "autolab" in `$PI_CODING_AGENT_DIR/models.json`
 *   (`api` from `provider`: openai-compatible → openai-completions, openai → openai-responses,
 *   anthropic → anthropic-messages); the key is read from an environment variable by pi's `$NAME`
 *   interpolation, so it is never written to disk. Without `base_url`, pi's own providers and
 *   the host's keys (`--model provider/id`).
 * - Scope: tools read, edit, write, grep, find, ls (no bash) and an extension whose `tool_call`
 *   handler blocks edit/write outside the editable files and reads outside the worktree (the
 *   notebook and trial logs next to it hold holdout metrics); project-local pi config is ignored
 *   (`--no-approve`) so a project cannot load its own extensions.
 * - `max_turns`: the same extension blocks every tool call after that many turns.
 * - Summary: a `submit_summary` tool (terminating), else the final text's JSON block.
 * - pi exits 0 even when the model API failed: the last assistant message's `stopReason: "error"`
 *   is the signal.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { AgentFailure } from "../../../core/agent-failure.ts";
import { AutolabError } from "../../../core/errors.ts";
import type { CliOutput, CliPreset, ParsedOutput, PresetInput } from "../preset.ts";

const API_OF: Record<string, string> = {
  "openai-compatible": "openai-completions",
  openai: "openai-responses",
  anthropic: "anthropic-messages",
};

/** Variable through which models.json reads the key (pi interpolates `$NAME`). */
const KEY_VAR = "AUTOLAB_PI_API_KEY";

const preset: CliPreset = {
  backend: "pi",
  executable: "pi",
  install: "npm install -g @earendil-works/pi-coding-agent@0.87.1",
  endpoints: [
    "https://api.anthropic.com",
    "https://api.openai.com",
    "https://generativelanguage.googleapis.com",
    "https://openrouter.ai",
  ],
  hostKeys: "all",
  summaryTool: "submit_summary",
  validate(config) {
    if (config.baseUrl && !config.model) {
      throw new AutolabError(
        "AGENT_CONFIG_INVALID",
        "agent backend pi with a base_url needs a model (the id the endpoint serves).",
        "Add it to program.md, e.g. agent: { backend: pi, base_url: http://127.0.0.1:8000/v1, model: qwen2.5-coder }",
      );
    }
  },
  invocation(input: PresetInput) {
    const { config, home } = input;
    const agentDir = join(home, ".pi", "agent");
    writeFiles(agentDir, {
      "settings.json": JSON.stringify({ quietStartup: true }, null, 2),
      ...(config.baseUrl
        ? {
            "models.json": JSON.stringify(
              {
                providers: {
                  autolab: {
                    baseUrl: config.baseUrl,
                    api: API_OF[config.provider ?? "openai-compatible"] ?? "openai-completions",
                    apiKey: `$${KEY_VAR}`,
                    models: [{ id: config.model }],
                  },
                },
              },
              null,
              2,
            ),
          }
        : {}),
    });
    const extension = join(agentDir, "autolab-guard.js");
    writeFileSync(extension, guardExtension(input.ctx.worktree, input.editable, config.maxTurns ?? 0));
    const args = [
      "--mode",
      "json",
      "--no-session",
      "--offline",
      "--no-approve",
      "--no-extensions",
      "--no-skills",
      "--no-prompt-templates",
      "--extension",
      extension,
      "--tools",
      "read,edit,write,grep,find,ls,submit_summary",
      ...(config.baseUrl ? ["--provider", "autolab"] : []),
      ...(config.model ? ["--model", config.model] : []),
      ...config.args,
      "-p",
      input.prompt,
    ];
    return {
      args,
      env: {
        PI_CODING_AGENT_DIR: agentDir,
        PI_OFFLINE: "1",
        PI_SKIP_VERSION_CHECK: "1",
        PI_TELEMETRY: "0",
        ...(input.apiKey ? { [KEY_VAR]: input.apiKey } : {}),
      },
    };
  },
  parse: parsePiJson,
};

export default preset;

interface PiMessage {
  role?: string;
  content?: { type?: string; text?: string; name?: string; arguments?: unknown }[] | string;
  usage?: {
    input?: number;
    output?: number;
    cacheRead?: number;
    cacheWrite?: number;
    cost?: { total?: number };
  };
  stopReason?: string;
  errorMessage?: string;
}

/** Reads pi's JSONL event stream: final text, the submit_summary arguments, usage, and API errors. */
export function parsePiJson(out: CliOutput): ParsedOutput {
  const assistants: PiMessage[] = [];
  let records = 0;
  let structured: unknown;
  let retryError: string | undefined;
  for (const line of out.stdout.split("\n")) {
    if (!line.trim()) continue;
    let e: {
      type?: string;
      message?: PiMessage;
      toolName?: string;
      args?: unknown;
      finalError?: string;
      success?: boolean;
    };
    try {
      e = JSON.parse(line);
    } catch {
      continue;
    }
    records++;
    if (e.type === "message_end" && e.message?.role === "assistant") assistants.push(e.message);
    if (e.type === "tool_execution_start" && e.toolName === "submit_summary") structured = e.args;
    if (e.type === "auto_retry_end" && e.success === false) retryError = e.finalError;
  }
  if (records === 0) {
    if (out.exitCode !== 0) return {};
    throw new AgentFailure(
      "garbage",
      "pi printed no JSON events (expected --mode json output)",
      out.stdout.slice(-2000),
    );
  }
  let input = 0;
  let output = 0;
  let cost = 0;
  for (const m of assistants) {
    input += (m.usage?.input ?? 0) + (m.usage?.cacheRead ?? 0) + (m.usage?.cacheWrite ?? 0);
    output += m.usage?.output ?? 0;
    cost += m.usage?.cost?.total ?? 0;
  }
  const last = assistants.at(-1);
  const text = textOf(last);
  const error =
    last?.stopReason === "error" || last?.stopReason === "aborted"
      ? (last.errorMessage ?? retryError ?? `the model call ended with ${last.stopReason}`)
      : undefined;
  return {
    ...(text ? { text } : {}),
    ...(structured !== undefined ? { structured } : {}),
    ...(error && structured === undefined ? { error } : {}),
    usage: { inputTokens: input, outputTokens: output, costUsd: cost },
  };
}

function textOf(m: PiMessage | undefined): string {
  if (!m?.content) return "";
  if (typeof m.content === "string") return m.content;
  return m.content
    .filter((c) => c.type === "text")
    .map((c) => c.text ?? "")
    .join("\n");
}

function writeFiles(dir: string, files: Record<string, string>): void {
  mkdirSync(dir, { recursive: true });
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
}

/**
 * The pi extension that keeps edits inside the editable files and reads inside the worktree,
 * and registers submit_summary.
 * Plain JavaScript with the allowlist inlined: pi loads it with jiti, which provides `typebox`.
 */
export function guardExtension(worktree: string, editable: string[], maxTurns: number): string {
  return `// Written by autolab for one proposal. Blocks edits outside the editable files.
import { realpathSync } from "node:fs";
import { isAbsolute, resolve, sep } from "node:path";
import { Type } from "typebox";

const WORKTREE = ${JSON.stringify(worktree)};
const EDITABLE = ${JSON.stringify(editable)};
const MAX_TURNS = ${maxTurns};
const real = (p) => { try { return realpathSync(p); } catch { return p; } };
const allowed = new Set(EDITABLE.flatMap((p) => [p, real(p)]));
const roots = [WORKTREE, real(WORKTREE)];
const inside = (p) => roots.some((r) => p === r || p.startsWith(r + sep));
const absolute = (raw) => (isAbsolute(raw) ? raw : resolve(process.cwd(), raw));

export default function (pi) {
  let turns = 0;
  pi.on("turn_start", () => { turns++; });
  pi.on("tool_call", async (event) => {
    if (MAX_TURNS > 0 && turns > MAX_TURNS && event.toolName !== "submit_summary") {
      return { block: true, reason: "autolab: the turn limit is reached; call submit_summary and stop" };
    }
    const raw = String(event.input?.path ?? ".").replace(/^@/, "");
    const abs = absolute(raw);
    if (event.toolName === "read" || event.toolName === "grep" || event.toolName === "find" || event.toolName === "ls") {
      // Outside the worktree lie the notebook and the trial logs, with holdout metrics.
      if (inside(abs) && inside(real(abs))) return undefined;
      return { block: true, reason: "autolab: " + raw + " is outside the project; only files under " + WORKTREE + " may be read" };
    }
    if (event.toolName !== "edit" && event.toolName !== "write") return undefined;
    if (allowed.has(abs) || allowed.has(real(abs))) return undefined;
    return { block: true, reason: "autolab: " + raw + " is not editable; only these files may be changed: " + EDITABLE.join(", ") };
  });
  pi.registerTool({
    name: "submit_summary",
    label: "Submit summary",
    description: "Submit the summary of your one change: the hypothesis it tests, the mechanism (why it should work) and the expected effect. Call it once, as your last action.",
    parameters: Type.Object({
      hypothesis: Type.String({ description: "The one idea this change tests" }),
      mechanism: Type.String({ description: "Why it should work" }),
      expected: Type.String({ description: "Expected effect on the objective metric" }),
    }),
    async execute(_id, params) {
      return { content: [{ type: "text", text: "Summary recorded. You are done." }], details: params, terminate: true };
    },
  });
}
`;
}
