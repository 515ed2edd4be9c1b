/**
 * Holdout canaries: metrics.holdout values are recorded for every trial and never shown to an
 * agent. A holdout measures the task the objective stands for on data the search never scores
 * against, so an honest improvement moves both; when they part ways, the search is gaming
 * something. Two directions, two alarms (an event, a status line, a notebook entry — the
 * caller's business):
 *
 * - **overfitting**: the objective improves while the holdout does not follow (it worsens, or
 *   stays flat while the objective gained a lot): the search fits the evaluator, not the task.
 * - **leakage**: the holdout improves far more than the objective does: a change is likely
 *   using holdout data (training on the holdout split, reading its labels).
 *
 * The rule. Kept experiments p₀ (the baseline) … p_k (the newest), each with its objective
 * value o (for a keep the noise-corrected one), its mean holdout value h, and the trial counts
 * they rest on. σ_o and σ_h are the noise of one trial of each metric, pooled from repeated
 * trials (each group around its own mean) with ν degrees of freedom. For each earlier kept
 * point a, the gains from a to now in noise units, signed so that positive is better:
 *
 *   G_o = ±(o_a − o_k) / σ_o        G_h = ±(h_a − h_k) / σ_h
 *   e_o = √(1/n_a + 1/n_k) (objective trial counts), e_h likewise: their standard errors.
 *
 * An honest change is expected to move both metrics by comparable amounts in their own noise
 * units; the rule allows a factor r (`ratio`, default 2) either way before it calls it a split:
 *
 *   overfitting  O = (G_o − r·G_h) / √(e_o² + r²·e_h²)   the holdout kept less than 1/r of the gain
 *   leakage      L = (G_h − r·G_o) / √(e_h² + r²·e_o²)   the holdout gained more than r times it
 *
 * Under the hypothesis that the ratio is exactly at the edge, O (or L) is a difference of
 * independent normal estimates divided by its standard error: Student-t with ν degrees of
 * freedom (positively correlated noise of the two metrics — one trained model — only shrinks
 * the true variance, so assuming independence errs toward silence). The check after the k-th
 * kept change (k = kept points after the baseline) raises
 *
 *   overfitting when O ≥ t(1 − α/(k(k+1)·m), ν) for some a with at least `minKeeps` (2) kept
 *               changes after it and G_o > 0 (the objective did improve since a);
 *   leakage     when L ≥ t(1 − α/(k(k+1)·m), ν) for some a with G_h > 0 (the holdout did
 *               improve since a);
 *
 * m the number of reference points of that direction (k − minKeeps + 1, resp. k). The loop
 * checks after every keep; the k-th check spends α/(k(k+1)) of the run's α (`alpha`, 0.02 per
 * direction), and these shares sum to α: by the union bound over checks and reference points,
 * pure noise raises a false alarm of either kind in at most 2α = 4% of runs, however long.
 *
 * "Worse while the objective improves" is the overfitting case with G_h < 0; "flat while the
 * objective gained a lot" is G_h ≈ 0 with G_o large; "the holdout improves while the objective
 * does not" is the leakage case with G_o ≈ 0. Without an objective σ only the worsening test
 * runs: −G_h/e_h ≥ the same threshold, with the objective improved since a.
 *
 * Why σ units and a factor 2: the two metrics need not share a scale (loss and accuracy), and
 * run-to-run noise is the one scale both have; a factor 2 absorbs differences in how strongly
 * each responds to a real change. Measured (test/trust-holdout-alarm.test.ts, docs/trust.md):
 * well under the 4% bound on pure noise, none on honest runs whose holdout follows.
 */
import { formatMetric } from "../core/format.ts";
import type { Direction } from "../core/types.ts";
import { pooledSd, tQuantile } from "./stats.ts";

export interface KeptPoint {
  /** Experiment number. */
  n: number;
  /** The objective value the experiment carries (for a keep: the noise-corrected one). */
  objective: number;
  /** Mean holdout value over its trials; undefined when no trial reported it. */
  holdout?: number;
  /** Trials the holdout mean rests on. Default 1. */
  trials?: number;
  /** Trials the objective value rests on. Default: `trials`. */
  objectiveTrials?: number;
}

export interface HoldoutAlarmInput {
  /** Kept experiments in order, baseline first. */
  kept: readonly KeptPoint[];
  objective: { name: string; direction: Direction };
  holdout: { name: string; direction?: Direction };
  /**
   * Noise σ of one holdout value (e.g. holdoutNoise(repeated holdout values)). NaN or
   * undefined: no alarm can be raised, and the reason says why.
   */
  holdoutSigma: number | undefined;
  /**
   * Noise σ of one objective value, from the same repeated trials. Without it only the
   * worsening test runs (the holdout worse while the objective improved): no leakage test.
   */
  objectiveSigma?: number | undefined;
  /** Degrees of freedom behind the σ estimates (Student-t thresholds). Default: the normal. */
  df?: number | undefined;
}

