/**
 * The default acceptance rule: keep a candidate only when its improvement over the best is
 * credible against the run's measured noise, spending extra trials only where they matter.
 *
 * Noise: σ is the pooled standard deviation of every group of repeated trials the judge can
 * see — the baseline's repeats (different seeds), the best's repeats and the candidate's own —
 * never smaller than a floor (NoiseJudgeOptions.relativeSigmaFloor). Each group is pooled
 * around its own mean, so a change that moves the mean does not inflate σ.
 *
 * After each of the candidate's trials, z = (reference − candidate's mean), signed so that
 * positive is better, in standard errors of that difference σ·sqrt(1/n_cand + 1/n_best). The
 * reference is the best's mean of trials made `referenceShrink` of its standard errors worse
 * (a kept best looked good partly by luck; the baseline's mean is used as it is).
 *
 * Pairs: the loop gives trial k of every experiment the same seed, and part of a real run's
 * noise is tied to the seed (data order, init). When the best's trials come with their seeds
 * (JudgeInput.best.trials) and at least two of the candidate's trials share a seed with one of
 * the best's, the difference is estimated so that the shared part cancels: the paired
 * difference (candidate − best on the same seeds), moved toward the plain difference of means
 * by the side's unpaired trials in proportion to the unshared share of the noise. Its variance
 * uses Var(d) of a paired difference, measured from the pairs and pooled with the no-sharing
 * value 2σ² (`pairPrior` degrees of freedom, which only errs toward caution); the keep
 * threshold is the Student-t quantile at the Welch–Satterthwaite degrees of freedom, and the
 * confirmation threshold the t quantile of confirmZ's one-sided probability at them. Without
 * seeds, or with fewer than two pairs, the rule is the unpaired one above, unchanged.
 * Two stages:
 *
 * Test (up to testTrials):
 *   - a failed trial (crash, timeout, tampered, violated constraint) decides at once, as greedy;
 *   - first trial and z ≤ −lossZ: a clear loss, discarded without another trial;
 *   - from the second trial on, z ≤ futilityZ: discarded (not better);
 *   - at least minKeepTrials trials and z ≥ the keep threshold (the Student-t quantile 1 − alpha
 *     at the pooled degrees of freedom, never below keepZ): passed, on to confirmation;
 *   - otherwise another trial; at testTrials, discarded as "not credibly better".
 * Confirmation (a candidate that passed, up to confirmTrials): more trials, discarded as soon as
 * z ≤ futilityZ; at confirmTrials kept when z ≥ confirmZ, reporting the mean pulled back toward
 * the best by `shrink` standard errors (the noise-corrected value; when paired, standard errors
 * of the unshared noise Var(d)/2 as the pairs measure it, since a test on paired differences
 * selects on that part only). Confirming costs a few
 * trials per keep, and buys a best measured on confirmTrials trials: the next candidates are
 * compared with a better-known, less lucky mean, which is what lets the rule accept smaller
 * real gains without keeping more truly worse changes. The judge is stateless: whether the
 * candidate passed is recomputed from its earlier trials.
 * "margin 2.5σ" in reasons is z. The defaults are the ones bench/noise.ts measured; the
 * trade-off behind them is in docs/trust.md.
 */
import { formatMetric, formatMetricTo, formatShare } from "../core/format.ts";
import type { Judge, JudgeInput, MoreTrials } from "../core/judge.ts";
import type { Decision, TrialResult } from "../core/types.ts";
import { firstFailure, withoutLaterPrunes } from "./greedy-judge.ts";
import { fitNoise, type NoiseModel, type NoiseSource, sigmaOf } from "./noise-model.ts";
import { mean, normalCdf, pooledSd, satterthwaiteDf, sumSquares, tQuantile } from "./stats.ts";

/** The candidate's key in the run's noise model (experiment numbers are never negative). */
const CANDIDATE = -1;

