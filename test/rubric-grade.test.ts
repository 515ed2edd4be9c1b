/**
 * Rubric grading against the scripted fake model server (test/fake-model/): real HTTP through
 * the llm backend's providers. Judges scripted to agree, to disagree, to return garbage, to
 * hang, to fail, and a gullible judge that scores the canary (a known-bad answer) high.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { graderFor } from "../src/core/trial-step.ts";
import type { TrialSpec } from "../src/core/types.ts";
import {
  gradeAnswer,
  type JudgeSpec,
  krippendorffAlpha,
  panelFor,
  type RubricEvaluation,
} from "../src/rubric/grade.ts";
import { parseRubric } from "../src/rubric/rubric.ts";
import { askWithProvider, rubricGrader } from "../src/rubric/trial-grader.ts";
import { LocalExecutor } from "../src/runner/local-executor.ts";
import { type FakeModel, startFakeModel } from "./fake-model/server.ts";

const RUBRIC = parseRubric(
  `Grade the write-up.

## question
weight: 2
must_reach: 1
It states the question it answers.
- 0: none
- 1: vague
- 2: precise

## evidence
It backs its claims with numbers.
- 0: none
- 1: some
- 2: all

## canary
CANARY-BAD-ANSWER: it works great, trust me.
`,
  "rubric.md",
);

const ANSWER = "We ask whether warmup helps. Loss fell from 3.1 to 2.9 (exp #4).";

let fake: FakeModel;
/** Per model: the level it gives per criterion on the answer, and on the canary. */
type Behaviour =
  | { answer: Record<string, number>; canary?: Record<string, number> }
  | "garbage"
  | "out_of_range"
  | "hang"
  | "http500";
const behaviours: Record<string, Behaviour> = {};

beforeAll(async () => {
  fake = await startFakeModel();
  fake.respond = ({ model, text }) => {
    const b = behaviours[model ?? ""];
    if (!b) return undefined;
    if (b === "garbage") return "I think it is pretty good overall!";
    if (b === "out_of_range") return '{"level": 7, "reason": "excellent"}';
    if (b === "hang") return { hang: true };
    if (b === "http500") return { status: 500 };
    const criterion = /Criterion \\"([a-z0-9_-]+)\\"/.exec(text)?.[1] ?? "";
    const table = text.includes("CANARY-BAD-ANSWER") ? (b.canary ?? { question: 0, evidence: 0 }) : b.answer;
    return `\`\`\`json\n${JSON.stringify({ level: table[criterion], reason: `scripted ${criterion}` })}\n\`\`\``;
  };
});
afterAll(async () => {
  await fake.close();
});

function judge(name: string): JudgeSpec {
  return { name, provider: "openai-compatible", baseUrl: `${fake.url}/v1`, model: name };
}

function evaluation(names: string[], over: Partial<RubricEvaluation> = {}): RubricEvaluation {
  return {
    rubricFile: "rubric.md",
    rubric: RUBRIC,
    grade: ["writeup.md"],
    judges: names.map(judge),
    panel: "all",
    canaryMax: 30,
    canaryEvery: 1,
    judgeTimeoutMs: 10_000,
    disagreement: 0.5,
    ...over,
  };
}

const grade = (ev: RubricEvaluation, seedIndex = 0) =>
  gradeAnswer(ev, ANSWER, { seedIndex, ask: askWithProvider });

