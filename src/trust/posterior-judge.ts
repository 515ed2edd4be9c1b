/**
 * Budget-driven acceptance (issue #38): what a run builds on is the configuration whose true
 * value it expects to be best, and the answer it ends with is re-measured in a reserved share of
 * the budget. Two rules share this module:
 *
 *   - "posterior": each configuration's true value is estimated by its posterior mean under an
 *     empirical-Bayes model of the run — true values of proposed configurations spread around
 *     μ₀ with variance τ², one trial adds noise σ² (the run-wide noise model) — so a
 *     configuration measured n times with mean ȳ is believed at μ₀ + w·(ȳ − μ₀),
 *     w = τ²/(τ² + σ²/n). A single lucky trial is pulled back toward the run's mean by as much
 *     as the noise makes lucky trials likely (the winner's curse, priced per configuration);
 *     when σ is small next to the spread of true values, w ≈ 1 and the rule is greedy. The
 *     challenger is built on when its posterior mean is better than the incumbent's: the
 *     choice that maximizes the expected true value of what the run builds on.
 *   - "greedy-final": greedy (one trial, kept when its value beats the incumbent's mean) with
 *     the same reserve: the simpler rule issue #38 names as the baseline.
 *
 * Both, while exploring (more than `reserve` of the budget left): one trial per challenger.
 * With `closeZ` > 0, "posterior" spends one more trial of the challenger (and first of the
 * incumbent, when it has fewer) when the decision is close (|difference| < closeZ posterior
 * standard deviations), where a trial's value of information is largest — measured, and off
 * by default: the extra trials cost more configurations than they were worth. In the reserve (the last `reserve` share of
 * JudgeInput.budget): the incumbent is re-measured to `finalTrials` trials before any challenger
 * is decided, and a challenger that is not clearly worse after its first trial is measured to as
 * many trials as the incumbent has, so that the run's answer rests on finalTrials trials. A run
 * without a budget never enters the reserve (explained in the reasons).
 *
 * Failures decide at once as in every rule (src/trust/greedy-judge.ts). A deterministic
 * objective (the noise model's "deterministic": repeats identical) compares exact values; an
 * unknown σ (nothing repeated yet) compares plain means, as greedy does, until repeats measure it.
 * The reported value of a keep is the posterior mean ("posterior") or the plain mean.
 */

import { formatMetric, formatShare } from "../core/format.ts";
import { isBetter, type Judge, type JudgeInput, type MoreTrials } from "../core/judge.ts";
import type { Decision, TrialResult } from "../core/types.ts";
import { firstFailure, withoutLaterPrunes } from "./greedy-judge.ts";
import { fitNoise, sigmaOf } from "./noise-model.ts";
import { mean, normalCdf } from "./stats.ts";

export interface PosteriorJudgeOptions {
  /** Baseline trials (different seeds) before any candidate: the first noise sample. Default 2. */
  baselineTrials?: number;
  /** Share of the budget, at its end, spent re-measuring the answer. Default 0.15. */
  reserve?: number;
  /** Trials the incumbent is re-measured to in the reserve (challengers matched). Default 4. */
  finalTrials?: number;
  /** Empirical-Bayes posterior means ("posterior"); false: plain means ("greedy-final"). Default true. */
  shrinkage?: boolean;
  /**
   * While exploring, a decision within this many posterior standard deviations of the
   * difference gets one more trial of the challenger (and of the incumbent first when it has
   * fewer). 0: never. Default 0: 0.5 explored 10–15% fewer configurations and ended
   * 0.1–0.6σ worse on the tuning functions (bench/accept.ts, docs/benchmarks.md).
   */
  closeZ?: number;
  /**
   * In the reserve, a challenger whose probability of being better is below this after its
   * trials so far is discarded without more. Default 0.2.
   */
  reserveStop?: number;
  /** σ floor relative to the best's value (the digits metrics are shown with). Default 1e-6. */
  relativeSigmaFloor?: number;
}

const DEFAULTS = {
  baselineTrials: 2,
  reserve: 0.15,
  finalTrials: 4,
  shrinkage: true,
  reserveStop: 0.2,
  relativeSigmaFloor: 1e-6,
};

/** The candidate's key in the run's noise model (experiment numbers are never negative). */
const CANDIDATE = -1;

export const DETERMINISTIC_POSTERIOR_NOTICE =
  "noise: deterministic — repeats of two or more configurations were identical, so values are compared exactly";

/** One configuration's belief: posterior mean and variance of its true value. */
export interface Belief {
  mean: number;
  variance: number;
}

