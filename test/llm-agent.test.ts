import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { LanguageModelV4CallOptions, LanguageModelV4GenerateResult } from "@ai-sdk/provider";
import { APICallError } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { createAgent } from "../src/agents/index.ts";
import { createLlmAgent, TRANSCRIPT_FILE } from "../src/agents/llm/llm-agent.ts";
import { costOf } from "../src/agents/llm/prices.ts";
import { resolveModel } from "../src/agents/llm/provider.ts";
import { createRun } from "../src/app/create-run.ts";
import { answerText, parseAdvice } from "../src/core/advisor.ts";
import { AgentFailure } from "../src/core/agent-failure.ts";
import { AutolabError } from "../src/core/errors.ts";
import type { AgentConfig, Program, ProposalContext } from "../src/core/types.ts";
import { loadProgram } from "../src/program/index.ts";
import { agentContract } from "./contracts/agent-contract.ts";
import { type FakeModel, startFakeModel } from "./fake-model/server.ts";
import { cleanupTemp, tempDir, writeFiles } from "./helpers/git-project.ts";
import { createToyProject, TOY_HOLDOUT, type ToyProject } from "./helpers/toy-project.ts";

afterAll(cleanupTemp);

// ——— a scripted model ———

type Reply = LanguageModelV4GenerateResult;
const usage = (input: number, output: number): Reply["usage"] => ({
  inputTokens: { total: input, noCache: input, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: output, text: output, reasoning: undefined },
});
let callSeq = 0;
/** The model calls one tool. */
const call = (toolName: string, input: unknown): Reply => ({
  content: [
    {
      type: "tool-call",
      toolCallId: `call${++callSeq}`,
      toolName,
      input: typeof input === "string" ? input : JSON.stringify(input),
    },
  ],
  finishReason: { unified: "tool-calls", raw: "tool_calls" },
  usage: usage(100, 20),
  warnings: [],
});
/** The model answers in prose. */
const say = (text: string): Reply => ({
  content: [{ type: "text", text }],
  finishReason: { unified: "stop", raw: "stop" },
  usage: usage(100, 20),
  warnings: [],
});
const FINISH = {
  hypothesis: "LR 0.5 → 0.05",
  mechanism: "smaller steps stop the divergence",
  expected: "1.2",
};

/** Replies in order; after the list runs out, the model keeps talking. */
function scripted(replies: Reply[]): MockLanguageModelV4 {
  let i = 0;
  return new MockLanguageModelV4({
    modelId: "mock-model",
    doGenerate: async () => replies[i++] ?? say("I am done."),
  });
}

/** What the model was sent as tool results, in the order of its calls. */
function toolOutputs(model: MockLanguageModelV4): { tool: string; type: string; value: string }[] {
  const last = model.doGenerateCalls.at(-1);
  const out: { tool: string; type: string; value: string }[] = [];
  for (const m of last?.prompt ?? []) {
    if (m.role !== "tool") continue;
    for (const part of m.content) {
      if (part.type !== "tool-result") continue;
      const o = part.output as { type: string; value: unknown };
      out.push({
        tool: part.toolName,
        type: o.type,
        value: typeof o.value === "string" ? o.value : JSON.stringify(o.value),
      });
    }
  }
  return out;
}

// ——— a project to work on ———

const TRAIN = "LR = 0.5\nWIDTH = 10\nprint('train')\n";
const EVALUATE = "print('score: 1')\n";

function project(): { dir: string; program: Program; ctx: ProposalContext } {
  const dir = tempDir("autolab-llm-");
  writeFiles(dir, {
    "program.md": [
      "---",
      "name: llm-unit",
      "objective: { metric: score, direction: minimize }",
      "run: { command: python train.py, evaluate: python evaluate.py, budget: 30s }",
      "files: { editable: [train.py], protected: [evaluate.py, data] }",
      "---",
      "Lower the score.",
      "",
    ].join("\n"),
    "train.py": TRAIN,
    "evaluate.py": EVALUATE,
    "data/secret.txt": "inside a protected directory\n",
    "notes.md": "not editable\n",
    ".git/config": "[core]\n",
  });
  const program = loadProgram(dir);
  const logDir = join(tempDir("autolab-llm-logs-"), "agent");
  return {
    dir,
    program,
    ctx: {
      worktree: dir,
      program,
      best: { n: 0, metric: 3.2 },
      history: [],
      contextText: "# Lab notebook: llm-unit\nNOTEBOOK-MARKER",
      logDir,
    },
  };
}

