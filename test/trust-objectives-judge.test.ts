/**
 * The several-objectives judge (src/trust/objectives-judge.ts) on synthetic noisy trials: the
 * loop's protocol is simulated (a "more" with `incumbent` adds a trial to the parent, else one
 * to the candidate, seeds continuing), so keeps rest on the same trials a real run would make.
 */
import { describe, expect, it } from "vitest";
import { simProgram } from "../bench/_keep-loop.ts";
import type { Judge, JudgeInput, MoreTrials } from "../src/core/judge.ts";
import type { Decision, Objectives, Program, TrialResult } from "../src/core/types.ts";
import { greedyJudge } from "../src/trust/greedy-judge.ts";
import { createNoiseJudge } from "../src/trust/noise-judge.ts";
import { createObjectivesJudge, paretoFront } from "../src/trust/objectives-judge.ts";

const SIGMA = 0.02;

/** A seeded Gaussian: the same draws every run of the test. */
function gaussian(seed: number): () => number {
  let s = seed >>> 0;
  const uniform = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return () => Math.sqrt(-2 * Math.log(1 - uniform())) * Math.cos(2 * Math.PI * uniform());
}

type Truth = Record<string, number>;

function trial(values: Record<string, number>, seed: number): TrialResult {
  return {
    status: "ok",
    exitCode: 0,
    signal: null,
    wallS: 1,
    cpuS: 1,
    peakRssMb: 10,
    metrics: values,
    selfReported: false,
    seed,
    command: "sim",
    stdoutPath: "",
    stderrPath: "",
    logTail: "",
  };
}

/** An experiment: its true values, drawn with noise SIGMA per trial (seeds from 42). */
class Config {
  trials: TrialResult[] = [];
  readonly n: number;
  readonly truth: Truth;
  readonly kept: boolean;
  private readonly draw: () => number;
  readonly sigma: number;
  constructor(n: number, truth: Truth, kept: boolean, draw: () => number, sigma: number = SIGMA) {
    this.n = n;
    this.truth = truth;
    this.kept = kept;
    this.draw = draw;
    this.sigma = sigma;
  }
  add(): void {
    const values: Record<string, number> = {};
    for (const [k, v] of Object.entries(this.truth)) values[k] = v + this.sigma * this.draw();
    this.trials.push(trial(values, 42 + this.trials.length));
  }
  addN(k: number): this {
    for (let i = 0; i < k; i++) this.add();
    return this;
  }
}

const PARETO: Objectives = {
  mode: "pareto",
  metrics: [
    { metric: "loss", direction: "minimize" },
    { metric: "latency", direction: "minimize" },
  ],
};

function programOf(objectives: Objectives, acceptance: Program["acceptance"] = "noise"): Program {
  return {
    ...simProgram(objectives.metrics[0]?.metric),
    objective: objectives.metrics[0] as Program["objective"],
    objectives,
    acceptance,
  };
}

/** Judges `cand` built on `parent` the way evaluate.ts does; returns the decision and trials used. */
function judgeLoop(
  judge: Judge,
  program: Program,
  run: Config[],
  parent: Config,
  cand: Config,
): { decision: Decision; trials: number; reasons: string[] } {
  const reasons: string[] = [];
  const primary = program.objective.metric;
  const values = (c: Config) => c.trials.map((t) => t.metrics[primary] as number);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  if (cand.trials.length === 0) cand.add();
  for (let step = 0; step < 100; step++) {
    const input: JudgeInput = {
      program,
      trials: cand.trials,
      best: { n: parent.n, metric: mean(values(parent)), values: values(parent), trials: parent.trials },
      baseline: values(run.find((c) => c.n === 0) as Config),
      run: run.map((c) => ({ n: c.n, values: values(c) })),
      experiments: run.map((c) => ({ n: c.n, kept: c.kept, trials: c.trials })),
    };
    const v = judge.decide(input) as Decision | MoreTrials;
    reasons.push(v.reason);
    if (v.action !== "more") return { decision: v, trials: cand.trials.length, reasons };
    if (v.incumbent && parent.trials.length < 10) parent.add();
    else if (cand.trials.length >= judge.maxTrials) {
      return {
        decision: { action: "discard", reason: "no trials left", mechanismConfirmed: false },
        trials: cand.trials.length,
        reasons,
      };
    } else cand.add();
  }
  throw new Error("the judge never decided");
}

