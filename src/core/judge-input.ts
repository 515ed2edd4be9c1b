/**
 * What the judge sees of the run when it weighs a candidate against an incumbent: the
 * incumbent's full-budget trials, the baseline's, every configuration's repeats (for σ), the
 * budget left and, with several objectives, every experiment's trials. One reading for the
 * evaluate phase (the incumbent is the node the candidate grew from) and the decide phase (a
 * tree-frontier keep weighed against the best before it moves the ratchet).
 */
import type { JudgeInput } from "./judge.ts";
import type { ExperimentRecord } from "./ledger.ts";
import type { LoopDeps } from "./loop-deps.ts";
import { budgetLeft } from "./run-budget.ts";
import { isFullBudget } from "./trial-values.ts";
import type { Program, TrialResult } from "./types.ts";

/** The full-budget ok trials of an experiment, in order (the judge pairs trials by seed). */
export function okTrials(program: Program, e: ExperimentRecord | undefined): TrialResult[] {
  return (e?.trials ?? [])
    .filter((t) => isFullBudget(program, t))
    .map((t) => t.result)
    .filter((r): r is NonNullable<typeof r> => r?.status === "ok");
}

/** The judge's input for `exp` against `incumbent` (valued `incumbentMetric`), read from the notebook now. */
export function judgeInputOf(
  deps: LoopDeps,
  exp: ExperimentRecord,
  incumbent: ExperimentRecord,
  incumbentMetric: number,
): Omit<JudgeInput, "trials"> {
  const { program, ledger, run } = deps;
  const metric = program.objective.metric;
  const values = (e: ExperimentRecord | undefined) =>
    okTrials(program, e).map((r) => r.metrics[metric] as number);
  const now = ledger.listExperiments(run.id);
  const p = now.find((e) => e.n === incumbent.n) ?? incumbent;
  return {
    program,
    best: { n: p.n, metric: incumbentMetric, values: values(p), trials: okTrials(program, p) },
    baseline: values(now.find((e) => e.n === 0)),
    // Every configuration's repeats inform σ (the noise model pools them).
    run: now.filter((e) => e.n !== exp.n).map((e) => ({ n: e.n, values: values(e) })),
    // The share of the run's budget left (this experiment counts as started).
    ...(deps.budget ? { budget: budgetLeft(deps.budget, now, exp.n) } : {}),
    // Several objectives: every metric of every other experiment (the front, each metric's σ).
    ...(program.objectives
      ? {
          experiments: now
            .filter((e) => e.n !== exp.n)
            .map((e) => ({ n: e.n, kept: e.decision?.action === "keep", trials: okTrials(program, e) })),
        }
      : {}),
  };
}
