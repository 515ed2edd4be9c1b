/** Metric values as people read them: 6 significant digits, no exponent for ordinary sizes. */
export function formatMetric(x: number | undefined): string {
  if (x === undefined) return "—";
  if (!Number.isFinite(x)) return String(x);
  const abs = Math.abs(x);
  if (abs !== 0 && (abs < 1e-4 || abs >= 1e7)) return x.toExponential(4);
  return Number(x.toPrecision(6)).toString();
}

/** Signed relative change, e.g. "-3.12%". */
export function formatChange(from: number, to: number): string {
  if (from === 0) return "";
  const pct = ((to - from) / Math.abs(from)) * 100;
  return `${pct >= 0 ? "+" : ""}${pct.toFixed(2)}%`;
}