describe("rubric grading with scripted judges", () => {
  it("judges that agree: the weighted partial credit, full agreement, the canary scored low", async () => {
    behaviours.agreeA = { answer: { question: 2, evidence: 1 } };
    behaviours.agreeB = { answer: { question: 2, evidence: 1 } };
    const r = await grade(evaluation(["agreeA", "agreeB"]));
    expect(r.status).toBe("ok");
    // (2 × 2/2 + 1 × 1/2) / 3 = 83.33
    expect(r.metrics).toMatchObject({
      rubric_score: 83.33,
      rubric_pass: 1,
      "rubric.question": 1,
      "rubric.evidence": 0.5,
      rubric_agreement: 1,
      rubric_alpha: 1,
      rubric_disagreements: 0,
      rubric_judge_failures: 0,
      rubric_judges: 2,
      rubric_flagged: 0,
      "rubric_canary.agreeA": 0,
      "rubric_canary.agreeB": 0,
    });
    expect(r.warnings).toEqual([]);
    // Tokens as the server reported them (the fake: 120 in, 30 out per request): 2 judges ×
    // 2 criteria × (answer + canary).
    expect(r.usage).toEqual({
      agreeA: { requests: 4, inputTokens: 480, outputTokens: 120 },
      agreeB: { requests: 4, inputTokens: 480, outputTokens: 120 },
    });
    expect(r.metrics.rubric_tokens).toBe(1200);
    // Each judge was asked once per criterion, on the answer and on the canary; the answer
    // reached it between nonce tags, as data.
    const asked = fake.modelRequests().filter((q) => q.model === "agreeA");
    expect(asked).toHaveLength(4);
    expect(JSON.stringify(asked[0]?.body)).toMatch(/<answer-[0-9a-f]{12}>\\nWe ask whether warmup helps/);
  });

  it("two judges that disagree wildly: their mean level, the disagreement recorded, a warning", async () => {
    behaviours.lenient = { answer: { question: 2, evidence: 2 } };
    behaviours.harsh = { answer: { question: 2, evidence: 0 } };
    const r = await grade(evaluation(["lenient", "harsh"]));
    expect(r.status).toBe("ok");
    expect(r.metrics.rubric_score).toBe(83.33);
    expect(r.metrics["rubric.evidence"]).toBe(0.5);
    expect(r.metrics.rubric_agreement).toBe(0.5);
    expect(r.metrics.rubric_disagreements).toBe(1);
    // units [1,1] and [1,0]: alpha = 1 − D_o/D_e = 1 − 0.5/(1/3)... computed by the formula
    expect(r.metrics.rubric_alpha).toBe(
      Math.round(
        (krippendorffAlpha([
          [1, 1],
          [1, 0],
        ]) as number) * 1e4,
      ) / 1e4,
    );
    expect(r.metrics.rubric_alpha).toBeLessThan(0.5);
    expect(r.warnings).toEqual(['judges disagree on "evidence": lenient 2, harsh 0 of 2']);
  });

  it("with three judges, one far from the others is outvoted (the median), the disagreement still recorded", async () => {
    behaviours.agreeA = { answer: { question: 2, evidence: 2 } };
    behaviours.agreeB = { answer: { question: 2, evidence: 2 } };
    behaviours.harsh = { answer: { question: 2, evidence: 0 } };
    const r = await grade(evaluation(["agreeA", "agreeB", "harsh"]));
    expect(r.metrics).toMatchObject({ rubric_score: 100, "rubric.evidence": 1, rubric_disagreements: 1 });
    // evidence: 1 agreeing pair of 3; question: 3 of 3
    expect(r.metrics.rubric_agreement).toBe(Math.round((4 / 6) * 1e4) / 1e4);
  });

  it("garbage, out-of-range levels, a hung endpoint and an HTTP error: recorded, the criterion graded by the others", async () => {
    behaviours.good = { answer: { question: 1, evidence: 2 } };
    behaviours.garbage = "garbage";
    behaviours.out_of_range = "out_of_range";
    behaviours.hang = "hang";
    behaviours.http500 = "http500";
    const r = await grade(
      evaluation(["good", "garbage", "out_of_range", "hang", "http500"], { judgeTimeoutMs: 500 }),
    );
    expect(r.status).toBe("ok");
    // Only `good` counted: (2 × 1/2 + 1 × 2/2) / 3 = 66.67
    expect(r.metrics).toMatchObject({ rubric_score: 66.67, rubric_judges: 1, rubric_judge_failures: 8 });
    expect(r.metrics.rubric_agreement).toBeUndefined();
    const failures = Object.fromEntries(
      r.answers
        .filter((a) => a.criterion === "question" && "failure" in a)
        .map((a) => [a.judge, "failure" in a && a.failure]),
    );
    expect(failures).toEqual({
      garbage: "garbage",
      out_of_range: "out_of_range",
      hang: "timeout",
      http500: "error",
    });
    // After a timeout the judge is not asked again: its second criterion is skipped.
    expect(r.answers.find((a) => a.judge === "hang" && a.criterion === "evidence")).toMatchObject({
      failure: "skipped",
    });
    // The canary of the judges that answered nothing usable is unscored: they are not flagged.
    expect(r.canary.filter((c) => c.flagged)).toEqual([]);
  });

  it("a criterion no judge could grade fails the trial with every judge's reason, never a crash of the harness", async () => {
    behaviours.garbage = "garbage";
    behaviours.out_of_range = "out_of_range";
    const r = await grade(evaluation(["garbage", "out_of_range"]));
    expect(r.status).toBe("crash");
    expect(r.reason).toBe(
      'rubric: no judge graded "question" (garbage: garbage; out_of_range: out_of_range), "evidence" (garbage: garbage; out_of_range: out_of_range); see rubric.json in the trial\'s logs',
    );
    // The judges' own words stay in the report, never in the reason researchers read.
    expect(r.answers.find((a) => a.judge === "garbage")).toMatchObject({
      failure: "garbage",
      detail: 'not JSON: "I think it is pretty good overall!"',
    });
    expect(r.answers.find((a) => a.judge === "out_of_range")).toMatchObject({
      detail: "level 7 is not an integer from 0 to 2",
    });
    expect(r.metrics.rubric_score).toBeUndefined();
  });

  it("judges nobody answers at their URL: the reason names each and its socket error, and each is asked once (issue #36)", async () => {
    // A port nothing listens on: bind one, note it, close it.
    const { createServer } = await import("node:net");
    const port = await new Promise<number>((res) => {
      const srv = createServer().listen(0, "127.0.0.1", () => {
        const p = (srv.address() as { port: number }).port;
        srv.close(() => res(p));
      });
    });
    const down = (name: string): JudgeSpec => ({
      name,
      provider: "openai-compatible",
      baseUrl: `http://127.0.0.1:${port}/v1`,
      model: name,
    });
    const r = await grade(evaluation([], { judges: [down("careful"), down("quick")] }));
    expect(r.status).toBe("crash");
    expect(r.reason).toBe(
      `rubric: no judge could be reached (careful at http://127.0.0.1:${port}/v1: ECONNREFUSED; quick at http://127.0.0.1:${port}/v1: ECONNREFUSED): start the judges program.md names under run.evaluate.judges, or point them at running endpoints`,
    );
    // One request for the answer and one for the canary, not one per criterion.
    expect(r.usage.careful?.requests).toBe(2);
    // One reachable judge: the others' failures are only part of the story, as before.
    behaviours.agreeA = { answer: { question: 2, evidence: 1 } };
    const mixed = await grade(evaluation(["agreeA"], { judges: [judge("agreeA"), down("quick")] }));
    expect(mixed.reason ?? "").not.toMatch(/no judge could be reached/);
  });

  it("a gullible judge that scores the canary high is flagged and its grades are excluded", async () => {
    behaviours.strict = { answer: { question: 1, evidence: 1 } };
    behaviours.gullible = { answer: { question: 2, evidence: 2 }, canary: { question: 2, evidence: 1 } };
    const r = await grade(evaluation(["strict", "gullible"]));
    expect(r.status).toBe("ok");
    expect(r.metrics).toMatchObject({
      "rubric_canary.gullible": 83.33,
      "rubric_canary.strict": 0,
      rubric_flagged: 1,
      rubric_judges: 1,
      rubric_score: 50, // strict's grades alone
    });
    expect(r.canary.find((c) => c.judge === "gullible")?.flagged).toBe(true);
    expect(r.criteria.find((c) => c.id === "evidence")?.levels).toEqual({ strict: 1 });
    expect(r.warnings[0]).toContain(
      "judge gullible (gullible) scored the canary (a known-bad answer) 83.33 > canary_max 30: flagged",
    );

    // Every judge flagged: nothing left to grade with, the trial fails saying why.
    const all = await grade(evaluation(["gullible"]));
    expect(all.status).toBe("crash");
    expect(all.reason).toContain("gullible: flagged by the canary");

    // canary_every 2: trial 1 grades no canary, so nobody is flagged there.
    const off = await grade(evaluation(["strict", "gullible"], { canaryEvery: 2 }), 1);
    expect(off.metrics.rubric_flagged).toBeUndefined();
    expect(off.metrics.rubric_judges).toBe(2);
  });

  it("a missed hard threshold makes the score 0 and rubric_pass 0", async () => {
    behaviours.noQuestion = { answer: { question: 0, evidence: 2 } };
    const r = await grade(evaluation(["noQuestion"]));
    expect(r.metrics).toMatchObject({
      rubric_score: 0,
      rubric_pass: 0,
      "rubric.question": 0,
      "rubric.evidence": 1,
    });
    expect(r.warnings).toEqual(["hard threshold missed on question: the score is 0 (it would be 33.33)"]);
  });
});

