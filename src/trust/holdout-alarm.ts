/**
 * Holdout canaries: metrics.holdout values are recorded for every trial and never shown to an
 * agent. When the objective keeps improving over kept changes while a holdout metric gets
 * worse beyond its noise, the search is fitting the evaluator rather than the task: raise an
 * overfitting alarm (an event, a status line, a notebook entry — the caller's business).
 *
 * Rule: among the kept experiments (baseline first, in order), find where the holdout was at
 * its best. The alarm is raised when at least `minKeeps` kept changes came after it, the
 * objective is better now than there, and the holdout is now worse than its best by more than
 * `z` standard errors of the difference (σ from the baseline's repeated holdout values).
 */
import { formatMetric } from "../core/format.ts";
import type { Direction } from "../core/types.ts";
import { pooledSd } from "./stats.ts";

export interface KeptPoint {
  /** Experiment number. */
  n: number;
  /** The objective value the experiment carries (for a keep: the noise-corrected one). */
  objective: number;
  /** Mean holdout value over its trials; undefined when no trial reported it. */
  holdout?: number;
  /** Trials the holdout mean rests on. Default 1. */
  trials?: number;
}

export interface HoldoutAlarmInput {
  /** Kept experiments in order, baseline first. */
  kept: readonly KeptPoint[];
  objective: { name: string; direction: Direction };
  holdout: { name: string; direction?: Direction };
  /**
   * Noise σ of one holdout value (e.g. holdoutNoise(baseline's holdout values)). NaN or
   * undefined: no alarm can be raised, and the reason says why.
   */
  holdoutSigma: number | undefined;
}

export interface HoldoutAlarmOptions {
  /** Standard errors of the difference the holdout must have worsened by. Default 2. */
  z?: number;
  /** Kept changes after the holdout's best before an alarm. Default 2 ("keeps improving"). */
  minKeeps?: number;
  /** Floor for σ relative to |holdout| (identical repeats). Default 1e-6. */
  relativeSigmaFloor?: number;
}

export interface HoldoutAlarm {
  alarm: boolean;
  reason: string;
}

/** Pooled σ of the holdout from repeated trials (one group per experiment with repeats). */
export function holdoutNoise(...groups: readonly (readonly number[])[]): number {
  return pooledSd(groups.map((g) => g.filter(Number.isFinite))).sd;
}

export function checkHoldout(input: HoldoutAlarmInput, options: HoldoutAlarmOptions = {}): HoldoutAlarm {
  const z = options.z ?? 2;
  const minKeeps = options.minKeeps ?? 2;
  const oName = input.objective.name;
  const hName = input.holdout.name;
  const oSign = input.objective.direction === "minimize" ? 1 : -1;
  const hSign = (input.holdout.direction ?? input.objective.direction) === "minimize" ? 1 : -1;
  const points = input.kept.filter(
    (p): p is KeptPoint & { holdout: number } =>
      p.holdout !== undefined && Number.isFinite(p.holdout) && Number.isFinite(p.objective),
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
  // Where the holdout was at its best (the earliest such point).
  let h = 0;
  for (let i = 1; i < points.length; i++) {
    if (
      hSign *
        ((points[i] as KeptPoint & { holdout: number }).holdout -
          (points[h] as { holdout: number }).holdout) <
      0
    )
      h = i;
  }
  const at = points[h] as KeptPoint & { holdout: number };
  const last = points[points.length - 1] as KeptPoint & { holdout: number };
  const since = points.length - 1 - h;
  const objectiveGain = oSign * (at.objective - last.objective);
  const holdoutLoss = hSign * (last.holdout - at.holdout);
  const fmt = (a: number, b: number) => `${formatMetric(a)} → ${formatMetric(b)}`;
  if (since === 0) {
    return {
      alarm: false,
      reason: `holdout ${hName} is at its best (${formatMetric(last.holdout)}, #${last.n})${missingNote}`,
    };
  }
  const raw = input.holdoutSigma;
  if (raw === undefined || !Number.isFinite(raw)) {
    return {
      alarm: false,
      reason: `holdout ${hName}: no noise estimate (the baseline needs repeated trials), so a worsening of ${formatMetric(holdoutLoss)} since #${at.n} cannot be judged${missingNote}`,
    };
  }
  const sigma = Math.max(raw, (options.relativeSigmaFloor ?? 1e-6) * Math.abs(at.holdout));
  const se = sigma * Math.sqrt(1 / (at.trials ?? 1) + 1 / (last.trials ?? 1));
  const worse = se > 0 ? holdoutLoss / se : holdoutLoss > 0 ? Number.POSITIVE_INFINITY : 0;
  const story = `${oName} ${objectiveGain > 0 ? "improved" : "did not improve"} over ${since} kept change${since > 1 ? "s" : ""} since #${at.n} (${fmt(at.objective, last.objective)}) while holdout ${hName} moved ${fmt(at.holdout, last.holdout)} from its best at #${at.n} (${worse.toFixed(1)}σ worse)`;
  if (since >= minKeeps && objectiveGain > 0 && worse > z) {
    return { alarm: true, reason: `overfitting: ${story}${missingNote}` };
  }
  const why =
    worse <= z
      ? `within noise (alarm above ${z}σ)`
      : since < minKeeps
        ? `only ${since} kept change${since > 1 ? "s" : ""} since (alarm after ${minKeeps})`
        : `the objective did not improve`;
  return { alarm: false, reason: `holdout ok: ${story}; ${why}${missingNote}` };
}