export interface HoldoutAlarmOptions {
  /**
   * False-alarm probability per direction over a whole run: the check after the k-th kept
   * change spends α/(k(k+1)) of it, shared by its reference points. Default 0.02.
   */
  alpha?: number;
  /** How far apart (a factor, in noise units) the two gains may be before an alarm. Default 2. */
  ratio?: number;
  /** Overfitting: kept changes after the reference point before an alarm. Default 2 ("keeps improving"). */
  minKeeps?: number;
  /** Floor for σ relative to |value| (identical repeats). Default 1e-6. */
  relativeSigmaFloor?: number;
}

export type HoldoutAlarmKind = "overfitting" | "leakage";

export interface HoldoutAlarm {
  alarm: boolean;
  /** Which direction fired (absent without an alarm). */
  kind?: HoldoutAlarmKind;
  /** For people: carries holdout values. Never show it to an agent. */
  reason: string;
}

/** Pooled σ of the holdout from repeated trials (one group per experiment with repeats). */
export function holdoutNoise(...groups: readonly (readonly number[])[]): number {
  return pooledNoise(groups).sigma;
}

/** Pooled σ and its degrees of freedom from groups of repeated values (non-finite values dropped). */
export function pooledNoise(groups: readonly (readonly number[])[]): { sigma: number; df: number } {
  const { sd, df } = pooledSd(groups.map((g) => g.filter(Number.isFinite)));
  return { sigma: sd, df };
}

type Point = KeptPoint & { holdout: number };

interface Scan {
  /** Index of the reference point in `points`. */
  at: number;
  stat: number;
  threshold: number;
}

