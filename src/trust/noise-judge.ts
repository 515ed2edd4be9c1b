/**
 * The default acceptance rule: keep a candidate only when its improvement over the best is
 * credible against the run's measured noise, spending extra trials only where they matter.
 *
 * Noise: σ is the pooled standard deviation of every group of repeated trials the judge can
 * see — the baseline's repeats (different seeds), the best's repeats and the candidate's own —
 * never smaller than a floor (NoiseJudgeOptions.relativeSigmaFloor). Each group is pooled
 * around its own mean, so a change that moves the mean does not inflate σ.
 *
 * After each of the candidate's trials, z = (best's mean of trials − candidate's mean), signed
 * so that positive is better, in standard errors of that difference σ·sqrt(1/n_cand + 1/n_best):
 *   - a failed trial (crash, timeout, tampered, violated constraint) decides at once, as greedy;
 *   - first trial and z ≤ −lossZ: a clear loss, discarded without another trial;
 *   - at least minKeepTrials trials and z ≥ the keep threshold (the Student-t quantile 1 − alpha
 *     at the pooled degrees of freedom, never below keepZ): kept, reporting the mean pulled back
 *     toward the best by `shrink` standard errors (the noise-corrected value);
 *   - from the second trial on, z ≤ futilityZ: discarded (not better at all);
 *   - otherwise another trial; at maxTrials, discarded as "not credibly better".
 * "margin 2.5σ" in reasons is z. The defaults are the ones bench/noise.ts measured; the
 * trade-off behind them is in docs/trust.md.
 */
import { formatMetric } from "../core/format.ts";
import type { Judge, JudgeInput, MoreTrials } from "../core/judge.ts";
import type { Decision, TrialResult } from "../core/types.ts";
import { decideConstraints, decideFailure } from "./greedy-judge.ts";
import { mean, pooledSd, tQuantile } from "./stats.ts";

export interface NoiseJudgeOptions {
  /** Baseline trials with different seeds before any candidate: the first noise sample. Default 3. */
  baselineTrials?: number;
  /** Most trials one candidate may get. Default 4. */
  maxTrials?: number;
  /**
   * Pulls the best's mean of trials back by this many of its standard errors before comparing
   * (it was kept because it looked good, so it is optimistic). Default 0: 0.5 buys some true
   * value in bench/noise.ts but lets truly worse keeps exceed 5% on Hartmann-3.
   */
  referenceShrink?: number;
  /** Fewest trials a keep rests on (one lucky trial is what greedy keeps). Default 2. */
  minKeepTrials?: number;
  /**
   * One-sided false-keep probability per test against a candidate exactly as good as the best.
   * The keep threshold is the Student-t quantile 1 − alpha at the pooled degrees of freedom
   * (few repeats → a wider threshold, since σ itself is uncertain), and never below keepZ.
   * Default 0.05: in bench/noise.ts, 0.025 gives up 0.2–0.3σ more true value for fewer truly
   * worse keeps, 0.1 lets the share of truly worse keeps reach 9% on Hartmann-3.
   */
  alpha?: number;
  /** Smallest keep threshold in standard errors, whatever the degrees of freedom. Default 1.645. */
  keepZ?: number;
  /**
   * A first trial worse than the best by this many standard errors is discarded at once.
   * Default 1 (0, 0.5, 1 and 1.5 measured within noise of each other; 1 is the cheapest safe one).
   */
  lossZ?: number;
  /** From the second trial on, a z at or below this discards (the mean is not better). Default 0. */
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
   * The baseline counts as too noisy when the smallest improvement the rule could ever accept
   * (at maxTrials) exceeds this fraction of |best|. Default 0.1 (10%).
   */
  tooNoisyRelative?: number;
}

const DEFAULTS = {
  baselineTrials: 3,
  maxTrials: 4,
  minKeepTrials: 2,
  referenceShrink: 0,
  alpha: 0.05,
  keepZ: 1.645,
  lossZ: 1,
  futilityZ: 0,
  sigmaFloor: 0,
  relativeSigmaFloor: 1e-6,
  shrink: 1.5,
  tooNoisyRelative: 0.1,
} satisfies Required<NoiseJudgeOptions>;