export interface NoiseJudgeOptions {
  /** Baseline trials with different seeds before any candidate: the first noise sample. Default 3. */
  baselineTrials?: number;
  /**
   * Most trials a candidate gets to pass the keep test; one that has not passed by then is
   * discarded as not credibly better. Default 10 (4 before the run-wide noise model, 6 until the cases of #20 were halved: docs/noise.md).
   */
  testTrials?: number;
  /**
   * Trials a keep rests on: a candidate that passed the keep test runs on to this many trials
   * (confirmation) and is kept if z is still at least confirmZ. The judge's maxTrials is the
   * larger of testTrials and confirmTrials. Default 8 (6 before #20's cases); a value ≤ minKeepTrials keeps at once
   * on passing (the rule before confirmation, which measured 0.07σ–0.45σ worse true value than
   * greedy in bench/noise.ts).
   */
  confirmTrials?: number;
  /** z a confirmed candidate needs at confirmTrials to be kept. Default 1.4 (1.2 before the run-wide noise model, whose longer tests let more near-ties reach confirmation). */
  confirmZ?: number;
  /**
   * Pulls the best's mean of trials back by this many of its standard errors before comparing
   * (it was kept because it looked good, so it is optimistic); not applied to the baseline.
   * Default 0.5 (0.3 until the longer test of #20; with it, 0.5 keeps fewer truly worse changes at equal power).
   */
  referenceShrink?: number;
  /** Fewest trials a keep rests on (one lucky trial is what greedy keeps). Default 2. */
  minKeepTrials?: number;
  /**
   * One-sided false-keep probability per test against a candidate exactly as good as the best.
   * The keep threshold is the Student-t quantile 1 − alpha at the pooled degrees of freedom
   * (few repeats → a wider threshold, since σ itself is uncertain), and never below keepZ.
   * Default 0.1: confirmation (confirmZ) is the second filter; see docs/trust.md for the sweep.
   */
  alpha?: number;
  /** Smallest keep threshold in standard errors, whatever the degrees of freedom. Default 1.28. */
  keepZ?: number;
  /** A first trial worse than the reference by this many standard errors is discarded at once. Default 0.5 (0.25 before #20's cases: a real improvement's first draw is often low). */
  lossZ?: number;
  /**
   * From the second trial on (and throughout confirmation), a z at or below this discards: the
   * candidate is not better by enough to be worth more trials. Default −0.25: only a candidate that looks worse stops early (0.5 before the run-wide noise model, 0.25 before #20's cases).
   */
  futilityZ?: number;
  /**
   * Absolute floor for σ, in metric units. Default 0. The effective floor is the larger of this
   * and relativeSigmaFloor·|best|.
   */
  sigmaFloor?: number;
  /**
   * Floor for σ relative to the best's value. Identical repeats (a deterministic program, or a
   * metric printed with few digits) estimate σ = 0, which would make any difference, down to
   * floating-point dust, "significant"; the floor makes differences below about
   * keepZ·floor ties instead. Default 1e-6 — the 6 significant digits metrics are shown with.
   * Raise it (or set sigmaFloor) when the metric is printed with fewer digits.
   */
  relativeSigmaFloor?: number;
  /**
   * How far the reported metric of a kept candidate is pulled back toward the best, in standard
   * errors of the candidate's mean: reported = mean − shrink·SE (for minimize, + for maximize),
   * never past the best's reported value. A candidate is kept because its trials looked good, so
   * its plain mean overstates it (the winner's curse). Default 1.5: in bench/noise.ts the final
   * best's reported-minus-true gap is then 1–13% of greedy's (0.5 left 20–36%).
   */
  shrink?: number;
  /**
   * Compare seed-matched trials of the candidate and the best as pairs (the loop gives trial k
   * of every experiment the same seed) when the best's trials come with their seeds
   * (JudgeInput.best.trials). Default true; false: always the unpaired test.
   */
  paired?: boolean;
  /**
   * Weight, in degrees of freedom, of the no-sharing assumption (variance of a paired difference
   * = 2σ²) pooled with the variance the pairs measure. A handful of pairs measures that variance
   * badly; the prior keeps one or two lucky pairs from making a difference look certain, and
   * only errs toward caution (seed-shared noise makes the true variance smaller than 2σ²).
   * Default 2.
   */
  pairPrior?: number;
  /**
   * Where σ comes from. "run" (default): every repeated configuration of the run
   * (JudgeInput.run), refitted after every trial (src/trust/noise-model.ts), each configuration
   * judged with its own σ where its noise is clearly larger, exact comparisons when the objective
   * is deterministic. "judged": the baseline's, the best's and the candidate's repeats only (the
   * rule before the run-wide model; kept for the comparison in bench/noise.ts).
   */
  pooling?: "run" | "judged";
  /**
   * Give the incumbent a paired trial (its next seed) whenever the challenger is about to have
   * more trials than it: a lucky incumbent loses its lead as evidence arrives. Default true with
   * pooling "run".
   */
  remeasure?: boolean;
  /**
   * How many trials the incumbent gets per trial of the challenger (rounded up, at most
   * `incumbentMaxTrials`): it is compared with every challenger, so a trial of it serves all of
   * them (the √k rule for comparisons with one control). Default 2 (3 before #20's cases; measured in bench/noise.ts: docs/noise.md).
   */
  remeasureRatio?: number;
  /** Most trials the incumbent is re-measured to. Default 10. */
  incumbentMaxTrials?: number;
  /**
   * `remeasureRatio` while exploring (budget-aware runs, outside the reserve): the incumbent gets
   * as many trials as its challenger, not twice as many, so the budget goes to new
   * configurations. Default 1 (tuned with promoteZ on bench/_functions.ts: docs/noise.md).
   */
  exploreRemeasureRatio?: number;
  /**
   * Budget-aware exploration (JudgeInput.budget): while more than this share of the budget is
   * left, a candidate whose first trial is not at least `promoteZ` standard errors better than
   * the best is discarded after that one trial, so the budget goes to new configurations rather
   * than to re-testing middling ones; in the reserve at the end, the full test. Default 0.2.
   */
  exploreReserve?: number;
  /**
   * z a first trial needs, while exploring, to earn more trials. Default 2 (tuned on
   * bench/_functions.ts with the GP sampler, docs/noise.md: 1.5 with the incumbent re-measured
   * twice as often explored too few configurations in six dimensions; 2.5 and 3 were no better).
   */
  promoteZ?: number;
  /**
   * While exploring, a candidate whose margin reaches this many standard errors after at least
   * minKeepTrials trials is kept at once, without the rest of its confirmation: a large
   * improvement is not in doubt, and confirming it costs trials exploration needs. Default 3.
   * (Giving the incumbent only as many trials as its challenger while exploring was measured
   * too: more configurations, but 4–8% of keeps truly worse; not done.)
   */
  clearZ?: number;
  /** A prior for σ (as if `df` degrees of freedom of repeats had measured `sigma`). Default none. */
  noisePrior?: { sigma: number; df: number };
  /**
   * The baseline counts as too noisy when the smallest improvement the rule could ever accept
   * (at testTrials) exceeds this fraction of |best|. Default 0.1 (10%).
   */
  tooNoisyRelative?: number;
}

