/**
 * Several objectives (program.md `objective: { metrics: [...], mode }`, docs/objectives.md): a
 * Judge that wraps the single-metric rule (noise-aware or greedy) and asks it about each metric.
 *
 * Every per-metric question is the single-metric rule itself: the candidate's trials against its
 * parent's (the best it was built on) with that metric as the objective, that metric's values of
 * the baseline and of every configuration of the run for its noise — so a per-metric "credibly
 * better" has the same margins, pairs, confirmation and re-measurements as with one objective,
 * and "more trials" when inside the noise.
 *
 * pareto: kept when the rule keeps the candidate on at least one metric (credibly better than its
 * parent there) and no other kept experiment credibly dominates it. K credibly dominates C when K
 * is credibly better than C on some metric and C is credibly better than K on none; "credibly
 * better" between two recorded experiments is a z test on their means with the metric's
 * run-wide σ (src/trust/noise-model.ts) at the rule's keep threshold (noise-judge.ts
 * keepThreshold); exact values when the metric is deterministic; never credible while its σ is
 * unknown. The parent cannot dominate a candidate the rule found credibly better on a metric, so
 * the parent is not asked again. When a kept point is better on every metric but not yet
 * credibly, the candidate gets more trials (up to the rule's maxTrials) before it is kept.
 * Otherwise, while any metric's rule wants another trial, another trial; else discarded.
 *
 * threshold_then_optimize (two metrics): the parent "has reached the bar" when its mean of the
 * bar metric is past the bar (in that metric's direction) by the keep threshold in standard
 * errors (σ/√n); greedy: simply past it. Before that, the rule judges the bar metric alone (the
 * other is ignored). After it, a candidate is kept when the rule keeps it on the optimized
 * metric and its own mean of the bar metric is credibly past the bar; one clearly below the bar
 * is discarded, and one whose bar metric is inside the noise of the bar gets more trials.
 *
 * The decision's metric is always the primary metric's value (the first listed): the rule's
 * noise-corrected value when the rule kept it on that metric, else the mean of its trials.
 */
import { formatMetric } from "../core/format.ts";
import type { Judge, JudgeInput, MoreTrials } from "../core/judge.ts";
import type { Decision, ObjectiveMetric, Objectives, TrialResult } from "../core/types.ts";
import { keepThreshold } from "./noise-judge.ts";
import { fitNoise, type NoiseModel } from "./noise-model.ts";
import { mean } from "./stats.ts";

/** The candidate's key in a noise fit (experiment numbers are never negative). */
const CANDIDATE = -1;

type Verdict = Decision | MoreTrials;

/** The finite values of one metric in trials. */
function valuesOf(trials: readonly TrialResult[], metric: string): number[] {
  const out: number[] = [];
  for (const t of trials) {
    const v = t.metrics[metric];
    if (typeof v === "number" && Number.isFinite(v)) out.push(v);
  }
  return out;
}

/** Positive when x is better than y in the metric's direction. */
function gain(m: ObjectiveMetric, x: number, y: number): number {
  return m.direction === "minimize" ? y - x : x - y;
}

/** One metric's noise across the run (and the candidate's values, when given). */
function metricNoise(input: JudgeInput, m: ObjectiveMetric, candidate?: readonly number[]): NoiseModel {
  const groups = (input.experiments ?? []).map((e) => ({ n: e.n, values: valuesOf(e.trials, m.metric) }));
  if (candidate) groups.push({ n: CANDIDATE, values: [...candidate] });
  const ref = groups.find((g) => g.n === 0)?.values ?? [];
  return fitNoise(groups, ref.length ? mean(ref) : 0);
}

/** How a comparison came out: z in standard errors (±∞ exact), and whether it is credible. */
interface Credibility {
  z: number;
  credible: boolean;
  /** x's mean is better than y's at all (ties: false). */
  ahead: boolean;
}

/**
 * Is the mean of xs credibly better than the mean of ys (or than a fixed value, `ys` a number)?
 * `plain`: the greedy rule — better is better.
 */
