/**
 * The advisor's pure parts (src/core/advisor.ts, views.ts buildAdvisorContext, the prompts and
 * program.md's `advisor:`): its answer's format, when it is due, what its brief shows and hides.
 * Real runs are in test/advisor.e2e.test.ts.
 */
import { describe, expect, it } from "vitest";
import { buildPrompt } from "../src/agents/cli/prompt.ts";
import { researcherInstructions } from "../src/agents/llm/instructions.ts";
import { adviceDue, advisorStop, parseAdvice, revisitOf } from "../src/core/advisor.ts";
import { AutolabError } from "../src/core/errors.ts";
import type { AdviceRecord, ExperimentRecord, RunRecord } from "../src/core/ledger.ts";
import type { DecisionAction, Program, ProposalContext } from "../src/core/types.ts";
import { buildAdvisorContext, buildContext } from "../src/core/views.ts";
import { parseProgram } from "../src/program/parse.ts";

const PROGRAM = `---
name: adv
objective: { metric: loss, direction: minimize }
run: { command: node train.mjs, evaluate: node evaluate.mjs, budget: 10s }
files: { editable: [train.mjs], protected: [evaluate.mjs] }
metrics: { holdout: [test_loss] }
ADVISOR---
Make loss small.
`;
const program = (advisor = "advisor: { agent: claude, after_discards: 3, plateau: 5 }\n"): Program =>
  parseProgram(PROGRAM.replace("ADVISOR", advisor), "program.md");

const RUN: RunRecord = {
  id: 1,
  tag: "t",
  branch: "autolab/t",
  programPath: "/x/program.md",
  programName: "adv",
  metric: "loss",
  direction: "minimize",
  baseCommit: "c0",
  protectedHashes: {},
  seed: 0,
  startedAt: "2026-01-01T00:00:00.000Z",
};

/** Experiments from [action, loss, parent n] in decision order (n from 0); commits are c<n>. */
function exps(spec: Array<[DecisionAction, number, number?, string?]>): ExperimentRecord[] {
  return spec.map(([action, loss, parent, hypothesis], n) => ({
    id: n + 1,
    runId: 1,
    n,
    agent: "scripted",
    parentCommit: `c${parent ?? 0}`,
    commit: `c${n}`,
    ref: `refs/autolab/t/${n}`,
    hypothesis: hypothesis ?? `idea ${n}`,
    mechanism: `mechanism ${n}`,
    diff: { files: 1, insertions: 1, deletions: 1 },
    createdAt: `2026-01-01T00:00:${String(n).padStart(2, "0")}.000Z`,
    trials: [
      {
        id: n + 1,
        attempt: 1,
        seed: 0,
        command: "node train.mjs",
        commit: `c${n}`,
        budgetMs: 10_000,
        env: {},
        startedAt: "2026-01-01T00:00:00.000Z",
        result: {
          status: "ok",
          exitCode: 0,
          signal: null,
          wallS: 1,
          cpuS: 1,
          peakRssMb: 1,
          metrics: { loss, test_loss: 777.125 + n },
          selfReported: false,
          seed: 0,
          command: "node train.mjs",
          stdoutPath: "",
          stderrPath: "",
          logTail: "",
          finishedAt: "2026-01-01T00:00:00.000Z",
          logDir: "",
        },
      },
    ],
    decision: {
      action,
      reason: `${action} #${n}`,
      metric: loss,
      mechanismConfirmed: action === "keep" ? true : action === "discard" ? false : null,
      decidedAt: `2026-01-01T00:01:${String(n).padStart(2, "0")}.000Z`,
    },
  }));
}

const advice = (over: Partial<AdviceRecord>): AdviceRecord => ({
  id: 1,
  runId: 1,
  trigger: "3 discards in a row",
  decided: 0,
  afterN: 0,
  agent: "claude",
  verdict: "ideas",
  ideas: [],
  reason: "",
  createdAt: "2026-01-01T00:02:00.000Z",
  ...over,
});

