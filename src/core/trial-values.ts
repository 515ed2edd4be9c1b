/**
 * Which trials count at the run's full budget and their objective values: shared by the ladder,
 * the views agents read and the posterior, so none of them imports another for it.
 */
import type { ExperimentRecord, TrialRecord } from "./ledger.ts";
import type { Program, TrialResult } from "./types.ts";

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

/** A result for a trial that did not run (or ran nowhere the coordinator can see): no process, no logs. */
export function notRunResult(
  job: { seed: number; command: string },
  status: TrialResult["status"],
  reason: string,
): TrialResult {
  return {
    status,
    reason,
    exitCode: null,
    signal: null,
    wallS: 0,
    cpuS: 0,
    peakRssMb: 0,
    metrics: {},
    selfReported: false,
    seed: job.seed,
    command: job.command,
    stdoutPath: "",
    stderrPath: "",
    logTail: "",
  };
}
