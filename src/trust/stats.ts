/**
 * The few statistics the trust modules need, written out so they stay deterministic and
 * dependency-free: means and pooled variances, the normal and Student-t distributions, ranks.
 */

// Means and spreads live in core (the loop needs them and core imports nothing outside it).
export { mean, sampleSd, sumSquares } from "../core/stats.ts";

import { mean, sampleSd, sumSquares } from "../core/stats.ts";

/**
 * Pooled standard deviation of several groups that share one noise level but may have
 * different means (baseline repeats, the best's repeats, a candidate's repeats):
 * sqrt(Σ SS_i / Σ (n_i − 1)). Groups of one value carry no information about spread.
 */
export function pooledSd(groups: readonly (readonly number[])[]): { sd: number; df: number } {
  let ss = 0;
  let df = 0;
  for (const g of groups) {
    if (g.length < 2) continue;
    ss += sumSquares(g);
    df += g.length - 1;
  }
  return { sd: df > 0 ? Math.sqrt(ss / df) : Number.NaN, df };
}

/**
 * Welch–Satterthwaite degrees of freedom of a sum of independent variance estimates, each
 * given as [its value, its degrees of freedom]; terms with value 0 are ignored, and a term with
 * 0 degrees of freedom makes the sum's 0 (nothing is known about it).
 */
export function satterthwaiteDf(terms: readonly (readonly [number, number])[]): number {
  let total = 0;
  let denom = 0;
  for (const [v, df] of terms) {
    if (!(v > 0)) continue;
    if (!(df > 0)) return 0;
    total += v;
    denom += (v * v) / df;
  }
  return denom > 0 ? (total * total) / denom : 0;
}

/** Complementary error function; fractional error < 1.2e-7 (Numerical Recipes, erfcc). */
const ERFC_COEFFS = [
  -1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587,
  -0.82215223, 0.17087277,
];
export function erfc(x: number): number {
  const z = Math.abs(x);
  const t = 1 / (1 + 0.5 * z);
  let poly = 0;
  for (let i = ERFC_COEFFS.length - 1; i >= 0; i--) poly = (ERFC_COEFFS[i] as number) + t * poly;
  const r = t * Math.exp(-z * z + poly);
  return x >= 0 ? r : 2 - r;
}

/** Standard normal CDF. */
export function normalCdf(x: number): number {
  return 0.5 * erfc(-x / Math.SQRT2);
}

/** Standard normal quantile (Acklam's rational approximation, relative error < 1.2e-9). */
export function normalQuantile(p: number): number {
  if (!(p > 0 && p < 1)) return p === 0 ? Number.NEGATIVE_INFINITY : p === 1 ? Number.POSITIVE_INFINITY : NaN;
  const a = [
    -39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269, -30.66479806614716,
    2.506628277459239,
  ];
  const b = [
    -54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572,
  ];
  const c = [
    -0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968,
    2.938163982698783,
  ];
  const d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];
  const poly = (k: number[], x: number) => k.reduce((s, v) => s * x + v, 0);
  const lo = 0.02425;
  if (p < lo) {
    const q = Math.sqrt(-2 * Math.log(p));
    return poly(c, q) / (poly(d, q) * q + 1);
  }
  if (p > 1 - lo) {
    const q = Math.sqrt(-2 * Math.log(1 - p));
    return -poly(c, q) / (poly(d, q) * q + 1);
  }
  const q = p - 0.5;
  const r = q * q;
  return (poly(a, r) * q) / (poly(b, r) * r + 1);
}

function logGamma(x: number): number {
  // Lanczos approximation (g = 7, n = 9).
  const g = [
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
    12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
  ];
  if (x < 0.5) return Math.log(Math.PI / Math.abs(Math.sin(Math.PI * x))) - logGamma(1 - x);
  const z = x - 1;
  let s = g[0] as number;
  for (let i = 1; i < 9; i++) s += (g[i] as number) / (z + i);
  const t = z + 7.5;
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(s);
}

