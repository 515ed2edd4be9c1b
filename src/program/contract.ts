import type { Program } from "../core/types.ts";

/**
 * The part of a program that makes experiments of one run comparable: what is measured, how
 * it runs, which files may change. A run records it at its start; resuming with a different
 * contract would compare numbers that do not mean the same thing. Directions, agent, search
 * knobs, constraints and the mode or bar of several objectives may change between invocations
 * (that is how a person steers a run).
 */
export function contractOf(p: Program): Record<string, unknown> {
  return {
    objective: p.objective,
    "run.setup": p.run.setup ?? null,
    "run.command": p.run.command,
    "run.evaluate": p.run.evaluate ?? null,
    "run.budget": p.run.budgetMs,
    "files.editable": [...p.files.editable].sort(),
    "files.protected": [...p.files.protected].sort(),
    "metrics.holdout": [...p.metrics.holdout].sort(),
    // Added later: present only when used, so runs recorded before them resume unchanged.
    ...(p.files.holdout.length ? { "files.holdout": [...p.files.holdout].sort() } : {}),
    ...(p.outputs.length ? { outputs: [...p.outputs].sort() } : {}),
    // Rubric grading: the rubric (a protected file, pinned by its hash), what is graded and by
    // whom are how the score is measured. The time limit and the disagreement bar are not.
    ...(p.run.rubric
      ? {
          "run.evaluate.rubric": {
            rubric: p.run.rubric.rubricFile,
            grade: p.run.rubric.grade,
            judges: p.run.rubric.judges.map((j) => [j.name, j.provider, j.baseUrl ?? null, j.model]),
            panel: p.run.rubric.panel,
            canaryMax: p.run.rubric.canaryMax,
            canaryEvery: p.run.rubric.canaryEvery,
          },
        }
      : {}),
    // Several objectives: the metrics measured are the contract; the mode and the bar steer.
    ...(p.objectives ? { "objective.metrics": p.objectives.metrics } : {}),
  };
}

/** Fields whose values differ, as "field: old → new". */
export function contractChanges(recorded: Record<string, unknown>, now: Record<string, unknown>): string[] {
  const out: string[] = [];
  for (const key of new Set([...Object.keys(recorded), ...Object.keys(now)])) {
    const a = JSON.stringify(recorded[key] ?? null);
    const b = JSON.stringify(now[key] ?? null);
    if (a !== b) out.push(`${key}: ${a} → ${b}`);
  }
  return out;
}