describe("several objectives: pareto", () => {
  const judge = createObjectivesJudge(createNoiseJudge(), PARETO);
  const program = programOf(PARETO);

  it("keeps a candidate that trades off: credibly better on one metric, worse on the other", () => {
    const base = new Config(0, { loss: 1.0, latency: 1.0 }, true, gaussian(1)).addN(3);
    const cand = new Config(1, { loss: 0.9, latency: 1.2 }, false, gaussian(2));
    const { decision } = judgeLoop(judge, program, [base], base, cand);
    expect(decision.action).toBe("keep");
    expect(decision.reason).toContain("credibly better than #0 on loss");
    expect(decision.reason).not.toContain("on loss, latency");
    // The decision's metric is the primary's (loss), near its truth.
    expect(decision.metric).toBeGreaterThan(0.85);
    expect(decision.metric).toBeLessThan(0.97);
  });

  it("discards a candidate its parent dominates (worse on both)", () => {
    const base = new Config(0, { loss: 1.0, latency: 1.0 }, true, gaussian(3)).addN(3);
    const cand = new Config(1, { loss: 1.1, latency: 1.1 }, false, gaussian(4));
    const { decision } = judgeLoop(judge, program, [base], base, cand);
    expect(decision.action).toBe("discard");
    expect(decision.reason).toContain("not credibly better than #0 on any objective");
  });

  it("discards one credibly dominated by another kept point, though better than its parent", () => {
    const base = new Config(0, { loss: 1.0, latency: 1.0 }, true, gaussian(5)).addN(3);
    const k1 = new Config(1, { loss: 0.8, latency: 0.8 }, true, gaussian(6)).addN(8);
    const k2 = new Config(2, { loss: 1.2, latency: 0.5 }, true, gaussian(7)).addN(8);
    // Built on #2: far better loss than #2, worse latency, but #1 beats it on both by 7σ.
    const cand = new Config(3, { loss: 0.95, latency: 0.95 }, false, gaussian(8));
    const { decision } = judgeLoop(judge, program, [base, k1, k2], k2, cand);
    expect(decision.action).toBe("discard");
    expect(decision.reason).toMatch(
      /^dominated: better than #2 on loss, but kept #1 is credibly better on loss/,
    );
  });

  it("a kept point ahead by a lucky draw (inside the noise) does not dominate", () => {
    const base = new Config(0, { loss: 1.0, latency: 1.0 }, true, gaussian(9)).addN(3);
    // #1 is ahead of the candidate's truth by 0.2σ on both: not credible on one or two trials.
    const k1 = new Config(1, { loss: 0.896, latency: 0.996 }, true, gaussian(10)).addN(1);
    const k2 = new Config(2, { loss: 1.2, latency: 0.5 }, true, gaussian(11)).addN(8);
    const cand = new Config(3, { loss: 0.9, latency: 1.0 }, false, gaussian(12));
    const { decision } = judgeLoop(judge, program, [base, k1, k2], k2, cand);
    expect(decision.action).toBe("keep");
    expect(decision.reason).toContain("not credibly dominated");
  });

  it("a kept point ahead on every metric but inside the noise: more trials first, then kept", () => {
    const base = new Config(0, { loss: 1.0, latency: 1.0 }, true, gaussian(50)).addN(3);
    const k1 = new Config(1, {}, true, gaussian(51));
    k1.trials.push(trial({ loss: 0.89, latency: 0.99 }, 42)); // one draw, 0.5σ ahead of the candidate
    const parent = new Config(2, { loss: 1.2, latency: 0.5 }, true, gaussian(52)).addN(8);
    const wobble = [0.01, -0.01, 0.005, -0.005, 0.01, -0.01, 0.005, -0.005, 0, 0];
    const cand = (n: number) =>
      wobble.slice(0, n).map((w, k) => trial({ loss: 0.9 + w, latency: 1.0 - w }, 42 + k));
    const input = (n: number): JudgeInput => ({
      program,
      trials: cand(n),
      best: {
        n: 2,
        metric: 1.2,
        values: parent.trials.map((t) => t.metrics.loss as number),
        trials: parent.trials,
      },
      baseline: base.trials.map((t) => t.metrics.loss as number),
      experiments: [base, k1, parent].map((c) => ({ n: c.n, kept: c.kept, trials: c.trials })),
    });
    const at8 = judge.decide(input(8));
    expect(at8.action).toBe("more");
    expect(at8.reason).toContain("kept #1 is ahead on every objective, not yet credibly");
    const at10 = judge.decide(input(10));
    expect(at10.action).toBe("keep");
    expect(at10.reason).toContain("not credibly dominated by a kept experiment (kept #1 is ahead");
    // The same #1, far ahead (10σ on both): dominated.
    k1.trials[0] = trial({ loss: 0.7, latency: 0.8 }, 42);
    const far = judge.decide(input(8));
    expect(far.action).toBe("discard");
    expect(far.reason).toMatch(
      /^dominated: better than #2 on loss, but kept #1 is credibly better on loss 0\.7 vs 0\.9/,
    );
  });

  it("a one-trial lucky improvement is not kept: the rule asks for more trials and they tell", () => {
    const base = new Config(0, { loss: 1.0, latency: 1.0 }, true, gaussian(13)).addN(3);
    // Truly the same as the baseline; its first trial is made lucky by 5σ on loss.
    const cand = new Config(1, { loss: 1.0, latency: 1.0 }, false, gaussian(14));
    cand.trials.push(trial({ loss: 0.9, latency: 1.0 }, 42));
    const first = judge.decide({
      program,
      trials: cand.trials,
      best: {
        n: 0,
        metric: 1,
        values: base.trials.map((t) => t.metrics.loss as number),
        trials: base.trials,
      },
      baseline: base.trials.map((t) => t.metrics.loss as number),
      experiments: [{ n: 0, kept: true, trials: base.trials }],
    });
    expect(first.action).toBe("more");
    // The loop goes on from there: the next trials (true values) undo the lucky one.
    const lucky = new Config(1, { loss: 1.0, latency: 1.0 }, false, gaussian(14));
    lucky.trials.push(trial({ loss: 0.9, latency: 1.0 }, 42));
    const { decision, trials } = judgeLoop(judge, program, [base], base, lucky);
    expect(decision.action).toBe("discard");
    expect(trials).toBeGreaterThan(1);
  });

  it("exact values: compared exactly, and the rule's notice about it is passed on", () => {
    const base = new Config(0, { loss: 1.0, latency: 1.0 }, true, gaussian(40), 0).addN(3);
    const { decision, trials } = judgeLoop(
      judge,
      program,
      [base],
      base,
      new Config(1, { loss: 0.999, latency: 2 }, false, gaussian(41), 0),
    );
    expect(decision.action).toBe("keep");
    expect(trials).toBe(2);
    expect(decision.notice).toMatch(/^noise: deterministic/);
  });

  it("a trial without one of the metrics is a crash that names it", () => {
    const base = new Config(0, { loss: 1.0, latency: 1.0 }, true, gaussian(15)).addN(3);
    const d = judge.decide({
      program,
      trials: [trial({ loss: 0.5 }, 42)],
      best: {
        n: 0,
        metric: 1,
        values: base.trials.map((t) => t.metrics.loss as number),
        trials: base.trials,
      },
      baseline: base.trials.map((t) => t.metrics.loss as number),
      experiments: [{ n: 0, kept: true, trials: base.trials }],
    });
    expect(d.action).toBe("crash");
    expect(d.reason).toContain('"latency" missing');
  });

  it("greedy inside: one trial, keep when better on one metric and undominated", () => {
    const g = createObjectivesJudge(greedyJudge, PARETO);
    const gp = programOf(PARETO, "greedy");
    const base = new Config(0, { loss: 1.0, latency: 1.0 }, true, gaussian(16), 0).addN(1);
    const trade = judgeLoop(
      g,
      gp,
      [base],
      base,
      new Config(1, { loss: 0.9, latency: 1.5 }, false, gaussian(17), 0),
    );
    expect(trade.decision.action).toBe("keep");
    expect(trade.trials).toBe(1);
    const worse = judgeLoop(
      g,
      gp,
      [base],
      base,
      new Config(1, { loss: 1.1, latency: 1.5 }, false, gaussian(18), 0),
    );
    expect(worse.decision.action).toBe("discard");
  });
});

