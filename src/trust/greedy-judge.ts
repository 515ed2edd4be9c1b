import { formatMetric } from "../core/format.ts";
import { isBetter, type Judge, type JudgeInput } from "../core/judge.ts";
import type { Decision, TrialResult } from "../core/types.ts";
import { checkConstraints, parseConstraint } from "./constraints.ts";

/** Costs every trial has, usable in constraints next to the metrics. */
export function costsOf(t: TrialResult): Record<string, number> {
  return { wall_s: t.wallS, cpu_s: t.cpuS, peak_rss_mb: t.peakRssMb };
}

/**
 * Outcomes that are not a measured metric. Shared by every acceptance rule: a crash is a
 * crash whatever the statistics.
 */
export function decideFailure(program: JudgeInput["program"], t: TrialResult): Decision | undefined {
  switch (t.status) {
    case "ok":
      return undefined;
    case "timeout":
      return {
        action: "reject",
        reason: `timeout: ${t.reason ?? "exceeded the budget"}`,
        mechanismConfirmed: null,
      };
    case "tampered":
      return {
        action: "reject",
        reason: `tampered: ${t.reason ?? "a protected file changed"}`,
        mechanismConfirmed: null,
      };
    case "missing_metric":
    case "nonfinite_metric":
    case "crash":
      return { action: "crash", reason: t.reason ?? t.status, mechanismConfirmed: null };
    case "pruned": {
      const why = t.reason ?? "its learning curve was worse than the best's";
      return {
        action: "discard",
        reason: why.startsWith("pruned") ? why : `pruned: ${why}`,
        mechanismConfirmed: false,
      };
    }
    case "interrupted":
      return { action: "crash", reason: "interrupted", mechanismConfirmed: null };
  }
  void program;
}

/** Checks program constraints over a trial's metrics and costs; a violation rejects. */
export function decideConstraints(program: JudgeInput["program"], t: TrialResult): Decision | undefined {
  if (program.constraints.length === 0) return undefined;
  const check = checkConstraints(program.constraints.map(parseConstraint), { ...t.metrics, ...costsOf(t) });
  if (check.ok) return undefined;
  return { action: "reject", reason: `constraint: ${check.violations.join("; ")}`, mechanismConfirmed: null };
}

/**
 * autoresearch's rule: keep when the single trial's metric is strictly better than the best.
 * Noise can make a worse change look better; the noise-aware judge exists for that.
 */
export const greedyJudge: Judge = {
  name: "greedy",
  baselineTrials: 1,
  maxTrials: 1,
  decide({ program, trials, best }: JudgeInput): Decision {
    const t = trials[trials.length - 1];
    if (!t) return { action: "crash", reason: "no trial finished", mechanismConfirmed: null };
    const failed = decideFailure(program, t) ?? decideConstraints(program, t);
    if (failed) return failed;
    const name = program.objective.metric;
    const value = t.metrics[name] as number;
    const cmp = `${name} ${formatMetric(value)} vs best ${formatMetric(best.metric)} (#${best.n})`;
    if (isBetter(program, value, best.metric)) {
      return { action: "keep", reason: `improved: ${cmp}`, metric: value, mechanismConfirmed: true };
    }
    return { action: "discard", reason: `not better: ${cmp}`, metric: value, mechanismConfirmed: false };
  },
};

/**
 * The first failed trial of several (crash, timeout, tampering, no metric, a broken constraint)
 * as the decision, saying which trial when it was not the only one: a candidate that fails on
 * some seeds is fragile. Shared by the rules that judge several trials (noise, posterior).
 */
export function firstFailure(program: JudgeInput["program"], trials: TrialResult[]): Decision | undefined {
  for (let i = 0; i < trials.length; i++) {
    const t = trials[i] as TrialResult;
    const d = decideFailure(program, t) ?? decideConstraints(program, t);
    if (!d) continue;
    return trials.length > 1 ? { ...d, reason: `trial ${i + 1} of ${trials.length}: ${d.reason}` } : d;
  }
  return undefined;
}

/**
 * A prune may stop a candidate's first trial (a curve clearly worse than the best's: discarded);
 * it never overturns trials that completed (issue #38 item 5). A pruned trial after the first
 * says nothing a judge can weigh — the incumbent's re-measurements are never pruned — so it is
 * left out, and the candidate is judged on its completed trials.
 */
export function withoutLaterPrunes(trials: TrialResult[]): TrialResult[] {
  return trials.filter((t, i) => i === 0 || t.status !== "pruned");
}
