/**
 * The run's budget: how many experiments (--max-experiments), how many trials (--max-trials) and
 * how much time (--max-time) this invocation may spend. The loop stops when any of them is spent,
 * and the judge is told the share left of the tightest one (JudgeInput.budget): it explores while
 * much is left and confirms at the end (docs/noise.md, "Budget-aware exploration").
 */
import { formatWholeSeconds } from "./format.ts";
import type { ExperimentRecord } from "./ledger.ts";

export interface RunBudget {
  /** Experiments besides the baseline, over the whole run (what --max-experiments counts). */
  experiments?: number;
  /**
   * Trials of every kind, over the whole run: the baseline's, each candidate's, re-measurements
   * of the incumbent and cheaper rungs of a proxy ladder — every trial started and not
   * interrupted (an interrupted trial runs again and is counted then).
   */
  trials?: number;
  /** This invocation's wall-clock window (epoch ms): no trial starts after `end`. */
  time?: { start: number; end: number };
}

/** Whether the budget bounds anything (an unbounded run is judged the same way throughout). */
export function isBounded(budget: RunBudget | undefined): budget is RunBudget {
  return (
    budget !== undefined &&
    (budget.experiments !== undefined || budget.trials !== undefined || budget.time !== undefined)
  );
}

/** Trials the run has started, interrupted ones excepted (they run again). */
export function trialsUsed(exps: readonly ExperimentRecord[]): number {
  let used = 0;
  for (const e of exps) for (const t of e.trials) if (t.result?.status !== "interrupted") used++;
  return used;
}

/**
 * The share of the budget left, in the unit of the limit that binds (the smallest share):
 * experiments not yet started (`current`, the one being judged, counts as started), trials not
 * yet started, or seconds. Undefined for an unbounded run.
 */
export function budgetLeft(
  budget: RunBudget | undefined,
  exps: readonly ExperimentRecord[],
  current = 0,
  now = Date.now(),
): { left: number; total: number } | undefined {
  if (!isBounded(budget)) return undefined;
  const shares: { left: number; total: number }[] = [];
  if (budget.experiments !== undefined) {
    const started = Math.max(current, exps.filter((e) => e.n > 0).length);
    shares.push({ left: Math.max(0, budget.experiments - started), total: budget.experiments });
  }
  if (budget.trials !== undefined) {
    shares.push({ left: Math.max(0, budget.trials - trialsUsed(exps)), total: budget.trials });
  }
  if (budget.time) {
    const total = Math.max(1, Math.round((budget.time.end - budget.time.start) / 1000));
    shares.push({ left: Math.max(0, Math.round((budget.time.end - now) / 1000)), total });
  }
  const share = (x: { left: number; total: number }) => (x.total > 0 ? x.left / x.total : 0);
  return shares.reduce((a, b) => (share(b) < share(a) ? b : a));
}

/**
 * Why no new experiment may start (the run ends there), or undefined while the budget lasts.
 * `issued` counts experiments already proposed (a parallel run proposes ahead of its trials).
 */
export function experimentsSpent(
  budget: RunBudget | undefined,
  exps: readonly ExperimentRecord[],
  issued = exps.filter((e) => e.n > 0).length,
  now = Date.now(),
): string | undefined {
  if (!budget) return undefined;
  if (budget.experiments !== undefined && issued >= budget.experiments) {
    return `reached --max-experiments ${budget.experiments}`;
  }
  return trialsSpent(budget, exps, now);
}

/** Why no further trial may start, or undefined while trials and time last. */
export function trialsSpent(
  budget: RunBudget | undefined,
  exps: readonly ExperimentRecord[],
  now = Date.now(),
): string | undefined {
  if (!budget) return undefined;
  if (budget.trials !== undefined && trialsUsed(exps) >= budget.trials) {
    return `reached --max-trials ${budget.trials}`;
  }
  if (budget.time && now >= budget.time.end) {
    return `reached --max-time ${formatWholeSeconds(budget.time.end - budget.time.start)}`;
  }
  return undefined;
}
