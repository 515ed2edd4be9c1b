/**
 * The proxy ladder in the loop (program.md `ladder:`, docs/trust.md "Proxy ladder"). Cheaper
 * budgets are rungs below run.budget: a candidate runs one trial per rung, cheapest first, and
 * climbs on only while its value ranks among the best `promote` fraction of every value that
 * rung has seen in this run (or beats, there, the best it was built on). The top rung is
 * run.budget, where the judge decides from the full-budget trials only.
 *
 * State lives in the notebook: a rung is measured when the experiment has a finished trial at
 * that budget (TrialRecord.budgetMs), so a resumed experiment continues at the rung where it
 * stopped and trials that finished before a crash count. The baseline measures every rung (no
 * promotion), so candidates have something to rank against; a kept candidate climbed them all.
 */

import type { LoopEvent } from "./events.ts";
import { bestOf } from "./experiments.ts";
import { formatMetric, formatRungBudget } from "./format.ts";
import { isBetter, parentNodeOf } from "./frontier.ts";
import type { ExperimentRecord } from "./ledger.ts";
import type { LoopDeps } from "./loop-deps.ts";
import { mean } from "./stats.ts";
import { isFullBudget, valuesAt } from "./trial-values.ts";
import type { Alarm, Decision, Program, TrialResult } from "./types.ts";

export interface Rung {
  budgetMs: number;
  graceMs: number;
}

/** Runs one trial of the experiment at a rung's budget (seed index 0: rungs share their seed). */
export type RungTrial = (rung: Rung) => Promise<TrialResult>;

/** An experiment's value at a budget: the mean of its ok trials there (normally exactly one). */
export function valueAt(
  program: Program,
  e: ExperimentRecord,
  budgetMs: number | "full",
): number | undefined {
  const v = valuesAt(program, e, budgetMs);
  return v.length ? mean(v) : undefined;
}

/**
 * Climbs the ladder for `exp` (before the judge loop): "top" when it reached run.budget (or
 * there is no ladder), a Decision when it stops on a rung (not promoted: discard; failed trial:
 * crash or reject), "interrupted" when a rung trial was cut short (the experiment stays pending).
 * The baseline measures every rung and is never stopped by ranking.
 */
export async function climbLadder(
  deps: LoopDeps,
  exp: ExperimentRecord,
  emit: (e: LoopEvent) => void,
  trial: RungTrial,
): Promise<Decision | "top" | "interrupted"> {
  const { program, ledger, run } = deps;
  const ladder = program.ladder;
  if (!ladder) return "top";
  const metric = program.objective.metric;
  const current = () => ledger.getExperiment(run.id, exp.n) ?? exp;
  if (exp.n !== 0 && current().trials.length === 0) noteTopRungAlarms(deps, exp, emit);

  for (const [i, rung] of ladder.rungs.entries()) {
    const name = formatRungBudget(rung.budgetMs);
    let result: TrialResult | undefined = current()
      .trials.filter((t) => t.budgetMs === rung.budgetMs && t.result && t.result.status !== "interrupted")
      .at(-1)?.result;
    if (!result) {
      // A trial on a rung above the first makes a new pair of adjacent rungs: the proxy alarm may change.
      const before = i > 0 ? proxyAlarms(deps, ledger.listExperiments(run.id)) : [];
      result = await trial(rung);
      if (result.status === "interrupted") return "interrupted";
      if (i > 0) noteNewAlarms(deps, before, proxyAlarms(deps, ledger.listExperiments(run.id)), exp, emit);
    }
    if (result.status !== "ok") return failedOnRung(name, result);
    if (exp.n === 0) continue;

    const exps = ledger.listExperiments(run.id);
    const value = result.metrics[metric] as number;
    const better = (a: number, b: number) => isBetter(a, b, program.objective.direction);
    const seen = exps.flatMap((e) => {
      const v = e.n === exp.n ? value : valueAt(program, e, rung.budgetMs);
      return v === undefined ? [] : [v];
    });
    const rank = 1 + seen.filter((v) => better(v, value)).length;
    const promoted = Math.max(1, Math.ceil(ladder.promote * seen.length));
    // Ranked against the node it grew from, as the judge does (a tree node with a frontier).
    const best = bestOf(exps);
    const parent = parentNodeOf(exps, exp) ?? best;
    const parentValue = parent && parent.n !== exp.n ? valueAt(program, parent, rung.budgetMs) : undefined;
    if (rank <= promoted || (parentValue !== undefined && better(value, parentValue))) continue;
    const whose = parent?.n === best?.n ? "the best" : "its parent";
    const there =
      parentValue !== undefined ? `; ${whose}, #${parent?.n}, has ${formatMetric(parentValue)} there` : "";
    return {
      action: "discard",
      reason: `not promoted from the ${name} rung: ${metric} ${formatMetric(value)} ranks ${rank} of ${seen.length} (top ${Math.round(ladder.promote * 100)}% promoted${there})`,
      mechanismConfirmed: null,
    };
  }
  return "top";
}

/** A rung trial that did not produce a value stops the climb, as a failed trial does at the top. */
function failedOnRung(name: string, r: TrialResult): Decision {
  const why = `on the ${name} rung: ${r.reason ?? r.status}`;
  switch (r.status) {
    case "timeout":
      return { action: "reject", reason: `timeout ${why}`, mechanismConfirmed: null };
    case "tampered":
      return { action: "reject", reason: `tampered ${why}`, mechanismConfirmed: null };
    default:
      return { action: "crash", reason: `${r.status} ${why}`, mechanismConfirmed: null };
  }
}

/** The proxy alarms among the notebook's alarms (deps.checkAlarms: src/app/alarms.ts). */
function proxyAlarms(deps: LoopDeps, exps: ExperimentRecord[]): Alarm[] {
  return (deps.checkAlarms?.(exps) ?? []).filter((a) => a.kind.startsWith("proxy"));
}

/** Records and announces the alarms of `after` that `before` did not have, on experiment `on`. */
function noteNewAlarms(
  deps: LoopDeps,
  before: Alarm[],
  after: Alarm[],
  on: ExperimentRecord,
  emit: (e: LoopEvent) => void,
): void {
  for (const alarm of after) {
    if (before.some((a) => a.kind === alarm.kind)) continue;
    deps.ledger.addNote(deps.run.id, on.id, `ALARM ${alarm.kind}: ${alarm.reason}`);
    emit({ type: "alarm", kind: alarm.kind, reason: alarm.reason, n: on.n });
  }
}

/**
 * The pair (last cheap rung, run.budget) is made by the judge's trials. The loop records new
 * alarms after a keep; for a candidate discarded at the top, its pair is checked here, when
 * the next candidate starts climbing: alarms with its full-budget trials vs. without them.
 */
function noteTopRungAlarms(deps: LoopDeps, exp: ExperimentRecord, emit: (e: LoopEvent) => void): void {
  const { program, ledger, run } = deps;
  if (!deps.checkAlarms) return;
  const exps = ledger.listExperiments(run.id);
  let last: ExperimentRecord | undefined;
  for (const e of exps) {
    if (e.n === exp.n || !e.decision) continue;
    if (!last?.decision || e.decision.decidedAt >= last.decision.decidedAt) last = e;
  }
  if (!last || last.n === 0 || last.decision?.action === "keep") return;
  if (valueAt(program, last, "full") === undefined) return;
  const without = exps.map((e) =>
    e === last ? { ...e, trials: e.trials.filter((t) => !isFullBudget(program, t)) } : e,
  );
  noteNewAlarms(deps, proxyAlarms(deps, without), proxyAlarms(deps, exps), last, emit);
}
