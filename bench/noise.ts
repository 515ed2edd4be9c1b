/**
 * Keep-or-revert on noisy objectives with known truth: greedy (autoresearch's rule) against
 * the noise judge (the default), at equal total trials.
 *
 * Each scenario is a standard test function plus Gaussian trial noise; a seed fixes the start
 * point and the proposal stream. Candidates come from local random search around the best
 * (a Gaussian step of 0.1 in the unit cube, 10% uniform) or, with --proposer=tpe, from the
 * built-in TPE fed with the judged values, as the built-in agent is. bench/_keep-loop.ts
 * consults the judge exactly as the loop does ("more" → another trial, up to maxTrials).
 *
 * Figures per scenario: share of kept changes that are truly worse than the best they replaced
 * (pooled over seeds), reported-minus-true gap of the final best, its true regret (true value −
 * optimum), and the paired difference of true regret noise − greedy (negative = noise better).
 *
 * Common seeds: the loop gives trial k of every experiment the same seed, and part of a real
 * run's noise is tied to the seed (data order, init). --share is the share of the noise variance
 * that depends on the seed index alone (default 0: independent noise); the judge sees the best's
 * trials with their seeds, so the noise rule compares seed-matched trials as pairs. Unless
 * --share is given, the local scenarios also run at --shared-share (default 0.5, 0 to skip),
 * reported under "shared" in the JSON line.
 *
 *   npm run bench -- noise [--seeds=200] [--trials=200] [--tpe-seeds=30] [--sweep] [--share=0]
 *                          [--shared-share=0.5] [--unpaired] [--case-seeds=400] [--case-trials=100]
 *                          [--cases-only]
 */

import type { Judge } from "../src/core/judge.ts";
import { greedyJudge } from "../src/trust/greedy-judge.ts";
import { createNoiseJudge, type NoiseJudgeOptions } from "../src/trust/noise-judge.ts";
import { mean, sampleSd } from "../src/trust/stats.ts";
import { branin, hartmann3, logQuadratic, logRosenbrock, type TestFunction } from "./_functions.ts";
import { type KeepLoopOptions, type KeepLoopResult, type Proposer, runKeepLoop } from "./_keep-loop.ts";
import { type Estimate, estimate, flags, numberFlag, ratio, round, show } from "./_stats.ts";

/** σ per function: of the order of the late improvements a local step makes (printed as typ/σ). */
export const SCENARIOS: { fn: TestFunction; sigma: number }[] = [
  { fn: branin, sigma: 1 },
  { fn: hartmann3, sigma: 0.3 },
  { fn: logRosenbrock, sigma: 0.3 },
  { fn: logQuadratic, sigma: 0.3 },
];

interface JudgeFigures {
  falseShare: Estimate;
  gap: Estimate;
  regret: Estimate;
  keepsPerSeed: number;
  experimentsPerSeed: number;
  regrets: number[];
  /** Median true improvement of truly-better keeps, in σ. */
  typicalImprovement: number;
}

function runJudge(
  judge: Judge,
  fn: TestFunction,
  sigma: number,
  seeds: number,
  trials: number,
  proposer: Proposer,
  share: number,
  unpaired: boolean,
): JudgeFigures {
  const results: KeepLoopResult[] = [];
  for (let s = 0; s < seeds; s++) {
    results.push(
      runKeepLoop({ fn, sigma, judge, totalTrials: trials, seed: s, proposer, seedShare: share, unpaired }),
    );
  }
  const gains = results
    .flatMap((r) => r.keeps.map((k) => k.trueOld - k.trueNew))
    .filter((g) => g > 0)
    .sort((a, b) => a - b);
  const regrets = results.map((r) => r.finalTrue - fn.optimum);
  return {
    falseShare: ratio(
      results.map((r) => r.falseKeeps),
      results.map((r) => r.keeps.length),
    ),
    gap: estimate(results.map((r) => r.finalReported - r.finalTrue)),
    regret: estimate(regrets),
    keepsPerSeed: results.reduce((a, r) => a + r.keeps.length, 0) / seeds,
    experimentsPerSeed: results.reduce((a, r) => a + r.experiments, 0) / seeds,
    regrets,
    typicalImprovement: (gains[Math.floor(gains.length / 2)] ?? Number.NaN) / sigma,
  };
}