describe("parseAdvice", () => {
  it("reads up to three IDEA lines, bullets and numbering allowed, and one STOP with its reason", () => {
    expect(
      parseAdvice("IDEA: halve the lr\n- idea 2: warmup\n* **IDEA**: revisit #4: lost to #2 only"),
    ).toEqual({
      verdict: "ideas",
      ideas: ["halve the lr", "warmup", "revisit #4: lost to #2 only"],
    });
    expect(parseAdvice("Thinking…\nSTOP: no lever left in train.mjs\nthanks")).toEqual({
      verdict: "stop",
      reason: "no lever left in train.mjs",
    });
    expect(parseAdvice("stop - the budget is too small")).toEqual({
      verdict: "stop",
      reason: "the budget is too small",
    });
  });

  it("calls garbage what is not one of those, saying why", () => {
    expect(parseAdvice("I would try a bigger model.")).toEqual({
      verdict: "garbage",
      reason: "no `IDEA:` or `STOP:` line in the answer: I would try a bigger model.",
    });
    expect(parseAdvice("")).toMatchObject({
      verdict: "garbage",
      reason: expect.stringContaining("(nothing)"),
    });
    expect(parseAdvice("IDEA: a\nIDEA: b\nIDEA: c\nIDEA: d")).toEqual({
      verdict: "garbage",
      reason: "4 ideas: at most 3",
    });
    expect(parseAdvice("IDEA: a\nSTOP: b").verdict).toBe("garbage");
    expect(parseAdvice("STOP:")).toEqual({
      verdict: "garbage",
      reason: "STOP without a reason (`STOP: <why>`)",
    });
    expect(parseAdvice(`IDEA: ${"x".repeat(5000)}`)).toEqual({
      verdict: "garbage",
      reason: "the answer is too long (5006 characters, at most 4000)",
    });
  });

  it("finds the revisited experiment in a hypothesis", () => {
    expect(revisitOf("revisit #12: lr 3e-4 on the new best")).toBe(12);
    expect(revisitOf("[revisit #3] warmup")).toBe(3);
    expect(revisitOf("do not revisit #12")).toBeUndefined();
    expect(revisitOf("revisit #x")).toBeUndefined();
  });
});