/** Regularized incomplete beta I_x(a, b) by its continued fraction (Numerical Recipes betacf). */
function incompleteBeta(x: number, a: number, b: number): number {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const front = Math.exp(logGamma(a + b) - logGamma(a) - logGamma(b) + a * Math.log(x) + b * Math.log(1 - x));
  const cf = (xx: number, aa: number, bb: number): number => {
    const tiny = 1e-300;
    let c = 1;
    let d = 1 - ((aa + bb) * xx) / (aa + 1);
    if (Math.abs(d) < tiny) d = tiny;
    d = 1 / d;
    let h = d;
    for (let m = 1; m <= 300; m++) {
      const m2 = 2 * m;
      let num = (m * (bb - m) * xx) / ((aa + m2 - 1) * (aa + m2));
      d = 1 + num * d;
      if (Math.abs(d) < tiny) d = tiny;
      c = 1 + num / c;
      if (Math.abs(c) < tiny) c = tiny;
      d = 1 / d;
      h *= d * c;
      num = (-(aa + m) * (aa + bb + m) * xx) / ((aa + m2) * (aa + m2 + 1));
      d = 1 + num * d;
      if (Math.abs(d) < tiny) d = tiny;
      c = 1 + num / c;
      if (Math.abs(c) < tiny) c = tiny;
      d = 1 / d;
      const del = d * c;
      h *= del;
      if (Math.abs(del - 1) < 1e-14) break;
    }
    return h;
  };
  return x < (a + 1) / (a + b + 2) ? (front * cf(x, a, b)) / a : 1 - (front * cf(1 - x, b, a)) / b;
}

/** CDF of Student's t with df degrees of freedom (df = Infinity: the normal). */
export function tCdf(t: number, df: number): number {
  if (!Number.isFinite(df)) return normalCdf(t);
  const tail = 0.5 * incompleteBeta(df / (df + t * t), df / 2, 0.5);
  return t >= 0 ? 1 - tail : tail;
}

/**
 * CDF of the F distribution with (d1, d2) degrees of freedom: the chance that the ratio of two
 * variance estimates of the same σ² (d1 and d2 degrees of freedom) is at most x.
 */
export function fCdf(x: number, d1: number, d2: number): number {
  if (!(x > 0)) return 0;
  if (!Number.isFinite(x)) return 1;
  return incompleteBeta((d1 * x) / (d1 * x + d2), d1 / 2, d2 / 2);
}

/** Quantile of Student's t (bisection on tCdf; df = Infinity: the normal). */
export function tQuantile(p: number, df: number): number {
  if (!Number.isFinite(df)) return normalQuantile(p);
  let lo = -1e3;
  let hi = 1e3;
  for (let i = 0; i < 200 && hi - lo > 1e-10; i++) {
    const mid = 0.5 * (lo + hi);
    if (tCdf(mid, df) < p) lo = mid;
    else hi = mid;
  }
  return 0.5 * (lo + hi);
}

/** Ranks from 1, ties sharing their average rank (what Spearman's rho needs). */
export function ranks(xs: readonly number[]): number[] {
  const order = xs.map((x, i) => ({ x, i })).sort((p, q) => p.x - q.x);
  const r = new Array<number>(xs.length).fill(0);
  for (let k = 0; k < order.length; ) {
    let j = k;
    while (j + 1 < order.length && (order[j + 1] as { x: number }).x === (order[k] as { x: number }).x) j++;
    const avg = (k + j) / 2 + 1;
    for (let m = k; m <= j; m++) r[(order[m] as { i: number }).i] = avg;
    k = j + 1;
  }
  return r;
}

/** Pearson correlation; NaN when either side has no spread. */
export function pearson(xs: readonly number[], ys: readonly number[]): number {
  const n = Math.min(xs.length, ys.length);
  if (n < 2) return Number.NaN;
  const mx = mean(xs.slice(0, n));
  const my = mean(ys.slice(0, n));
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (let i = 0; i < n; i++) {
    const dx = (xs[i] as number) - mx;
    const dy = (ys[i] as number) - my;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  return sxx > 0 && syy > 0 ? sxy / Math.sqrt(sxx * syy) : Number.NaN;
}

/** Spearman's rank correlation (Pearson on average ranks); NaN when a side is constant. */
export function spearman(xs: readonly number[], ys: readonly number[]): number {
  const n = Math.min(xs.length, ys.length);
  return pearson(ranks(xs.slice(0, n)), ranks(ys.slice(0, n)));
}

/** Mean and the half-width of a normal 95% confidence interval of the mean. */
export function meanCi(xs: readonly number[]): { mean: number; ci: number; n: number } {
  const m = mean(xs);
  const sd = sampleSd(xs);
  return { mean: m, ci: xs.length > 1 ? (1.96 * sd) / Math.sqrt(xs.length) : Number.NaN, n: xs.length };
}