interface ScenarioFigures {
  function: string;
  proposer: Proposer;
  /** Share of the noise variance tied to the seed index. */
  share: number;
  sigma: number;
  seeds: number;
  greedy: JudgeFigures;
  noise: JudgeFigures;
  /** Paired over seeds: noise's true regret minus greedy's (negative: noise found better). */
  regretDiff: Estimate;
  /** |gap noise| / |gap greedy|. */
  gapRatio: number;
}

export function scenario(
  fn: TestFunction,
  sigma: number,
  seeds: number,
  trials: number,
  proposer: Proposer,
  share: number,
  options: NoiseJudgeOptions,
  unpaired = false,
): ScenarioFigures {
  const greedy = runJudge(greedyJudge, fn, sigma, seeds, trials, proposer, share, unpaired);
  const noise = runJudge(createNoiseJudge(options), fn, sigma, seeds, trials, proposer, share, unpaired);
  return {
    function: fn.name,
    proposer,
    share,
    sigma,
    seeds,
    greedy,
    noise,
    regretDiff: estimate(noise.regrets.map((x, i) => x - (greedy.regrets[i] as number))),
    gapRatio: Math.abs(noise.gap.mean) / Math.abs(greedy.gap.mean),
  };
}

function print(s: ScenarioFigures): void {
  const line = (name: string, j: JudgeFigures) =>
    `  ${name.padEnd(6)} truly-worse keeps ${show(j.falseShare, 3, 100)}%  gap ${show(j.gap)}  regret ${show(j.regret)}  keeps/seed ${round(j.keepsPerSeed, 3)}  experiments/seed ${round(j.experimentsPerSeed, 3)}`;
  console.log(
    `${s.function} (σ ${s.sigma}, ${s.proposer} proposals, ${s.seeds} seeds${s.share ? `, seed share ${s.share}` : ""}; typical true gain of a good keep ${round(s.greedy.typicalImprovement, 2)}σ)`,
  );
  console.log(line("greedy", s.greedy));
  console.log(line("noise", s.noise));
  console.log(
    `  noise − greedy true regret ${show(s.regretDiff)} (negative: noise better); |gap| ratio ${round(s.gapRatio, 2)}`,
  );
}

/** The summary figures of a set of scenarios (pooled false share over its local ones). */
function figures(all: ScenarioFigures[]) {
  const local = all.filter((s) => s.proposer === "local");
  const pooled = (pick: (s: ScenarioFigures) => JudgeFigures) =>
    local.reduce((a, s) => a + pick(s).falseShare.mean, 0) / local.length;
  return {
    false_share_noise_pct: round(100 * pooled((s) => s.noise), 3),
    false_share_greedy_pct: round(100 * pooled((s) => s.greedy), 3),
    max_false_share_noise_pct: round(100 * Math.max(...all.map((s) => s.noise.falseShare.mean)), 3),
    max_gap_ratio: round(Math.max(...all.map((s) => s.gapRatio)), 2),
    scenarios_noise_regret_not_worse: all.filter((s) => s.regretDiff.mean <= 0).length,
    scenarios_noise_regret_significantly_worse: all.filter((s) => s.regretDiff.mean - s.regretDiff.ci > 0)
      .length,
    scenarios: all.map((s) => ({
      function: s.function,
      proposer: s.proposer,
      sigma: s.sigma,
      seeds: s.seeds,
      typical_gain_sigma: round(s.greedy.typicalImprovement, 2),
      false_share_pct: {
        greedy: round(100 * s.greedy.falseShare.mean, 3),
        noise: round(100 * s.noise.falseShare.mean, 3),
      },
      false_share_ci_pct: {
        greedy: round(100 * s.greedy.falseShare.ci, 2),
        noise: round(100 * s.noise.falseShare.ci, 2),
      },
      gap: { greedy: round(s.greedy.gap.mean), noise: round(s.noise.gap.mean) },
      gap_ratio: round(s.gapRatio, 2),
      regret: { greedy: round(s.greedy.regret.mean), noise: round(s.noise.regret.mean) },
      regret_diff: round(s.regretDiff.mean),
      regret_diff_ci: round(s.regretDiff.ci, 2),
      experiments_per_seed: {
        greedy: round(s.greedy.experimentsPerSeed, 3),
        noise: round(s.noise.experimentsPerSeed, 3),
      },
    })),
  };
}