describe("adviceDue", () => {
  const cfg = (afterDiscards?: number, plateau?: number): Program["advisor"] => ({
    agent: { backend: "claude", args: [], env: {} },
    ...(afterDiscards !== undefined ? { afterDiscards } : {}),
    ...(plateau !== undefined ? { plateau } : {}),
  });

  it("is due after N discards in a row; crashes and rejections neither count nor break the streak", () => {
    const some = exps([
      ["keep", 5],
      ["discard", 6],
      ["crash", 0],
      ["discard", 7],
      ["reject", 0],
    ]);
    expect(adviceDue(cfg(3), some, [])).toBeUndefined();
    expect(adviceDue(cfg(2), some, [])).toBe("2 discards in a row");
    // A keep ends the streak.
    expect(
      adviceDue(
        cfg(2),
        exps([
          ["keep", 5],
          ["discard", 6],
          ["keep", 4],
          ["discard", 5],
        ]),
        [],
      ),
    ).toBeUndefined();
    expect(adviceDue(undefined, some, [])).toBeUndefined();
  });

  it("is due on a plateau: decisions of any kind since the last keep", () => {
    const some = exps([
      ["keep", 5],
      ["discard", 6],
      ["crash", 0],
      ["reject", 0],
    ]);
    expect(adviceDue(cfg(undefined, 3), some, [])).toBe("plateau: 3 experiments without a keep");
    expect(adviceDue(cfg(undefined, 4), some, [])).toBeUndefined();
  });

  it("counts afresh after any answer (garbage too), from the decisions after it", () => {
    const some = exps([
      ["keep", 5],
      ["discard", 6],
      ["discard", 7],
      ["discard", 8],
    ]);
    expect(adviceDue(cfg(2), some, [advice({ decided: 2, verdict: "garbage" })])).toBeUndefined();
    expect(adviceDue(cfg(2), some, [advice({ decided: 1 })])).toBe("2 discards in a row");
  });

  it("skips a winner that was rebased onto a newer best (a parallel run's merge)", () => {
    const some = exps([
      ["keep", 5],
      ["discard", 6],
      ["discard", 4],
      ["discard", 7],
    ]);
    expect(adviceDue(cfg(3), some, [])).toBe("3 discards in a row");
    const merged = [...some, { ...(exps([["discard", 9]])[0] as ExperimentRecord), n: 9, rebaseOf: 2 }];
    // #9 itself is a discard and counts; #2 (its original) does not.
    expect(adviceDue(cfg(4), merged, [])).toBeUndefined();
    expect(adviceDue(cfg(3), merged, [])).toBe("3 discards in a row");
  });

  it("a stop is the run's stop until a harness session starts after it", () => {
    const stop = advice({ verdict: "stop", reason: "flat", createdAt: "2026-01-01T00:00:30.000Z" });
    const session = (startedAt: string) => ({ startedAt });
    expect(advisorStop([stop], [])).toBe(stop);
    expect(advisorStop([stop], [session("2026-01-01T00:00:01.000Z")])).toBe(stop);
    expect(advisorStop([stop], [session("2026-01-01T00:00:31.000Z")])).toBeUndefined();
    expect(advisorStop([stop, advice({ verdict: "garbage" })], [])).toBeUndefined();
  });
});

