import { mkdirSync } from "node:fs";
import { join } from "node:path";
import {
  APICallError,
  generateText,
  type LanguageModel,
  type ModelMessage,
  RetryError,
  type StepResult,
  type StopCondition,
  stepCountIs,
  type ToolSet,
} from "ai";
import { AgentFailure, type AgentFailureKind } from "../../core/agent-failure.ts";
import { formatSpokenTimeout } from "../../core/format.ts";
import { redactSecrets } from "../../core/secrets.ts";
import type { Agent, AgentConfig, Program, Proposal, ProposalContext } from "../../core/types.ts";
import { writeUntrusted } from "../../core/untrusted-file.ts";
import { createFileTools, type ToolState } from "./file-tools.ts";
import { ADVISE_PROMPT, NUDGE_PROMPT, PROPOSE_PROMPT, researcherInstructions } from "./instructions.ts";
import { costOf } from "./prices.ts";
import { type ProviderName, resolveModel } from "./provider.ts";

export const DEFAULT_MAX_TURNS = 30;
export const DEFAULT_TIMEOUT_MS = 15 * 60_000;
export const TRANSCRIPT_FILE = "llm-transcript.jsonl";

export interface LlmAgentOptions {
  /** A ready model (tests: MockLanguageModelV4); program.md's provider settings are then not used. */
  model?: LanguageModel;
}

/** Characters of one tool output or text kept in the transcript. */
const TRANSCRIPT_CAP = 20_000;

/**
 * autolab's own researcher: a tool-calling loop (Vercel AI SDK) over any OpenAI-compatible
 * endpoint (vLLM, Ollama, llama.cpp, OpenRouter), Anthropic or OpenAI. The model looks at the
 * project with list_files/read_file, changes editable files with edit_file/write_file and ends
 * with finish({hypothesis, mechanism, expected}), which becomes the Proposal.
 *
 * Configuration mistakes (no model, no base URL, no key) throw AutolabError here, before a run
 * starts. Everything that goes wrong during a proposal is an AgentFailure: the loop records it
 * and goes on.
 */
export function createLlmAgent(config: AgentConfig, _program: Program, opts: LlmAgentOptions = {}): Agent {
  const resolved = opts.model
    ? {
        model: opts.model,
        provider: (config.provider ?? "openai-compatible") as ProviderName,
        modelId: config.model ?? (typeof opts.model === "string" ? opts.model : opts.model.modelId),
        ...(config.baseUrl ? { baseUrl: config.baseUrl } : {}),
      }
    : resolveModel(config);
  const maxTurns = config.maxTurns ?? DEFAULT_MAX_TURNS;
  const timeoutMs = config.timeoutMs ?? DEFAULT_TIMEOUT_MS;

  return {
    name: "llm",
    async propose(ctx: ProposalContext): Promise<Proposal> {
      const started = performance.now();
      const transcriptPath = join(ctx.logDir, TRANSCRIPT_FILE);
      // The transcript is best effort: a full disk stops it, never the proposal.
      let logging = true;
      const log = (entry: Record<string, unknown>) => {
        if (!logging) return;
        try {
          mkdirSync(ctx.logDir, { recursive: true });
          writeUntrusted(
            transcriptPath,
            `${redactSecrets(JSON.stringify({ at: new Date().toISOString(), ...entry }))}\n`,
            { append: true },
          );
        } catch {
          logging = false;
        }
      };

      const state: ToolState = { changed: [] };
      const tools = createFileTools(ctx.worktree, ctx.program, state);
      const instructions = researcherInstructions(ctx, maxTurns);
      const ask = ctx.task === "advise" ? ADVISE_PROMPT : PROPOSE_PROMPT;
      const timeout = AbortSignal.timeout(timeoutMs);
      const signal = ctx.signal ? AbortSignal.any([ctx.signal, timeout]) : timeout;

      const tokens = { input: 0, output: 0, inputKnown: false, outputKnown: false };
      let steps = 0;
      let lastText = "";
      const usage = () => {
        const inputTokens = tokens.inputKnown ? tokens.input : undefined;
        const outputTokens = tokens.outputKnown ? tokens.output : undefined;
        const costUsd = costOf(resolved.provider, resolved.modelId, inputTokens, outputTokens, config.price);
        return {
          ...(inputTokens !== undefined ? { inputTokens } : {}),
          ...(outputTokens !== undefined ? { outputTokens } : {}),
          ...(costUsd !== undefined ? { costUsd } : {}),
          wallS: Math.round(performance.now() - started) / 1000,
        };
      };
      const fail = (kind: AgentFailureKind, message: string, detail = ""): never => {
        const u = usage();
        log({ type: "end", outcome: kind, message, usage: u, steps, changed: state.changed });
        throw new AgentFailure(kind, message, detail, u);
      };

      // Ends the loop after a step in which finish succeeded. (hasToolCall("finish") would also
      // stop on a finish call with invalid arguments, which the model should get to correct.)
      const finished: StopCondition<ToolSet> = () => state.finished !== undefined;
      const onStepEnd = (step: StepResult<ToolSet>) => {
        steps++;
        if (step.usage.inputTokens !== undefined) {
          tokens.input += step.usage.inputTokens;
          tokens.inputKnown = true;
        }
        if (step.usage.outputTokens !== undefined) {
          tokens.output += step.usage.outputTokens;
          tokens.outputKnown = true;
        }
        if (step.text) lastText = step.text;
        log(stepEntry(steps, step));
      };
      const common = {
        model: resolved.model,
        instructions,
        tools,
        abortSignal: signal,
        // Edits apply in the order the model wrote them.
        toolCallConcurrency: 1,
        onStepEnd,
      };

      log({
        type: "start",
        provider: resolved.provider,
        model: resolved.modelId,
        ...(resolved.baseUrl ? { baseUrl: resolved.baseUrl } : {}),
        maxTurns,
        timeoutMs,
        instructions,
        prompt: ask,
      });
      try {
        signal.throwIfAborted();
        const first = await generateText({
          ...common,
          prompt: ask,
          stopWhen: [finished, stepCountIs(maxTurns)],
        });
        // Models (small local ones especially) often end with prose instead of the finish call:
        // remind them once, with the turns that are left.
        if (!state.finished && steps < maxTurns) {
          log({ type: "nudge", prompt: NUDGE_PROMPT });
          const messages: ModelMessage[] = [
            { role: "user", content: ask },
            ...first.responseMessages,
            { role: "user", content: NUDGE_PROMPT },
          ];
          await generateText({ ...common, messages, stopWhen: [finished, stepCountIs(maxTurns - steps)] });
        }
      } catch (err) {
        if (timeout.aborted)
          fail("timeout", `no proposal within ${formatSpokenTimeout(timeoutMs)} (agent.timeout)`);
        // Ctrl-C: the loop sees its signal and records nothing for this proposal.
        if (ctx.signal?.aborted) fail("crashed", "stopped by a signal");
        const { message, detail } = describeError(err, resolved.baseUrl);
        fail("crashed", message, detail);
      }

      const summary = state.finished;
      if (!summary) {
        return fail(
          "no_summary",
          steps >= maxTurns
            ? `no finish call within ${maxTurns} steps (agent.max_turns)`
            : "the model stopped without calling finish",
          lastText.slice(-2000),
        );
      }
      const u = usage();
      log({ type: "end", outcome: "finished", summary, usage: u, steps, changed: state.changed });
      return {
        hypothesis: summary.hypothesis,
        ...(summary.mechanism ? { mechanism: summary.mechanism } : {}),
        ...(summary.expected ? { expected: summary.expected } : {}),
        usage: u,
      };
    },
  };
}