const config = (extra: Partial<AgentConfig> = {}): AgentConfig => ({
  backend: "llm",
  model: "mock-model",
  args: [],
  env: {},
  ...extra,
});

function transcript(ctx: ProposalContext): Record<string, unknown>[] {
  return readFileSync(join(ctx.logDir, TRANSCRIPT_FILE), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

async function failure(p: Promise<unknown>): Promise<AgentFailure> {
  try {
    await p;
  } catch (err) {
    if (err instanceof AgentFailure) return err;
    throw err;
  }
  throw new Error("expected an AgentFailure, but the proposal succeeded");
}

describe("llm agent (scripted model)", () => {
  it("reads, edits, finishes: the edit is in the worktree and finish becomes the proposal", async () => {
    const { dir, program, ctx } = project();
    const model = scripted([
      call("read_file", { path: "train.py" }),
      call("edit_file", { path: "train.py", old_text: "LR = 0.5", new_text: "LR = 0.05" }),
      call("finish", FINISH),
    ]);
    const agent = createLlmAgent(config(), program, { model });
    expect(agent.name).toBe("llm");
    const proposal = await agent.propose(ctx);

    expect(readFileSync(join(dir, "train.py"), "utf8")).toBe(TRAIN.replace("LR = 0.5", "LR = 0.05"));
    expect(proposal).toMatchObject({
      hypothesis: FINISH.hypothesis,
      mechanism: FINISH.mechanism,
      expected: FINISH.expected,
      usage: { inputTokens: 300, outputTokens: 60 },
    });
    expect(proposal.usage?.wallS).toBeGreaterThanOrEqual(0);
    // A model without a price gets no cost rather than a guess.
    expect(proposal.usage?.costUsd).toBeUndefined();
    // The loop stopped at finish: three model calls, nothing after.
    expect(model.doGenerateCalls).toHaveLength(3);

    // What the model was given: instructions with the rules and the notebook, five tools, and
    // the file's exact content as the read result.
    const first = model.doGenerateCalls[0] as LanguageModelV4CallOptions;
    const system = first.prompt.find((m) => m.role === "system")?.content as string;
    expect(system).toContain("NOTEBOOK-MARKER");
    expect(system).toContain("editable files: train.py");
    expect(system).toContain("python train.py");
    expect(first.tools?.map((t) => t.name)).toEqual([
      "list_files",
      "read_file",
      "edit_file",
      "write_file",
      "finish",
    ]);
    expect(toolOutputs(model)[0]).toEqual({ tool: "read_file", type: "text", value: TRAIN });

    const lines = transcript(ctx);
    expect(lines.map((l) => l.type)).toEqual(["start", "step", "step", "step", "end"]);
    expect(lines[0]).toMatchObject({ model: "mock-model", maxTurns: 30 });
    expect(lines[2]).toMatchObject({ calls: [{ tool: "edit_file" }], results: [{ tool: "edit_file" }] });
    expect(lines[4]).toMatchObject({
      outcome: "finished",
      changed: ["train.py"],
      usage: { inputTokens: 300 },
    });
  });

  it("as the advisor: asked the advisor's question, its finish is the answer (docs/advisor.md)", async () => {
    const { program, ctx } = project();
    const model = scripted([
      call("finish", { hypothesis: "STOP: the score is at its floor", mechanism: "flat" }),
    ]);
    const agent = createLlmAgent(config(), program, { model });
    const proposal = await agent.propose({ ...ctx, task: "advise" });
    expect(parseAdvice(answerText(proposal))).toEqual({
      verdict: "stop",
      reason: "the score is at its floor",
    });
    const first = model.doGenerateCalls[0] as LanguageModelV4CallOptions;
    const system = first.prompt.find((m) => m.role === "system")?.content as string;
    expect(system).toContain("You are the advisor");
    expect(system).toContain("NOTEBOOK-MARKER");
    expect(system).not.toContain("propose ONE experiment");
    expect(JSON.stringify(first.prompt.find((m) => m.role === "user"))).toContain(
      "Answer the advisor's question",
    );
  });

  it("refuses to touch protected, non-editable and outside files; the model sees why, files stay as they were", async () => {
    const { dir, program, ctx } = project();
    symlinkSync(join(dir, "evaluate.py"), join(dir, "link.py"));
    const model = scripted([
      call("edit_file", { path: "evaluate.py", old_text: "score: 1", new_text: "score: -1000" }),
      call("write_file", { path: "evaluate.py", content: "print('score: -1000')\n" }),
      call("write_file", { path: "data/secret.txt", content: "x" }),
      call("write_file", { path: "notes.md", content: "x" }),
      call("write_file", { path: "../escape.py", content: "x" }),
      call("read_file", { path: "../../etc/passwd" }),
      call("read_file", { path: ".git/config" }),
      call("read_file", { path: "link.py" }),
      call("edit_file", { path: 42, old_text: null }), // nonsense arguments
      call("edit_file", "{not json"),
      call("no_such_tool", {}),
      call("edit_file", { path: "train.py", old_text: "LR = 0.25", new_text: "LR = 0.1" }), // not found
      call("read_file", { path: "evaluate.py" }), // protected files may be read
      call("finish", FINISH),
    ]);
    const proposal = await createLlmAgent(config(), program, { model }).propose(ctx);
    expect(proposal.hypothesis).toBe(FINISH.hypothesis);

    expect(readFileSync(join(dir, "evaluate.py"), "utf8")).toBe(EVALUATE);
    expect(readFileSync(join(dir, "data/secret.txt"), "utf8")).toBe("inside a protected directory\n");
    expect(readFileSync(join(dir, "notes.md"), "utf8")).toBe("not editable\n");
    expect(readFileSync(join(dir, "train.py"), "utf8")).toBe(TRAIN);
    expect(existsSync(join(dir, "..", "escape.py"))).toBe(false);

    const outputs = toolOutputs(model);
    expect(outputs).toHaveLength(13);
    const [
      protEdit,
      protWrite,
      protDir,
      notEditable,
      outside,
      passwd,
      git,
      link,
      nonsense,
      badJson,
      noTool,
      notFound,
    ] = outputs;
    for (const o of outputs.slice(0, 12)) expect(o.type).toBe("error-text");
    expect(protEdit?.value).toMatch(/evaluate\.py is protected \(read-only\).*Editable files: train\.py/);
    expect(protWrite?.value).toMatch(/evaluate\.py is protected/);
    expect(protDir?.value).toMatch(/data\/secret\.txt is protected/);
    expect(notEditable?.value).toMatch(/notes\.md is not an editable file/);
    expect(outside?.value).toMatch(/outside the project/);
    expect(passwd?.value).toMatch(/outside the project/);
    expect(git?.value).toMatch(/off limits/);
    expect(link?.value).toMatch(/symbolic link/);
    expect(nonsense?.value).toMatch(/Invalid input for tool edit_file/);
    expect(badJson?.value).toMatch(/edit_file/);
    expect(noTool?.value).toMatch(/unavailable tool 'no_such_tool'/);
    expect(notFound?.value).toMatch(/old_text was not found in train\.py/);
    expect(outputs[12]).toEqual({ tool: "read_file", type: "text", value: EVALUATE });
    expect(transcript(ctx).at(-1)).toMatchObject({ outcome: "finished", changed: [] });
  });

  it("write_file replaces an editable file; edit_file keeps $ patterns literal and wants a unique match", async () => {
    const { dir, program, ctx } = project();
    const model = scripted([
      call("list_files", {}),
      call("write_file", { path: "./train.py", content: "A = 1\nA = 1\n" }),
      call("edit_file", { path: "train.py", old_text: "A = 1", new_text: "A = 2" }),
      call("edit_file", { path: "train.py", old_text: "A = 1\nA = 1", new_text: "A = '$&'\nB = 3" }),
      call("finish", { hypothesis: "rewrite", mechanism: "" }),
    ]);
    const proposal = await createLlmAgent(config(), program, { model }).propose(ctx);
    expect(readFileSync(join(dir, "train.py"), "utf8")).toBe("A = '$&'\nB = 3\n");
    expect(proposal).toEqual({ hypothesis: "rewrite", usage: expect.any(Object) });
    const [list, write, twice, edit] = toolOutputs(model);
    expect(list?.value).toMatch(/Editable \(you may change these\):\n {2}train\.py {2}\d+ bytes/);
    expect(list?.value).toMatch(
      /Protected \(read-only[^\n]*\n {2}evaluate\.py {2}\d+ bytes\n {2}data\/ {2}\(directory\)/,
    );
    expect(list?.value).toContain("notes.md");
    expect(list?.value).not.toContain(".git");
    expect(write?.value).toBe("Wrote train.py (12 bytes).");
    expect(twice).toMatchObject({ type: "error-text", value: expect.stringMatching(/occurs 2 times/) });
    expect(edit?.value).toMatch(/^Edited train\.py/);
  });

  it("pages through a large file", async () => {
    const { dir, program, ctx } = project();
    const line = `${"x".repeat(99)}\n`;
    writeFileSync(join(dir, "train.py"), line.repeat(1000)); // 100 000 characters
    const model = scripted([
      call("read_file", { path: "train.py" }),
      call("read_file", { path: "train.py", start_line: 601 }),
      call("finish", FINISH),
    ]);
    await createLlmAgent(config(), program, { model }).propose(ctx);
    const [head, tail] = toolOutputs(model);
    expect(head?.value).toMatch(
      /truncated: this shows lines 1-600 of 1000\. Call read_file with start_line=601/,
    );
    expect(tail?.value).toBe(line.repeat(400));
  });

  it("no finish call: reminds the model once, then fails with no_summary", async () => {
    const { program, ctx } = project();
    const model = scripted([say("I would lower the learning rate.")]);
    const err = await failure(createLlmAgent(config(), program, { model }).propose(ctx));
    expect(err.kind).toBe("no_summary");
    expect(err.message).toMatch(/stopped without calling finish/);
    expect(err.detail).toContain("I am done.");
    expect(err.usage).toMatchObject({ inputTokens: 200, outputTokens: 40 });
    expect(model.doGenerateCalls).toHaveLength(2);
    const nudge = model.doGenerateCalls[1]?.prompt.at(-1);
    expect(JSON.stringify(nudge)).toContain("without calling finish");
    expect(transcript(ctx).map((l) => l.type)).toEqual(["start", "step", "nudge", "step", "end"]);
  });

  it("no finish call within max_turns: no_summary, and the model was called max_turns times", async () => {
    const { program, ctx } = project();
    const model = new MockLanguageModelV4({
      doGenerate: async () => call("read_file", { path: "train.py" }),
    });
    const err = await failure(createLlmAgent(config({ maxTurns: 4 }), program, { model }).propose(ctx));
    expect(err.kind).toBe("no_summary");
    expect(err.message).toMatch(/no finish call within 4 steps/);
    expect(model.doGenerateCalls).toHaveLength(4);
  });

  it("a finish call with invalid arguments does not end the turn: the model gets to correct it", async () => {
    const { program, ctx } = project();
    const model = scripted([
      call("edit_file", { path: "train.py", old_text: "LR = 0.5", new_text: "LR = 0.05" }),
      call("finish", { mechanism: "forgot the hypothesis" }),
      call("finish", { hypothesis: "   ", mechanism: "blank" }),
      call("finish", FINISH),
    ]);
    const proposal = await createLlmAgent(config(), program, { model }).propose(ctx);
    expect(proposal.hypothesis).toBe(FINISH.hypothesis);
    expect(model.doGenerateCalls).toHaveLength(4);
    expect(toolOutputs(model).map((o) => o.type)).toEqual(["text", "error-text", "error-text"]);
  });

  it("a provider error is a crashed proposal, with the HTTP status in the message", async () => {
    const { program, ctx } = project();
    const model = new MockLanguageModelV4({
      doGenerate: async () => {
        throw new APICallError({
          message: "Service Unavailable",
          url: "http://127.0.0.1:1/v1/chat/completions",
          requestBodyValues: {},
          statusCode: 503,
          responseBody: '{"error":"overloaded"}',
          isRetryable: false,
        });
      },
    });
    const err = await failure(createLlmAgent(config(), program, { model }).propose(ctx));
    expect(err.kind).toBe("crashed");
    expect(err.message).toBe("HTTP 503 from http://127.0.0.1:1/v1/chat/completions: Service Unavailable");
    expect(err.detail).toContain("overloaded");
    expect(transcript(ctx).at(-1)).toMatchObject({ type: "end", outcome: "crashed" });

    const plain = new MockLanguageModelV4({
      doGenerate: async () => {
        throw new Error("socket hang up");
      },
    });
    const err2 = await failure(createLlmAgent(config(), program, { model: plain }).propose(ctx));
    expect(err2).toMatchObject({ kind: "crashed", message: "socket hang up" });
  });

  it("a model that hangs past agent.timeout is a timeout; Ctrl-C ends the proposal at once", async () => {
    const { program, ctx } = project();
    const hang = () =>
      new MockLanguageModelV4({
        doGenerate: (opts) =>
          new Promise((_, reject) => {
            // Like fetch: an already aborted signal rejects at once.
            if (opts.abortSignal?.aborted) reject(opts.abortSignal.reason);
            opts.abortSignal?.addEventListener("abort", () => reject(opts.abortSignal?.reason));
          }),
      });
    const err = await failure(
      createLlmAgent(config({ timeoutMs: 50 }), program, { model: hang() }).propose(ctx),
    );
    expect(err.kind).toBe("timeout");
    expect(err.message).toMatch(/no proposal within 0\.05 s/);

    const stop = new AbortController();
    const pending = createLlmAgent(config(), program, { model: hang() }).propose({
      ...ctx,
      signal: stop.signal,
    });
    stop.abort();
    const err2 = await failure(pending);
    expect(err2).toMatchObject({ kind: "crashed", message: "stopped by a signal" });
  });

  it("accounts tokens across steps and prices a known hosted model", async () => {
    const { program, ctx } = project();
    const model = scripted([call("read_file", { path: "train.py" }), call("finish", FINISH)]);
    const agent = createLlmAgent(
      config({ provider: "anthropic", model: "claude-sonnet-4-5-20250929" }),
      program,
      {
        model,
      },
    );
    const { usage } = await agent.propose(ctx);
    expect(usage).toMatchObject({ inputTokens: 200, outputTokens: 40 });
    expect(usage?.costUsd).toBeCloseTo((200 * 3 + 40 * 15) / 1e6, 12);
    expect(costOf("openai", "gpt-4o-2024-08-06", 1e6, 0)).toBe(2.5);
    expect(costOf("openai", "gpt-4o-mini", 0, 1e6)).toBe(0.6);
    expect(costOf("openai-compatible", "gpt-4o", 1, 1)).toBeUndefined();
    expect(costOf("anthropic", "claude-sonnet-4-5-experimental", 1, 1)).toBeUndefined();
  });
});

describe("llm agent configuration", () => {
  const expectConfigError = (fn: () => unknown, message: RegExp, hint: RegExp) => {
    try {
      fn();
    } catch (err) {
      expect(err).toBeInstanceOf(AutolabError);
      expect((err as AutolabError).code).toBe("AGENT_CONFIG_INVALID");
      expect((err as AutolabError).message).toMatch(message);
      expect((err as AutolabError).hint).toMatch(hint);
      return;
    }
    throw new Error("expected an AutolabError");
  };

  it("says what to write in program.md when something is missing", () => {
    expectConfigError(() => resolveModel(config({ model: undefined })), /needs a model/, /set agent\.model/i);
    expectConfigError(() => resolveModel(config()), /needs the server's URL/, /agent\.base_url/);
    expectConfigError(
      () => resolveModel(config({ provider: "anthropic", model: "claude-sonnet-4-5" }), {}),
      /ANTHROPIC_API_KEY/,
      /agent\.api_key_env/,
    );
    expectConfigError(
      () => resolveModel(config({ provider: "openai", model: "gpt-5" }), {}),
      /OPENAI_API_KEY/,
      /export OPENAI_API_KEY/,
    );
    expectConfigError(
      () =>
        resolveModel(
          config({ baseUrl: "https://openrouter.ai/api/v1", apiKeyEnv: "OPENROUTER_API_KEY" }),
          {},
        ),
      /OPENROUTER_API_KEY/,
      /export OPENROUTER_API_KEY/,
    );
    expectConfigError(
      () => resolveModel(config({ provider: "gemini" })),
      /unknown provider/,
      /openai-compatible/,
    );
  });

  it("builds each provider's model without a network call", () => {
    const local = resolveModel(config({ baseUrl: "http://127.0.0.1:11434/v1/" }), {});
    expect(local).toMatchObject({
      provider: "openai-compatible",
      modelId: "mock-model",
      baseUrl: "http://127.0.0.1:11434/v1",
    });
    const env = { ANTHROPIC_API_KEY: "k", OPENAI_API_KEY: "k" };
    expect(resolveModel(config({ provider: "anthropic", model: "claude-haiku-4-5" }), env).provider).toBe(
      "anthropic",
    );
    expect(resolveModel(config({ provider: "openai", model: "gpt-5-mini" }), env).provider).toBe("openai");
  });

  it("is registered as the llm backend, and a bad config is refused before the run starts", async () => {
    const { program } = project();
    await expect(createAgent({ backend: "llm", args: [], env: {} }, program, 0)).rejects.toThrow(
      /needs a model/,
    );
    const agent = await createAgent(config({ baseUrl: "http://127.0.0.1:1/v1" }), program, 0);
    expect(agent.name).toBe("llm");
  });
});

// ——— end to end: createRun → llm agent → fake OpenAI-compatible server → trial → decision ———

describe("llm agent end to end (fake OpenAI-compatible server)", () => {
  let fake: FakeModel | undefined;
  let toy: ToyProject | undefined;
  afterEach(async () => {
    await fake?.close();
    toy?.cleanup();
    fake = undefined;
    toy = undefined;
  });

  const SUMMARY = {
    hypothesis: "LR 0.5 → 0.01: the loss is smallest near LR 0.01",
    mechanism: "the score is a bowl in log10(LR) centred on 0.01",
    expected: "score ≈ 0.28",
  };

  async function runWith(script: Parameters<typeof startFakeModel>[0]) {
    fake = await startFakeModel(script);
    toy = createToyProject({
      evaluate: true,
      agent: `{ backend: llm, provider: openai-compatible, base_url: "${fake.url}/v1", model: fake-model }`,
    });
    const outcome = await createRun({ program: toy.dir, tag: "llm", maxExperiments: 1 });
    outcome.lab.ledger.close();
    return { outcome, fake, toy };
  }

  it("edit → experiment → decision → notebook row", async () => {
    const { outcome, fake, toy } = await runWith({
      file: "train.mjs",
      oldText: "const LR = 0.5;",
      newText: "const LR = 0.01;",
      summary: SUMMARY,
    });
    const exp = outcome.experiments.find((e) => e.n === 1);
    expect(exp).toMatchObject({
      agent: "llm",
      hypothesis: SUMMARY.hypothesis,
      mechanism: SUMMARY.mechanism,
      decision: { action: "keep" },
      usage: { inputTokens: 3 * 120, outputTokens: 3 * 30 },
    });
    // The candidate commit holds exactly the model's edit.
    expect(toy.git(["diff", "--name-only", exp?.parentCommit ?? "", exp?.commit ?? ""]).trim()).toBe(
      "train.mjs",
    );
    const diff = toy.git(["diff", exp?.parentCommit ?? "", exp?.commit ?? ""]);
    expect(diff).toContain("-const LR = 0.5;");
    expect(diff).toContain("+const LR = 0.01;");
    expect(toy.git(["show", "autolab/llm:train.mjs"])).toContain("const LR = 0.01;");

    // The server saw three chat-completions calls for fake-model, each offering the five tools:
    // read, edit, finish. No holdout ever reached the model.
    const reqs = fake.modelRequests();
    expect(reqs.map((r) => r.reply)).toEqual(["read", "edit", "submit"]);
    for (const r of reqs) {
      expect(r).toMatchObject({ path: "/v1/chat/completions", protocol: "chat", model: "fake-model" });
      expect(r.tools).toEqual(["list_files", "read_file", "edit_file", "write_file", "finish"]);
      const body = JSON.stringify(r.body);
      expect(body).not.toContain(String(TOY_HOLDOUT));
      expect(body).not.toContain("secret_holdout");
    }
    expect(JSON.stringify(reqs[0]?.body)).toContain("Lab notebook");

    const transcriptFile = join(toy.dir, ".autolab", "logs", "llm", "1", "agent", TRANSCRIPT_FILE);
    expect(readFileSync(transcriptFile, "utf8")).toContain('"outcome":"finished"');
  });

  it("an edit of the protected evaluator is refused over the wire; the file is unchanged and nothing runs", async () => {
    const { outcome, fake, toy } = await runWith({
      file: "train.mjs",
      oldText: "console.log",
      newText: "void ",
      editFile: "evaluate.mjs",
      summary: SUMMARY,
    });
    const exp = outcome.experiments.find((e) => e.n === 1);
    expect(exp?.decision?.action).toBe("reject");
    expect(exp?.decision?.reason).toMatch(/no change/);
    expect(exp?.trials).toHaveLength(0);
    expect(toy.git(["show", `${exp?.commit}:evaluate.mjs`])).toBe(toy.git(["show", "main:evaluate.mjs"]));
    const worktree = join(toy.dir, ".autolab", "worktrees", "llm");
    expect(readFileSync(join(worktree, "evaluate.mjs"), "utf8")).toBe(toy.git(["show", "main:evaluate.mjs"]));
    // The third request carries the refusal as the edit's tool result.
    const third = fake.modelRequests()[2]?.body as { messages?: { role: string; content: string }[] };
    const toolMessages = (third?.messages ?? []).filter((m) => m.role === "tool").map((m) => m.content);
    expect(toolMessages[1]).toMatch(/evaluate\.mjs is protected \(read-only\)/);
  });
});

// ——— the agent contract (test/contracts/agent-contract.ts), over the fake server's chat completions ———

agentContract(
  "llm",
  ({ fake, program, timeoutMs }) =>
    createLlmAgent(
      config({ provider: "openai-compatible", baseUrl: `${fake.url}/v1`, model: "fake-model", timeoutMs }),
      program,
    ),
  {
    protectedEdit: "blocked",
    reportsUsage: true,
    // The contract's model checks also want agent.stdout.log / agent.stderr.log, which a CLI
    // writes; this backend keeps llm-transcript.jsonl instead (checked above).
    usesModel: false,
  },
);

// ——— a real hosted model: only with a key, never in CI by default ———

const hosted = process.env.ANTHROPIC_API_KEY
  ? { provider: "anthropic", model: process.env.AUTOLAB_TEST_ANTHROPIC_MODEL ?? "claude-haiku-4-5" }
  : process.env.OPENAI_API_KEY
    ? { provider: "openai", model: process.env.AUTOLAB_TEST_OPENAI_MODEL ?? "gpt-5-mini" }
    : undefined;

describe.skipIf(!hosted)(
  "llm agent against a hosted model (needs ANTHROPIC_API_KEY or OPENAI_API_KEY)",
  () => {
    it("proposes a change to the editable file and leaves the protected one alone", {
      timeout: 180_000,
    }, async () => {
      const { dir, program, ctx } = project();
      mkdirSync(ctx.logDir, { recursive: true });
      const agent = createLlmAgent(config({ ...hosted, maxTurns: 12, timeoutMs: 150_000 }), program);
      const proposal = await agent.propose(ctx);
      expect(proposal.hypothesis.length).toBeGreaterThan(0);
      expect(proposal.usage?.inputTokens).toBeGreaterThan(0);
      expect(readFileSync(join(dir, "evaluate.py"), "utf8")).toBe(EVALUATE);
      expect(readFileSync(join(dir, "train.py"), "utf8")).not.toBe(TRAIN);
    });
  },
);