const DEFAULTS = {
  baselineTrials: 3,
  testTrials: 10,
  confirmTrials: 8,
  confirmZ: 1.4,
  minKeepTrials: 2,
  referenceShrink: 0.5,
  alpha: 0.1,
  keepZ: 1.28,
  lossZ: 0.5,
  futilityZ: -0.25,
  sigmaFloor: 0,
  relativeSigmaFloor: 1e-6,
  shrink: 1.5,
  tooNoisyRelative: 0.1,
  paired: true,
  pairPrior: 2,
  pooling: "run",
  remeasure: true,
  remeasureRatio: 2,
  incumbentMaxTrials: 10,
  exploreRemeasureRatio: 1,
  exploreReserve: 0.2,
  promoteZ: 2,
  clearZ: 3,
} satisfies Omit<Required<NoiseJudgeOptions>, "noisePrior">;

export type ResolvedNoiseJudgeOptions = Omit<Required<NoiseJudgeOptions>, "noisePrior"> &
  Pick<NoiseJudgeOptions, "noisePrior">;

export interface NoiseEstimate {
  /** σ used for decisions: max(measured, floor), or the floor alone when nothing was repeated. */
  sigma: number;
  /** Pooled standard deviation of the repeated trials; NaN when no group has two values. */
  measured: number;
  /** Degrees of freedom of `measured` (Σ (n_i − 1)); 0 when nothing was repeated. */
  df: number;
  floor: number;
  /** True when the floor, not the measurement, set σ. */
  floored: boolean;
}

export interface NoiseReport extends NoiseEstimate {
  /** Smallest improvement over the best that could pass the keep test, with testTrials candidate trials. */
  minDetectable: number;
  /** minDetectable as a fraction of |best|. */
  minDetectableRelative: number;
  /** The rule can practically never accept anything: explain it in status. */
  tooNoisy: boolean;
  /** One line for status: what the noise is and what it means for acceptance. */
  reason: string;
  /** Where σ came from (see NoiseSource). */
  source: NoiseSource;
  /** The σ and where it came from, in one clause. */
  explain: string;
}

/**
 * Pooled noise of groups of repeated trials, floored relative to `reference` (the best's
 * value). Pass the baseline's values once: when the best is the baseline, not twice.
 */
export function estimateNoise(
  groups: readonly (readonly number[])[],
  reference: number,
  options: NoiseJudgeOptions = {},
): NoiseEstimate {
  const o = { ...DEFAULTS, ...options };
  const finite = groups.map((g) => g.filter(Number.isFinite));
  const { sd, df } = pooledSd(finite);
  const floor = Math.max(
    o.sigmaFloor,
    o.relativeSigmaFloor * Math.abs(Number.isFinite(reference) ? reference : 0),
  );
  const measured = df > 0 ? sd : Number.NaN;
  const sigma = Number.isFinite(measured) ? Math.max(measured, floor) : floor;
  return { sigma, measured, df, floor, floored: !(Number.isFinite(measured) && measured >= floor) };
}

/** The keep threshold in standard errors at df degrees of freedom (df 0: the normal). */
export function keepThreshold(df: number, options: NoiseJudgeOptions = {}): number {
  const o = { ...DEFAULTS, ...options };
  const q = tQuantile(1 - o.alpha, df > 0 ? df : Number.POSITIVE_INFINITY);
  return Math.max(o.keepZ, q);
}