/**
 * The run's prior over true values of configurations (μ₀, τ²) from their means, by moments:
 * τ² = var(means) − mean(σ²/n). Fewer than three measured configurations, or a spread no larger
 * than the noise explains: τ² is left infinite (no shrinkage) or at a small positive floor.
 */
export function runPrior(
  groups: readonly { values: readonly number[] }[],
  sigma: number,
): { mu0: number; tau2: number } {
  const measured = groups.map((g) => g.values.filter(Number.isFinite)).filter((v) => v.length > 0);
  if (measured.length < 3 || !(sigma > 0)) return { mu0: Number.NaN, tau2: Number.POSITIVE_INFINITY };
  const means = measured.map(mean);
  const mu0 = mean(means);
  const spread = means.reduce((a, m) => a + (m - mu0) ** 2, 0) / (means.length - 1);
  const noiseShare = mean(measured.map((v) => (sigma * sigma) / v.length));
  // A spread the noise alone explains still leaves some true spread possible: a tenth of σ².
  return { mu0, tau2: Math.max(spread - noiseShare, (sigma * sigma) / 10) };
}

/** Posterior belief in one configuration's true value (plain mean when there is no prior). */
export function beliefOf(
  values: readonly number[],
  sigma: number,
  prior: { mu0: number; tau2: number },
): Belief {
  const n = values.length;
  const m = mean(values);
  const se2 = sigma > 0 ? (sigma * sigma) / n : 0;
  if (!Number.isFinite(prior.tau2) || se2 === 0) return { mean: m, variance: se2 };
  const w = prior.tau2 / (prior.tau2 + se2);
  return { mean: prior.mu0 + w * (m - prior.mu0), variance: w * se2 };
}

export type ResolvedPosteriorJudgeOptions = Required<PosteriorJudgeOptions>;