export function checkHoldout(input: HoldoutAlarmInput, options: HoldoutAlarmOptions = {}): HoldoutAlarm {
  const alpha = options.alpha ?? 0.02;
  const r = options.ratio ?? 2;
  const minKeeps = options.minKeeps ?? 2;
  const relFloor = options.relativeSigmaFloor ?? 1e-6;
  const oName = input.objective.name;
  const hName = input.holdout.name;
  const oSign = input.objective.direction === "minimize" ? 1 : -1;
  const hSign = (input.holdout.direction ?? input.objective.direction) === "minimize" ? 1 : -1;
  const points = input.kept.filter(
    (p): p is Point => p.holdout !== undefined && Number.isFinite(p.holdout) && Number.isFinite(p.objective),
  );
  const missing = input.kept.length - points.length;
  const missingNote = missing
    ? ` (${missing} kept experiment${missing > 1 ? "s" : ""} without a ${hName} value)`
    : "";
  if (points.length < 2) {
    return {
      alarm: false,
      reason: `holdout ${hName}: fewer than two kept experiments report it${missingNote}`,
    };
  }
  const k = points.length - 1;
  const last = points[k] as Point;
  const first = points[0] as Point;
  const arrow = (a: number, b: number) => `${formatMetric(a)} → ${formatMetric(b)}`;
  const rawH = input.holdoutSigma;
  if (rawH === undefined || !Number.isFinite(rawH)) {
    return {
      alarm: false,
      reason: `holdout ${hName}: no noise estimate (the baseline needs repeated trials), so its move ${arrow(first.holdout, last.holdout)} since #${first.n} cannot be judged${missingNote}`,
    };
  }
  const floorOf = (sigma: number, values: (p: Point) => number) =>
    Math.max(sigma, relFloor * Math.max(...points.map((p) => Math.abs(values(p)))));
  const sh = floorOf(rawH, (p) => p.holdout);
  const rawO = input.objectiveSigma;
  const so = rawO !== undefined && Number.isFinite(rawO) ? floorOf(rawO, (p) => p.objective) : undefined;
  const df = input.df !== undefined && input.df > 0 ? input.df : Number.POSITIVE_INFINITY;
  // This check's share of the run's α (the k-th check gets α/(k(k+1)); the shares sum to α),
  // split among its m reference points.
  const spend = alpha / (k * (k + 1));
  const threshold = (m: number) => tQuantile(1 - spend / Math.max(1, m), df);
  const nh = (p: Point) => p.trials ?? 1;
  const no = (p: Point) => p.objectiveTrials ?? p.trials ?? 1;
  const gains = (a: Point) => {
    const eo = Math.sqrt(1 / no(a) + 1 / no(last));
    const eh = Math.sqrt(1 / nh(a) + 1 / nh(last));
    const go = so !== undefined ? (oSign * (a.objective - last.objective)) / so : Number.NaN;
    const gh = (hSign * (a.holdout - last.holdout)) / sh;
    return { eo, eh, go, gh, improved: oSign * (a.objective - last.objective) > 0 };
  };
  const sigmaWord = (g: number) => `${Math.abs(g) >= 10 ? g.toFixed(0) : g.toFixed(1)}σ`;
  const fmtStat = (x: number) => (Math.abs(x) >= 10 ? x.toFixed(0) : x.toFixed(1));
  const keeps = (i: number) => `${k - i} kept change${k - i > 1 ? "s" : ""}`;

  // Overfitting: references with at least minKeeps kept changes after them.
  const overRefs = k - minKeeps + 1;
  let over: Scan | undefined;
  if (overRefs > 0) {
    const t = threshold(overRefs);
    for (let i = 0; i < overRefs; i++) {
      const g = gains(points[i] as Point);
      if (!g.improved) continue;
      const stat = so !== undefined ? (g.go - r * g.gh) / Math.hypot(g.eo, r * g.eh) : -g.gh / g.eh;
      if (!over || stat > over.stat) over = { at: i, stat, threshold: t };
    }
  }
  // Leakage: every earlier kept point is a reference (one keep can carry the leak).
  let leak: Scan | undefined;
  if (so !== undefined) {
    const t = threshold(k);
    for (let i = 0; i < k; i++) {
      const g = gains(points[i] as Point);
      if (!(g.gh > 0)) continue;
      const stat = (g.gh - r * g.go) / Math.hypot(g.eh, r * g.eo);
      if (!leak || stat > leak.stat) leak = { at: i, stat, threshold: t };
    }
  }

  const ratioWord = r === 2 ? "half" : `1/${r}`;
  const timesWord = r === 2 ? "twice" : `${r} times`;
  if (over && over.stat >= over.threshold) {
    const a = points[over.at] as Point;
    const g = gains(a);
    const story =
      so !== undefined
        ? `${oName} improved over ${keeps(over.at)} since #${a.n} (${arrow(a.objective, last.objective)}, ${sigmaWord(g.go)}) while holdout ${hName} moved ${arrow(a.holdout, last.holdout)} (${sigmaWord(-g.gh)} worse): the holdout kept less than ${ratioWord} of the objective's gain by ${fmtStat(over.stat)} standard errors (alarm at ${over.threshold.toFixed(1)})`
        : `${oName} improved over ${keeps(over.at)} since #${a.n} (${arrow(a.objective, last.objective)}) while holdout ${hName} moved ${arrow(a.holdout, last.holdout)}: ${fmtStat(over.stat)} standard errors worse (alarm at ${over.threshold.toFixed(1)}; no ${oName} noise estimate, so only a worsening holdout is judged)`;
    return { alarm: true, kind: "overfitting", reason: `overfitting: ${story}${missingNote}` };
  }
  if (leak && leak.stat >= leak.threshold) {
    const a = points[leak.at] as Point;
    const g = gains(a);
    return {
      alarm: true,
      kind: "leakage",
      reason: `leakage: holdout ${hName} improved over ${keeps(leak.at)} since #${a.n} (${arrow(a.holdout, last.holdout)}, ${sigmaWord(g.gh)}) while ${oName} moved ${arrow(a.objective, last.objective)} (${sigmaWord(g.go)}): the holdout gained more than ${timesWord} the objective's gain by ${fmtStat(leak.stat)} standard errors (alarm at ${leak.threshold.toFixed(1)}); a change may be using holdout data (training on the holdout split, reading its labels)${missingNote}`,
    };
  }
  const g0 = gains(first);
  const since = `since #${first.n}: ${oName} ${arrow(first.objective, last.objective)}${so !== undefined ? ` (${sigmaWord(g0.go)} better)` : ""}, holdout ${hName} ${arrow(first.holdout, last.holdout)} (${sigmaWord(g0.gh)} better)`;
  const checks = [
    over
      ? `overfitting ${fmtStat(over.stat)} < ${over.threshold.toFixed(1)} standard errors`
      : overRefs > 0
        ? "overfitting: the objective did not improve"
        : `overfitting: only ${k} kept change${k > 1 ? "s" : ""} (alarm after ${minKeeps})`,
    so === undefined
      ? `leakage: no ${oName} noise estimate`
      : leak
        ? `leakage ${fmtStat(leak.stat)} < ${leak.threshold.toFixed(1)}`
        : "leakage: the holdout did not improve",
  ];
  return { alarm: false, reason: `holdout ok: ${since}; ${checks.join(", ")}${missingNote}` };
}
