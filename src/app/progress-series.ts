import type { ChartPoint, ChartSeries } from "../chart/progress-chart.ts";
import type { ExperimentRecord, RunRecord } from "../core/ledger.ts";
import { objectiveOf } from "../core/views.ts";

/** The progress chart's data for a run: one point per experiment, objective metric only. */
export function progressSeries(run: RunRecord, exps: ExperimentRecord[]): ChartSeries {
  return { metric: run.metric, direction: run.direction, points: exps.map((e) => chartPoint(e, run.metric)) };
}

export function chartPoint(e: ExperimentRecord, metric: string): ChartPoint {
  return {
    n: e.n,
    metric: objectiveOf(e, metric) ?? null,
    action: e.decision?.action ?? "pending",
    label: e.n === 0 ? "baseline" : firstLine(e.hypothesis, 100),
  };
}

export function firstLine(s: string, max: number): string {
  const line = s.split("\n")[0] ?? "";
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}
