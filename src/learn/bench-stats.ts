/**
 * The bench's statistics: a cell's improvement and best-so-far curve, seeded percentile
 * bootstrap intervals that resample programs (then seeds within a program), and the verdict
 * per layer on held-out programs. Pure: no files, no runs.
 */
import { mulberry32 } from "../core/random.ts";
import { mean } from "../core/stats.ts";
import { widerInterval } from "./tournament-stats.ts";

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
  /**
   * Paired differences candidate − baseline (percentage points of improvement), held-out only:
   * the deciding interval, the wider of `bootstrap` and `t`.
   */
  interval: Interval;
  /** The cluster bootstrap's 95% interval (programs, then seeds). */
  bootstrap: { lo: number; hi: number };
  /**
   * Student's t 95% interval over the programs' mean differences (over the seeds when there is
   * one program); infinite when there is one unit.
   */
  t: { lo: number; hi: number };
  ships: boolean;
  /** "org vs single on held-out programs: +x% ± y, ships" (or why there is no verdict). */
  line: string;
}

function signed(x: number, digits = 2): string {
  if (!Number.isFinite(x)) return x > 0 ? "+∞" : "−∞";
  const s = x.toFixed(digits);
  return x >= 0 ? `+${s}` : s;
}

/**
 * The verdict on a layer (issue #38): on held-out programs, the candidate's final improvement
 * minus the baseline configuration's, paired by (program, seed) — same program, same seed, same
 * budget. It ships only when the lower bound of the wider of two 95% intervals is above zero:
 * the cluster bootstrap's (programs, then seeds) and Student's t over the programs' mean
 * differences (`widerInterval`, the tournament's rule). The claim is about programs not yet
 * seen, so the programs are the units: over 2–3 of them the bootstrap alone is far too narrow.
 * With one held-out program the units are its seeds, and the claim is about that program only.
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
  const groups = byProgram(pairs, (c) => c.improvement);
  const boot = clusterBootstrap(groups, resamples, seed);
  const head = `${layer.candidate} vs ${layer.baseline} on held-out programs`;
  if (boot.cells === 0) {
    const none = { lo: Number.NaN, hi: Number.NaN };
    return {
      ...layer,
      interval: boot,
      bootstrap: none,
      t: none,
      ships: false,
      line: `${head}: no paired held-out cells, does not ship`,
    };
  }
  const one = boot.programs === 1;
  const units = one ? ([...groups.values()][0] as number[]) : [...groups.values()].map((g) => mean(g));
  const wide = widerInterval(units, [boot.lo, boot.hi], 0.95);
  const interval: Interval = { ...boot, lo: wide.lo, hi: wide.hi };
  const ships = interval.lo > 0;
  const half = (interval.hi - interval.lo) / 2;
  const tOver = one
    ? `Student's t over its ${units.length} seeds (one program: a claim about it alone)`
    : `Student's t over ${boot.programs} programs`;
  return {
    ...layer,
    interval,
    bootstrap: { lo: boot.lo, hi: boot.hi },
    t: { lo: wide.t[0], hi: wide.t[1] },
    ships,
    line: `${head}: ${signed(interval.mean)}% ± ${Number.isFinite(half) ? half.toFixed(2) : "∞"} (95% CI [${signed(interval.lo)}, ${signed(interval.hi)}], the wider of the bootstrap's [${signed(boot.lo)}, ${signed(boot.hi)}] and ${tOver}, [${signed(wide.t[0])}, ${signed(wide.t[1])}]; ${interval.programs} program${interval.programs === 1 ? "" : "s"} × seeds, ${interval.cells} pairs), ${ships ? "ships" : "does not ship"}`,
  };
}

/**
 * Fresh seeds each cell's baseline and best must be re-measured on for a verdict to ship (issue
 * #38; the suite's default `remeasure`): fewer leave the winner's curse of a rule that keeps
 * lucky trials inside the verdict, and the runs' own records (`remeasure: 0`) are that curse.
 */
export const MIN_REMEASURE = 5;

/**
 * A verdict on values re-measured on fewer than MIN_REMEASURE fresh seeds never ships: its
 * interval is reported as it is, and the line says why it does not ship.
 */
export function requireRemeasured(v: LayerVerdict, remeasure: number): LayerVerdict {
  if (!v.ships || remeasure >= MIN_REMEASURE) return v;
  const why =
    remeasure === 0
      ? "the runs' own records, not re-measured"
      : `re-measured on ${remeasure} fresh seed${remeasure === 1 ? "" : "s"}`;
  return {
    ...v,
    ships: false,
    line: v.line.replace(/, ships$/, `, does not ship (${why}; a verdict needs at least ${MIN_REMEASURE})`),
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
