/**
 * Means and spreads: the loop (core) and the trust modules (src/trust/stats.ts re-exports these)
 * share one definition.
 */

export function mean(xs: readonly number[]): number {
  let s = 0;
  for (const x of xs) s += x;
  return xs.length ? s / xs.length : Number.NaN;
}

/** Sum of squared deviations from the mean. */
export function sumSquares(xs: readonly number[]): number {
  const m = mean(xs);
  let s = 0;
  for (const x of xs) s += (x - m) ** 2;
  return s;
}

/** Sample standard deviation (n − 1); NaN for fewer than two values. */
export function sampleSd(xs: readonly number[]): number {
  return xs.length < 2 ? Number.NaN : Math.sqrt(sumSquares(xs) / (xs.length - 1));
}
