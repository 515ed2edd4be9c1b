import { describe, expect, it } from "vitest";
import { simProgram, simTrial } from "../bench/_keep-loop.ts";
import type { JudgeInput } from "../src/core/judge.ts";
import type { TrialResult } from "../src/core/types.ts";
import { createJudge } from "../src/trust/acceptance.ts";
import { beliefOf, createPosteriorJudge, runPrior } from "../src/trust/posterior-judge.ts";

const program = simProgram("loss");
const trials = (...xs: number[]): TrialResult[] => xs.map((x, k) => simTrial(x, 7 + k, "loss"));
const BASELINE = [1.0, 1.02]; // σ from these repeats and the run's
/** A run whose configurations spread widely (τ ≫ σ) or barely (τ ≪ σ), each measured once or twice. */
const wide = [
  { n: 1, values: [1.4] },
  { n: 2, values: [0.7] },
  { n: 3, values: [1.2, 1.22] },
  { n: 4, values: [0.9, 0.88] },
];
const narrow = [
  { n: 1, values: [1.0, 1.3] },
  { n: 2, values: [0.8, 1.1] },
  { n: 3, values: [1.2, 0.9] },
  { n: 4, values: [1.1] },
];
const input = (xs: number[], over: Partial<JudgeInput> = {}): JudgeInput => ({
  program,
  trials: trials(...xs),
  best: { n: 0, metric: 1.01, values: BASELINE, trials: trials(...BASELINE) },
  baseline: BASELINE,
  run: wide,
  ...over,
});
const exploring = { budget: { left: 40, total: 50 } };
const reserve = { budget: { left: 5, total: 50 } };

describe("posterior belief", () => {
  it("pulls a configuration toward the run's mean by its share of noise, not at all without a prior", () => {
    const prior = { mu0: 1, tau2: 0.01 };
    // σ²/n = 0.01 = τ²: halfway back to μ₀.
    expect(beliefOf([0.8], 0.1, prior).mean).toBeCloseTo(0.9, 10);
    // Four trials: σ²/n = 0.0025, w = 0.8.
    expect(beliefOf([0.8, 0.8, 0.8, 0.8], 0.1, prior).mean).toBeCloseTo(0.84, 10);
    expect(beliefOf([0.8], 0.1, { mu0: Number.NaN, tau2: Number.POSITIVE_INFINITY }).mean).toBe(0.8);
  });

  it("has no prior with fewer than three measured configurations", () => {
    expect(runPrior([{ values: [1] }, { values: [2] }], 0.1).tau2).toBe(Number.POSITIVE_INFINITY);
    expect(runPrior([{ values: [1] }, { values: [2] }, { values: [3] }], 0.1).tau2).toBeCloseTo(1 - 0.01, 10);
  });
});

