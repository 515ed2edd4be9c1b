import { describe, expect, it } from "vitest";
import { hartmann3 } from "../bench/_functions.ts";
import { runKeepLoop, simProgram, simTrial } from "../bench/_keep-loop.ts";
import { OLD_RULE } from "../bench/noise.ts";
import type { JudgeInput } from "../src/core/judge.ts";
import type { Program, TrialResult } from "../src/core/types.ts";
import { createJudge } from "../src/trust/acceptance.ts";
import { greedyJudge } from "../src/trust/greedy-judge.ts";
import {
  confirmThreshold,
  createNoiseJudge,
  describeNoise,
  estimateNoise,
  keepThreshold,
  type NoiseJudgeOptions,
  seedPairs,
} from "../src/trust/noise-judge.ts";
import { satterthwaiteDf } from "../src/trust/stats.ts";

const program = simProgram("val_bpb");
const trials = (...xs: number[]): TrialResult[] => xs.map((x, k) => simTrial(x, 42 + k, "val_bpb"));
const BASELINE = [2.95, 2.97, 2.93]; // mean 2.95, sd 0.02
const input = (xs: number[], over: Partial<JudgeInput> = {}): JudgeInput => ({
  program,
  trials: trials(...xs),
  best: { n: 0, metric: 2.95, values: BASELINE },
  baseline: BASELINE,
  ...over,
});

/**
 * The rule's mechanics at the thresholds they were written for — the old rule's (4 test trials,
 * 6 for a keep, futility 0.5σ, confirmation at 1.2σ) — with the run-wide noise model; the
 * defaults that bench/noise.ts chose are checked on their own.
 */
const MECHANICS: NoiseJudgeOptions = { ...OLD_RULE, pooling: "run", remeasureRatio: 3 };

