/**
 * Aider (Python, `aider-chat`): `aider --message-file <prompt> --yes-always --no-auto-commits
 * --no-git --model openai/<model> --openai-api-base … <editable files>`.
 *
 * NOT TESTED AGAINST THE REAL CLI: aider is a Python tool that cannot be installed where
 * autolab's tests run. The command line and the parser are unit-tested (test/agents-aider.test.ts)
 * from aider's documented options and output; expect to adjust them on first real use.
 *
 * - Endpoint: with `base_url`, litellm's OpenAI-compatible route: `--model openai/<model>`
 *   (also the weak model) and `--openai-api-base`; the key in OPENAI_API_KEY (environment,
 *   not the command line). Without `base_url`, `model` is passed as is (`sonnet`,
 *   `anthropic/claude-sonnet-4-5`, `openrouter/…`) with the host's keys.
 * - Scope: the editable files are the files of the chat (named on the command line); the
 *   protected files are not given. Aider edits by SEARCH/REPLACE blocks in its answer; a block
 *   for another file makes aider ask "Allow edits to file that has not been added to the
 *   chat?", which `--yes-always` answers yes. So edits outside the editable files are left to
 *   the loop's scope check. Aider runs no shell commands here (`--no-suggest-shell-commands`).
 * - Offline apart from the model: `--no-check-update`, `--analytics-disable`, and
 *   LITELLM_LOCAL_MODEL_COST_MAP (litellm's price list from the package, not from GitHub).
 * - Aider's own files go to the proposal's log directory (chat, input and LLM histories) or
 *   the isolated home, never into the worktree (`--no-gitignore`: no .gitignore edit). Aider
 *   still reads a project's `.aider.conf.yml` and `.env` (the latter overrides the environment).
 * - `max_turns` is ignored (aider makes one request, plus up to 3 reflections on failed edits).
 * - Summary: the JSON block at the end of its answer (plain text output).
 */
import { join } from "node:path";
import { AutolabError } from "../../../core/errors.ts";
import type { CliOutput, CliPreset, ParsedOutput, PresetInput } from "../preset.ts";

const preset: CliPreset = {
  backend: "aider",
  executable: "aider",
  install: "python -m pip install aider-install && aider-install",
  docs: "https://aider.chat/docs/install.html",
  endpoints: [
    "https://api.anthropic.com",
    "https://api.openai.com",
    "https://generativelanguage.googleapis.com",
    "https://openrouter.ai",
  ],
  // A `pip install --user aider-chat`: its packages lie under ~/.local/lib.
  homeReads: [".local/lib"],
  hostKeys: "all",
  validate(config) {
    if (!config.model) {
      throw new AutolabError(
        "AGENT_CONFIG_INVALID",
        "agent backend aider needs a model (the id the endpoint serves with base_url, else an aider model name).",
        "Add it to program.md, e.g. agent: { backend: aider, base_url: http://127.0.0.1:8000/v1, model: qwen2.5-coder } or agent: { backend: aider, model: sonnet }",
      );
    }
    if (config.baseUrl && config.provider === "anthropic") {
      throw new AutolabError(
        "AGENT_CONFIG_INVALID",
        "agent backend aider with a base_url uses the OpenAI-compatible route; provider anthropic is not supported.",
        "Remove agent.provider, or drop base_url and use model: anthropic/<id> with ANTHROPIC_API_KEY.",
      );
    }
  },
  invocation(input: PresetInput) {
    const { config, ctx } = input;
    const model = config.baseUrl ? `openai/${config.model}` : (config.model ?? "");
    const args = [
      "--message-file",
      input.promptFile,
      "--yes-always",
      "--no-auto-commits",
      "--no-dirty-commits",
      "--no-git",
      "--no-gitignore",
      "--no-auto-lint",
      "--no-auto-test",
      "--no-suggest-shell-commands",
      "--no-detect-urls",
      "--no-check-update",
      "--no-show-release-notes",
      "--analytics-disable",
      "--no-show-model-warnings",
      "--no-pretty",
      "--no-stream",
      "--no-fancy-input",
      "--chat-history-file",
      join(ctx.logDir, "aider.chat.history.md"),
      "--input-history-file",
      join(ctx.logDir, "aider.input.history"),
      "--llm-history-file",
      join(ctx.logDir, "aider.llm.history"),
      "--model",
      model,
      ...(config.baseUrl
        ? ["--weak-model", model, "--openai-api-base", config.baseUrl.replace(/\/+$/, "")]
        : []),
      ...config.args,
      // The files of the chat: only these are edited without asking.
      ...input.editable,
    ];
    const env: Record<string, string> = {
      // litellm would otherwise fetch its model price list from GitHub when imported.
      LITELLM_LOCAL_MODEL_COST_MAP: "True",
      ...(input.apiKey ? { OPENAI_API_KEY: input.apiKey } : {}),
    };
    return { args, env };
  },
  parse: parseAiderOutput,
};

export default preset;

/**
 * Reads aider's plain output: the whole stdout is the answer (the summary JSON block ends it);
 * "Tokens: 1.2k sent, 345 received. Cost: $0.01 message, …" lines give the usage; a litellm
 * exception line ("litellm.APIError: …", "litellm.AuthenticationError: …") is an API failure.
 */
export function parseAiderOutput(out: CliOutput): ParsedOutput {
  let input = 0;
  let output = 0;
  let cost: number | undefined;
  for (const m of out.stdout.matchAll(
    /Tokens: ([\d.,]+k?) sent.*?, ([\d.,]+k?) received\.(?:\s*Cost: \$([\d.]+) message)?/g,
  )) {
    input += count(m[1] ?? "0");
    output += count(m[2] ?? "0");
    if (m[3] !== undefined) cost = (cost ?? 0) + Number(m[3]);
  }
  const usage = {
    inputTokens: input,
    outputTokens: output,
    ...(cost !== undefined ? { costUsd: cost } : {}),
  };
  const failure = [
    ...`${out.stdout}\n${out.stderr}`.matchAll(/^.*\blitellm\.[A-Za-z]*(?:Error|Exception)\b.*$/gm),
  ].at(-1);
  // An API failure after which aider still produced an answer (a retry that worked) is no failure.
  if (failure && input === 0) return { error: failure[0].trim(), usage };
  return { text: out.stdout, usage };
}

/** "1.2k" → 1200, "2,345" → 2345. */
function count(s: string): number {
  const n = Number(s.replace(/,/g, "").replace(/k$/, ""));
  return Math.round(s.endsWith("k") ? n * 1000 : n);
}