describe("panels, alpha", () => {
  it("rotates a panel of judges by the trial's seed index", () => {
    const ev = { judges: ["a", "b", "c"].map((n) => ({ name: n }) as JudgeSpec), panel: 2 as const };
    expect(
      [0, 1, 2, 3].map((i) =>
        panelFor(ev, i)
          .map((j) => j.name)
          .join(""),
      ),
    ).toEqual(["ab", "bc", "ca", "ab"]);
    expect(panelFor({ ...ev, panel: "all" }, 1).map((j) => j.name)).toEqual(["b", "c", "a"]);
    expect(panelFor({ ...ev, panel: 5 }, 0)).toHaveLength(3);
  });

  it("Krippendorff's alpha (interval) on known cases", () => {
    expect(
      krippendorffAlpha([
        [1, 1],
        [0, 0],
      ]),
    ).toBe(1);
    expect(
      krippendorffAlpha([
        [0, 1],
        [1, 0],
      ]),
    ).toBeCloseTo(-0.5, 10);
    expect(
      krippendorffAlpha([
        [1, 1],
        [1, 1],
      ]),
    ).toBeUndefined(); // no variation: 0/0
    expect(krippendorffAlpha([[1], [0]])).toBeUndefined(); // nothing pairable
  });
});

describe("a trial graded through the executor", () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  function spec(cwd: string, grade: TrialSpec["grade"]): TrialSpec {
    const logDir = join(cwd, "logs");
    mkdirSync(logDir, { recursive: true });
    return {
      cwd,
      // The editable command tries to forge the rubric's score; the harness's grade wins.
      command: "echo rubric_score: 100; echo words: 12",
      budgetMs: 10_000,
      graceMs: 2_000,
      evaluateTimeoutMs: 10_000,
      seed: 7,
      logDir,
      objective: "rubric_score",
      ...(grade ? { grade } : {}),
    };
  }

  it("merges the rubric's metrics over the command's; a grading failure is the trial's crash; no grader says so", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "rubric-trial-"));
    dirs.push(cwd);
    writeFileSync(join(cwd, "writeup.md"), ANSWER);
    behaviours.agreeA = { answer: { question: 1, evidence: 0 } };
    const ev = evaluation(["agreeA"], { grade: ["writeup.md"] });
    const executor = new LocalExecutor({ killGraceMs: 500 });
    const warnings: string[] = [];
    const grader = graderFor({ grade: rubricGrader(ev) }, cwd, join(cwd, "logs"), 0, undefined, (m) =>
      warnings.push(m),
    );
    const ok = await executor.runTrial(spec(cwd, grader));
    expect(ok.status).toBe("ok");
    expect(ok.metrics).toMatchObject({ rubric_score: 33.33, words: 12, rubric_judges: 1 });
    expect(warnings).toEqual([]);

    // A forged rubric metric the grader does not produce is dropped too.
    const forged = await executor.runTrial({
      ...spec(cwd, grader),
      command: "echo rubric_alpha: 1; echo rubric_score: 100",
    });
    expect(forged.metrics.rubric_alpha).toBeUndefined();
    expect(forged.metrics.rubric_score).toBe(33.33);

    behaviours.agreeA = "garbage";
    const bad = await executor.runTrial(spec(cwd, grader));
    expect(bad.status).toBe("crash");
    expect(bad.reason).toContain("rubric: no judge graded");
    expect(bad.metrics.rubric_score).toBeUndefined();

    const none = await executor.runTrial(spec(cwd, graderFor({}, cwd, join(cwd, "logs"), 0, undefined)));
    expect(none.status).toBe("crash");
    expect(none.reason).toContain("this run has no rubric grader");

    const missing = await executor.runTrial(
      spec(
        cwd,
        graderFor(
          { grade: rubricGrader({ ...ev, grade: ["out/missing.md"] }) },
          cwd,
          join(cwd, "logs"),
          0,
          undefined,
        ),
      ),
    );
    expect(missing.status).toBe("crash");
    expect(missing.reason).toContain("the graded file out/missing.md does not exist");
  });
});
