/**
 * The evaluate phase: an experiment's trials (the proxy ladder's rungs, then full-budget trials
 * until the judge decides or the budget runs out) and its decision (decide.ts). The baseline's
 * repeated trials are the run's noise sample.
 */

import { recordDecision } from "./decide.ts";
import { AutolabError } from "./errors.ts";
import type { LoopEvent } from "./events.ts";
import { bestOf, objectiveOf } from "./experiments.ts";
import { formatMetric } from "./format.ts";
import { parentNodeOf } from "./frontier.ts";
import { afterDecisionEnv, bestCommitOf, runHook } from "./hooks.ts";
import { judgeInputOf } from "./judge-input.ts";
import { climbLadder } from "./ladder.ts";
import type { ExperimentRecord } from "./ledger.ts";
import { coordinationOf, type LoopDeps, type Trials } from "./loop-deps.ts";
import { trialsSpent } from "./run-budget.ts";
import { mean as meanOf, sampleSd } from "./stats.ts";
import { runTrial } from "./trial-step.ts";
import { isFullBudget } from "./trial-values.ts";
import type { Decision, Program, TrialResult } from "./types.ts";

/**
 * Runs the trials of `exp` and, unless interrupted, decides it and moves the ratchet. Four
 * cases: a candidate on a best that is no longer the one it is judged on is rejected as stale;
 * one built while the baseline is still measured (parallel runs) goes to Coordination.beforeBaseline;
 * the baseline measures the noise; any other candidate climbs the ladder and meets the judge.
 */
export async function evaluateExperiment(
  deps: LoopDeps,
  exp: ExperimentRecord,
  emit: (e: LoopEvent) => void,
  signal: AbortSignal | undefined,
  /** Known when the caller just built `exp` on the best and its worktree is at exp.commit. */
  freshOn?: string,
): Promise<void> {
  await evaluateAndDecide(deps, exp, emit, signal, freshOn);
  // The after hook (program.md hooks:) follows the decision, if there was one (not on Ctrl-C).
  if (!deps.program.hooks?.after || signal?.aborted) return;
  if (!deps.ledger.getExperiment(deps.run.id, exp.n)?.decision) return;
  await runHook(deps, "after", exp.n, {
    at: bestCommitOf(deps),
    env: afterDecisionEnv(deps, exp.n),
    emit,
    signal,
    experimentId: exp.id,
  });
}

/**
 * evaluateExperiment without the after hook: what a nested evaluation calls (the parallel run's
 * beforeBaseline judges a candidate inside an outer evaluateExperiment, which runs the hook).
 */
export async function evaluateAndDecide(
  deps: LoopDeps,
  exp: ExperimentRecord,
  emit: (e: LoopEvent) => void,
  signal: AbortSignal | undefined,
  freshOn?: string,
): Promise<void> {
  const { ledger, run, workspace: ws } = deps;
  // The notebook as this evaluation starts: the best it is judged against (a parallel run's
  // other slots may move it meanwhile; the decision checks again, under the lock).
  const exps = ledger.listExperiments(run.id);
  const best = bestOf(exps);
  const coordination = coordinationOf(deps);
  const bestCommit = freshOn ?? (await coordination.judgedOn(exp));
  if (exp.n !== 0 && exp.parentCommit !== bestCommit) return rejectStale(deps, exp, bestCommit, best, emit);

  if (!freshOn) await ws.resetTo(exp.commit);
  const trials = trialsOf(deps, exp, emit, signal);
  if (exp.n !== 0 && !best && coordination.beforeBaseline) {
    return coordination.beforeBaseline(deps, exp, trials, emit, signal);
  }
  if (exp.n === 0) return decideBaseline(deps, exp, trials, emit, signal);
  return judgeCandidate(deps, exp, exps, trials, emit, signal);
}

function trialsOf(
  deps: LoopDeps,
  exp: ExperimentRecord,
  emit: (e: LoopEvent) => void,
  signal: AbortSignal | undefined,
): Trials {
  const { program, ledger, run } = deps;
  // Trials that finished before a crash are not run again: they count, only the rest is missing.
  const finished = (): TrialResult[] =>
    (ledger.getExperiment(run.id, exp.n)?.trials ?? [])
      .filter((t) => isFullBudget(program, t)) // the proxy ladder's cheaper rungs are not the judge's
      .map((t) => t.result)
      .filter((r): r is NonNullable<typeof r> => r !== undefined && r.status !== "interrupted");
  const another = async (fresh = false): Promise<boolean> => {
    const done = finished().length;
    // A candidate's first trial runs on a fresh seed (src/core/trial-seeds.ts): a rule may keep
    // on one trial (greedy, an exact objective), so that one must be on a seed the candidate's
    // code cannot have seen. Its later trials take the slots every experiment shares (pairs),
    // except confirmations (fresh again).
    const first = exp.n !== 0 && done === 0;
    const r = await runTrial(deps, exp.n, fresh || first ? "fresh" : done, emit, signal);
    return r.status !== "interrupted";
  };
  return { finished, another };
}