describe("createNoiseJudge", () => {
  const judge = createNoiseJudge(MECHANICS);

  it("defaults: 3 baseline trials, up to 10 to pass the keep test and 8 for a keep, the incumbent re-measured", () => {
    const d = createNoiseJudge();
    expect(d.name).toBe("noise");
    expect(d.baselineTrials).toBe(3);
    expect(d.maxTrials).toBe(10);
    expect(d.options).toMatchObject({
      testTrials: 10,
      confirmTrials: 8,
      confirmZ: 1.4,
      futilityZ: -0.25,
      lossZ: 0.5,
      referenceShrink: 0.5,
      pooling: "run",
      remeasure: true,
      remeasureRatio: 2,
      incumbentMaxTrials: 10,
    });
  });

  it("discards a clear loss after one trial", () => {
    const d = judge.decide(input([3.2]));
    expect(d.action).toBe("discard");
    expect(d.reason).toMatch(/^clear loss: val_bpb 3\.2 ± 0\.02 \(1 trial\) vs best 2\.95/);
    expect(d.action === "discard" && d.metric).toBe(3.2);
  });

  it("never shows a margin of -0.0σ", () => {
    // Two trials a hair worse than the baseline: z rounds to zero, shown without a sign.
    const d = judge.decide(input([2.9501, 2.9502]));
    expect(d.reason).toMatch(/margin 0\.0σ/);
    expect(d.reason).not.toMatch(/-0\.0σ/);
  });

  it("asks for another trial when the first result is inside the noise band, even a better one", () => {
    for (const x of [2.955, 2.94, 2.9, 2.8]) {
      const d = judge.decide(input([x]));
      expect(d.action, `first trial ${x}`).toBe("more");
      expect(d.reason).toMatch(/running trial 2 of up to 4/);
    }
  });

  it("confirms a candidate that passed the keep test before keeping it", () => {
    const passed = judge.decide(input([2.8, 2.82]));
    expect(passed.action).toBe("more");
    expect(passed.reason).toMatch(
      /^passed the keep test: .*confirming with trial 3 of 6; σ [\d.]+ pooled from 2 configurations and 5 trials; first the incumbent #0 runs its trial 4 \(the incumbent is evidence too.*\)$/,
    );
    const confirming = judge.decide(input([2.8, 2.82, 2.83]));
    expect(confirming.action).toBe("more");
    expect(confirming.reason).toMatch(
      /^confirming: .*\(passed the keep test at trial 2\); running trial 4 of 6; σ /,
    );
  });

  it("keeps a confirmed improvement with a noise-corrected metric and a readable reason", () => {
    const d = judge.decide(input([2.8, 2.82, 2.81, 2.8, 2.82, 2.81]));
    expect(d.action).toBe("keep");
    if (d.action !== "keep") return;
    // Mean 2.81, pulled back toward the best by 1.5 standard errors.
    expect(d.metric).toBeGreaterThan(2.81);
    expect(d.metric).toBeLessThan(2.95);
    expect(d.reason).toMatch(
      /^improved: val_bpb 2\.81 ± 0\.0\d* \(6 trials\) vs best 2\.95 ± 0\.0\d* \(3 trials, #0\); margin \d+\.\dσ ≥ 1\.2σ after 6 trials \(passed the keep test at trial 2\)/,
    );
    expect(d.mechanismConfirmed).toBe(true);
  });

  it("discards a candidate that falls back during confirmation", () => {
    // Passed at trial 2 (2.85, 2.86), then regressed to the best's level.
    const fell = judge.decide(input([2.85, 2.86, 3.02, 3.03]));
    expect(fell.action).toBe("discard");
    expect(fell.reason).toMatch(/^not confirmed: .* after 4 trials \(passed the keep test at trial 2\); σ /);
    // Still ahead but by less than confirmZ after 6 trials: not kept either.
    const weak = judge.decide(input([2.85, 2.86, 2.95, 2.94, 2.95, 2.95]));
    expect(weak.action).toBe("discard");
    expect(weak.reason).toMatch(/^not confirmed: .* < 1\.2σ after 6 trials/);
  });

  it("without confirmation (confirmTrials ≤ minKeepTrials), keeps as soon as the test passes", () => {
    const j = createNoiseJudge({ ...MECHANICS, confirmTrials: 2 });
    expect(j.maxTrials).toBe(4);
    const d = j.decide(input([2.8, 2.82]));
    expect(d.action).toBe("keep");
    expect(d.reason).toMatch(
      /^improved: val_bpb 2\.81 .*\(2 trials\).*; margin \d+\.\dσ ≥ \d\.\dσ; reported/,
    );
  });

  it("discards a second trial that is not better, and gives up at maxTrials", () => {
    expect(judge.decide(input([2.94, 2.97])).action).toBe("discard");
    const last = judge.decide(input([2.94, 2.94, 2.945, 2.94]));
    expect(last.action).toBe("discard");
    expect(last.reason).toMatch(/^not credibly better: .* after 4 trials/);
  });

  it("works for maximize objectives", () => {
    const max: Program = simProgram("acc", "maximize");
    const base = [0.8, 0.81, 0.79];
    const mk = (xs: number[]) => ({
      program: max,
      trials: xs.map((x, k) => simTrial(x, k, "acc")),
      best: { n: 0, metric: 0.8, values: base },
      baseline: base,
    });
    const good = [0.9, 0.91, 0.9, 0.91, 0.9, 0.91];
    expect(judge.decide(mk(good.slice(0, 2))).action).toBe("more");
    expect(judge.decide(mk(good)).action).toBe("keep");
    expect(judge.decide(mk([0.6])).action).toBe("discard");
    const kept = judge.decide(mk(good));
    expect(kept.action === "keep" && (kept.metric as number) < 0.905).toBe(true);
  });

  it("pools the best's repeats into the noise and compares with the best's mean of trials", () => {
    const best = { n: 5, metric: 2.86, values: [2.84, 2.86, 2.85] };
    // 2.83 vs the best's mean 2.85: too small against σ 0.02 after 2 trials.
    expect(judge.decide(input([2.83, 2.83], { best })).action).toBe("more");
    const good = [2.7, 2.71, 2.7, 2.71, 2.7, 2.71];
    expect(judge.decide(input(good, { best })).action).toBe("keep");
    // A keep never reports a value worse than the best's.
    const d = judge.decide(input(good, { best }));
    expect(d.action === "keep" && (d.metric as number) <= 2.86).toBe(true);
  });

  it("a failed trial decides at once, whichever trial it is; constraints apply to every trial", () => {
    const crash: TrialResult = {
      ...simTrial(0, 1, "val_bpb"),
      status: "crash",
      reason: "exit code 1",
      metrics: {},
    };
    expect(judge.decide({ ...input([2.9]), trials: [crash] }).action).toBe("crash");
    const second = judge.decide({ ...input([2.9]), trials: [...trials(2.9), crash] });
    expect(second.action).toBe("crash");
    expect(second.reason).toBe("trial 2 of 2: exit code 1");
    const constrained: Program = { ...program, constraints: ["peak_rss_mb <= 100"] };
    const heavy = { ...simTrial(2.7, 2, "val_bpb"), peakRssMb: 500 };
    const d = judge.decide({ ...input([]), program: constrained, trials: [...trials(2.7), heavy] });
    expect(d.action).toBe("reject");
    expect(d.reason).toMatch(/trial 2 of 2: constraint: peak_rss_mb 500 > 100/);
  });

  it("a prune may stop a candidate's first trial, never overturn trials that completed (issue #38 item 5)", () => {
    const pruned: TrialResult = {
      ...simTrial(0, 9, "val_bpb"),
      status: "pruned",
      reason: "train_loss worse than the best's curve by 3.1 standard errors at 40% of the budget",
      metrics: { train_loss: 4 },
    };
    // A first trial stopped for its curve: discarded, saying so.
    const first = judge.decide({ ...input([]), trials: [pruned] });
    expect(first.action).toBe("discard");
    expect(first.reason).toMatch(/^pruned: /);
    // Three completed trials with a clear gain, then a pruned fourth: judged on the three (kept or
    // more trials), never "refuted" by the prune.
    const later = judge.decide({ ...input([]), trials: [...trials(2.8, 2.79, 2.81), pruned] });
    expect(later.action).not.toBe("discard");
    expect(later.reason).not.toMatch(/pruned/);
    const sameAsWithout = judge.decide(input([2.8, 2.79, 2.81]));
    expect(later.action).toBe(sameAsWithout.action);
  });

  it("identical repeats of two configurations: a deterministic objective, compared exactly (dust is no gain)", () => {
    const same = [3, 3, 3];
    const mk = (xs: number[]) => input(xs, { best: { n: 0, metric: 3, values: same }, baseline: same });
    const dust = judge.decide(mk([3 - 1e-9, 3 - 1e-9]));
    expect(dust.action).not.toBe("keep");
    const real = judge.decide(mk([2.9, 2.9, 2.9, 2.9, 2.9, 2.9]));
    expect(real.action).toBe("keep");
    expect(real.reason).toMatch(
      /deterministic: repeats of 2 configurations and 9 trials were identical, so values are compared exactly/,
    );
    // One configuration's identical repeats are not enough: the candidate is measured again.
    const first = judge.decide(mk([2.9]));
    expect(first.action).toBe("more");
    expect(first.reason).toMatch(/σ unknown: the repeats of one configuration were identical/);
  });

  it("with a single baseline trial, repeats the candidate to get a noise estimate", () => {
    const j = createNoiseJudge({ ...MECHANICS, baselineTrials: 1 });
    const d = j.decide(input([2.5], { best: { n: 0, metric: 2.95, values: [2.95] }, baseline: [2.95] }));
    expect(d.action).toBe("more");
    expect(d.reason).toMatch(/no noise estimate yet/);
  });

  it("explains when the baseline is too noisy to ever accept anything", () => {
    const noisy = [1, 3, 5];
    const d = judge.decide(
      input([2.9, 3.1, 3, 3.05], { best: { n: 0, metric: 3, values: noisy }, baseline: noisy }),
    );
    expect(d.action).toBe("discard");
    expect(d.reason).toMatch(
      /too noisy: val_bpb — σ [\d.]+ pooled from .*#0 is clearly noisier \(σ 2\).*practically nothing can be kept/,
    );
    const r = describeNoise({ metricName: "val_bpb", baseline: noisy });
    expect(r.tooNoisy).toBe(true);
    expect(describeNoise({ metricName: "val_bpb", baseline: BASELINE }).tooNoisy).toBe(false);
  });

  it("is deterministic and pure", () => {
    const a = judge.decide(input([2.8, 2.82]));
    const b = judge.decide(input([2.8, 2.82]));
    expect(a).toEqual(b);
  });
});

describe("seed-paired comparison", () => {
  const judge = createNoiseJudge(MECHANICS);
  // Seed-driven noise: trial k of every experiment moves by e[k] (sd 0.22), plus a little of its own.
  const e = [-0.2, 0.2, -0.1, 0.1, -0.3, 0.3];
  const jitter = [0.004, -0.003, 0.002, -0.004, 0.003, -0.002];
  const bestValues = e.map((x) => 2.9 + x);
  const bestTrials = bestValues.map((v, k) => simTrial(v, 42 + k, "val_bpb"));
  const baseline = [3.1, 2.9, 3.0].map((x, k) => x + (e[k] as number));
  const candidate = (n: number, level = 2.78, seed0 = 42) =>
    e.slice(0, n).map((x, k) => simTrial(level + x + (jitter[k] as number), seed0 + k, "val_bpb"));
  const run = (withTrials: TrialResult[] | undefined, level = 2.78, seed0 = 42) => {
    const steps: { action: string; reason: string }[] = [];
    for (let n = 1; n <= judge.maxTrials; n++) {
      const d = judge.decide({
        program,
        trials: candidate(n, level, seed0),
        best: { n: 4, metric: 2.9, values: bestValues, ...(withTrials ? { trials: withTrials } : {}) },
        baseline,
      });
      steps.push(d);
      if (d.action !== "more") break;
    }
    return steps;
  };

  it("keeps a candidate consistently better on every shared seed, which the unpaired spread would not allow", () => {
    const unpaired = run(undefined);
    expect(unpaired.at(-1)?.action).toBe("discard");
    expect(unpaired.at(-1)?.reason).toMatch(/^not credibly better: .* after 4 trials/);
    const paired = run(bestTrials);
    const last = paired.at(-1);
    expect(last?.action).toBe("keep");
    expect(paired).toHaveLength(6);
    expect(last?.reason).toMatch(/margin \d+\.\dσ \(paired on 6 seeds\) ≥ 1\.\dσ after 6 trials/);
    // The pull-back is in the unshared noise, which the pairs show is small: close to the mean.
    const d = last as { metric?: number };
    expect(d.metric).toBeGreaterThan(2.78);
    expect(d.metric).toBeLessThan(2.8);
  });

  it("while exploring, a margin of 4 on two pairs is not clear: the pairs' variance rests on few degrees of freedom", () => {
    const explore = { budget: { left: 9, total: 10 } };
    const decide = (n: number) =>
      judge.decide({
        program,
        trials: candidate(n, 2.3),
        best: { n: 4, metric: 2.9, values: bestValues, trials: bestTrials },
        baseline,
        ...explore,
      });
    // Margin 4σ on two pairs (3 degrees of freedom): a t of 4 there is one in seventy.
    const two = decide(2);
    expect(two.reason).toMatch(/margin 4\.0σ \(paired on 2 seeds\)/);
    expect(two.action).toBe("more");
    // Three pairs and 5.7σ clear the bar of 5.2σ; six pairs need 4.5σ.
    expect(decide(3).reason).toMatch(
      /margin 5\.7σ \(paired on 3 seeds\) ≥ 5\.2σ after 3 trials: a clear improvement/,
    );
    expect(decide(6).reason).toMatch(/≥ 4\.5σ after 6 trials: a clear improvement/);
  });

  it("does not keep a candidate that is as good as the best on every shared seed", () => {
    const same = run(bestTrials, 2.9);
    expect(same.at(-1)?.action).toBe("discard");
  });

  it("falls back to the unpaired rule without seeds in common, or with a single pair", () => {
    const unpaired = run(undefined);
    // The best's trials under other seeds: nothing pairs.
    const otherSeeds = bestValues.map((v, k) => simTrial(v, 1000 + k, "val_bpb"));
    expect(run(otherSeeds)).toEqual(unpaired);
    // Only the first seed lines up: one pair says nothing about the variance of differences.
    const onePair = bestValues.map((v, k) => simTrial(v, k === 0 ? 42 : 1000 + k, "val_bpb"));
    expect(run(onePair)).toEqual(unpaired);
    // Failed trials of the best do not pair.
    const failed = bestTrials.map((t) => ({ ...t, status: "crash" as const }));
    expect(run(failed)).toEqual(unpaired);
    expect(run(bestTrials, 2.78, 1000)).toEqual(run(undefined, 2.78, 1000));
  });

  it("is deterministic", () => {
    expect(run(bestTrials)).toEqual(run(bestTrials));
  });

  it("seedPairs matches each of the candidate's trials with the best's trial of the same seed, once", () => {
    const best = [
      simTrial(1, 7),
      simTrial(2, 8),
      simTrial(3, 8),
      { ...simTrial(4, 9), status: "timeout" as const },
    ];
    const cand = [simTrial(10, 8), simTrial(11, 7), simTrial(12, 9), simTrial(13, 8), simTrial(14, 5)];
    expect(seedPairs(cand, best, "value")).toEqual({ candidate: [10, 11], best: [2, 1] });
    expect(seedPairs(cand, undefined, "value")).toEqual({ candidate: [], best: [] });
  });

  it("satterthwaiteDf and confirmThreshold: few degrees of freedom, a wider threshold", () => {
    expect(satterthwaiteDf([[1, 10]])).toBeCloseTo(10, 12);
    expect(
      satterthwaiteDf([
        [1, 4],
        [1, 4],
      ]),
    ).toBeCloseTo(8, 12);
    expect(
      satterthwaiteDf([
        [1, 4],
        [0, 0],
      ]),
    ).toBeCloseTo(4, 12);
    expect(satterthwaiteDf([[1, 0]])).toBe(0);
    expect(confirmThreshold(3)).toBeGreaterThan(confirmThreshold(30));
    expect(confirmThreshold(1e6)).toBeCloseTo(1.4, 3);
    expect(confirmThreshold(0)).toBe(1.4);
  });

  it("the simulated loop hands the judge the best's trials with seeds that line up with the candidate's", () => {
    const inner = createNoiseJudge(MECHANICS);
    let checked = 0;
    const spy = {
      ...inner,
      decide(i: JudgeInput) {
        const seeds = i.best.trials?.map((t) => t.seed) ?? [];
        expect(seeds).toHaveLength(i.best.values.length);
        for (const [k, t] of i.trials.entries()) {
          if (k < seeds.length) expect(t.seed).toBe(seeds[k]);
        }
        checked++;
        return inner.decide(i);
      },
    };
    runKeepLoop({ fn: hartmann3, sigma: 0.3, judge: spy, totalTrials: 60, seed: 3, seedShare: 0.5 });
    expect(checked).toBeGreaterThan(10);
  });
});

describe("noise helpers", () => {
  it("estimateNoise pools groups around their own means and applies the floor", () => {
    const e = estimateNoise([[1, 3], [10, 12], [5]], 1);
    expect(e.sigma).toBeCloseTo(Math.SQRT2, 10);
    expect(e.df).toBe(2);
    const zero = estimateNoise([[4, 4, 4]], 4, { relativeSigmaFloor: 0.01 });
    expect(zero.sigma).toBeCloseTo(0.04, 12);
    expect(zero.floored).toBe(true);
  });

  it("keepThreshold is wider with few degrees of freedom and never below keepZ", () => {
    expect(keepThreshold(2)).toBeGreaterThan(keepThreshold(20));
    expect(keepThreshold(1000)).toBeCloseTo(1.28, 1);
    expect(keepThreshold(1000, { keepZ: 3 })).toBe(3);
  });
});

describe("noise judge against greedy on a noisy objective (small version of bench/noise.ts)", () => {
  it("keeps far fewer truly worse changes and reports a far smaller gap, at equal trials", () => {
    const run = (judge: typeof greedyJudge) => {
      let keeps = 0;
      let falseKeeps = 0;
      let gap = 0;
      for (let seed = 0; seed < 40; seed++) {
        const r = runKeepLoop({ fn: hartmann3, sigma: 0.3, judge, totalTrials: 120, seed });
        keeps += r.keeps.length;
        falseKeeps += r.falseKeeps;
        gap += r.finalReported - r.finalTrue;
        expect(r.trialsUsed).toBeLessThanOrEqual(120);
      }
      return { share: falseKeeps / keeps, gap: gap / 40 };
    };
    const greedy = run(greedyJudge);
    const noise = run(createNoiseJudge());
    expect(greedy.share).toBeGreaterThan(0.15);
    expect(noise.share).toBeLessThan(greedy.share / 3);
    expect(Math.abs(noise.gap)).toBeLessThan(Math.abs(greedy.gap) / 4);
  });
});

describe("with seed-shared noise (small version of the common-seed scenarios)", () => {
  it("the paired rule still keeps far fewer truly worse changes than greedy", () => {
    const run = (judge: typeof greedyJudge) => {
      let keeps = 0;
      let falseKeeps = 0;
      for (let seed = 0; seed < 40; seed++) {
        const r = runKeepLoop({ fn: hartmann3, sigma: 0.3, judge, totalTrials: 120, seed, seedShare: 0.5 });
        keeps += r.keeps.length;
        falseKeeps += r.falseKeeps;
      }
      return falseKeeps / keeps;
    };
    const greedy = run(greedyJudge);
    expect(greedy).toBeGreaterThan(0.1);
    expect(run(createNoiseJudge())).toBeLessThan(greedy / 3);
  });
});

describe("createJudge", () => {
  it("maps acceptance names to judges and refuses unknown ones with a hint", () => {
    expect(createJudge().name).toBe("noise");
    expect(createJudge("greedy")).toBe(greedyJudge);
    expect(createJudge("noise", { testTrials: 5, confirmTrials: 8 }).maxTrials).toBe(8);
    expect(() => createJudge("lucky")).toThrow(/unknown acceptance rule "lucky"/);
  });
});

describe("budget-aware exploration (JudgeInput.budget)", () => {
  const judge = createNoiseJudge({ remeasure: false });
  // σ 0.02 from the baseline: one trial's standard error against the baseline's mean of 3 is 0.023.
  it("while exploring, a first trial that is not promising ends the candidate; in the reserve it gets more", () => {
    const middling = [2.94]; // 0.01 better: z ≈ 0.4
    const exploring = judge.decide(input(middling, { budget: { left: 8, total: 10 } }));
    expect(exploring.action).toBe("discard");
    expect((exploring as { reason: string }).reason).toMatch(
      /^not promising: .* < 2σ after one trial, while exploring \(80% of the budget left/,
    );
    expect(judge.decide(input(middling, { budget: { left: 1, total: 10 } })).action).toBe("more");
    expect(judge.decide(input(middling)).action).toBe("more");
  });

  it("a promising first trial earns more trials while exploring", () => {
    expect(judge.decide(input([2.9], { budget: { left: 9, total: 10 } })).action).toBe("more");
  });

  it("while exploring, a clear improvement (≥ 3σ after two trials) is kept without the rest of its confirmation", () => {
    const clear = [2.85, 2.86];
    // σ measured on 10 degrees of freedom (another configuration repeated 8 times): 3σ is clear.
    const run = [{ n: 7, values: [2.95, 2.97, 2.93, 2.96, 2.94, 2.95, 2.97, 2.93] }];
    const d = judge.decide(input(clear, { budget: { left: 9, total: 10 }, run }));
    expect(d.action).toBe("keep");
    expect((d as { reason: string }).reason).toMatch(
      /a clear improvement, kept without further confirmation/,
    );
    // Without the budget (or in the reserve) the full confirmation runs.
    expect(judge.decide(input(clear, { run })).action).toBe("more");
    expect(judge.decide(input(clear, { budget: { left: 1, total: 10 }, run })).action).toBe("more");
    // On σ from 3 degrees of freedom (the baseline's and the candidate's repeats alone), 6σ is not clear yet.
    expect(judge.decide(input(clear, { budget: { left: 9, total: 10 } })).action).toBe("more");
  });
});
