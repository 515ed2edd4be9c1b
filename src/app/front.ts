/**
 * The front of a run with several objectives (docs/objectives.md), as status, the report, the
 * dashboard and MCP show it: the kept experiments no other kept experiment dominates, each with
 * its mean of every objective metric over its full-budget ok trials.
 */
import { firstLine } from "../core/format.ts";
import type { ExperimentRecord } from "../core/ledger.ts";
import { isFullBudget } from "../core/trial-values.ts";
import type { ObjectiveMetric, ObjectiveMode, Program } from "../core/types.ts";
import { paretoFront } from "../trust/objectives-judge.ts";
import { mean } from "../trust/stats.ts";

/** `status.front` (and GET /api/status's): null for a run with one objective. */
export interface StatusFront {
  mode: ObjectiveMode;
  metrics: ObjectiveMetric[];
  /** threshold_then_optimize's bar. */
  threshold: { metric: string; bar: number } | null;
  /** The kept, non-dominated experiments in order of n (the last kept one is the branch's head). */
  points: FrontPointJson[];
  /** Kept experiments in all (on the front or since dominated). */
  kept: number;
  /** The experiment the branch holds (the last kept), on the front or not; null before any keep. */
  head: number | null;
}

export interface FrontPointJson {
  id: number;
  commit: string;
  /** First line of the hypothesis (researcher text: escape it wherever it is shown). */
  hypothesis: string;
  /** Mean of each objective metric over its full-budget ok trials. */
  values: Record<string, number>;
  trials: number;
  /** True for the last kept experiment: the one the branch holds. */
  head: boolean;
}

/** Every kept experiment with its mean of each objective metric (full-budget ok trials). */
export function keptObjectivePoints(
  program: Program,
  exps: readonly ExperimentRecord[],
): { n: number; values: Record<string, number>; trials: number; e: ExperimentRecord }[] {
  const metrics = program.objectives?.metrics ?? [program.objective];
  return exps
    .filter((e) => e.decision?.action === "keep")
    .map((e) => {
      const ok = e.trials
        .filter((t) => isFullBudget(program, t))
        .map((t) => t.result)
        .filter((r) => r?.status === "ok");
      const values: Record<string, number> = {};
      for (const m of metrics) {
        const vs = ok.map((r) => r?.metrics[m.metric]).filter((v): v is number => Number.isFinite(v));
        if (vs.length) values[m.metric] = mean(vs);
      }
      return { n: e.n, values, trials: ok.length, e };
    });
}

/** The front, or null when the program has one objective (or could not be read). */
export function frontOf(program: Program | undefined, exps: readonly ExperimentRecord[]): StatusFront | null {
  const objectives = program?.objectives;
  if (!program || !objectives) return null;
  const points = keptObjectivePoints(program, exps);
  const head = points[points.length - 1]?.n;
  const front = new Set(paretoFront(objectives.metrics, points).map((p) => p.n));
  return {
    mode: objectives.mode,
    metrics: objectives.metrics.map((m) => ({ ...m })),
    threshold: objectives.threshold ? { ...objectives.threshold } : null,
    points: points
      .filter((p) => front.has(p.n))
      .map((p) => ({
        id: p.n,
        commit: p.e.commit,
        hypothesis: p.n === 0 ? "baseline" : firstLine(p.e.hypothesis),
        values: p.values,
        trials: p.trials,
        head: p.n === head,
      })),
    kept: points.length,
    head: head ?? null,
  };
}
