/** Small helpers shared by the trust benchmarks: argument flags, confidence intervals, rounding. */
import { mean, sampleSd } from "../src/trust/stats.ts";

/** `--name=value` and `--flag` arguments; anything else is ignored. */
export function flags(args: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const a of args) {
    const m = /^--([\w-]+)(?:=(.*))?$/.exec(a);
    if (m?.[1]) out[m[1]] = m[2] ?? "true";
  }
  return out;
}

export function numberFlag(f: Record<string, string>, name: string, fallback: number): number {
  const v = f[name];
  if (v === undefined) return fallback;
  const x = Number(v);
  if (!Number.isFinite(x)) throw new Error(`--${name} must be a number, got ${v}`);
  return x;
}

export interface Estimate {
  mean: number;
  /** Half-width of the normal 95% confidence interval. */
  ci: number;
}

export function estimate(xs: readonly number[]): Estimate {
  return { mean: mean(xs), ci: xs.length > 1 ? (1.96 * sampleSd(xs)) / Math.sqrt(xs.length) : Number.NaN };
}

/**
 * A pooled ratio Σa / Σb over independent seeds, with a delta-method 95% interval (the share
 * of kept changes that are truly worse, pooled over every keep of every seed).
 */
export function ratio(a: readonly number[], b: readonly number[]): Estimate {
  const sa = a.reduce((s, x) => s + x, 0);
  const sb = b.reduce((s, x) => s + x, 0);
  const r = sb > 0 ? sa / sb : Number.NaN;
  const n = a.length;
  const bBar = sb / n;
  let v = 0;
  for (let i = 0; i < n; i++) v += ((a[i] as number) - r * (b[i] as number)) ** 2;
  const se = n > 1 && bBar > 0 ? Math.sqrt(v / (n - 1) / n) / bBar : Number.NaN;
  return { mean: r, ci: 1.96 * se };
}

export function round(x: number, digits = 4): number {
  if (!Number.isFinite(x)) return x;
  return Number(x.toPrecision(digits));
}

export function show(e: Estimate, digits = 3, scale = 1): string {
  return `${round(e.mean * scale, digits)} ± ${round(e.ci * scale, 2)}`;
}
