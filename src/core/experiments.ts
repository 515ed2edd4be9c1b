import type { ExperimentRecord } from "./ledger.ts";
import type { TrialResult } from "./types.ts";

/**
 * Reading an experiment record: its last result, its objective value, the run's best. Used by
 * the loop, the views and the app alike (views.ts is only what an agent may see).
 */

/** The last finished trial of an experiment. */
export function lastResult(e: ExperimentRecord): TrialResult | undefined {
  for (let i = e.trials.length - 1; i >= 0; i--) {
    const r = e.trials[i]?.result;
    if (r && r.status !== "interrupted") return r;
  }
  return undefined;
}

/** The experiment's objective value: the decision's when decided, else the last trial's. */
export function objectiveOf(e: ExperimentRecord, metric: string): number | undefined {
  if (e.decision?.metric !== undefined) return e.decision.metric;
  const v = lastResult(e)?.metrics[metric];
  return v !== undefined && Number.isFinite(v) ? v : undefined;
}

/** The current best: the last kept experiment (the baseline is kept first). */
export function bestOf(exps: ExperimentRecord[]): ExperimentRecord | undefined {
  let best: ExperimentRecord | undefined;
  for (const e of exps) if (e.decision?.action === "keep") best = e;
  return best;
}