/**
 * The z a confirmed candidate needs: confirmZ, or, when the variance rests on few degrees of
 * freedom (paired differences), the Student-t quantile of the same one-sided probability.
 */
export function confirmThreshold(df: number, options: NoiseJudgeOptions = {}): number {
  const o = { ...DEFAULTS, ...options };
  if (!(df > 0)) return o.confirmZ;
  return Math.max(o.confirmZ, tQuantile(normalCdf(o.confirmZ), df));
}

/**
 * The candidate's and the best's values of the trials that share a seed, in the candidate's
 * order: each ok trial of the candidate with the best's first ok trial of the same seed, each
 * seed once. Empty without the best's trials.
 */
export function seedPairs(
  candidate: readonly TrialResult[],
  best: readonly TrialResult[] | undefined,
  metric: string,
): { candidate: number[]; best: number[] } {
  const out = { candidate: [] as number[], best: [] as number[] };
  if (!best?.length) return out;
  const value = (t: TrialResult): number | undefined => {
    const v = t.metrics[metric];
    return t.status === "ok" && typeof v === "number" && Number.isFinite(v) ? v : undefined;
  };
  const bySeed = new Map<number, number>();
  for (const t of best) {
    const v = value(t);
    if (v !== undefined && !bySeed.has(t.seed)) bySeed.set(t.seed, v);
  }
  for (const t of candidate) {
    const v = value(t);
    const b = bySeed.get(t.seed);
    if (v === undefined || b === undefined) continue;
    bySeed.delete(t.seed);
    out.candidate.push(v);
    out.best.push(b);
  }
  return out;
}

/**
 * The noise of a run as status shows it: σ, where it came from, and the smallest improvement
 * the rule can accept. Pure: from the baseline's values and (optionally) the best's.
 */
export function describeNoise(
  input: {
    metricName: string;
    baseline: readonly number[];
    best?: { n: number; metric: number; values: readonly number[] };
    /** Every configuration of the run (see JudgeInput.run): pooled with pooling "run". */
    run?: readonly { n: number; values: readonly number[] }[];
  },
  options: NoiseJudgeOptions = {},
): NoiseReport {
  const o = { ...DEFAULTS, ...options };
  const baseline = input.baseline.filter(Number.isFinite);
  const bestValues = input.best && input.best.n !== 0 ? input.best.values.filter(Number.isFinite) : [];
  const reference = input.best?.metric ?? mean(baseline);
  const nBest = input.best
    ? Math.max(1, input.best.n === 0 ? baseline.length : bestValues.length)
    : baseline.length;
  const name = input.metricName;
  let est: NoiseEstimate;
  let source: string;
  let model: NoiseModel | undefined;
  if (o.pooling === "run") {
    model = fitRun(
      o,
      input.run,
      baseline,
      input.best ? { n: input.best.n, values: bestValues } : undefined,
      reference,
    );
    const known = model.source !== "unknown" && model.source !== "deterministic";
    est = {
      sigma: known ? model.sigma : model.floor,
      measured: model.measured,
      df: model.df,
      floor: model.floor,
      floored: !known || model.source === "floor",
    };
    source = model.explain;
  } else {
    est = estimateNoise([baseline, bestValues], reference, o);
    source =
      est.df === 0
        ? `no repeated trials yet; σ is the floor ${formatMetric(est.floor)}`
        : est.floored
          ? `the repeats were ${est.measured === 0 ? "identical" : "nearly identical"} (σ ${formatMetric(est.measured)}); σ is the floor ${formatMetric(est.floor)}`
          : `σ ${formatMetric(est.sigma)} from repeated trials (${est.df} degrees of freedom)`;
  }
  // At testTrials the candidate's own repeats add testTrials − 1 degrees of freedom.
  const threshold = keepThreshold(est.df + o.testTrials - 1, o);
  // The best is compared with its own σ where its noise is clearly larger than the pool's.
  const own = model ? sigmaOf(model, input.best?.n ?? 0) : undefined;
  const bestSigma = own?.exact ? 0 : Math.max(est.sigma, own?.sigma || 0);
  const minDetectable =
    model?.source === "deterministic"
      ? model.floor
      : threshold * Math.sqrt(est.sigma ** 2 / o.testTrials + bestSigma ** 2 / Math.max(1, nBest));
  const rel = Math.abs(reference) > 0 ? minDetectable / Math.abs(reference) : Number.POSITIVE_INFINITY;
  const tooNoisy = !(est.sigma > 0) || model?.source === "deterministic" ? false : rel > o.tooNoisyRelative;
  const accept =
    model?.source === "unknown"
      ? "candidates get a second trial to measure it"
      : `the smallest improvement the rule can accept is ${formatMetricTo(minDetectable, 3)} (${formatShare(rel)} of ${formatMetric(reference)})${model?.source === "deterministic" ? "" : ` with ${o.testTrials} trials`}`;
  const reason = tooNoisy
    ? `too noisy: ${name} — ${source}; ${accept} — practically nothing can be kept. Reduce the noise (a longer budget, a larger evaluation set, a fixed data order) or allow more trials per candidate`
    : `noise: ${name} — ${source}; ${accept}`;
  return {
    ...est,
    minDetectable,
    minDetectableRelative: rel,
    tooNoisy,
    reason,
    source: model?.source ?? (est.df === 0 ? "unknown" : est.floored ? "floor" : "pooled"),
    explain: source,
  };
}