function printSummary(label: string, x: ReturnType<typeof figures>): void {
  console.log(
    `${label}: truly-worse keeps noise ${x.false_share_noise_pct}% vs greedy ${x.false_share_greedy_pct}% (target ≤ 5%); worst |gap| ratio ${x.max_gap_ratio} (target ≤ 0.25); true regret not worse than greedy in ${x.scenarios_noise_regret_not_worse} of ${x.scenarios.length} scenarios, significantly worse in ${x.scenarios_noise_regret_significantly_worse}`,
  );
}

/**
 * The three cases the run-wide noise model (#20) is for, old rule ("judged": σ from the
 * baseline's, the best's and the candidate's repeats only, no re-measured incumbent) against
 * the new one in the same runs (same seeds, same proposals). Proposals are synthetic: each
 * candidate's true value is the best's plus N(0.3σ, σ) (minimize: about 10% of candidates are
 * truly better by ≥ 1σ, 62% truly worse), so every run has improvements to find.
 *   - "σ too large": the baseline's 3 repeats happened to spread ≥ 2σ (their sample σ).
 *   - "deterministic incumbent": the baseline scores identically on every repeat, the
 *     candidates are noisy (σ).
 *   - "lucky incumbent": the baseline's mean of 3 happened to be ≥ 1.5 standard errors better
 *     than its truth.
 * Figures: share of keeps that are truly worse (target ≤ 5%), share of candidates truly better
 * by ≥ 1σ that were discarded ("improvements lost"; target: at least halved), and true regret.
 */
const NOISE_CASES: { name: string; opts: Partial<KeepLoopOptions> }[] = [
  {
    name: "σ too large",
    opts: { baselineIf: (v) => sampleSd(v) >= 2 },
  },
  { name: "deterministic incumbent", opts: { baselineSigma: 0 } },
  {
    name: "lucky incumbent",
    opts: { baselineIf: (v, t) => mean(v) <= t - 1.5 / Math.sqrt(v.length) },
  },
];

/** The rule before the run-wide noise model (#20), every option pinned to its value of then. */
export const OLD_RULE: NoiseJudgeOptions = {
  pooling: "judged",
  testTrials: 4,
  confirmTrials: 6,
  futilityZ: 0.5,
  lossZ: 0.25,
  confirmZ: 1.2,
  referenceShrink: 0.3,
  alpha: 0.1,
};

interface CaseFigures {
  falseShare: Estimate;
  lost: Estimate;
  /** The same, among candidates judged against the case's incumbent (the baseline). */
  lostVsCase: Estimate;
  /** True improvement of the final best over the baseline, in σ. */
  gain: Estimate;
  keepsPerSeed: number;
  incumbentTrialsPerSeed: number;
}

