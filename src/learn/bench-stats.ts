/**
 * The bench's statistics: a cell's improvement and best-so-far curve, seeded percentile
 * bootstrap intervals that resample programs (then seeds within a program), and the verdict
 * per layer on held-out programs. Pure: no files, no runs.
 */
import { mulberry32 } from "../core/random.ts";

/** One cell's result as the statistics need it. */
export interface CellOutcome {
  config: string;
  program: string;
  split: "tuning" | "held-out";
  seed: number;
  /** Final improvement over the baseline, in percent (0 when the cell failed). */
  improvement: number;
  /** Best-so-far improvement (percent) after x units of compute, x ascending, starting at [0, 0]. */
  curve: [number, number][];
}

/**
 * Improvement of `best` over `baseline` in percent, positive when better: (baseline − best) /
 * |baseline| for a minimized metric, the opposite for a maximized one. A baseline of 0 has no
 * relative scale: the plain difference is used (× 100, so the units stay "percent of 1").
 */
export function improvementPct(baseline: number, best: number, direction: "minimize" | "maximize"): number {
  const gain = direction === "minimize" ? baseline - best : best - baseline;
  const scale = Math.abs(baseline) > 1e-12 ? Math.abs(baseline) : 1;
  return (100 * gain) / scale;
}

export interface Interval {
  mean: number;
  lo: number;
  hi: number;
  /** How many cells the estimate rests on, and over how many programs. */
  cells: number;
  programs: number;
}

/**
 * The mean of `value` over cells grouped by program, with a 95% percentile bootstrap interval:
 * each resample draws the programs with replacement, then each drawn program's seeds with
 * replacement, and averages (programs weigh equally). Resampling programs is the point: the
 * claim is about programs not yet seen, so the interval must widen when programs disagree.
 * Deterministic for a given seed. Empty input → NaNs.
 */
export function clusterBootstrap(
  groups: ReadonlyMap<string, readonly number[]>,
  resamples: number,
  seed: number,
): Interval {
  const gs = [...groups.values()].filter((g) => g.length > 0);
  const cells = gs.reduce((s, g) => s + g.length, 0);
  if (gs.length === 0) return { mean: Number.NaN, lo: Number.NaN, hi: Number.NaN, cells: 0, programs: 0 };
  const meanOf = (xs: readonly number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
  const point = meanOf(gs.map(meanOf));
  const rand = mulberry32(seed);
  const pick = (n: number) => Math.min(n - 1, Math.floor(rand() * n));
  const stats: number[] = [];
  for (let b = 0; b < resamples; b++) {
    let total = 0;
    for (let i = 0; i < gs.length; i++) {
      const g = gs[pick(gs.length)] as readonly number[];
      let s = 0;
      for (let j = 0; j < g.length; j++) s += g[pick(g.length)] as number;
      total += s / g.length;
    }
    stats.push(total / gs.length);
  }
  stats.sort((a, b) => a - b);
  const q = (p: number) =>
    stats[Math.min(stats.length - 1, Math.max(0, Math.floor(p * stats.length)))] as number;
  return { mean: point, lo: q(0.025), hi: q(0.975), cells, programs: gs.length };
}

function byProgram(cells: readonly CellOutcome[], value: (c: CellOutcome) => number): Map<string, number[]> {
  const m = new Map<string, number[]>();
  for (const c of cells) {
    const xs = m.get(c.program) ?? [];
    xs.push(value(c));
    m.set(c.program, xs);
  }
  return m;
}

/** Final improvement per configuration and split, with its interval. */
export function improvementIntervals(
  cells: readonly CellOutcome[],
  configs: readonly string[],
  resamples: number,
  seed: number,
): { config: string; split: "tuning" | "held-out"; interval: Interval }[] {
  const out: { config: string; split: "tuning" | "held-out"; interval: Interval }[] = [];
  for (const config of configs)
    for (const split of ["tuning", "held-out"] as const) {
      const mine = cells.filter((c) => c.config === config && c.split === split);
      if (mine.length === 0) continue;
      out.push({
        config,
        split,
        interval: clusterBootstrap(
          byProgram(mine, (c) => c.improvement),
          resamples,
          seed,
        ),
      });
    }
  return out;
}

export interface LayerVerdict {
  label: string;
  candidate: string;
  baseline: string;
  /** Paired differences candidate − baseline (percentage points of improvement), held-out only. */
  interval: Interval;
  ships: boolean;
  /** "org vs single on held-out programs: +x% ± y, ships" (or why there is no verdict). */
  line: string;
}

function signed(x: number, digits = 2): string {
  const s = x.toFixed(digits);
  return x >= 0 ? `+${s}` : s;
}

/**
 * The verdict on a layer: on held-out programs, the candidate's final improvement minus the
 * baseline configuration's, paired by (program, seed) — same program, same seed, same budget —
 * with the cluster bootstrap's 95% interval. It ships when the interval's lower bound is above
 * zero: the layer credibly beats the simpler one on programs nobody tuned on.
 */
export function layerVerdict(
  layer: { label: string; candidate: string; baseline: string },
  cells: readonly CellOutcome[],
  resamples: number,
  seed: number,
): LayerVerdict {
  const held = cells.filter((c) => c.split === "held-out");
  const base = new Map(
    held.filter((c) => c.config === layer.baseline).map((c) => [`${c.program}\u0000${c.seed}`, c]),
  );
  const pairs: CellOutcome[] = [];
  for (const c of held) {
    if (c.config !== layer.candidate) continue;
    const b = base.get(`${c.program}\u0000${c.seed}`);
    if (b) pairs.push({ ...c, improvement: c.improvement - b.improvement });
  }
  const interval = clusterBootstrap(
    byProgram(pairs, (c) => c.improvement),
    resamples,
    seed,
  );
  const head = `${layer.candidate} vs ${layer.baseline} on held-out programs`;
  if (interval.cells === 0)
    return { ...layer, interval, ships: false, line: `${head}: no paired held-out cells, does not ship` };
  const ships = interval.lo > 0;
  const half = (interval.hi - interval.lo) / 2;
  return {
    ...layer,
    interval,
    ships,
    line: `${head}: ${signed(interval.mean)}% ± ${half.toFixed(2)} (95% CI [${signed(interval.lo)}, ${signed(interval.hi)}], ${interval.programs} program${interval.programs === 1 ? "" : "s"} × seeds, ${interval.cells} pairs), ${ships ? "ships" : "does not ship"}`,
  };
}

/**
 * The mean best-so-far curve of some cells: at every x where any cell has a point, the mean
 * over cells of each cell's last value at or before x (a cell's curve stays flat after its
 * last point, so a cell that stopped early keeps what it had reached).
 */
export function meanCurve(cells: readonly CellOutcome[]): [number, number][] {
  if (cells.length === 0) return [];
  const xs = [...new Set(cells.flatMap((c) => c.curve.map(([x]) => x)))].sort((a, b) => a - b);
  return xs.map((x) => {
    let s = 0;
    for (const c of cells) {
      let v = 0;
      for (const [cx, cy] of c.curve) if (cx <= x) v = cy;
      s += v;
    }
    return [x, s / cells.length];
  });
}