describe("the advisor's brief (views.ts buildAdvisorContext)", () => {
  // #1 kept (on #0), #2 discarded against #1, #3 kept (on #1), #4 discarded against #3.
  const history = exps([
    ["keep", 5, 0, "baseline"],
    ["keep", 4, 0, "warmup"],
    ["discard", 4.5, 1, "lr 3e-4"],
    ["keep", 3, 1, "wider"],
    ["discard", 3.5, 3, "dropout test_loss 777.125 seen"],
  ]);

  it("summarizes best, kept changes and discards with reasons, marking those lost to a superseded best", () => {
    const text = buildAdvisorContext(program(), RUN, history, {
      trigger: "3 discards in a row",
      advice: [advice({ afterN: 1, ideas: ["try warmup"] })],
    });
    expect(text).toContain("You are asked because: 3 discards in a row.");
    expect(text).toContain("Best: #3 loss = 3 (baseline 5).");
    expect(text).toContain("- #1 warmup → 4");
    expect(text).toContain("- #3 wider → 3");
    expect(text).toContain(
      "- #2 lr 3e-4 (loss=4.5) → discard #2 [judged against #1, since superseded by #3: may be revisited as `revisit #2`]",
    );
    // #4 lost to the current best: nothing to revisit.
    expect(text).toMatch(/- #4 .* → discard #4\n/);
    // A winner rebased onto a newer best (#5 merges #2) is no discard to the advisor.
    const merged = [
      ...history,
      { ...(history[3] as ExperimentRecord), id: 6, n: 5, commit: "c5", rebaseOf: 2 },
    ];
    expect(buildAdvisorContext(program(), RUN, merged, { trigger: "x" })).not.toContain(
      "- #2 lr 3e-4 (loss=4.5)",
    );
    expect(text).toContain("## Refuted mechanisms (hypothesis — mechanism)\n- #2 lr 3e-4 — mechanism 2");
    expect(text).toContain("- after #1: IDEA: try warmup");
    expect(text).toContain("## Research directions\nMake loss small.");
    expect(text).toMatch(
      /## Your question\n.*\nAnswer with tagged lines only: up to three lines `IDEA: <idea>`/,
    );
  });

  it("holds no holdout value, no command line, and keeps its question when truncated", () => {
    const text = buildAdvisorContext(program(), RUN, history, { trigger: "x", maxChars: 300 });
    expect(text).not.toContain("777");
    expect(text).not.toContain("evaluate.mjs");
    expect(text).toContain("(brief truncated to 300 chars)");
    expect(text).toContain("## Your question");
    const full = buildAdvisorContext(program(), RUN, history, { trigger: "x" });
    expect(full).not.toContain("777");
    expect(full).toContain("[holdout redacted]");
  });

  it("researchers read the newest ideas as the advisor's, with how to mark a revisit", () => {
    const text = buildContext(program(), RUN, history, {
      advice: [
        advice({ afterN: 2, ideas: ["old idea"] }),
        advice({ afterN: 4, ideas: ["revisit #2: on the new best", "narrower"] }),
        advice({ afterN: 4, verdict: "garbage", reason: "no IDEA" }),
      ],
    });
    expect(text).toContain("## The advisor's ideas (after #4; suggestions, not results)");
    expect(text).toContain("- [advisor] revisit #2: on the new best\n- [advisor] narrower");
    expect(text).toContain("start your hypothesis with `revisit #<n>:`");
    expect(text).not.toContain("old idea");
    expect(buildContext(program(), RUN, history, {})).not.toContain("[advisor]");
  });

  it("is asked as an advisor by the CLI and llm researchers: no edit, the answer as tagged lines", () => {
    const ctx: ProposalContext = {
      worktree: "/w",
      program: program(),
      best: { n: 3, metric: 3 },
      history: [],
      contextText: "BRIEF test_loss: 777.125",
      logDir: "/l",
      task: "advise",
    };
    const prompt = buildPrompt(ctx);
    expect(prompt).toContain("You are the advisor");
    expect(prompt).toContain("Do NOT edit");
    expect(prompt).not.toContain("Make ONE focused change");
    expect(prompt).not.toContain("777");
    expect(prompt).toContain('{"hypothesis": "STOP: the reason"}');
    const llm = researcherInstructions(ctx, 10);
    expect(llm).toContain("Answer by calling finish with hypothesis holding your answer as tagged lines");
    expect(llm).not.toContain("777");
    expect(buildPrompt({ ...ctx, task: undefined })).toContain("Make ONE focused change");
  });
});

describe("program.md advisor:", () => {
  it("takes a map, the shorthand `advisor: <backend>`, and defaults after_discards to 8", () => {
    expect(program().advisor).toEqual({
      agent: { backend: "claude", args: [], env: {} },
      afterDiscards: 3,
      plateau: 5,
    });
    expect(program("advisor: codex\n").advisor).toEqual({
      agent: { backend: "codex", args: [], env: {} },
      afterDiscards: 8,
    });
    expect(
      program("advisor: { agent: { backend: llm, model: m1, timeout: 2m }, plateau: 12 }\n").advisor,
    ).toEqual({
      agent: { backend: "llm", model: "m1", timeoutMs: 120_000, args: [], env: {} },
      afterDiscards: 8,
      plateau: 12,
    });
    expect(program("").advisor).toBeUndefined();
  });

  it("refuses the built-in optimizer, counts below 1 and unknown keys, with the line", () => {
    const fail = (adv: string): string => {
      try {
        program(adv);
      } catch (err) {
        expect(err).toBeInstanceOf(AutolabError);
        return (err as AutolabError).message;
      }
      throw new Error("parsed");
    };
    expect(fail("advisor: builtin\n")).toMatch(/program\.md:7 .*built-in optimizer cannot advise/s);
    expect(fail("advisor: { agent: claude, after_discards: 0 }\n")).toMatch(/after_discards.*at least 1/s);
    expect(fail("advisor: { agent: claude, plateu: 3 }\n")).toMatch(/plateu.*plateau/s);
  });
});
