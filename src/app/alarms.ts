import type { ExperimentRecord } from "../core/ledger.ts";
import type { Alarm, Program } from "../core/types.ts";
import { bestOf, objectiveOf } from "../core/views.ts";
import { checkHoldout, holdoutNoise } from "../trust/holdout-alarm.ts";
import { describeNoise, type NoiseReport } from "../trust/noise-judge.ts";

const okValues = (e: ExperimentRecord | undefined, name: string): number[] =>
  (e?.trials ?? [])
    .map((t) => t.result)
    .filter((r) => r?.status === "ok" && r.metrics[name] !== undefined)
    .map((r) => r?.metrics[name] as number);

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : undefined);

/**
 * Alarms over a run's notebook: the holdout canary (objective keeps improving while a holdout
 * metric worsens beyond noise) and a baseline too noisy to ever accept anything. Computed from
 * the records, so status, the loop and the dashboard agree.
 */
export function alarmsOf(program: Program, exps: ExperimentRecord[]): Alarm[] {
  const alarms: Alarm[] = [];
  const metric = program.objective.metric;
  const baseline = exps.find((e) => e.n === 0);
  const kept = exps.filter((e) => e.decision?.action === "keep");
  for (const h of program.metrics.holdout) {
    const sigma = holdoutNoise(okValues(baseline, h));
    const res = checkHoldout({
      kept: kept.map((e) => {
        const values = okValues(e, h);
        const m = mean(values);
        return {
          n: e.n,
          objective: objectiveOf(e, metric) ?? Number.NaN,
          ...(m !== undefined ? { holdout: m } : {}),
          trials: Math.max(1, values.length),
        };
      }),
      objective: { name: metric, direction: program.objective.direction },
      holdout: { name: h },
      holdoutSigma: sigma,
    });
    if (res.alarm) alarms.push({ kind: `overfitting:${h}`, reason: res.reason });
  }
  const noise = noiseOf(program, exps);
  if (noise?.tooNoisy) alarms.push({ kind: "too-noisy", reason: noise.reason });
  return alarms;
}

/** The run's noise as status shows it (undefined before the baseline is measured). */
export function noiseOf(program: Program, exps: ExperimentRecord[]): NoiseReport | undefined {
  const metric = program.objective.metric;
  const base = okValues(
    exps.find((e) => e.n === 0),
    metric,
  );
  if (base.length === 0) return undefined;
  const best = bestOf(exps);
  const bm = best ? objectiveOf(best, metric) : undefined;
  return describeNoise({
    metricName: metric,
    baseline: base,
    ...(best && bm !== undefined ? { best: { n: best.n, metric: bm, values: okValues(best, metric) } } : {}),
  });
}
