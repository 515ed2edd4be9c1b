/**
 * Which trials count at the run's full budget and their objective values: shared by the ladder,
 * the views agents read and the posterior, so none of them imports another for it.
 */
import type { ExperimentRecord, TrialRecord } from "./ledger.ts";
import type { Program } from "./types.ts";

/** True for a trial at run.budget (what the judge sees), false for a trial on a cheaper rung. */
export function isFullBudget(program: Program, t: Pick<TrialRecord, "budgetMs">): boolean {
  return !program.ladder?.rungs.some((r) => r.budgetMs === t.budgetMs);
}

/** The objective values of an experiment's ok trials at `budgetMs` ("full": at run.budget). */
export function valuesAt(program: Program, e: ExperimentRecord, budgetMs: number | "full"): number[] {
  const metric = program.objective.metric;
  return e.trials
    .filter((t) => (budgetMs === "full" ? isFullBudget(program, t) : t.budgetMs === budgetMs))
    .map((t) => t.result)
    .filter((r) => r?.status === "ok" && Number.isFinite(r.metrics[metric]))
    .map((r) => r?.metrics[metric] as number);
}