export type ResolvedNoiseJudgeOptions = Required<NoiseJudgeOptions>;

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
  /** Smallest improvement over the best that could be kept, with maxTrials candidate trials. */
  minDetectable: number;
  /** minDetectable as a fraction of |best|. */
  minDetectableRelative: number;
  /** The rule can practically never accept anything: explain it in status. */
  tooNoisy: boolean;
  /** One line for status: what the noise is and what it means for acceptance. */
  reason: string;
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
 * The noise of a run as status shows it: σ, where it came from, and the smallest improvement
 * the rule can accept. Pure: from the baseline's values and (optionally) the best's.
 */
export function describeNoise(
  input: {
    metricName: string;
    baseline: readonly number[];
    best?: { n: number; metric: number; values: readonly number[] };
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
  const est = estimateNoise([baseline, bestValues], reference, o);
  // At maxTrials the candidate's own repeats add maxTrials − 1 degrees of freedom.
  const threshold = keepThreshold(est.df + o.maxTrials - 1, o);
  const minDetectable = threshold * est.sigma * Math.sqrt(1 / o.maxTrials + 1 / Math.max(1, nBest));
  const rel = Math.abs(reference) > 0 ? minDetectable / Math.abs(reference) : Number.POSITIVE_INFINITY;
  const tooNoisy = !(est.sigma > 0) ? false : rel > o.tooNoisyRelative;
  const name = input.metricName;
  const source =
    est.df === 0
      ? `no repeated trials yet; σ is the floor ${formatMetric(est.floor)}`
      : est.floored
        ? `the repeats were ${est.measured === 0 ? "identical" : "nearly identical"} (σ ${formatMetric(est.measured)}); σ is the floor ${formatMetric(est.floor)}`
        : `σ ${formatMetric(est.sigma)} from repeated trials (${est.df} degrees of freedom)`;
  const accept = `the smallest improvement the rule can accept is ${formatMetric(Number(minDetectable.toPrecision(3)))} (${pct(rel)} of ${formatMetric(reference)}) with ${o.maxTrials} trials`;
  const reason = tooNoisy
    ? `too noisy: ${name} — ${source}; ${accept} — practically nothing can be kept. Reduce the noise (a longer budget, a larger evaluation set, a fixed data order) or allow more trials per candidate`
    : `noise: ${name} — ${source}; ${accept}`;
  return { ...est, minDetectable, minDetectableRelative: rel, tooNoisy, reason };
}

function pct(x: number): string {
  if (!Number.isFinite(x)) return "∞";
  const p = x * 100;
  return `${p >= 10 ? p.toFixed(0) : p >= 1 ? p.toFixed(1) : p.toPrecision(2)}%`;
}

/** "2.81 ± 0.02 (3 trials)": a mean and its standard error (2 significant digits). */
function meanText(m: number, se: number, n: number): string {
  const seText = Number.isFinite(se) && se > 0 ? Number(se.toPrecision(2)).toString() : formatMetric(se);
  return `${formatMetric(m)} ± ${seText} (${n} trial${n === 1 ? "" : "s"})`;
}

function failed(program: JudgeInput["program"], trials: TrialResult[]): Decision | undefined {
  for (let i = 0; i < trials.length; i++) {
    const t = trials[i] as TrialResult;
    const d = decideFailure(program, t) ?? decideConstraints(program, t);
    if (!d) continue;
    // Say which trial when it was not the first: a candidate that fails on some seeds is fragile.
    return trials.length > 1 ? { ...d, reason: `trial ${i + 1} of ${trials.length}: ${d.reason}` } : d;
  }
  return undefined;
}

/** The noise-aware judge (see the file comment for the rule). */
export function createNoiseJudge(
  options: NoiseJudgeOptions = {},
): Judge & { options: ResolvedNoiseJudgeOptions } {
  const o: ResolvedNoiseJudgeOptions = { ...DEFAULTS, ...options };
  if (!(o.maxTrials >= 1 && o.baselineTrials >= 1 && o.minKeepTrials >= 1)) {
    throw new RangeError("noise judge: maxTrials, baselineTrials and minKeepTrials must be at least 1");
  }
  const minKeep = Math.min(o.minKeepTrials, o.maxTrials);
  return {
    name: "noise",
    baselineTrials: o.baselineTrials,
    maxTrials: o.maxTrials,
    options: o,
    decide(input: JudgeInput): Decision | MoreTrials {
      const { program, trials, best } = input;
      if (trials.length === 0)
        return { action: "crash", reason: "no trial finished", mechanismConfirmed: null };
      const bad = failed(program, trials);
      if (bad) return bad;

      const name = program.objective.metric;
      const sign = program.objective.direction === "minimize" ? 1 : -1;
      const values = trials.map((t) => t.metrics[name] as number);
      const n = values.length;
      const m = mean(values);
      const baseline = input.baseline.filter(Number.isFinite);
      const bestValues = best.values.filter(Number.isFinite);
      // The best is compared through the mean of its own trials (for the baseline: the baseline's
      // mean); a best recorded without trial values falls back to its metric, as one trial.
      const nBest = Math.max(1, bestValues.length);
      const raw = bestValues.length > 0 ? mean(bestValues) : best.metric;
      const noise = estimateNoise([baseline, best.n === 0 ? [] : bestValues, values], raw, o);
      const ref = best.n === 0 ? raw : raw + sign * o.referenceShrink * (noise.sigma / Math.sqrt(nBest));
      const sigma = noise.sigma;
      const seDiff = sigma * Math.sqrt(1 / n + 1 / nBest);
      const seCand = sigma / Math.sqrt(n);
      const seBest = sigma / Math.sqrt(nBest);
      // Positive: the candidate is better.
      const improvement = sign * (ref - m);
      const z = seDiff > 0 ? improvement / seDiff : Math.sign(improvement) * Number.POSITIVE_INFINITY;
      const threshold = keepThreshold(noise.df, o);
      const floorNote =
        noise.floored && noise.df > 0
          ? ` (repeats ${noise.measured === 0 ? "identical" : "nearly identical"}: σ is the floor)`
          : "";
      const cmp = `${name} ${meanText(m, seCand, n)} vs best ${meanText(ref, seBest, nBest).replace(")", `, #${best.n})`)}`;
      const margin = `margin ${fmtZ(z)}σ${floorNote}`;

      // Nothing repeated anywhere yet (a single baseline trial): σ would be the floor alone, so
      // repeat the candidate to measure the noise before judging it.
      if (noise.df === 0 && n < o.maxTrials) {
        return {
          action: "more",
          reason: `no noise estimate yet (nothing was repeated): ${cmp}; running trial ${n + 1} of up to ${o.maxTrials}`,
        };
      }
      if (n === 1 && z <= -o.lossZ) {
        return {
          action: "discard",
          reason: `clear loss: ${cmp}; ${margin} (worse by more than ${o.lossZ}σ after one trial)`,
          metric: m,
          mechanismConfirmed: false,
        };
      }
      if (n >= minKeep && z >= threshold) {
        // Noise-corrected value: the mean pulled back toward the best by `shrink` standard
        // errors (the winner's curse), never past the best's reported value.
        const pulled = m + sign * o.shrink * seCand;
        const metric = sign > 0 ? Math.min(pulled, best.metric) : Math.max(pulled, best.metric);
        return {
          action: "keep",
          reason: `improved: ${cmp}; ${margin} ≥ ${fmtZ(threshold)}σ; reported ${formatMetric(metric)} (noise-corrected)`,
          metric,
          mechanismConfirmed: true,
        };
      }
      if (n >= o.maxTrials || (n >= 2 && z <= o.futilityZ)) {
        const report = describeNoise({ metricName: name, baseline, best: { ...best, metric: ref } }, o);
        const why = report.tooNoisy ? ` — ${report.reason}` : "";
        const head = n >= o.maxTrials ? "not credibly better" : "not better";
        const tail = n >= o.maxTrials ? ` < ${fmtZ(threshold)}σ after ${n} trials` : ` after ${n} trials`;
        return {
          action: "discard",
          reason: `${head}: ${cmp}; ${margin}${tail}${why}`,
          metric: m,
          mechanismConfirmed: false,
        };
      }
      return {
        action: "more",
        reason: `inside the noise band: ${cmp}; ${margin} (a keep needs ${fmtZ(threshold)}σ); running trial ${n + 1} of up to ${o.maxTrials}`,
      };
    },
  };
}

function fmtZ(z: number): string {
  if (!Number.isFinite(z)) return z > 0 ? "∞" : "-∞";
  return z.toFixed(1);
}