/** Serially this cannot happen; with parallel slots a stale candidate is rebased (see org). */
function rejectStale(
  deps: LoopDeps,
  exp: ExperimentRecord,
  bestCommit: string,
  best: ExperimentRecord | undefined,
  emit: (e: LoopEvent) => void,
): void {
  const bestMetric = best ? objectiveOf(best, deps.program.objective.metric) : undefined;
  const reason = `stale: built on ${exp.parentCommit.slice(0, 8)} but the best is now ${bestCommit.slice(0, 8)}`;
  deps.ledger.decide(exp.id, { action: "reject", reason, mechanismConfirmed: null });
  emit({
    type: "decision",
    n: exp.n,
    action: "reject",
    reason,
    best: { n: best?.n ?? 0, metric: bestMetric ?? Number.NaN },
  });
}

/**
 * The baseline: with a proxy ladder it first measures every cheaper rung (candidates rank
 * against it), then runs judge.baselineTrials times with different seeds — the noise sample —
 * and is kept with their mean, or the run stops (assertBaselineOk) when one failed.
 */
async function decideBaseline(
  deps: LoopDeps,
  exp: ExperimentRecord,
  { finished, another }: Trials,
  emit: (e: LoopEvent) => void,
  signal: AbortSignal | undefined,
): Promise<void> {
  const { program, ledger, judge } = deps;
  const metric = program.objective.metric;
  const rungs = await climbLadder(deps, exp, emit, (rung) => runTrial(deps, 0, 0, emit, signal, rung));
  if (rungs === "interrupted") return;
  while (
    rungs === "top" &&
    finished().length < judge.baselineTrials &&
    finished().every((r) => r.status === "ok")
  ) {
    if (!(await another())) return;
  }
  const results = finished();
  const bad =
    rungs === "top"
      ? (results.find((r) => r.status !== "ok") ?? missingObjective(program, results))
      : { reason: rungs.reason, status: "crash" };
  const values = results.map((r) => r.metrics[metric] as number);
  const mean = values.length ? meanOf(values) : 0;
  const decision = bad
    ? { action: "crash" as const, reason: bad.reason ?? bad.status, mechanismConfirmed: null }
    : {
        action: "keep" as const,
        reason:
          values.length > 1 ? `baseline: mean of ${values.length} trials (${spread(values)})` : "baseline",
        metric: mean,
        mechanismConfirmed: null,
      };
  ledger.decide(exp.id, decision);
  emit({
    type: "decision",
    n: 0,
    action: decision.action,
    reason: decision.reason,
    ...(bad ? {} : { metric: mean }),
    best: { n: 0, metric: bad ? Number.NaN : mean },
  });
}

/**
 * A candidate: the proxy ladder's rungs, then full-budget trials until the judge decides (the
 * incumbent re-measured when it asks), the budget runs out, or no trials are left; then the
 * decision, under the coordination's lock (decide.ts).
 */