function credibleGain(
  m: ObjectiveMetric,
  xs: readonly number[],
  ys: readonly number[] | number,
  noise: NoiseModel,
  plain: boolean,
): Credibility {
  const mx = mean(xs);
  const fixed = typeof ys === "number";
  const my = fixed ? ys : mean(ys);
  const d = gain(m, mx, my);
  if (!(xs.length > 0) || (!fixed && !(ys.length > 0)) || !Number.isFinite(d)) {
    return { z: Number.NaN, credible: false, ahead: false };
  }
  if (plain) return { z: d > 0 ? Number.POSITIVE_INFINITY : 0, credible: d > 0, ahead: d > 0 };
  if (noise.source === "deterministic") {
    const credible = d > noise.floor;
    return { z: credible ? Number.POSITIVE_INFINITY : 0, credible, ahead: credible };
  }
  if (noise.source === "unknown" || !(noise.sigma > 0))
    return { z: Number.NaN, credible: false, ahead: d > 0 };
  const se = noise.sigma * Math.sqrt(1 / xs.length + (fixed ? 0 : 1 / ys.length));
  const z = d / se;
  return { z, credible: z >= keepThreshold(noise.df), ahead: d > 0 };
}

function fmtZ(z: number): string {
  if (Number.isNaN(z)) return "σ unknown";
  if (!Number.isFinite(z)) return "exact";
  return `${z.toFixed(1)}σ`;
}

/** The single-metric rule's input with metric m as the objective (values from the run's trials). */
function projectInput(input: JudgeInput, m: ObjectiveMetric, primary: string): JudgeInput {
  const program = { ...input.program, objective: m };
  if (m.metric === primary) return { ...input, program };
  const exps = input.experiments ?? [];
  const parentTrials = input.best.trials ?? exps.find((e) => e.n === input.best.n)?.trials ?? [];
  const bestValues = valuesOf(parentTrials, m.metric);
  const baseline = valuesOf(exps.find((e) => e.n === 0)?.trials ?? [], m.metric);
  return {
    ...input,
    program,
    best: {
      n: input.best.n,
      metric: bestValues.length ? mean(bestValues) : input.best.n === 0 ? mean(baseline) : Number.NaN,
      values: input.best.n === 0 && bestValues.length === 0 ? baseline : bestValues,
      trials: parentTrials,
    },
    baseline,
    run: exps.map((e) => ({ n: e.n, values: valuesOf(e.trials, m.metric) })),
  };
}

const isDecision = (v: Verdict): v is Decision => v.action !== "more";
const failedAction = (v: Verdict) => v.action === "crash" || v.action === "reject";