function runCase(judge: Judge, opts: Partial<KeepLoopOptions>, seeds: number, trials: number): CaseFigures {
  const results: KeepLoopResult[] = [];
  for (let s = 0; s < seeds; s++) {
    results.push(
      runKeepLoop({
        fn: logQuadratic,
        sigma: 1,
        judge,
        totalTrials: trials,
        seed: 10_000 + s,
        proposeTrue: (rng, bestTrue) => bestTrue + 0.3 + rng.normal(),
        ...opts,
      }),
    );
  }
  const good = results.map((r) => r.candidates.filter((c) => c.improvement >= 1));
  const good0 = good.map((g) => g.filter((c) => c.incumbent === 0));
  return {
    falseShare: ratio(
      results.map((r) => r.falseKeeps),
      results.map((r) => r.keeps.length),
    ),
    lost: ratio(
      good.map((g) => g.filter((c) => !c.kept).length),
      good.map((g) => g.length),
    ),
    lostVsCase: ratio(
      good0.map((g) => g.filter((c) => !c.kept).length),
      good0.map((g) => g.length),
    ),
    gain: estimate(results.map((r) => r.keeps.reduce((a, k) => a + k.trueOld - k.trueNew, 0))),
    keepsPerSeed: results.reduce((a, r) => a + r.keeps.length, 0) / seeds,
    incumbentTrialsPerSeed: results.reduce((a, r) => a + r.incumbentTrials, 0) / seeds,
  };
}

function noiseCases(seeds: number, trials: number, judge: NoiseJudgeOptions = {}) {
  console.log(
    `the noise model's cases (${trials} trials per run, ${seeds} seeds, synthetic proposals N(0.3σ, σ) worse than the best): old rule (σ from the judged repeats) vs new (pooled over the run, incumbent re-measured)`,
  );
  return NOISE_CASES.map(({ name, opts }) => {
    const old = runCase(createNoiseJudge(OLD_RULE), opts, seeds, trials);
    const now = runCase(createNoiseJudge(judge), opts, seeds, trials);
    const line = (label: string, c: CaseFigures) =>
      `  ${label.padEnd(4)} truly-worse keeps ${show(c.falseShare, 3, 100)}%  improvements lost ${show(c.lost, 3, 100)}% (against the case's incumbent ${show(c.lostVsCase, 3, 100)}%)  true gain ${show(c.gain)}σ  keeps/seed ${round(c.keepsPerSeed, 3)}  incumbent trials/seed ${round(c.incumbentTrialsPerSeed, 3)}`;
    console.log(name);
    console.log(line("old", old));
    console.log(line("new", now));
    const figures = (c: CaseFigures) => ({
      false_share_pct: round(100 * c.falseShare.mean, 3),
      false_share_ci_pct: round(100 * c.falseShare.ci, 2),
      lost_pct: round(100 * c.lost.mean, 3),
      lost_ci_pct: round(100 * c.lost.ci, 2),
      lost_vs_case_incumbent_pct: round(100 * c.lostVsCase.mean, 3),
      lost_vs_case_incumbent_ci_pct: round(100 * c.lostVsCase.ci, 2),
      true_gain_sigma: round(c.gain.mean),
      true_gain_ci: round(c.gain.ci, 2),
      keeps_per_seed: round(c.keepsPerSeed, 3),
      incumbent_trials_per_seed: round(c.incumbentTrialsPerSeed, 3),
    });
    return {
      case: name,
      old: figures(old),
      new: figures(now),
      lost_ratio: round(now.lost.mean / old.lost.mean, 3),
    };
  });
}

function judgeFlag(f: Record<string, string>): NoiseJudgeOptions {
  if (f.judge === undefined) return {};
  try {
    return JSON.parse(f.judge) as NoiseJudgeOptions;
  } catch {
    throw new Error(`--judge must be JSON options of the noise judge, e.g. --judge='{"confirmZ":1.3}'`);
  }
}