describe("several objectives: threshold_then_optimize", () => {
  const T: Objectives = {
    mode: "threshold_then_optimize",
    metrics: [
      { metric: "accuracy", direction: "maximize" },
      { metric: "size", direction: "minimize" },
    ],
    threshold: { metric: "accuracy", bar: 0.9 },
  };
  const judge = createObjectivesJudge(createNoiseJudge(), T);
  const program = programOf(T);

  it("below the bar: keeps an improvement of the bar metric even when the other gets worse", () => {
    const base = new Config(0, { accuracy: 0.8, size: 10 }, true, gaussian(20)).addN(3);
    const cand = new Config(1, { accuracy: 0.85, size: 12 }, false, gaussian(21));
    const { decision } = judgeLoop(judge, program, [base], base, cand);
    expect(decision.action).toBe("keep");
    expect(decision.reason).toMatch(
      /^below the bar \(accuracy ≥ 0\.9 not yet reached by #0: 0\.\d+\): optimizing accuracy; improved/,
    );
  });

  it("below the bar: a smaller size alone is not a keep", () => {
    const base = new Config(0, { accuracy: 0.8, size: 10 }, true, gaussian(22)).addN(3);
    const cand = new Config(1, { accuracy: 0.8, size: 5 }, false, gaussian(23));
    const { decision } = judgeLoop(judge, program, [base], base, cand);
    expect(decision.action).toBe("discard");
  });

  it("past the bar: optimizes size, and discards a smaller model that falls below the bar", () => {
    const base = new Config(0, { accuracy: 0.8, size: 10 }, true, gaussian(24)).addN(3);
    const k1 = new Config(1, { accuracy: 0.95, size: 10 }, true, gaussian(25)).addN(8);
    const better = judgeLoop(
      judge,
      program,
      [base, k1],
      k1,
      new Config(2, { accuracy: 0.95, size: 9 }, false, gaussian(26)),
    );
    expect(better.decision.action).toBe("keep");
    expect(better.decision.reason).toMatch(/^bar reached \(accuracy ≥ 0\.9 since #1\): optimizing size/);
    expect(better.decision.reason).toContain("stays past the bar");
    const below = judgeLoop(
      judge,
      program,
      [base, k1],
      k1,
      new Config(2, { accuracy: 0.85, size: 5 }, false, gaussian(27)),
    );
    expect(below.decision.action).toBe("discard");
    expect(below.decision.reason).toContain("falls below the bar");
    // More accuracy alone is no longer a keep once the bar is reached.
    const acc = judgeLoop(
      judge,
      program,
      [base, k1],
      k1,
      new Config(2, { accuracy: 0.99, size: 10 }, false, gaussian(28)),
    );
    expect(acc.decision.action).toBe("discard");
  });

  it("a parent past the bar by a hair (inside the noise) has not reached it", () => {
    const base = new Config(0, { accuracy: 0.8, size: 10 }, true, gaussian(29)).addN(3);
    const k1 = new Config(1, { accuracy: 0.901, size: 10 }, true, gaussian(30)).addN(2);
    const cand = new Config(2, { accuracy: 0.95, size: 10 }, false, gaussian(31));
    const { decision } = judgeLoop(judge, program, [base, k1], k1, cand);
    expect(decision.reason).toMatch(/^below the bar/);
  });
});

describe("paretoFront", () => {
  it("keeps the points no other point dominates, by their means", () => {
    const front = paretoFront(PARETO.metrics, [
      { n: 0, values: { loss: 1, latency: 1 } },
      { n: 1, values: { loss: 0.8, latency: 1.2 } },
      { n: 2, values: { loss: 0.7, latency: 0.9 } },
      { n: 3, values: { loss: 1.5, latency: 0.5 } },
      { n: 4, values: { loss: 0.7, latency: 0.9 } },
    ]);
    expect(front.map((p) => p.n)).toEqual([2, 3, 4]);
  });
});
