/**
 * The propose phase: one experiment on the current best — the researcher edits a worktree, the
 * change is scope-checked, committed (candidate ref), recorded; a failed or out-of-scope
 * proposal is decided at once, anything else is evaluated here (serial, MCP) or queued for a
 * slot (the scheduler: StepOptions.deferEvaluation).
 */
import { join } from "node:path";
import { type AgentFailure, failureForTerminal, isAgentFailure } from "./agent-failure.ts";
import {
  commitMessage,
  DEFAULT_MAX_DIFF_LINES,
  NO_CHANGE,
  scopeViolation,
  secretLeak,
  tooLarge,
} from "./candidate.ts";
import { crashPoint } from "./crash-points.ts";
import { AutolabError } from "./errors.ts";
import { evaluateExperiment } from "./evaluate.ts";
import type { LoopEvent } from "./events.ts";
import { bestOf, objectiveOf } from "./experiments.ts";
import { afterDecisionEnv, runHook } from "./hooks.ts";
import type { ExperimentRecord, HookRunRecord } from "./ledger.ts";
import { coordinationOf, type LoopDeps, measuredBest } from "./loop-deps.ts";
import { setupFilesOf } from "./setup.ts";
import type { DecisionAction, Proposal, ProposalContext } from "./types.ts";
import { freshDir } from "./untrusted-file.ts";
import { buildContext, notebookExtras, seedsOf, toView } from "./views.ts";
import type { Snapshot } from "./workspace.ts";

export interface StepOptions {
  emit?: (e: LoopEvent) => void;
  signal?: AbortSignal;
  /**
   * The researcher has already edited the worktree (an interactive agent through MCP): do not
   * reset it before proposing; untracked files absent from this snapshot count as new. The
   * caller put the worktree at the node this step builds on (Coordination.buildsOn: with a
   * branching frontier, the one loop-deps.ts frontierNode draws for this notebook).
   */
  prepared?: Snapshot;
  /** Replaces deps.agent.propose for this step (MCP: the proposal is what the agent said it did). */
  propose?: (ctx: ProposalContext) => Promise<Proposal>;
  maxDiffLines?: number;
  /** Parallel runs: stop after recording the candidate; a slot evaluates StepResult.experiment. */
  deferEvaluation?: boolean;
}

export interface StepResult {
  n: number;
  /** "queued": recorded with deferEvaluation, waiting for a slot. */
  action: DecisionAction | "interrupted" | "queued";
  reason: string;
  metric?: number;
  best: { n: number; metric: number };
  /** The researcher, not the idea, failed: crash, timeout, garbage, no change, out of scope. */
  researcherFailed: boolean;
  /** With deferEvaluation: the recorded candidate, waiting for a slot. */
  experiment?: ExperimentRecord;
}

/**
 * One experiment on the current best: propose → scope check → commit + ref → row → trial →
 * decision → ratchet. Returns undefined when stopped by the signal before anything was
 * recorded. Requires a run whose baseline has been measured (runLoop does that first).
 */
