import { bestOf, objectiveOf } from "../core/experiments.ts";
import { formatRungBudget } from "../core/format.ts";
import { valueAt } from "../core/ladder.ts";
import type { ExperimentRecord } from "../core/ledger.ts";
import { mean as meanOf } from "../core/stats.ts";
import { isFullBudget } from "../core/trial-values.ts";
import type { Alarm, Program } from "../core/types.ts";
import { checkHoldout, pooledNoise } from "../trust/holdout-alarm.ts";
import { describeNoise, type NoiseReport } from "../trust/noise-judge.ts";
import { checkProxy, type Pair, type ProxyCheck } from "../trust/proxy-ladder.ts";

/** Values of the ok trials at run.budget (a proxy ladder's cheaper rungs are not counted). */
const okValues = (e: ExperimentRecord | undefined, name: string, program?: Program): number[] =>
  (e?.trials ?? [])
    .filter((t) => !program || isFullBudget(program, t))
    .map((t) => t.result)
    .filter((r) => r?.status === "ok" && r.metrics[name] !== undefined)
    .map((r) => r?.metrics[name] as number);

const mean = (xs: number[]) => (xs.length ? meanOf(xs) : undefined);

/**
 * Alarms over a run's notebook: the holdout canary both ways (`overfitting:<holdout>`: the
 * objective improves while the holdout does not follow; `leakage:<holdout>`: the holdout
 * improves far more than the objective — src/trust/holdout-alarm.ts has the rule), a baseline
 * too noisy to ever accept anything, a proxy rung that stopped predicting. Computed from the
 * records, so status, the loop and the dashboard agree. Reasons carry holdout values: for
 * people only (agent views drop holdout alarms, src/core/views.ts agentAlarms).
 */
export function alarmsOf(program: Program, exps: ExperimentRecord[]): Alarm[] {
  const alarms: Alarm[] = [];
  const metric = program.objective.metric;
  const kept = exps.filter((e) => e.decision?.action === "keep");
  // The noise of one trial, pooled over every experiment with repeated trials (the baseline's
  // three, each confirmed keep's, candidates that ran more than one), each around its own mean.
  const repeated = exps.filter((e) => okValues(e, metric, program).length > 1);
  const objectiveNoise = pooledNoise(repeated.map((e) => okValues(e, metric, program)));
  for (const h of program.metrics.holdout) {
    const holdoutNoise = pooledNoise(repeated.map((e) => okValues(e, h, program)));
    const res = checkHoldout({
      kept: kept.map((e) => {
        const values = okValues(e, h, program);
        const m = mean(values);
        return {
          n: e.n,
          objective: objectiveOf(e, metric) ?? Number.NaN,
          ...(m !== undefined ? { holdout: m } : {}),
          trials: Math.max(1, values.length),
          objectiveTrials: Math.max(1, okValues(e, metric, program).length),
        };
      }),
      objective: { name: metric, direction: program.objective.direction },
      holdout: { name: h },
      holdoutSigma: holdoutNoise.sigma,
      objectiveSigma: objectiveNoise.sigma,
      df: Math.min(objectiveNoise.df, holdoutNoise.df),
    });
    if (res.alarm) alarms.push({ kind: `${res.kind ?? "overfitting"}:${h}`, reason: res.reason });
  }
  const noise = noiseOf(program, exps);
  if (noise?.tooNoisy) alarms.push({ kind: "too-noisy", reason: noise.reason });
  for (const step of ladderOf(program, exps) ?? []) {
    if (step.check.alarm) alarms.push({ kind: `proxy:${step.low}→${step.high}`, reason: step.check.reason });
  }
  return alarms;
}

/** One step of the proxy ladder: a rung and the next one up (the last step ends at run.budget). */
export interface LadderStep {
  low: string;
  high: string;
  /** Candidates (not the baseline) with a value on the lower rung. */
  measured: number;
  /** Of those, the ones with a value on the higher rung too: promoted (or still climbing). */
  promoted: number;
  /** Rank correlation between the two rungs over experiments measured on both (baseline included). */
  check: ProxyCheck;
}

/** The most recent pairs the proxy alarm looks at: a proxy that stops predicting shows there. */
export const PROXY_WINDOW = 20;

/**
 * The proxy ladder over the notebook: per step, how many candidates were measured and promoted
 * and whether the cheap rung still ranks experiments like the expensive one. Pairs exist only
 * for promoted candidates (and the baseline), so they come from the top of the cheap rung: that
 * restriction of range lowers the correlation even for a good proxy, which is why the default
 * threshold (ladder.alarm_below 0.2) is lower than checkProxy's and min_pairs is 12 (docs/trust.md).
 */
export function ladderOf(program: Program, exps: ExperimentRecord[]): LadderStep[] | undefined {
  const ladder = program.ladder;
  if (!ladder) return undefined;
  const levels: Array<number | "full"> = [...ladder.rungs.map((r) => r.budgetMs), "full"];
  const name = (l: number | "full") => formatRungBudget(l === "full" ? program.run.budgetMs : l);
  const sorted = [...exps].sort((a, b) => a.n - b.n);
  const steps: LadderStep[] = [];
  for (let i = 0; i + 1 < levels.length; i++) {
    const lo = levels[i] as number | "full";
    const hi = levels[i + 1] as number | "full";
    const pairs: Pair[] = [];
    let measured = 0;
    let promoted = 0;
    for (const e of sorted) {
      const low = valueAt(program, e, lo);
      if (low === undefined) continue;
      const high = valueAt(program, e, hi);
      if (e.n !== 0) {
        measured++;
        if (e.trials.some((t) => (hi === "full" ? isFullBudget(program, t) : t.budgetMs === hi))) promoted++;
      }
      if (high !== undefined) pairs.push({ low, high });
    }
    const check = checkProxy(pairs, {
      threshold: ladder.alarmBelow,
      minPairs: ladder.minPairs,
      window: PROXY_WINDOW,
      lowName: name(lo),
      highName: name(hi),
    });
    steps.push({ low: name(lo), high: name(hi), measured, promoted, check });
  }
  return steps;
}

/** The run's noise as status shows it (undefined before the baseline is measured). */
export function noiseOf(program: Program, exps: ExperimentRecord[]): NoiseReport | undefined {
  const metric = program.objective.metric;
  const base = okValues(
    exps.find((e) => e.n === 0),
    metric,
    program,
  );
  if (base.length === 0) return undefined;
  const best = bestOf(exps);
  const bm = best ? objectiveOf(best, metric) : undefined;
  return describeNoise({
    metricName: metric,
    baseline: base,
    ...(best && bm !== undefined
      ? { best: { n: best.n, metric: bm, values: okValues(best, metric, program) } }
      : {}),
    // Every configuration's repeats: σ is pooled over the whole run.
    run: exps.map((e) => ({ n: e.n, values: okValues(e, metric, program) })),
  });
}