/**
 * The run's noise model as the judge and status see it: every configuration of the run, the
 * baseline, the best (its own values, when it is not the baseline) and, while it is judged, the
 * candidate's values so far.
 */
function fitRun(
  o: ResolvedNoiseJudgeOptions,
  run: readonly { n: number; values: readonly number[] }[] | undefined,
  baseline: readonly number[],
  best: { n: number; values: readonly number[] } | undefined,
  reference: number,
  candidate?: readonly number[],
): NoiseModel {
  return fitNoise(
    [
      ...(run ?? []),
      { n: 0, values: baseline },
      ...(best && best.n !== 0 ? [best] : []),
      ...(candidate ? [{ n: CANDIDATE, values: candidate }] : []),
    ],
    reference,
    {
      sigmaFloor: o.sigmaFloor,
      relativeSigmaFloor: o.relativeSigmaFloor,
      ...(o.noisePrior ? { prior: o.noisePrior } : {}),
    },
  );
}

/**
 * Said once in the notebook when the model first finds the objective deterministic: the same
 * text every time (the loop compares it with the notes already written).
 */
const DETERMINISTIC_NOTICE =
  "noise: deterministic — repeats of two or more configurations were identical, so values are compared exactly; differences below 1e-6 of the best are ties";

/** "2.81 ± 0.02 (3 trials)": a mean and its standard error (2 significant digits). */
function meanText(m: number, se: number, n: number): string {
  const seText = Number.isFinite(se) && se > 0 ? Number(se.toPrecision(2)).toString() : formatMetric(se);
  return `${formatMetric(m)} ± ${seText} (${n} trial${n === 1 ? "" : "s"})`;
}

