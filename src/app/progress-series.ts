import type { ChartPoint, ChartSeries, PriorPoint } from "../chart/progress-chart.ts";
import { lastResult, objectiveOf } from "../core/experiments.ts";
import { firstLine } from "../core/format.ts";
import type { ExperimentRecord, ImportedResultRecord, RunRecord } from "../core/ledger.ts";
import type { TrialResult } from "../core/types.ts";

/**
 * The progress chart's data for a run: one point per experiment, at its objective value, or,
 * for one pruned before it had any, at the last value of its learning curve; and the notebook's
 * imported results (`autolab init --from`) as a series of their own, `prior`, drawn before
 * experiment 0 and never part of the running best. The dashboard (`/api/chart`) and the report
 * draw this same series.
 */
export function progressSeries(
  run: RunRecord,
  exps: ExperimentRecord[],
  imported: readonly ImportedResultRecord[] = [],
): ChartSeries {
  const series: ChartSeries = {
    metric: run.metric,
    direction: run.direction,
    points: exps.map((e) => chartPoint(e, run.metric)),
  };
  if (imported.length) series.prior = priorPoints(imported, run.metric);
  return series;
}

/** Imported results on the run's metric, numbered 1… in import order (several sources: one after another). */
export function priorPoints(imported: readonly ImportedResultRecord[], metric: string): PriorPoint[] {
  return imported.map((r, i) => ({
    seq: i + 1,
    metric: r.metrics[metric] ?? null,
    status: r.status,
    // Control characters have no place in an SVG (nor a terminal): an imported description is untrusted.
    label: firstLine(r.description.replace(/[\p{Cc}]/gu, " "), 100),
  }));
}

export function chartPoint(e: ExperimentRecord, metric: string): ChartPoint {
  const label = e.n === 0 ? "baseline" : firstLine(e.hypothesis, 100);
  const value = objectiveOf(e, metric);
  const last = lastResult(e);
  if (value === undefined && last?.status === "pruned") {
    return {
      n: e.n,
      metric: lastProgress(last)?.value ?? null,
      action: "pruned",
      label,
      pruned: prunedAt(last),
    };
  }
  return { n: e.n, metric: value ?? null, action: e.decision?.action ?? "pending", label };
}

/** Where a pruned trial's learning curve stopped: its k-th progress value, at that share of the budget. */
function prunedAt(r: TrialResult): NonNullable<ChartPoint["pruned"]> {
  const p = lastProgress(r);
  if (!p) return { metric: null, step: 0, at: null };
  // The notebook does not name the progress metric; the runner recorded its last value by name.
  const name = Object.entries(r.metrics).find(([, v]) => v === p.value)?.[0] ?? null;
  return { metric: name, step: p.step, at: p.at };
}

/** The last finite point of a trial's learning curve; `step` counts from 1. */
function lastProgress(r: TrialResult): { value: number; step: number; at: number } | undefined {
  const curve = r.progress ?? [];
  for (let i = curve.length - 1; i >= 0; i--) {
    const [x, v] = curve[i] as [number, number];
    if (Number.isFinite(x) && Number.isFinite(v)) return { value: v, step: i + 1, at: x };
  }
  return undefined;
}