async function judgeCandidate(
  deps: LoopDeps,
  exp: ExperimentRecord,
  /** The notebook as the evaluation started (its best is the one judged against). */
  exps: ExperimentRecord[],
  { finished, another }: Trials,
  emit: (e: LoopEvent) => void,
  signal: AbortSignal | undefined,
): Promise<void> {
  const { program, ledger, run, judge } = deps;
  const metric = program.objective.metric;
  const best = bestOf(exps);
  const bestMetric = best ? objectiveOf(best, metric) : undefined;
  if (!best || bestMetric === undefined) throw new AutolabError("NO_BEST", "the run has no measured best.");
  // Judged against the best it was built on (in a parallel run the best may have moved since).
  // With a branching frontier, the kept node it grew from (a tree node is kept in the tree too).
  const parent = parentNodeOf(exps, exp) ?? best;
  const parentMetric = objectiveOf(parent, metric) ?? bestMetric;
  /** The judge's view of the run now: re-read after an incumbent trial adds to the best. */
  const judgeInput = () => judgeInputOf(deps, exp, parent, parentMetric);
  /** Why no further trial may start (the run's budget is spent), else undefined. */
  // (An unbounded run reads nothing for it.)
  const spent = () => (deps.budget ? trialsSpent(deps.budget, ledger.listExperiments(run.id)) : undefined);
  /** Queued (a parallel run) but the budget ran out before any of its trials, rungs included. */
  const notRun =
    deps.budget && (ledger.getExperiment(run.id, exp.n)?.trials.length ?? 0) === 0 ? spent() : undefined;
  // The proxy ladder: one trial per cheaper rung; a candidate not promoted is decided there.
  const climbed = notRun
    ? "top"
    : await climbLadder(deps, exp, emit, (rung) => runTrial(deps, exp.n, 0, emit, signal, rung));
  if (climbed === "interrupted") return;
  let decision: Decision | undefined = notRun
    ? { action: "discard", reason: `not run: ${notRun} before its first trial`, mechanismConfirmed: null }
    : climbed === "top"
      ? undefined
      : climbed;
  let remeasure = true;
  while (!decision) {
    const trials = finished();
    if (trials.length === 0) {
      if (!(await another())) return;
      continue;
    }
    const verdict = judge.decide({ ...judgeInput(), trials });
    const out = verdict.action === "more" ? spent() : undefined;
    if (verdict.action !== "more") decision = verdict;
    else if (out) {
      // Undecided when the budget ran out: discarded with what its trials showed.
      const values = trials.map((t) => t.metrics[metric]).filter((v): v is number => Number.isFinite(v));
      decision = {
        action: "discard",
        reason: `${verdict.reason}; ${out} before it was decided`,
        ...(values.length ? { metric: meanOf(values) } : {}),
        mechanismConfirmed: false,
      };
    } else if (verdict.incumbent && remeasure) {
      // The incumbent is evidence too: re-measured in this worktree on the challenger's next
      // seed. A confirmation trial's fresh seed is the challenger's to run first (so its code
      // cannot have seen it), then the incumbent's on the same seed (a pair).
      if (verdict.fresh) {
        if (trials.length >= judge.maxTrials) {
          decision = {
            action: "discard",
            reason: `${verdict.reason}; no trials left (${judge.maxTrials})`,
            mechanismConfirmed: false,
          };
          continue;
        }
        if (!(await another(true))) return;
        // The budget may have run out with the challenger's trial: the judge decides without the pair.
        if (spent()) continue;
      }
      const r = await runTrial(deps, parent.n, "next", emit, signal, undefined, exp.n);
      if (r.status === "interrupted") return;
      if (r.status !== "ok") {
        remeasure = false; // not again for this challenger: its other trials decide
        ledger.addNote(
          run.id,
          parent.id,
          `the incumbent #${parent.n} failed when re-measured (trial ${ledger.getExperiment(run.id, parent.n)?.trials.length ?? "?"}: ${r.status}${r.reason ? `: ${r.reason}` : ""}); it is judged on its other trials`,
        );
      }
    } else if (trials.length >= judge.maxTrials) {
      decision = {
        action: "discard",
        reason: `${verdict.reason}; no trials left (${judge.maxTrials})`,
        mechanismConfirmed: false,
      };
    } else if (!(await another(verdict.fresh === true))) return;
  }
  const decided = decision;
  await coordinationOf(deps).lock(() => recordDecision(deps, exp, decided, emit));
}

/**
 * Several objectives: a baseline trial that printed the primary metric but not another listed
 * one fails the baseline (every candidate would crash on it), naming the metric.
 */
function missingObjective(
  program: Program,
  results: TrialResult[],
): { reason: string; status: string } | undefined {
  const listed = program.objectives?.metrics ?? [];
  for (const r of results) {
    const missing = listed.find((m) => !Number.isFinite(r.metrics[m.metric]));
    if (missing) {
      return {
        status: "crash",
        reason: `objective metric "${missing.metric}" missing or not finite: every trial must print each of ${listed.map((m) => m.metric).join(", ")} (docs/objectives.md)`,
      };
    }
  }
  return undefined;
}

/** "± sd" of a few values, for reasons people read. */
function spread(values: number[]): string {
  const sd = values.length > 1 ? sampleSd(values) : 0;
  return `${formatMetric(meanOf(values))} ± ${formatMetric(sd)}`;
}