export async function main(args: string[]): Promise<Record<string, unknown>> {
  const f = flags(args);
  const seeds = numberFlag(f, "seeds", 200);
  const tpeSeeds = numberFlag(f, "tpe-seeds", 30);
  const trials = numberFlag(f, "trials", 200);
  const share = numberFlag(f, "share", 0);
  const sharedShare = f.share === undefined ? numberFlag(f, "shared-share", 0.5) : 0;
  const unpaired = Boolean(f.unpaired);
  const caseSeeds = numberFlag(f, "case-seeds", 400);
  const caseTrials = numberFlag(f, "case-trials", 100);
  // --judge='{"confirmZ":1.3}': options of the noise-aware rule under test (default: its defaults).
  const judge = judgeFlag(f);
  if (f["cases-only"]) return { benchmark: "noise", cases: noiseCases(caseSeeds, caseTrials, judge) };
  const t0 = performance.now();
  console.log(
    `keep-or-revert at ${trials} total trials per run (baseline included); noise independent between trials${share ? ` except a seed share of ${share}` : ""}${unpaired ? "; the judge does not see the best's seeds (unpaired)" : ""}`,
  );
  const all: ScenarioFigures[] = [];
  for (const { fn, sigma } of SCENARIOS) {
    const s = scenario(fn, sigma, seeds, trials, "local", share, judge, unpaired);
    print(s);
    all.push(s);
  }
  if (tpeSeeds > 0) {
    for (const { fn, sigma } of SCENARIOS) {
      const s = scenario(fn, sigma, tpeSeeds, trials, "tpe", share, judge, unpaired);
      print(s);
      all.push(s);
    }
  }
  const shared: ScenarioFigures[] = [];
  if (sharedShare > 0) {
    console.log(
      `common seeds: ${sharedShare} of the noise variance tied to the trial's seed index (trial k of every experiment has seed k), local proposals`,
    );
    for (const { fn, sigma } of SCENARIOS) {
      const s = scenario(fn, sigma, seeds, trials, "local", sharedShare, judge, unpaired);
      print(s);
      shared.push(s);
    }
  }

  const sweep: Record<string, unknown>[] = [];
  if (f.sweep) {
    console.log("trade-off of the keep threshold (local proposals, pooled over the scenarios):");
    for (const alpha of [0.01, 0.025, 0.05, 0.1, 0.2]) {
      const rows = SCENARIOS.map(({ fn, sigma }) =>
        scenario(fn, sigma, seeds, trials, "local", share, { ...judge, alpha, keepZ: 0 }, unpaired),
      );
      const fs = rows.map((r) => r.noise.falseShare.mean);
      const diff = rows.map((r) => r.regretDiff.mean / r.sigma);
      const row = {
        alpha,
        false_share_pct: fs.map((x) => round(100 * x, 3)),
        gap_ratio: rows.map((r) => round(r.gapRatio, 2)),
        regret_diff_sigma: diff.map((x) => round(x, 2)),
      };
      console.log(
        `  alpha ${alpha}: truly-worse keeps ${row.false_share_pct.join(" / ")}%; |gap| ratio ${row.gap_ratio.join(" / ")}; regret noise − greedy ${row.regret_diff_sigma.join(" / ")} σ`,
      );
      sweep.push(row);
    }
  }

  const cases = caseSeeds > 0 ? noiseCases(caseSeeds, caseTrials, judge) : [];
  const main = figures(all);
  const sharedFigures = shared.length ? figures(shared) : undefined;
  const summary = {
    benchmark: "noise",
    trials,
    seeds,
    tpe_seeds: tpeSeeds,
    seed_share: share,
    ...(unpaired ? { unpaired } : {}),
    ...main,
    ...(sharedFigures ? { shared: { seed_share: sharedShare, ...sharedFigures } } : {}),
    ...(sweep.length ? { sweep } : {}),
    ...(cases.length ? { cases } : {}),
    seconds: round((performance.now() - t0) / 1000, 3),
  };
  printSummary("summary", main);
  if (sharedFigures) printSummary(`common seeds (share ${sharedShare}, local)`, sharedFigures);
  return summary;
}