export async function runStep(deps: LoopDeps, opts: StepOptions = {}): Promise<StepResult | undefined> {
  const { program, ledger, run, workspace: ws, agent } = deps;
  const metric = program.objective.metric;
  const emit = opts.emit ?? (() => {});
  const exps = ledger.listExperiments(run.id);
  const coordination = coordinationOf(deps);
  // Reserved together with reading the best: kept experiments then come in order of n (bestOf);
  // a branching frontier draws the node for this number (the same number, the same node).
  const n = coordination.allocate();
  const base = coordination.buildsOn(deps, exps, n);
  if (!base) throw new AutolabError("NO_BEST", "the run has no measured best.");
  // What it builds on: the best, or with a branching frontier any kept node (frontier.ts).
  const { exp: best, metric: bestMetric } = base;
  const ratchet = measuredBest(program, exps) ?? base;
  // The ledger is the truth and the branch was reconciled with it at start: no git call needed.
  const bestCommit = best.commit;
  let before = opts.prepared;
  if (!before) {
    await ws.resetTo(bestCommit);
    before = await ws.snapshot();
  }
  // The before hook (program.md hooks:) runs in the worktree at the best, which it leaves clean;
  // a worktree the researcher already edited (MCP's prepared step) is not touched.
  const beforeHook = opts.prepared
    ? undefined
    : await runHook(deps, "before", n, { at: bestCommit, emit, signal: opts.signal });
  if (opts.signal?.aborted) {
    await ws.resetTo(bestCommit);
    return undefined;
  }
  if (beforeHook) before = await ws.snapshot();
  emit({
    type: "proposal_started",
    n,
    agent: deps.role ?? agent.name,
    ...(best.n !== ratchet.exp.n ? { parent: best.n } : {}),
  });

  // The researcher writes its log directory: each proposal gets one made now (agent, agent-2, …
  // when #n is proposed again after an interruption), never the one an earlier researcher filled
  // with symlinks or FIFOs for the harness to write through (docs/security.md).
  const agentLogDir = freshDir(join(deps.logDir, String(n)), "agent");
  let proposal: Proposal;
  let failure: AgentFailure | undefined;
  // What the researcher was shown, recorded with its row (the trajectory export, docs/learning.md).
  let contextText: string | undefined;
  try {
    const runSeeds = seedsOf(exps);
    const ctx: ProposalContext = {
      worktree: ws.projectDir,
      program,
      best: { n: best.n, metric: bestMetric, ...(best.params ? { params: best.params } : {}) },
      history: exps.map((e) => toView(e, program, runSeeds)),
      contextText: buildContext(program, run, exps, {
        ...(deps.instructions
          ? { role: { name: deps.role ?? "researcher", instructions: deps.instructions } }
          : {}),
        ...notebookExtras(ledger, program, run.id),
        // Its own before hook, with the latest after hook (not an older before hook).
        hooks: hooksForContext(deps, beforeHook),
        ...(deps.priorWork ? { priorWork: deps.priorWork.for(exps) } : {}),
        ...(best.n !== ratchet.exp.n ? { buildsOn: best } : {}),
      }),
      logDir: agentLogDir,
      ...(opts.signal ? { signal: opts.signal } : {}),
    };
    // An interactive agent (MCP: opts.propose) proposed before this context was built: it read
    // the notebook through its own tools, so there is nothing to record as what it was shown.
    if (!opts.propose) contextText = ctx.contextText;
    const sandbox = deps.confinement?.researcher(ws, setupFilesOf(deps), [agentLogDir]);
    if (sandbox) ctx.sandbox = sandbox;
    proposal = await (opts.propose ?? ((c) => agent.propose(c)))(ctx);
  } catch (err) {
    if (!isAgentFailure(err)) throw err;
    // A failed proposal is an ordinary outcome: recorded like any experiment, then the loop goes on.
    failure = err;
    proposal = {
      hypothesis: `(no proposal: the agent ${err.kind === "timeout" ? "timed out" : err.kind.replace("_", " ")})`,
      ...(err.usage ? { usage: err.usage } : {}),
    };
  }
  if (opts.signal?.aborted) {
    await ws.resetTo(bestCommit);
    return undefined;
  }
  const changed = await ws.changes(before);
  const violation = await scopeViolation(ws, program, changed);
  // Before the commit: a secret the change wrote is redacted out of the files (never in git).
  const secret = await secretLeak(ws, bestCommit, changed);
  const message = commitMessage(run.tag, n, agent.name, proposal, deps.role ? { role: deps.role } : {});
  const ref = await ws.commitCandidate(n, changed, message);
  crashPoint("after-commit");
  const exp = ledger.addExperiment(
    {
      runId: run.id,
      n,
      agent: agent.name,
      parentCommit: bestCommit,
      commit: ref.commit,
      ref: ref.ref,
      hypothesis: proposal.hypothesis,
      ...(proposal.mechanism ? { mechanism: proposal.mechanism } : {}),
      ...(proposal.expected ? { expected: proposal.expected } : {}),
      ...(proposal.params ? { params: proposal.params } : {}),
      ...(proposal.usage ? { usage: proposal.usage as Record<string, number> } : {}),
      ...(deps.role ? { role: deps.role } : {}),
      diff: ref.diff,
    },
    contextText,
  );
  crashPoint("after-row");
  emit({ type: "experiment_created", n, hypothesis: proposal.hypothesis, commit: ref.commit });

  const maxDiff = opts.maxDiffLines ?? DEFAULT_MAX_DIFF_LINES;
  const reject = failure
    ? `agent ${failure.kind}: ${failure.message}`
    : changed.length === 0
      ? NO_CHANGE
      : (violation ??
        secret ??
        (ref.diff.insertions + ref.diff.deletions > maxDiff ? tooLarge(ref.diff, maxDiff) : undefined));
  if (reject) {
    // A researcher whose output the harness refused to read (src/core/untrusted-file.ts) broke a
    // rule, as an out-of-scope edit does: a reject, not a crash.
    const action = failure && failure.kind !== "refused" ? "crash" : "reject";
    ledger.decide(exp.id, { action, reason: reject, mechanismConfirmed: null });
    const bestNow = { n: ratchet.exp.n, metric: ratchet.metric };
    const shown = failure ? failureForTerminal(failure) : undefined;
    emit({
      type: "decision",
      n,
      action,
      reason: reject,
      best: bestNow,
      ...(shown ? { failure: shown } : {}),
    });
    await ws.resetTo(bestCommit, changed);
    await runHook(deps, "after", n, {
      at: bestCommit,
      env: afterDecisionEnv(deps, n),
      emit,
      signal: opts.signal,
      experimentId: exp.id,
    });
    return { n, action, reason: reject, best: bestNow, researcherFailed: true };
  }
  if (opts.deferEvaluation) {
    return {
      n,
      action: "queued",
      reason: "recorded; a slot evaluates it",
      best: { n: ratchet.exp.n, metric: ratchet.metric },
      researcherFailed: false,
      experiment: exp,
    };
  }
  await evaluateExperiment(deps, exp, emit, opts.signal, bestCommit);
  const decided = ledger.getExperiment(run.id, n);
  const after = bestOf(ledger.listExperiments(run.id));
  const afterMetric = after ? objectiveOf(after, metric) : undefined;
  return {
    n,
    action: decided?.decision?.action ?? "interrupted",
    reason: decided?.decision?.reason ?? "interrupted; `autolab run` runs it again",
    ...(decided?.decision?.metric !== undefined ? { metric: decided.decision.metric } : {}),
    best: { n: after?.n ?? best.n, metric: afterMetric ?? bestMetric },
    researcherFailed: false,
  };
}

/**
 * The hook outputs a proposal for n reads: its own before hook's and the run's latest after
 * hook's (with parallel proposers, another's before hook is not this proposal's).
 */
function hooksForContext(deps: LoopDeps, before: HookRunRecord | undefined): HookRunRecord[] {
  if (!deps.program.hooks) return [];
  const latest = deps.ledger.latestHookRuns(deps.run.id).filter((h) => h.phase === "after");
  return before ? [...latest, before] : latest;
}
