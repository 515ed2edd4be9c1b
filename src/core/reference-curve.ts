/**
 * The pruner's reference curve (docs/security.md "Curves are claims"). Progress values are printed
 * by the trial: claims, not measurements. A candidate's curve becomes the reference only once it
 * agrees with what the protected evaluator measured of the same trial.
 */
import type { ExperimentRecord } from "./ledger.ts";
import { isFullBudget } from "./trial-values.ts";
import type { Direction, Program } from "./types.ts";

type Curve = readonly (readonly [number, number])[];

/** A trial's curve with the objective value the protected evaluator measured for the same trial. */
export interface MeasuredCurve {
  curve: Curve;
  value: number;
}

/**
 * Whether `claimed` (a candidate's curve and its evaluated value) may serve as the pruner's
 * reference: progress values are printed by the trial, so they are claims, checked against the
 * evaluation of the same trial. `anchor` is the baseline's (the user's own code). The curve's end
 * may not claim a relative improvement over the anchor's end more than twice (+ 5 points) the
 * improvement its evaluated value shows over the anchor's: a curve that says "far better" while
 * the evaluator says "a little better" (or worse) is contradicted, and never a reference.
 */
export function curveAgrees(claimed: MeasuredCurve, anchor: MeasuredCurve, direction: Direction): boolean {
  const end = (c: Curve) => {
    const finite = c.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
    return finite[finite.length - 1]?.[1];
  };
  const ce = end(claimed.curve);
  const ae = end(anchor.curve);
  if (ce === undefined || ae === undefined) return false;
  if (!Number.isFinite(claimed.value) || !Number.isFinite(anchor.value)) return false;
  const sign = direction === "minimize" ? 1 : -1;
  const scale = (x: number) => Math.max(Math.abs(x), 1e-12);
  const byCurve = (sign * (ae - ce)) / scale(ae);
  const byValue = (sign * (anchor.value - claimed.value)) / scale(anchor.value);
  return byCurve <= 2 * Math.max(byValue, 0) + 0.05;
}

/**
 * The curve a running trial is compared with (docs/security.md "Curves are claims"): the best's
 * first full-budget ok trial's, when it agrees with what the evaluator measured of that trial
 * (`curveAgrees`, against the baseline's); else the baseline's (the user's own code); none when
 * the baseline has no curve to check against.
 */
export function referenceCurve(
  program: Program,
  best: ExperimentRecord | undefined,
  baseline: ExperimentRecord | undefined,
): Array<[number, number]> | undefined {
  const measured = (e: ExperimentRecord | undefined) => {
    const t = e?.trials.find(
      (t) => isFullBudget(program, t) && t.result?.status === "ok" && t.result.progress?.length,
    );
    const value = t?.result?.metrics[program.objective.metric];
    return t?.result?.progress && typeof value === "number" && Number.isFinite(value)
      ? { curve: t.result.progress, value }
      : undefined;
  };
  const anchor = measured(baseline);
  if (!anchor) return undefined;
  const claimed = best && best.n !== 0 ? measured(best) : undefined;
  return claimed && curveAgrees(claimed, anchor, program.objective.direction) ? claimed.curve : anchor.curve;
}