/** The noise-aware judge (see the file comment for the rule). */
export function createNoiseJudge(
  options: NoiseJudgeOptions = {},
): Judge & { options: ResolvedNoiseJudgeOptions } {
  const o: ResolvedNoiseJudgeOptions = { ...DEFAULTS, ...options };
  if (!(o.testTrials >= 1 && o.confirmTrials >= 1 && o.baselineTrials >= 1 && o.minKeepTrials >= 1)) {
    throw new RangeError(
      "noise judge: testTrials, confirmTrials, baselineTrials and minKeepTrials must be at least 1",
    );
  }
  const maxTrials = Math.max(o.testTrials, o.confirmTrials);
  const minKeep = Math.min(o.minKeepTrials, o.testTrials);
  return {
    name: "noise",
    baselineTrials: o.baselineTrials,
    maxTrials,
    options: o,
    decide(given: JudgeInput): Decision | MoreTrials {
      const input = { ...given, trials: withoutLaterPrunes(given.trials) };
      const { program, trials, best } = input;
      if (trials.length === 0)
        return { action: "crash", reason: "no trial finished", mechanismConfirmed: null };
      const bad = firstFailure(program, trials);
      if (bad) return bad;

      const name = program.objective.metric;
      const sign = program.objective.direction === "minimize" ? 1 : -1;
      const all = trials.map((t) => t.metrics[name] as number);
      const baseline = input.baseline.filter(Number.isFinite);
      const bestValues = best.values.filter(Number.isFinite);
      // The best is compared through the mean of its own trials (for the baseline: the baseline's
      // mean); a best recorded without trial values falls back to its metric, as one trial.
      const nBest = Math.max(1, bestValues.length);
      const raw = bestValues.length > 0 ? mean(bestValues) : best.metric;
      const bestTrials = o.paired && bestValues.length > 0 ? best.trials : undefined;
      /**
       * The noise after the candidate's first n values: the run-wide model (pooling "run"), or
       * the baseline's, the best's and the candidate's repeats alone ("judged"). Fitted once
       * per n (the current n is needed both by the test and by the re-measurement choice).
       */
      const fits = new Map<number, ReturnType<typeof fitAfter>>();
      const noiseAfter = (n: number) => {
        const known = fits.get(n);
        if (known) return known;
        const f = fitAfter(all.slice(0, n));
        fits.set(n, f);
        return f;
      };
      const fitAfter = (values: number[]) => {
        if (o.pooling === "judged") {
          const noise = estimateNoise([baseline, best.n === 0 ? [] : bestValues, values], raw, o);
          const side = { sigma: noise.sigma, df: noise.df, own: false, exact: false };
          return { noise, model: undefined, cand: side, best: side };
        }
        const model = fitRun(o, input.run, baseline, { n: best.n, values: bestValues }, raw, values);
        const noise: NoiseEstimate = {
          sigma: model.sigma,
          measured: model.measured,
          df: model.df,
          floor: model.floor,
          floored: model.source === "floor",
        };
        // The scale hook (issue #38): on the log scale each side's σ is a share of its own value.
        return {
          noise,
          model,
          cand: sigmaOf(model, CANDIDATE, values.length ? mean(values) : raw),
          best: sigmaOf(model, best.n, raw),
        };
      };
      /** The test on the candidate's first n trials (what the judge saw after trial n). */
      const assess = (n: number) => {
        const values = all.slice(0, n);
        const fitted = noiseAfter(n);
        const { noise, model } = fitted;
        // σ of each side: the pooled one, or its own where its noise is clearly larger.
        const sc = fitted.cand.sigma;
        const sb = fitted.best.sigma;
        const seBest = sb / Math.sqrt(nBest);
        const ref = best.n === 0 ? raw : raw + sign * o.referenceShrink * seBest;
        const s2 = (sc * sc + sb * sb) / 2;
        // Seed-matched pairs: the shared part of their noise cancels in the difference.
        // (Against an exact best there is no noise of its to cancel: unpaired.)
        const pairs = seedPairs(trials.slice(0, n), fitted.best.exact ? undefined : bestTrials, name);
        const p = Math.min(pairs.candidate.length, n, nBest);
        const m = mean(values);
        // Positive: the candidate is better.
        let improvement = sign * (ref - m);
        let varDiff = (sc * sc) / n + (sb * sb) / nBest;
        let df =
          fitted.cand.own || fitted.best.own
            ? satterthwaiteDf([
                [(sc * sc) / n, fitted.cand.df],
                [(sb * sb) / nBest, fitted.best.df],
              ])
            : noise.df;
        let ownPairVar = 2 * s2;
        if (p >= 2) {
          const d = pairs.candidate.slice(0, p).map((x, i) => x - (pairs.best[i] as number));
          const ss = sumSquares(d);
          ownPairVar = ss / (p - 1);
          // Var(d) of a paired difference: the pairs' own estimate pooled with the no-sharing
          // value 2σ² (pairPrior degrees of freedom), never below the floor's.
          const prior = Math.min(o.pairPrior, noise.df);
          const pairDf = p - 1 + prior;
          const pairVar = Math.max((ss + prior * 2 * s2) / pairDf, 2 * noise.floor ** 2);
          const extraCand = n - p;
          const extraBest = nBest - p;
          const sum = (xs: readonly number[]) => xs.reduce((acc, x) => acc + x, 0);
          const pc = mean(pairs.candidate.slice(0, p));
          const pb = mean(pairs.best.slice(0, p));
          let diff: number; // candidate − best, the shared seed noise cancelled as far as it can be
          let aS: number; // coefficient of σ² in the variance of diff
          let bD: number; // coefficient of Var(d)
          if (extraCand > 0 && extraBest > 0) {
            // Both sides have unpaired trials (seeds that do not line up): plain means, whose
            // variance is σ²·(1/n + 1/n_best) − 2p·σ_s²/(n·n_best) with σ_s² = σ² − Var(d)/2.
            diff = m - raw;
            aS = 1 / n + 1 / nBest - (2 * p) / (n * nBest);
            bD = p / (n * nBest);
          } else {
            // One side has `extra` unpaired trials. The estimate is the paired difference
            // moved by λ·(paired mean − unpaired mean) of that side; λ = extra/(p + extra) is
            // the plain mean (best without shared noise), λ = 0 the pairs alone (best when all
            // noise is shared): λ = ρ·extra/(p + extra), ρ the unshared share Var(d)/(2σ²).
            const extra = Math.max(extraCand, extraBest);
            const rho = Math.min(1, pairVar / (2 * s2));
            const lambda = extra > 0 ? (rho * extra) / (p + extra) : 0;
            const extraMean =
              extraCand > 0
                ? (sum(values) - sum(pairs.candidate.slice(0, p))) / extraCand
                : extraBest > 0
                  ? (sum(bestValues) - sum(pairs.best.slice(0, p))) / extraBest
                  : 0;
            diff =
              extraCand > 0
                ? (1 - lambda) * pc + lambda * extraMean - pb
                : pc - ((1 - lambda) * pb + lambda * extraMean);
            aS = extra > 0 ? lambda * lambda * (1 / p + 1 / extra) : 0;
            bD = (1 - lambda) / p;
          }
          improvement = sign * (ref - raw - diff);
          varDiff = aS * s2 + bD * pairVar;
          df = satterthwaiteDf([
            [aS * s2, noise.df],
            [bD * pairVar, pairDf],
          ]);
        }
        // Two exact values differ by their difference alone: below the floor it is a tie.
        const seDiff = Math.sqrt(Math.max(varDiff, noise.floor ** 2 / Math.max(n, nBest)));
        const z = seDiff > 0 ? improvement / seDiff : Math.sign(improvement) * Number.POSITIVE_INFINITY;
        return {
          n,
          m,
          ref,
          z,
          noise,
          pairs: p,
          df,
          seBest,
          model,
          seCand: sc / Math.sqrt(n),
          // The winner's curse of a paired test is in the unshared noise only (selection on the
          // difference cannot pick the shared part): pull back by its standard error.
          seShrink:
            p >= 2
              ? Math.sqrt(Math.max(Math.min(ownPairVar / 2, s2), noise.floor ** 2) / n)
              : sc / Math.sqrt(n),
          threshold: keepThreshold(df, o),
          paired: p >= 2,
          confirmAt: p >= 2 ? confirmThreshold(df, o) : o.confirmZ,
          // "Clear" means clearZ's one-sided probability at the difference's degrees of freedom:
          // a margin of 3 on a variance measured by two or three pairs is not clear (a t of 3 on
          // 2 degrees of freedom happens one time in twenty).
          clearAt: df > 0 ? Math.max(o.clearZ, tQuantile(normalCdf(o.clearZ), df)) : Number.POSITIVE_INFINITY,
        };
      };
      const passes = (a: ReturnType<typeof assess>) =>
        a.n >= minKeep && a.noise.df > 0 && a.noise.sigma > 0 && a.z >= a.threshold;
      const n = all.length;
      const m = mean(all);
      // The share of the budget left (JudgeInput.budget); exploring while it exceeds the reserve.
      const left =
        input.budget && input.budget.total > 0 ? input.budget.left / input.budget.total : undefined;
      const exploring = left !== undefined && left > o.exploreReserve;
      /** Another trial of the challenger; first one of the incumbent when it would fall behind. */
      const incumbentTarget = Math.min(
        Math.max(n + 1, Math.ceil((exploring ? o.exploreRemeasureRatio : o.remeasureRatio) * (n + 1))),
        Math.max(o.incumbentMaxTrials, n + 1),
      );
      // An incumbent whose value is exact (identical repeats while others vary) gains nothing.
      const now = noiseAfter(all.length);
      const bestExact = now.best.exact;
      /** `fresh`: a confirmation trial, on a seed no trial of the run has used (MoreTrials.fresh). */
      const more = (reason: string, fresh = false): MoreTrials => ({
        ...moreOf(reason),
        ...(fresh ? { fresh: true } : {}),
      });
      const moreOf = (reason: string): MoreTrials =>
        o.pooling === "run" &&
        o.remeasure &&
        !bestExact &&
        bestValues.length > 0 &&
        bestValues.length < incumbentTarget
          ? {
              action: "more",
              incumbent: true,
              reason: `${reason}; first the incumbent #${best.n} runs its trial ${bestValues.length + 1} (the incumbent is evidence too: it is measured at least as often as its challenger)`,
            }
          : { action: "more", reason };
      const discard = (reason: string): Decision => ({
        action: "discard",
        reason,
        metric: m,
        mechanismConfirmed: false,
      });
      if (now.model?.source === "deterministic") {
        // Exact values: repeats of two or more configurations were identical.
        const cmp = `${name} ${formatMetric(m)} vs best ${formatMetric(raw)} (#${best.n})`;
        if (sign * (raw - m) > now.model.floor) {
          return {
            action: "keep",
            reason: `improved: ${cmp}; ${now.model.explain}`,
            metric: m,
            mechanismConfirmed: true,
            notice: DETERMINISTIC_NOTICE,
          };
        }
        return { ...discard(`not better: ${cmp}; ${now.model.explain}`), notice: DETERMINISTIC_NOTICE };
      }
      if (now.model?.source === "unknown") {
        const cmp = `${name} ${meanText(m, Number.NaN, n)} vs best ${formatMetric(raw)} (#${best.n})`;
        if (n < maxTrials) {
          return more(
            `no noise estimate yet (${now.model.explain}): ${cmp}; running trial ${n + 1} of up to ${maxTrials}`,
          );
        }
        return discard(`not credibly better: ${cmp}; ${now.model.explain} after ${n} trials`);
      }
      // Did an earlier trial pass the keep test? Then this is confirmation.
      let passedAt = 0;
      for (let k = minKeep; k < n && k <= o.testTrials && !passedAt; k++) {
        if (passes(assess(k))) passedAt = k;
      }
      const a = assess(n);
      const { ref, z, noise, threshold } = a;
      const floorNote =
        !a.model && noise.floored && noise.df > 0
          ? ` (repeats ${noise.measured === 0 ? "identical" : "nearly identical"}: σ is the floor)`
          : "";
      // Every σ is explained: where it came from, in the reason the notebook keeps.
      const sigmaNote = a.model ? `; ${a.model.explain}` : "";
      const cmp = `${name} ${meanText(m, a.seCand, n)} vs best ${meanText(ref, a.seBest, nBest).replace(")", `, #${best.n})`)}`;
      const margin = `margin ${fmtZ(z)}σ${a.paired ? ` (paired on ${a.pairs} seeds)` : ""}${floorNote}`;
      const keep = (why: string): Decision => {
        // Noise-corrected value: the mean pulled back toward the best by `shrink` standard
        // errors (the winner's curse), never past the best's reported value.
        const pulled = m + sign * o.shrink * a.seShrink;
        const metric = sign > 0 ? Math.min(pulled, best.metric) : Math.max(pulled, best.metric);
        return {
          action: "keep",
          reason: `improved: ${cmp}; ${why}; reported ${formatMetric(metric)} (noise-corrected)${sigmaNote}`,
          metric,
          mechanismConfirmed: true,
        };
      };

      if (exploring && n >= minKeep && noise.df > 0 && z >= Math.max(a.clearAt, threshold, a.confirmAt)) {
        return keep(
          `${margin} ≥ ${fmtZ(a.clearAt)}σ after ${n} trials: a clear improvement, kept without further confirmation`,
        );
      }
      if (passedAt) {
        if (z <= o.futilityZ) {
          return discard(
            `not confirmed: ${cmp}; ${margin} after ${n} trials (passed the keep test at trial ${passedAt})${sigmaNote}`,
          );
        }
        if (n >= o.confirmTrials) {
          return z >= a.confirmAt
            ? keep(
                `${margin} ≥ ${fmtZ(a.confirmAt)}σ after ${n} trials (passed the keep test at trial ${passedAt})`,
              )
            : discard(
                `not confirmed: ${cmp}; ${margin} < ${fmtZ(a.confirmAt)}σ after ${n} trials (passed the keep test at trial ${passedAt})${sigmaNote}`,
              );
        }
        return more(
          `confirming: ${cmp}; ${margin} (passed the keep test at trial ${passedAt}); running trial ${n + 1} of ${o.confirmTrials}${sigmaNote}`,
          true,
        );
      }
      // Nothing repeated anywhere yet (a single baseline trial): σ would be the floor alone, so
      // repeat the candidate to measure the noise before judging it.
      if (noise.df === 0 && n < maxTrials) {
        return more(
          `no noise estimate yet (nothing was repeated): ${cmp}; running trial ${n + 1} of up to ${maxTrials}`,
        );
      }
      if (n === 1 && exploring && z < o.promoteZ && z > -o.lossZ) {
        return discard(
          `not promising: ${cmp}; ${margin} < ${fmtT(o.promoteZ)}σ after one trial, while exploring (${formatShare(left)} of the budget left: only a promising first trial earns more)${sigmaNote}`,
        );
      }
      if (n === 1 && z <= -o.lossZ) {
        return discard(
          `clear loss: ${cmp}; ${margin} (worse by more than ${o.lossZ}σ after one trial)${sigmaNote}`,
        );
      }
      if (passes(a)) {
        if (n >= o.confirmTrials) return keep(`${margin} ≥ ${fmtZ(threshold)}σ`);
        return more(
          `passed the keep test: ${cmp}; ${margin} ≥ ${fmtZ(threshold)}σ; confirming with trial ${n + 1} of ${o.confirmTrials}${sigmaNote}`,
          true,
        );
      }
      if (n >= o.testTrials || (n >= 2 && z <= o.futilityZ)) {
        const report = describeNoise(
          {
            metricName: name,
            baseline,
            best: { ...best, metric: ref },
            run: [...(input.run ?? []), { n: CANDIDATE, values: all }],
          },
          o,
        );
        const why = report.tooNoisy ? ` — ${report.reason}` : sigmaNote;
        if (n >= o.testTrials) {
          return discard(
            `not credibly better: ${cmp}; ${margin} < ${fmtZ(threshold)}σ after ${n} trials${why}`,
          );
        }
        return discard(`not better: ${cmp}; ${margin} ≤ ${fmtT(o.futilityZ)}σ after ${n} trials${why}`);
      }
      return more(
        `inside the noise band: ${cmp}; ${margin} (a keep needs ${fmtZ(threshold)}σ); running trial ${n + 1} of up to ${o.testTrials}${sigmaNote}`,
      );
    },
  };
}

/** A threshold as configured (−0.25 stays −0.25, not "-0.3"). */
function fmtT(t: number): string {
  return Number(t.toFixed(2)).toString();
}

function fmtZ(z: number): string {
  if (!Number.isFinite(z)) return z > 0 ? "∞" : "-∞";
  // A tiny negative rounds to "-0.0"; a margin that rounds to zero is shown as 0.0.
  const text = z.toFixed(1);
  return text === "-0.0" ? "0.0" : text;
}