/** Wraps a single-metric judge (noise or greedy) into the several-objectives rule of `objectives`. */
export function createObjectivesJudge(inner: Judge, objectives: Objectives): Judge {
  const { metrics, mode } = objectives;
  const primary = (metrics[0] as ObjectiveMetric).metric;
  const plain = inner.name === "greedy";
  const names = metrics.map((m) => m.metric).join(", ");
  return {
    name: `${inner.name}+${mode}`,
    baselineTrials: inner.baselineTrials,
    maxTrials: inner.maxTrials,
    decide(input: JudgeInput): Verdict {
      const { trials } = input;
      if (trials.length === 0)
        return { action: "crash", reason: "no trial finished", mechanismConfirmed: null };
      // A failure (crash, timeout, constraint) is the same whatever the metric: the rule's own.
      const first = inner.decide(projectInput(input, metrics[0] as ObjectiveMetric, primary));
      if (failedAction(first)) return first;
      for (const [i, t] of trials.entries()) {
        if (t.status !== "ok") continue;
        const missing = metrics.find((m) => !Number.isFinite(t.metrics[m.metric]));
        if (missing) {
          return {
            action: "crash",
            reason: `trial ${i + 1}: objective metric "${missing.metric}" missing or not finite (the objectives are ${names}: every trial must print each)`,
            mechanismConfirmed: null,
          };
        }
      }
      const primaryValue = (v: Verdict | undefined): number =>
        v && v.action === "keep" && v.metric !== undefined ? v.metric : mean(valuesOf(trials, primary));
      const keep = (reason: string, primaryVerdict: Verdict | undefined): Decision => ({
        action: "keep",
        reason,
        metric: primaryValue(primaryVerdict),
        mechanismConfirmed: true,
      });
      const discard = (reason: string): Decision => ({
        action: "discard",
        reason,
        metric: mean(valuesOf(trials, primary)),
        mechanismConfirmed: false,
      });
      const more = (reason: string, incumbent: boolean): MoreTrials => ({
        action: "more",
        reason,
        ...(incumbent ? { incumbent: true } : {}),
        // The primary rule confirming: on a fresh seed (src/core/trial-seeds.ts).
        ...(first.action === "more" && first.fresh ? { fresh: true } : {}),
      });
      const verdictOn = (m: ObjectiveMetric): Verdict =>
        m.metric === primary ? first : inner.decide(projectInput(input, m, primary));
      const canMore = trials.length < inner.maxTrials;

      if (mode === "pareto") {
        const verdicts = metrics.map((m) => ({ m, v: verdictOn(m) }));
        const failed = verdicts.find(({ v }) => failedAction(v));
        if (failed) return failed.v;
        // What the rule found about the run (a deterministic metric) is said once in the notebook.
        const notice = verdicts.map(({ v }) => (isDecision(v) ? v.notice : undefined)).find((x) => x);
        const noted = (d: Decision): Decision => (notice ? { ...d, notice } : d);
        const better = verdicts.filter(({ v }) => v.action === "keep");
        const says = verdicts.map(({ m, v }) => `${m.metric}: ${v.reason}`).join(" | ");
        if (better.length > 0) {
          const on = better.map(({ m }) => m.metric).join(", ");
          // Does another kept point credibly dominate the candidate?
          const noise = new Map(
            metrics.map((m) => [m.metric, metricNoise(input, m, valuesOf(trials, m.metric))]),
          );
          let maybe: string | undefined;
          for (const k of input.experiments ?? []) {
            if (!k.kept || k.n === input.best.n) continue;
            const cmp = metrics.map((m) => {
              const kv = valuesOf(k.trials, m.metric);
              const cv = valuesOf(trials, m.metric);
              const n = noise.get(m.metric) as NoiseModel;
              return {
                m,
                k: credibleGain(m, kv, cv, n, plain),
                c: credibleGain(m, cv, kv, n, plain),
                kv,
                cv,
              };
            });
            if (cmp.some((x) => !x.kv.length)) continue;
            const kBetter = cmp.filter((x) => x.k.credible);
            if (kBetter.length > 0 && !cmp.some((x) => x.c.credible)) {
              const where = kBetter
                .map(
                  (x) =>
                    `${x.m.metric} ${formatMetric(mean(x.kv))} vs ${formatMetric(mean(x.cv))} (${fmtZ(x.k.z)})`,
                )
                .join(", ");
              return noted(
                discard(
                  `dominated: better than #${input.best.n} on ${on}, but kept #${k.n} is credibly better on ${where} and not credibly worse on any objective`,
                ),
              );
            }
            if (!maybe && cmp.every((x) => x.k.ahead) && !cmp.some((x) => x.c.ahead)) {
              maybe = `kept #${k.n} is ahead on every objective, not yet credibly`;
            }
          }
          if (maybe && canMore) {
            return more(
              `better than #${input.best.n} on ${on}, but ${maybe}; running trial ${trials.length + 1}`,
              false,
            );
          }
          const primaryVerdict = verdicts.find(({ m }) => m.metric === primary)?.v;
          return noted(
            keep(
              `pareto: credibly better than #${input.best.n} on ${on}; not credibly dominated by a kept experiment${maybe ? ` (${maybe})` : ""} — ${says}`,
              primaryVerdict,
            ),
          );
        }
        const wanting = verdicts.filter(({ v }) => v.action === "more");
        if (wanting.length > 0) {
          return more(
            `pareto: ${says}`,
            wanting.some(({ v }) => v.action === "more" && v.incumbent === true),
          );
        }
        return noted(discard(`pareto: not credibly better than #${input.best.n} on any objective — ${says}`));
      }

      // threshold_then_optimize
      const threshold = objectives.threshold as { metric: string; bar: number };
      const barMetric = metrics.find((m) => m.metric === threshold.metric) as ObjectiveMetric;
      const target = metrics.find((m) => m.metric !== threshold.metric) as ObjectiveMetric;
      const past = barMetric.direction === "minimize" ? "≤" : "≥";
      const exps = input.experiments ?? [];
      const parentTrials = input.best.trials ?? exps.find((e) => e.n === input.best.n)?.trials ?? [];
      const parentBar = valuesOf(parentTrials, barMetric.metric);
      const noiseBar = metricNoise(input, barMetric, valuesOf(trials, barMetric.metric));
      const reached = credibleGain(barMetric, parentBar, threshold.bar, noiseBar, plain);
      const barText = `${barMetric.metric} ${past} ${formatMetric(threshold.bar)}`;
      if (!reached.credible) {
        const v = verdictOn(barMetric);
        const phase = `below the bar (${barText} not yet reached by #${input.best.n}: ${parentBar.length ? formatMetric(mean(parentBar)) : "unmeasured"}): optimizing ${barMetric.metric}`;
        if (!isDecision(v)) return { ...v, reason: `${phase}; ${v.reason}` };
        if (v.action === "keep")
          return keep(`${phase}; ${v.reason}`, barMetric.metric === primary ? v : undefined);
        return { ...v, reason: `${phase}; ${v.reason}`, metric: mean(valuesOf(trials, primary)) };
      }
      const candBar = valuesOf(trials, barMetric.metric);
      const above = credibleGain(barMetric, candBar, threshold.bar, noiseBar, plain);
      const barState = `${barMetric.metric} ${formatMetric(mean(candBar))} (${fmtZ(above.z)} past the bar ${formatMetric(threshold.bar)})`;
      const phase = `bar reached (${barText} since #${input.best.n}): optimizing ${target.metric}`;
      const v = verdictOn(target);
      if (failedAction(v)) return v;
      if (!above.ahead && (candBar.length >= 2 || !canMore || plain)) {
        return discard(`${phase}; falls below the bar: ${barState}`);
      }
      if (v.action === "keep") {
        if (above.credible) {
          return keep(
            `${phase}; ${v.reason}; stays past the bar: ${barState}`,
            target.metric === primary ? v : undefined,
          );
        }
        if (canMore)
          return more(
            `${phase}; ${v.reason}; but ${barState} is not credibly past the bar yet; running trial ${trials.length + 1}`,
            false,
          );
        return discard(
          `${phase}; ${v.reason}; but ${barState} is not credibly past the bar after ${trials.length} trials`,
        );
      }
      if (!isDecision(v)) return { ...v, reason: `${phase}; ${v.reason}` };
      return { ...v, reason: `${phase}; ${v.reason}`, metric: mean(valuesOf(trials, primary)) };
    },
  };
}

/** One kept experiment's mean of each objective metric. */
export interface FrontPoint {
  n: number;
  values: Record<string, number>;
}

/**
 * The front: the kept experiments no other kept experiment dominates (at least as good on every
 * metric and better on one, by their means), in order of n.
 */
export function paretoFront(
  metrics: readonly ObjectiveMetric[],
  points: readonly FrontPoint[],
): FrontPoint[] {
  const complete = points.filter((p) => metrics.every((m) => Number.isFinite(p.values[m.metric])));
  const dominates = (a: FrontPoint, b: FrontPoint) =>
    metrics.every((m) => gain(m, a.values[m.metric] as number, b.values[m.metric] as number) >= 0) &&
    metrics.some((m) => gain(m, a.values[m.metric] as number, b.values[m.metric] as number) > 0);
  return complete.filter((p) => !complete.some((q) => q !== p && dominates(q, p))).sort((a, b) => a.n - b.n);
}
