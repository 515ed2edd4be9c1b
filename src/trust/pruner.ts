/**
 * Learning-curve pruning: stop a running trial whose progress metric (metrics.progress, e.g.
 * train_loss) is confidently worse than the best's curve at the same point of the budget.
 *
 * The rule, in the spirit of Optuna's MedianPruner but against the best's recorded curve:
 *   - never before `warmup` of the budget (curves cross: a slow start can end best);
 *   - compare the running trial's last `window` points with the best's curve interpolated at
 *     the same x (beyond the best's last point, its last value);
 *   - prune when the mean difference exceeds `z` standard errors of that mean, where the
 *     point noise σ is given or estimated from both curves (second differences, robust to the
 *     trend), plus `relativeMargin` of the best's value; and only after `patience`
 *     consecutive checks agree.
 * Never with a point noise of 0 or an infinite margin (a printed constant curve has both).
 * Curves are claims (a trial prints them): the loop takes a candidate's curve as the reference
 * only when it agrees with the evaluated value of the same trial (src/core/reference-curve.ts).
 * Pure functions plus a small stateful helper for the runner; x is an elapsed fraction of the
 * budget (total 1) or a step count (total = steps in the budget).
 */

import { formatMetric, formatWholePercent } from "../core/format.ts";
import type { Direction } from "../core/types.ts";

/** [x, value] points, x ascending: elapsed fraction of the budget or step. */
export type Curve = readonly (readonly [number, number])[];

export interface PrunerOptions {
  direction: Direction;
  /** x at the end of the budget: 1 when x is a fraction, the number of steps otherwise. Default 1. */
  total?: number;
  /** Fraction of the budget before which nothing is pruned. Default 0.3. */
  warmup?: number;
  /** How many standard errors worse the trial must be. Default 5 (bench/pruning.ts: 3 saves more but loses the true best in 22% of searches, 5 in 7.5%). */
  z?: number;
  /** Points of the running curve averaged at each check. Default 5. */
  window?: number;
  /** Noise σ of one progress value; estimated from the curves when absent. */
  sigma?: number;
  /** An extra margin as a fraction of |best value at that point|. Default 0.01 (1%). */
  relativeMargin?: number;
  /** Consecutive checks that must say "worse" before pruning. Default 2. */
  patience?: number;
}

const DEFAULTS = { total: 1, warmup: 0.3, z: 5, window: 5, relativeMargin: 0.01, patience: 2 };

export interface PruneVerdict {
  prune: boolean;
  /** Why (or why not): for the decision's reason and the progress line. */
  reason: string;
  /** Fraction of the budget elapsed at the check. */
  at: number;
  /** Fraction of the budget saved when pruned now (1 − at); 0 otherwise. */
  saved: number;
  /** Mean difference (positive: worse than the best) in standard errors, when compared. */
  margin?: number;
}

/** The best's value at x: linear interpolation, clamped to its first and last points. */
export function valueAt(curve: Curve, x: number): number {
  const first = curve[0];
  const last = curve[curve.length - 1];
  if (!first || !last) return Number.NaN;
  if (x <= first[0]) return first[1];
  if (x >= last[0]) return last[1];
  let lo = 0;
  let hi = curve.length - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if ((curve[mid] as readonly [number, number])[0] <= x) lo = mid;
    else hi = mid;
  }
  const [x0, y0] = curve[lo] as readonly [number, number];
  const [x1, y1] = curve[hi] as readonly [number, number];
  return x1 === x0 ? y1 : y0 + ((y1 - y0) * (x - x0)) / (x1 - x0);
}

/**
 * Noise σ of single points of a curve, robust to its trend: the median absolute second
 * difference (y[i+1] − 2y[i] + y[i−1] has variance 6σ² for independent noise around a locally
 * linear trend), scaled to a standard deviation. NaN with fewer than 3 points.
 */
export function curveNoise(curve: Curve): number {
  const d: number[] = [];
  for (let i = 1; i + 1 < curve.length; i++) {
    const a = (curve[i - 1] as readonly [number, number])[1];
    const b = (curve[i] as readonly [number, number])[1];
    const c = (curve[i + 1] as readonly [number, number])[1];
    if (Number.isFinite(a) && Number.isFinite(b) && Number.isFinite(c)) d.push(Math.abs(c - 2 * b + a));
  }
  if (d.length === 0) return Number.NaN;
  d.sort((p, q) => p - q);
  const mid = d.length >> 1;
  const median = d.length % 2 ? (d[mid] as number) : 0.5 * ((d[mid - 1] as number) + (d[mid] as number));
  return (1.4826 * median) / Math.sqrt(6);
}