export function createPosteriorJudge(
  options: PosteriorJudgeOptions = {},
): Judge & { options: ResolvedPosteriorJudgeOptions } {
  const base = { ...DEFAULTS, ...options };
  const o: ResolvedPosteriorJudgeOptions = {
    ...base,
    closeZ: options.closeZ ?? 0,
  };
  if (!(o.baselineTrials >= 1 && o.finalTrials >= 1 && o.reserve >= 0 && o.reserve < 1)) {
    throw new RangeError("posterior judge: baselineTrials and finalTrials ≥ 1, 0 ≤ reserve < 1");
  }
  const name = o.shrinkage ? "posterior" : "greedy-final";
  return {
    name,
    baselineTrials: o.baselineTrials,
    maxTrials: Math.max(o.finalTrials, 2),
    options: o,
    decide(given: JudgeInput): Decision | MoreTrials {
      // A prune is not a verdict (issue #38): only a first trial may be stopped for its curve.
      const input = { ...given, trials: withoutLaterPrunes(given.trials) };
      const { program, trials, best } = input;
      if (trials.length === 0)
        return { action: "crash", reason: "no trial finished", mechanismConfirmed: null };
      const bad = firstFailure(program, trials);
      if (bad) return bad;
      const metric = program.objective.metric;
      const sign = program.objective.direction === "minimize" ? 1 : -1;
      const values = trials.map((t) => t.metrics[metric] as number);
      const bestValues = best.values.filter(Number.isFinite);
      const incumbentValues = bestValues.length > 0 ? bestValues : [best.metric];
      const groups = [
        ...(input.run ?? []).filter((g) => g.n !== best.n && g.n !== 0),
        { n: 0, values: best.n === 0 ? incumbentValues : input.baseline },
        ...(best.n !== 0 ? [{ n: best.n, values: incumbentValues }] : []),
        { n: CANDIDATE, values },
      ];
      const model = fitNoise(groups, mean(incumbentValues), { relativeSigmaFloor: o.relativeSigmaFloor });
      const left =
        input.budget && input.budget.total > 0 ? input.budget.left / input.budget.total : undefined;
      const inReserve = left !== undefined && left <= o.reserve;
      // The smallest budget whose reserve holds the answer's re-measurements.
      const smallest = Math.ceil((o.finalTrials - 1) / Math.max(o.reserve, 1e-9));
      const tooSmall =
        input.budget && input.budget.total < smallest
          ? `; the budget (${input.budget.total}) is too small to re-measure the answer to ${o.finalTrials} trials in its last ${formatShare(o.reserve)} (the smallest that can: ${smallest})`
          : "";
      const budgetNote =
        left === undefined
          ? "no budget: the answer is not re-measured at the end"
          : `${inReserve ? `reserve (${formatShare(left)} of the budget left): the answer is re-measured to ${o.finalTrials} trials` : `exploring (${formatShare(left)} of the budget left)`}${tooSmall}`;
      const m = mean(values);
      const cmp = (a: number, b: number) =>
        `${metric} ${formatMetric(a)} (${values.length} trial${values.length === 1 ? "" : "s"}) vs best ${formatMetric(b)} (#${best.n}, ${incumbentValues.length} trial${incumbentValues.length === 1 ? "" : "s"})`;

      if (model.source === "deterministic") {
        const inc = mean(incumbentValues);
        const c = cmp(m, inc);
        const better = sign * (inc - m) > model.floor;
        return better
          ? {
              action: "keep",
              reason: `improved: ${c}; ${model.explain}`,
              metric: m,
              mechanismConfirmed: true,
              notice: DETERMINISTIC_POSTERIOR_NOTICE,
            }
          : {
              action: "discard",
              reason: `not better: ${c}; ${model.explain}`,
              metric: m,
              mechanismConfirmed: false,
              notice: DETERMINISTIC_POSTERIOR_NOTICE,
            };
      }
      const known = model.source !== "unknown" && model.sigma > 0;
      const sigma = known ? model.sigma : 0;
      const bestSide = sigmaOf(model, best.n);
      const bestExact = bestSide.exact;
      const prior = o.shrinkage && known ? runPrior(groups, sigma) : { mu0: Number.NaN, tau2: Infinity };
      const cand = beliefOf(values, sigma, prior);
      const inc = bestExact
        ? { mean: mean(incumbentValues), variance: 0 }
        : beliefOf(incumbentValues, known ? bestSide.sigma : 0, prior);
      const sd = Math.sqrt(cand.variance + inc.variance);
      const gain = sign * (inc.mean - cand.mean);
      // P(challenger truly better | data); 0.5 when there is no noise estimate to weigh by.
      const pBetter = sd > 0 ? normalCdf(gain / sd) : gain > 0 ? 1 : 0;
      const sigmaNote = known ? model.explain : `${model.explain}: plain means are compared`;
      const c =
        o.shrinkage && known && Number.isFinite(prior.tau2)
          ? `${cmp(m, mean(incumbentValues))}; posterior ${formatMetric(cand.mean)} vs ${formatMetric(inc.mean)}, P(better) ${formatShare(pBetter)}`
          : cmp(m, mean(incumbentValues));
      const canRemeasure = !bestExact && bestValues.length > 0 && known;
      const incumbentMore = (why: string): MoreTrials => ({
        action: "more",
        incumbent: true,
        reason: `${why}: ${c}; first the incumbent #${best.n} runs its trial ${bestValues.length + 1}; ${budgetNote}`,
      });
      const keep = (why: string): Decision => ({
        action: "keep",
        reason: `improved: ${c}; ${why}; ${budgetNote}; ${sigmaNote}`,
        metric: o.shrinkage ? cand.mean : m,
        mechanismConfirmed: true,
      });
      const discard = (why: string): Decision => ({
        action: "discard",
        reason: `not better: ${c}; ${why}; ${budgetNote}; ${sigmaNote}`,
        metric: m,
        mechanismConfirmed: false,
      });
      const better = o.shrinkage ? gain > 0 : isBetter(program, m, mean(incumbentValues));

      if (inReserve) {
        // The answer first: the incumbent is re-measured to finalTrials before anything else.
        if (canRemeasure && bestValues.length < o.finalTrials) {
          return incumbentMore("the answer is re-measured in the reserve");
        }
        if (!better || pBetter < o.reserveStop) {
          return discard(`not better than the re-measured answer after ${values.length} trial(s)`);
        }
        const target = Math.min(Math.max(incumbentValues.length, 1), o.finalTrials);
        if (values.length < target) {
          return {
            action: "more",
            reason: `looks better in the reserve: ${c}; measured to ${target} trials like the incumbent before it can replace the answer; ${budgetNote}`,
          };
        }
        return keep(`better after as many trials as the answer (${values.length})`);
      }
      // Exploring: one trial, one more only when the decision is close.
      const close = o.closeZ > 0 && sd > 0 && Math.abs(gain) < o.closeZ * sd;
      if (close && values.length < 2) {
        if (canRemeasure && bestValues.length < 2) return incumbentMore("a close call");
        return { action: "more", reason: `a close call: ${c}; one more trial; ${budgetNote}` };
      }
      return better
        ? keep(o.shrinkage ? "the better posterior mean" : "better than the incumbent's mean")
        : discard(
            o.shrinkage ? "the incumbent's posterior mean is better" : "the incumbent's mean is better",
          );
    },
  };
}
