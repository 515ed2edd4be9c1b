/**
 * The decide phase: the decision row, then the ratchet (decision first, branch second: on resume
 * the ledger is the truth), then alarms over the notebook.
 */
import { crashPoint } from "./crash-points.ts";
import { AutolabError } from "./errors.ts";
import type { LoopEvent } from "./events.ts";
import { bestOf, objectiveOf } from "./experiments.ts";
import { formatMetric } from "./format.ts";
import { isBetter } from "./frontier.ts";
import { judgeInputOf, okTrials } from "./judge-input.ts";
import type { ExperimentRecord } from "./ledger.ts";
import { branches, coordinationOf, type LoopDeps } from "./loop-deps.ts";
import { verifyRatchet } from "./ratchet.ts";
import type { Decision, Direction } from "./types.ts";

/** Writes the decision and moves the ratchet; in a parallel run a winner on an old best is merged. */
export async function recordDecision(
  deps: LoopDeps,
  exp: ExperimentRecord,
  decided: Decision,
  emit: (e: LoopEvent) => void,
): Promise<void> {
  const { program, ledger, run, workspace: ws } = deps;
  let decision = decided;
  const metric = program.objective.metric;
  const exps = ledger.listExperiments(run.id);
  const best = bestOf(exps);
  const bestMetric = best ? objectiveOf(best, metric) : undefined;
  if (!best || bestMetric === undefined) throw new AutolabError("NO_BEST", "the run has no measured best.");
  const bestCommit = best.commit;
  await verifyRatchet(deps, bestCommit, exp, emit);
  if (decision.action === "keep" && exp.parentCommit !== bestCommit) {
    if (branches(program)) {
      // The tree frontier: a keep against another kept node (serially one the frontier drew; in
      // a parallel run also a best that moved meanwhile, a node of the tree all the same) moves
      // the ratchet only when it beats the best too; otherwise it stays in the tree as a node.
      // Never merged onto the best: the tree keeps its branches apart (docs/loop.md).
      // Moving the ratchet takes what any keep takes: the judge, asked against the best itself.
      const direction = program.objective.direction;
      const ahead =
        decision.metric !== undefined && isBetter(decision.metric, bestMetric, direction) && exp.n > best.n;
      const notCredible = ahead ? notCredibleAgainst(deps, exp, best, bestMetric) : undefined;
      decision = onTree(decision, best.n, bestMetric, direction, exp.n < best.n, notCredible);
    } else {
      // Only a parallel run judges a candidate on a best that has moved (Coordination.judgedOn).
      const { keepOnMovedBest } = coordinationOf(deps);
      if (keepOnMovedBest) {
        await keepOnMovedBest(deps, exp, decision, best, exps, emit);
        return;
      }
    }
  }
  // What the rule found about the run (a deterministic objective) is said once in the notebook.
  if (decision.notice && !ledger.listNotes(run.id).some((n) => n.text === decision.notice)) {
    ledger.addNote(run.id, exp.id, decision.notice);
  }
  // Decision first, branch second: on resume the ledger is the truth and the branch follows it.
  const alarmsBefore = decision.action === "keep" && deps.checkAlarms ? deps.checkAlarms(exps) : [];
  ledger.decide(exp.id, decision);
  crashPoint("after-decision");
  if (decision.action === "keep") await ws.advance(exp.commit, bestCommit);
  if (decision.action === "keep" && deps.checkAlarms) {
    for (const alarm of deps.checkAlarms(ledger.listExperiments(run.id))) {
      if (alarmsBefore.some((a) => a.kind === alarm.kind)) continue;
      ledger.addNote(run.id, exp.id, `ALARM ${alarm.kind}: ${alarm.reason}`);
      emit({ type: "alarm", kind: alarm.kind, reason: alarm.reason, n: exp.n });
    }
  }
  const newBest =
    decision.action === "keep" && decision.metric !== undefined
      ? { n: exp.n, metric: decision.metric }
      : { n: best.n, metric: bestMetric };
  emit({
    type: "decision",
    n: exp.n,
    action: decision.action,
    reason: decision.reason,
    ...(decision.metric !== undefined ? { metric: decision.metric } : {}),
    best: newBest,
  });
}

/** The judge's reason when it would not keep `exp` against `best` itself; undefined when it would. */
function notCredibleAgainst(
  deps: LoopDeps,
  exp: ExperimentRecord,
  best: ExperimentRecord,
  bestMetric: number,
): string | undefined {
  const now = deps.ledger.getExperiment(deps.run.id, exp.n) ?? exp;
  const verdict = deps.judge.decide({
    ...judgeInputOf(deps, exp, best, bestMetric),
    trials: okTrials(deps.program, now),
  });
  return verdict.action === "keep" ? undefined : verdict.reason;
}

/**
 * A candidate kept against the kept node it grew from (not the best): kept, moving the ratchet,
 * when its value beats the best's too; else a tree node — a discard others may build on.
 * `bestIsLater`: the best has a higher number (a parallel run kept it while this one ran). Kept
 * experiments go in order of n (bestOf, the ratchet's reconciliation), so such a candidate is a
 * tree node even when it beats the best — the frontier ranks it first and grows from it.
 * `notCredible`: the judge's reason when, asked about the candidate against the best, it did not
 * keep it (ahead by a point value inside the noise): a tree node too, the ratchet stays.
 */
export function onTree(
  decision: Decision,
  bestN: number,
  bestMetric: number,
  direction: Direction,
  bestIsLater = false,
  notCredible?: string,
): Decision {
  const v = decision.metric;
  const shown = `the best #${bestN} (${formatMetric(bestMetric)})`;
  if (v !== undefined && isBetter(v, bestMetric, direction)) {
    if (bestIsLater) {
      return {
        ...decision,
        action: "discard",
        treeNode: true,
        reason: `kept in the tree: ${decision.reason}; it beats ${shown} too, but #${bestN} was kept while it ran and keeps go in order of number: the best #${bestN} stays`,
      };
    }
    if (notCredible !== undefined) {
      return {
        ...decision,
        action: "discard",
        treeNode: true,
        reason: `kept in the tree: ${decision.reason}; ahead of ${shown}, but not credibly (${notCredible}): the best stays`,
      };
    }
    return { ...decision, reason: `${decision.reason}; beats ${shown} too` };
  }
  return {
    ...decision,
    action: "discard",
    treeNode: true,
    reason: `kept in the tree: ${decision.reason}; ${shown} stays`,
  };
}