/** One check: should the running trial stop now? */
export function shouldPrune(best: Curve, current: Curve, options: PrunerOptions): PruneVerdict {
  const o = { ...DEFAULTS, ...options };
  const finite = (c: Curve) => c.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
  const b = finite(best);
  const c = finite(current);
  const last = c[c.length - 1];
  const at = last ? last[0] / o.total : 0;
  const keep = (reason: string, margin?: number): PruneVerdict => ({
    prune: false,
    reason,
    at,
    saved: 0,
    ...(margin !== undefined ? { margin } : {}),
  });
  if (!last) return keep("no progress values yet");
  if (b.length < 2) return keep("no curve of the best to compare with");
  if (at < o.warmup)
    return keep(`warm-up: ${formatWholePercent(at)} of the budget < ${formatWholePercent(o.warmup)}`);
  if (at >= 1) return keep("the budget is spent");

  const sign = o.direction === "minimize" ? 1 : -1;
  const recent = c.slice(-o.window);
  let diff = 0;
  let ref = 0;
  for (const [x, y] of recent) {
    const v = valueAt(b, x);
    diff += sign * (y - v);
    ref += v;
  }
  diff /= recent.length;
  ref /= recent.length;
  const sigma = o.sigma ?? estimateSigma(b, c);
  const compared = `${formatMetric(ref + sign * diff)} vs best ${formatMetric(ref)} at ${formatWholePercent(at)} of the budget`;
  // A noise of 0 (flat or perfectly smooth curves: a printed constant is one) makes any gap
  // "infinitely many standard errors": no evidence, so no prune (docs/security.md "Curves are claims").
  if (!(sigma > 0 && Number.isFinite(sigma)))
    return keep(`no noise estimate (σ ${formatMetric(sigma)}): progress ${compared} is not compared`);
  const se = sigma * Math.sqrt(2 / recent.length);
  const need = o.z * se + o.relativeMargin * Math.abs(ref);
  const margin = diff / se;
  if (!Number.isFinite(margin)) return keep(`progress ${compared}: no finite margin`);
  if (diff > need) {
    return {
      prune: true,
      reason: `pruned: progress ${compared} (worse by ${margin.toFixed(1)} standard errors, σ ${formatMetric(sigma)}); saved ${formatWholePercent(1 - at)} of the budget`,
      at,
      saved: 1 - at,
      margin,
    };
  }
  return keep(`on track: progress ${compared}`, margin);
}

/** Point noise from both curves (the larger: the conservative choice), or 0 when unknown. */
function estimateSigma(best: Curve, current: Curve): number {
  const s = [curveNoise(best), curveNoise(current)].filter(Number.isFinite);
  return s.length ? Math.max(...s) : 0;
}

export interface Pruner {
  /** Records a progress value of the running trial and checks it. */
  observe(x: number, value: number): PruneVerdict;
  /** The running trial's curve so far (to record when it becomes the best). */
  curve(): Curve;
  /** The last verdict, or undefined before the first observation. */
  last(): PruneVerdict | undefined;
}

/**
 * A pruner for one running trial against a fixed best curve. Prunes only after `patience`
 * consecutive "worse" checks, and once pruned stays pruned.
 */
export function createPruner(best: Curve, options: PrunerOptions): Pruner {
  const patience = options.patience ?? DEFAULTS.patience;
  const points: [number, number][] = [];
  let streak = 0;
  let verdict: PruneVerdict | undefined;
  return {
    observe(x, value) {
      if (verdict?.prune) return verdict;
      points.push([x, value]);
      const v = shouldPrune(best, points, options);
      streak = v.prune ? streak + 1 : 0;
      verdict =
        v.prune && streak < patience
          ? {
              ...v,
              prune: false,
              saved: 0,
              reason: `${v.reason.replace(/^pruned/, "worse").replace(/; saved .*$/, "")} (check ${streak} of ${patience} before pruning)`,
            }
          : v;
      return verdict;
    },
    curve: () => points,
    last: () => verdict,
  };
}