describe("createPosteriorJudge (acceptance: posterior)", () => {
  const judge = createPosteriorJudge();

  it("defaults: 2 baseline trials, 15% of the budget reserved, the answer re-measured to 4 trials", () => {
    expect(judge.name).toBe("posterior");
    expect(judge.baselineTrials).toBe(2);
    expect(judge.maxTrials).toBe(4);
    expect(judge.options).toMatchObject({ reserve: 0.15, finalTrials: 4, shrinkage: true, closeZ: 0 });
    expect(createJudge("posterior").name).toBe("posterior");
    expect(createJudge("greedy-final").name).toBe("greedy-final");
  });

  it("is greedy when the noise is small next to the spread of true values: one trial, kept", () => {
    const d = judge.decide(input([0.9], exploring));
    expect(d.action).toBe("keep");
    expect(d.reason).toMatch(/posterior .* P\(better\)/);
    // The reported value is the posterior mean: pulled back toward the run's mean, a little.
    expect((d as { metric: number }).metric).toBeGreaterThan(0.9);
    expect((d as { metric: number }).metric).toBeLessThan(0.92);
  });

  it("does not build on one lucky trial when the noise is large next to the spread (greedy would)", () => {
    // Incumbent: 4 trials, mean 0.95. Challenger's one trial 0.9 looks better; σ ≈ 0.2, τ small.
    const best = {
      n: 4,
      metric: 0.95,
      values: [0.95, 0.95, 1.05, 0.85],
      trials: trials(0.95, 0.95, 1.05, 0.85),
    };
    const over = { ...reserve, best, run: narrow.filter((g) => g.n !== 4) };
    const greedyFinal = createPosteriorJudge({ shrinkage: false });
    // greedy-final measures a challenger whose one trial beats the answer's mean to as many
    // trials as the answer; the posterior rule prices the luck of one trial and stops.
    const g = greedyFinal.decide(input([0.9], over));
    expect(g.action).toBe("more");
    const d = judge.decide(input([0.9], over));
    expect(d.action).toBe("discard");
    expect(d.reason).toMatch(/posterior/);
  });

  it("in the reserve, re-measures the answer to finalTrials before deciding a challenger", () => {
    const d = judge.decide(input([0.9], reserve));
    expect(d).toMatchObject({ action: "more", incumbent: true });
    expect(d.reason).toMatch(/re-measured in the reserve/);
    const best = { n: 0, metric: 1.01, values: [1, 1.02, 1.01, 1.0], trials: trials(1, 1.02, 1.01, 1.0) };
    // The answer has its 4 trials: a challenger that looks better is measured to as many.
    expect(judge.decide(input([0.9], { ...reserve, best }))).toMatchObject({ action: "more" });
    expect(judge.decide(input([0.9, 0.91, 0.89, 0.9], { ...reserve, best })).action).toBe("keep");
    // One that looks worse stops at once.
    expect(judge.decide(input([1.3], { ...reserve, best })).action).toBe("discard");
  });

  it("spends a trial only on a close call while exploring (closeZ)", () => {
    const judge = createPosteriorJudge({ closeZ: 0.5 });
    const close = judge.decide(input([1.005], exploring));
    expect(close.action).toBe("more");
    expect(close.reason).toMatch(/close call/);
    expect(judge.decide(input([1.4], exploring)).action).toBe("discard");
    expect(judge.decide(input([1.005, 1.0], exploring)).action).not.toBe("more");
  });

  it("without a budget never re-measures the answer, and says so", () => {
    const d = judge.decide(input([1.3]));
    expect(d.action).toBe("discard");
    expect(d.reason).toMatch(/no budget: the answer is not re-measured/);
  });

  it("says when the budget is too small to re-measure the answer, with the smallest that can", () => {
    const d = judge.decide(input([1.3], { budget: { left: 8, total: 10 } }));
    expect(d.reason).toMatch(
      /budget \(10\) is too small to re-measure the answer to 4 trials .*smallest that can: 20/,
    );
  });

  it("decides failures as every rule does", () => {
    const crash: TrialResult = {
      ...simTrial(Number.NaN, 7, "loss"),
      status: "nonfinite_metric",
      reason: "loss is NaN",
    };
    expect(judge.decide({ ...input([]), trials: [crash] }).action).toBe("crash");
    expect(judge.decide({ ...input([]), trials: [] }).action).toBe("crash");
  });

  it("compares exact values when the objective is deterministic", () => {
    const det = {
      best: { n: 0, metric: 1, values: [1, 1], trials: trials(1, 1) },
      baseline: [1, 1],
      run: [{ n: 3, values: [2, 2] }],
    };
    const kept = judge.decide(input([0.999], { ...det, ...exploring }));
    expect(kept.action).toBe("keep");
    expect((kept as { notice?: string }).notice).toMatch(/deterministic/);
    expect(judge.decide(input([1], { ...det, ...exploring })).action).toBe("discard");
  });

  it("compares plain means while nothing was repeated (σ unknown), as greedy does", () => {
    const d = judge.decide(
      input([0.99], { best: { n: 0, metric: 1, values: [1] }, baseline: [1], run: [], ...exploring }),
    );
    expect(d.action).toBe("keep");
    expect(d.reason).toMatch(/σ unknown/);
  });
});

describe("a prune is not a verdict (issue #38 item 5)", () => {
  it("a later pruned trial never overturns the completed ones; a pruned first trial is decided", () => {
    const judge = createJudge("greedy-final");
    const pruned = { ...simTrial(5, 99, "loss"), status: "pruned" as const, reason: "slow learning curve" };
    const clean = judge.decide(input([0.7, 0.72], reserve));
    const withPrune = judge.decide({
      ...input([0.7, 0.72], reserve),
      trials: [...trials(0.7, 0.72), pruned],
    });
    expect(withPrune).toEqual(clean);
    const first = judge.decide({ ...input([], exploring), trials: [pruned] });
    expect("action" in first && first.action).not.toBe("keep");
  });
});