/** One transcript line per model call: what it said, which tools it called and what came back. */
function stepEntry(n: number, step: StepResult<ToolSet>): Record<string, unknown> {
  const calls: unknown[] = [];
  const results: unknown[] = [];
  for (const part of step.content) {
    if (part.type === "tool-call") {
      calls.push({ id: part.toolCallId, tool: part.toolName, input: part.input });
    } else if (part.type === "tool-result") {
      results.push({ id: part.toolCallId, tool: part.toolName, output: cap(part.output) });
    } else if (part.type === "tool-error") {
      results.push({ id: part.toolCallId, tool: part.toolName, error: cap(errorText(part.error)) });
    }
  }
  return {
    type: "step",
    step: n,
    finishReason: step.finishReason,
    ...(step.text ? { text: cap(step.text) } : {}),
    ...(step.reasoningText ? { reasoning: cap(step.reasoningText) } : {}),
    calls,
    results,
    usage: { inputTokens: step.usage.inputTokens, outputTokens: step.usage.outputTokens },
  };
}

function cap(v: unknown): unknown {
  if (typeof v !== "string" || v.length <= TRANSCRIPT_CAP) return v;
  return `${v.slice(0, TRANSCRIPT_CAP)}… (${v.length - TRANSCRIPT_CAP} more characters)`;
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * A provider failure as one line for the notebook (with the likely fix for the common ones)
 * and the details for the log.
 */
export function describeError(
  err: unknown,
  baseUrl: string | undefined,
): { message: string; detail: string } {
  const last = RetryError.isInstance(err) ? err.lastError : err;
  const detail = [
    errorText(err),
    APICallError.isInstance(last) && last.responseBody ? `response: ${last.responseBody.slice(0, 2000)}` : "",
    last instanceof Error && last.cause ? `cause: ${errorText(last.cause)}` : "",
  ]
    .filter(Boolean)
    .join("\n");
  let message = errorText(last).split("\n")[0] ?? "";
  if (APICallError.isInstance(last)) {
    const status = last.statusCode;
    const hint =
      status === 401 || status === 403
        ? " — check the API key (agent.api_key_env)"
        : status === 404
          ? " — check agent.base_url (most servers want the /v1 suffix) and agent.model"
          : "";
    message = `${status ? `HTTP ${status} from ${last.url}: ` : ""}${message}${hint}`;
    const cause = last.cause instanceof Error ? last.cause : undefined;
    const code = (cause as NodeJS.ErrnoException | undefined)?.code ?? causeCode(cause);
    if (!status && code === "ECONNREFUSED") {
      message = `cannot connect to ${baseUrl ?? last.url} (connection refused) — is the model server running?`;
    }
  }
  return { message: message.slice(0, 500), detail };
}

function causeCode(e: Error | undefined): string | undefined {
  const inner = e?.cause as NodeJS.ErrnoException | undefined;
  return inner?.code;
}
