import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { type AgentFailure, isAgentFailure } from "./agent-failure.ts";
import type { Confinement } from "./confinement.ts";
import { crashPoint } from "./crash-points.ts";
import { AutolabError } from "./errors.ts";
import type { LoopEvent, LoopEventListener } from "./events.ts";
import { fileRules } from "./file-patterns.ts";
import { formatMetric } from "./format.ts";
import type { Judge } from "./judge.ts";
import { climbLadder, type Rung } from "./ladder.ts";
import type { DiffStats, ExperimentRecord, Ledger, RunRecord } from "./ledger.ts";
import { budgetLeft, experimentsSpent, isBounded, type RunBudget, trialsSpent } from "./run-budget.ts";
import { closest } from "./suggest.ts";
import { trialsFailing } from "./trial-streak.ts";
import { isFullBudget } from "./trial-values.ts";
import type {
  Agent,
  Alarm,
  Decision,
  DecisionAction,
  Executor,
  Params,
  Program,
  Proposal,
  ProposalContext,
  TrialPruner,
  TrialResult,
} from "./types.ts";
import { bestOf, buildContext, firstLine, lastResult, objectiveOf, toView } from "./views.ts";
import type { Snapshot, Workspace } from "./workspace.ts";

export interface LoopDeps {
  program: Program;
  ledger: Ledger;
  run: RunRecord;
  workspace: Workspace;
  executor: Executor;
  agent: Agent;
  judge: Judge;
  /** Directory for this run's logs: <logDir>/<n>/<attempt>/. */
  logDir: string;
  /** File whose existence records that `setup` ran in this run's worktree. */
  setupStamp: string;
  /** Learning-curve pruning against the best's curve (absent: trials always run to the end). */
  makePruner?: (bestCurve: Array<[number, number]>) => TrialPruner;
  /** Alarms over the notebook (e.g. the holdout canary), checked after every kept change. */
  checkAlarms?: (exps: ExperimentRecord[]) => Alarm[];
  /** The slot this worker's trials run on (parallel runs): recorded per trial, its env added. */
  slot?: { index: number; env: Record<string, string> };
  /** The org role proposing through this worker (recorded on its experiments). */
  role?: string;
  /** The role's instructions (its file's body), appended to the context its agent reads. */
  instructions?: string;
  /** Parallel runs (src/core/scheduler.ts); absent in the serial loop. */
  parallel?: ParallelHooks;
  /** How setup, trials and researchers are confined (src/app/confinement.ts); absent: unsandboxed. */
  confinement?: Confinement;
  /**
   * The run's budget (--max-experiments, --max-trials, --max-time): the loop stops when it is
   * spent, and the judge is told how much of it is left (JudgeInput.budget). Absent: unbounded.
   */
  budget?: RunBudget;
}

/**
 * What a parallel run adds to the serial rules. A candidate is judged against its parent (the
 * best it was built on); when the best moved meanwhile, a winner is rebased onto the new best
 * as a new experiment that is evaluated again (a conflict rejects it as stale).
 */
export interface ParallelHooks {
  /** Serializes decide → advance across workers (the ratchet moves one decision at a time). */
  lock<T>(fn: () => Promise<T>): Promise<T>;
  /** The next experiment number (also reserved by proposals at their start). */
  allocate(): number;
  /** A merge candidate was recorded: queue it for evaluation. */
  onMerged(exp: ExperimentRecord): void;
  /**
   * Set while the baseline is being measured: resolves true once it is kept (false if it failed
   * or the run stopped). Meanwhile proposals build on the baseline and their first trials run.
   */
  baselineDecided?: Promise<boolean>;
  /** Queues `exp` again once the baseline is kept (set with baselineDecided). */
  afterBaseline?(exp: ExperimentRecord): void;
  /**
   * When a rebase conflicts and the candidate changed only knob values (search: knobs), writes
   * those values into the new best's files in `workspace` and commits them as candidate n;
   * undefined when the change is more than knob values. (src/app/knob-rebase.ts)
   */
  rebaseKnobs?(args: {
    workspace: Workspace;
    exp: ExperimentRecord;
    onto: string;
    n: number;
    message: string;
  }): Promise<{ commit: string; ref: string; diff: DiffStats } | undefined>;
}

export interface LoopOptions {
  /** Stop once the run holds this many experiments besides the baseline. */
  maxExperiments?: number;
  /** Stop once the run has started this many trials, every kind counted (src/core/run-budget.ts). */
  maxTrials?: number;
  /** Start no trial after this many milliseconds of this invocation. */
  maxTimeMs?: number;
  /** Changed lines (added + removed) above which a candidate is rejected. Default 5000. */
  maxDiffLines?: number;
  /** Consecutive failed proposals (crash, timeout, garbage, no change, out of scope) before the run stops. Default 5. */
  maxAgentFailures?: number;
  /** Consecutive candidates whose trials failed (crash, timeout, no metric) before the run stops. Default 10. */
  maxTrialFailures?: number;
  /** Ctrl-C: the running trial is killed and recorded as interrupted; `autolab run` resumes it. */
  signal?: AbortSignal;
  onEvent?: LoopEventListener;
}

export interface LoopSummary {
  stoppedBecause: string;
  experiments: ExperimentRecord[];
  best: ExperimentRecord | undefined;
}

/**
 * One run of the research loop, serially: reconcile after a crash, measure the baseline, then
 * propose → commit → record → trial → decide → ratchet, until the limit or a stop signal.
 *
 * Order of writes (what makes kill -9 at any point safe): candidate commit + ref, then the
 * experiment row, then a trial start row, then the trial result, then the decision row, then
 * the branch. Resume derives everything from which of these exist.
 */
export async function runLoop(given: LoopDeps, opts: LoopOptions = {}): Promise<LoopSummary> {
  const deps = withBudget(given, opts);
  const { program, ledger, run, workspace: ws, agent } = deps;
  const emit = (e: LoopEvent) => opts.onEvent?.(e);
  const stopped = () => opts.signal?.aborted === true;
  const list = () => ledger.listExperiments(run.id);

  let exps = startRun(deps, 1, emit);
  const finish = (reason: string): LoopSummary => finishRun(deps, reason, emit);
  const finishEarly = () => finish(STOPPED_BY_SIGNAL);

  await reconcileBranch(deps, exps, emit);
  await runSetup(deps, emit, opts.signal);
  if (stopped()) return finishEarly();

  // An experiment committed just before a crash but not yet recorded: adopt it.
  await adoptOrphan(deps, exps);
  exps = list();

  await ensureBaseline(deps, exps);
  exps = list();
  // A decided incumbent re-measured when the harness stopped: its trial is closed, not re-run.
  for (const e of exps.filter((x) => x.decision)) await closeOpenTrials(deps, e);
  exps = list();

  // Experiments without a decision: their trial was cut short by a crash or Ctrl-C.
  for (const e of exps.filter((x) => !x.decision)) {
    if (stopped()) return finishEarly();
    await closeOpenTrials(deps, e);
    await evaluateExperiment(deps, e, emit, opts.signal);
  }
  exps = list();

  assertBaselineOk(program, exps);
  if (stopped()) return finishEarly();

  const failures: string[] = [];
  while (!stopped()) {
    exps = list();
    const spent = experimentsSpent(deps.budget, exps);
    if (spent) {
      await ws.resetTo(bestOf(exps)?.commit ?? run.baseCommit);
      return finish(spent);
    }
    const step = await runStep(deps, {
      emit,
      ...(opts.signal ? { signal: opts.signal } : {}),
      ...(opts.maxDiffLines !== undefined ? { maxDiffLines: opts.maxDiffLines } : {}),
    });
    if (!step) break;
    const failing = trialsFailing(program, list(), opts.maxTrialFailures);
    if (failing) {
      await ws.resetTo(bestOf(list())?.commit ?? run.baseCommit);
      throw failing;
    }
    if (!step.researcherFailed) {
      failures.length = 0;
      continue;
    }
    // Failures that a researcher causes (crash, hang, garbage, nothing changed, out of scope) in a
    // row mean something is wrong with its setup, not with one idea: stop and say so.
    failures.push(`#${step.n} ${step.reason}`);
    if (failures.length >= (opts.maxAgentFailures ?? DEFAULT_MAX_AGENT_FAILURES)) {
      throw new AutolabError(
        "AGENT_FAILING",
        `the researcher (${agent.name}) failed ${failures.length} times in a row:\n  ${failures.map((f) => f.split("\n")[0]).join("\n  ")}`,
        `Check the agent's configuration (program.md \`agent:\`, docs/agents.md) and its logs in ${join(deps.logDir, "<n>", "agent")}; then \`autolab run\` continues the run.`,
      );
    }
  }
  await ws.resetTo(await ws.bestCommit());
  return finishEarly();
}

/**
 * The deps with the run's budget from the options (the time window starts now). A trial budget
 * must leave room for a candidate after the baseline's trials.
 */
export function withBudget(
  deps: LoopDeps,
  opts: Pick<LoopOptions, "maxExperiments" | "maxTrials" | "maxTimeMs">,
): LoopDeps {
  // Infinity is no limit; 0 experiments catches up (setup, baseline, experiments cut short) and
  // stops (autolab mcp); 0 trials is refused below; 0 ms starts no trial after the baseline.
  const given = (x: number | undefined): x is number => x !== undefined && Number.isFinite(x);
  const budget: RunBudget = {
    ...(given(opts.maxExperiments) ? { experiments: Math.max(0, opts.maxExperiments) } : {}),
    ...(given(opts.maxTrials) ? { trials: opts.maxTrials } : {}),
    ...(given(opts.maxTimeMs)
      ? { time: { start: Date.now(), end: Date.now() + Math.max(0, opts.maxTimeMs) } }
      : {}),
  };
  const baseline = deps.judge.baselineTrials;
  if (budget.trials !== undefined && budget.trials <= baseline) {
    throw new AutolabError(
      "INVALID_BUDGET",
      `--max-trials ${budget.trials} leaves no trial for a candidate: the baseline alone runs ${baseline} (its repeats measure the noise)`,
      `give at least ${baseline + 1}; a candidate usually needs 1 trial, one being confirmed about 8 (docs/noise.md)`,
    );
  }
  return isBounded(budget) ? { ...deps, budget } : deps;
}

export const STOPPED_BY_SIGNAL = "stopped by a signal (Ctrl-C); `autolab run` resumes";

/** Announces the run and records this harness session (how many slots); returns the notebook. */
export function startRun(deps: LoopDeps, slots: number, emit: (e: LoopEvent) => void): ExperimentRecord[] {
  const { ledger, run, program } = deps;
  const exps = ledger.listExperiments(run.id);
  emit({
    type: "run_started",
    tag: run.tag,
    branch: run.branch,
    metric: program.objective.metric,
    resumed: exps.length > 0,
    experiments: exps.length,
    ...(deps.confinement ? { sandbox: deps.confinement.description } : {}),
    ...(deps.confinement?.hint ? { sandboxHint: deps.confinement.hint } : {}),
  });
  ledger.startSession(run.id, slots, deps.confinement?.description);
  return exps;
}

/** The run's summary, announced. */
export function finishRun(deps: LoopDeps, reason: string, emit: (e: LoopEvent) => void): LoopSummary {
  const all = deps.ledger.listExperiments(deps.run.id);
  const best = bestOf(all);
  const bm = best ? objectiveOf(best, deps.program.objective.metric) : undefined;
  emit({
    type: "run_finished",
    reason,
    best: best && bm !== undefined ? { n: best.n, metric: bm } : undefined,
  });
  return { stoppedBecause: reason, experiments: all, best };
}

/** Experiment 0, the unmodified base commit, recorded if it is not yet. */
export async function ensureBaseline(deps: LoopDeps, exps: ExperimentRecord[]): Promise<void> {
  const { program, ledger, run, workspace: ws, agent } = deps;
  if (exps.some((e) => e.n === 0)) return;
  const ref = await ws.commitCandidate(0, [], "baseline");
  const params = agent.paramsOf ? await agent.paramsOf(ws.projectDir, program) : undefined;
  ledger.addExperiment({
    runId: run.id,
    n: 0,
    agent: "baseline",
    parentCommit: run.baseCommit,
    commit: ref.commit,
    ref: ref.ref,
    hypothesis: "baseline",
    mechanism: "the unmodified starting point every candidate is compared with",
    ...(params && Object.keys(params).length ? { params } : {}),
    diff: { files: 0, insertions: 0, deletions: 0 },
  });
}

/** A failed baseline stops the run: nothing could ever be compared with it. */
export function assertBaselineOk(program: Program, exps: ExperimentRecord[]): void {
  const baseline = exps.find((e) => e.n === 0);
  if (!baseline?.decision || baseline.decision.action === "keep") return;
  const result = lastResult(baseline);
  const tail = result?.logTail.trim().split("\n").slice(-8).join("\n") ?? "";
  const advice = baselineAdvice(program, result);
  throw new AutolabError(
    "BASELINE_FAILED",
    `the baseline (the unmodified project) failed: ${baseline.decision.reason}${advice.found ? `\n${advice.found}` : ""}${tail ? `\n--- last lines of its log ---\n${tail}` : ""}`,
    `${advice.fix}, commit, and start a new run (autolab run --tag <new-tag>).`,
  );
}

/**
 * What to do about a failed baseline. A command that ran but printed no objective is not
 * broken: name the metrics it did print (holdouts left out: an agent may read this through
 * MCP) and the likely one; only a command that failed is told to work.
 */
function baselineAdvice(program: Program, result: TrialResult | undefined): { found?: string; fix: string } {
  const metric = program.objective.metric;
  const step = `\`${program.run.evaluate ?? program.run.command}\``;
  if (result?.status === "nonfinite_metric") {
    return { fix: `Make ${step} print a finite number for ${metric} (it printed ${result.metrics[metric]})` };
  }
  if (result?.status !== "missing_metric") {
    return { fix: `Fix the program so that \`${program.run.command}\` works on the committed code` };
  }
  const hidden = new Set(program.metrics.holdout);
  const printed = Object.keys(result.metrics).filter((m) => m !== metric && !hidden.has(m));
  if (printed.length === 0) {
    return {
      found: `${step} ran and printed no metric line at all.`,
      fix: `Make ${step} print a line like "${metric}: 0.123" (or "METRIC ${metric}=0.123")`,
    };
  }
  const guess = likelyMetric(metric, printed);
  return {
    found: `${step} ran and printed ${printed.join(", ")}, but no ${metric}${guess ? ` — did you mean ${guess}?` : "."}`,
    fix: `Name the metric to optimize in program.md's objective (objective: { metric: ${guess ?? "<one of them>"}, … }), or make ${step} print "${metric}: <value>"`,
  };
}

/**
 * The printed metric the objective most likely meant: a near spelling (two neighbours swapped
 * too: "scroe"), one containing the other, or the only one.
 */
function likelyMetric(metric: string, printed: readonly string[]): string | undefined {
  const m = metric.toLowerCase();
  const swapped = (p: string) =>
    p.length === m.length &&
    [...m].some((_, i) => `${m.slice(0, i)}${m[i + 1]}${m[i]}${m.slice(i + 2)}` === p);
  return (
    closest(metric, printed) ??
    printed.find((p) => swapped(p.toLowerCase())) ??
    printed.find((p) => p.toLowerCase().includes(m) || m.includes(p.toLowerCase())) ??
    (printed.length === 1 ? printed[0] : undefined)
  );
}

export interface StepOptions {
  emit?: (e: LoopEvent) => void;
  signal?: AbortSignal;
  /**
   * The researcher has already edited the worktree (an interactive agent through MCP): do not
   * reset it before proposing; untracked files absent from this snapshot count as new.
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
  let best = bestOf(exps);
  let bestMetric = best ? objectiveOf(best, metric) : undefined;
  if (!best && deps.parallel?.baselineDecided) {
    // A parallel run proposes while the baseline is still measured: candidates build on it.
    best = exps.find((e) => e.n === 0);
    bestMetric = Number.NaN;
  }
  if (!best || bestMetric === undefined) throw new AutolabError("NO_BEST", "the run has no measured best.");
  // The ledger is the truth and the branch was reconciled with it at start: no git call needed.
  const bestCommit = best.commit;
  let before = opts.prepared;
  if (!before) {
    await ws.resetTo(bestCommit);
    before = await ws.snapshot();
  }
  // Reserved together with reading the best: kept experiments then come in order of n (bestOf).
  const n = deps.parallel ? deps.parallel.allocate() : Math.max(...exps.map((e) => e.n)) + 1;
  emit({ type: "proposal_started", n, agent: deps.role ?? agent.name });

  const agentLogDir = join(deps.logDir, String(n), "agent");
  await mkdir(agentLogDir, { recursive: true });
  let proposal: Proposal;
  let failure: AgentFailure | undefined;
  try {
    const ctx: ProposalContext = {
      worktree: ws.projectDir,
      program,
      best: { n: best.n, metric: bestMetric, ...(best.params ? { params: best.params } : {}) },
      history: exps.map((e) => toView(e, program)),
      contextText: buildContext(
        program,
        run,
        exps,
        deps.instructions
          ? { role: { name: deps.role ?? "researcher", instructions: deps.instructions } }
          : {},
      ),
      logDir: agentLogDir,
      ...(opts.signal ? { signal: opts.signal } : {}),
    };
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
  const message = commitMessage(run.tag, n, agent.name, proposal, deps.role ? { role: deps.role } : {});
  const ref = await ws.commitCandidate(n, changed, message);
  crashPoint("after-commit");
  const exp = ledger.addExperiment({
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
  });
  crashPoint("after-row");
  emit({ type: "experiment_created", n, hypothesis: proposal.hypothesis, commit: ref.commit });

  const maxDiff = opts.maxDiffLines ?? DEFAULT_MAX_DIFF_LINES;
  const reject = failure
    ? `agent ${failure.kind}: ${failure.message}`
    : changed.length === 0
      ? NO_CHANGE
      : (violation ??
        (ref.diff.insertions + ref.diff.deletions > maxDiff ? tooLarge(ref.diff, maxDiff) : undefined));
  if (reject) {
    const action = failure ? "crash" : "reject";
    ledger.decide(exp.id, { action, reason: reject, mechanismConfirmed: null });
    const bestNow = { n: best.n, metric: bestMetric };
    emit({ type: "decision", n, action, reason: reject, best: bestNow });
    await ws.resetTo(bestCommit, changed);
    return { n, action, reason: reject, best: bestNow, researcherFailed: true };
  }
  if (opts.deferEvaluation) {
    return {
      n,
      action: "queued",
      reason: "recorded; a slot evaluates it",
      best: { n: best.n, metric: bestMetric },
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

function tooLarge(diff: DiffStats, max: number): string {
  return `scope: the diff is too large (${diff.insertions + diff.deletions} changed lines in ${diff.files} files; the limit is ${max})`;
}

/**
 * The first seed index that no full-budget trial of `exp` holds, finished (ok or failed: a failed
 * one is not re-run) or running; an interrupted trial's seed is free again.
 */
function nextSeedIndex(program: Program, runSeed: number, exp: ExperimentRecord): number {
  const taken = new Set(
    exp.trials
      .filter((t) => isFullBudget(program, t) && t.result?.status !== "interrupted")
      .map((t) => t.seed - runSeed),
  );
  let k = 0;
  while (taken.has(k)) k++;
  return k;
}

/** Runs a trial of `exp` and, unless interrupted, decides it and moves the ratchet. */
export async function evaluateExperiment(
  deps: LoopDeps,
  exp: ExperimentRecord,
  emit: (e: LoopEvent) => void,
  signal: AbortSignal | undefined,
  /** Known when the caller just built `exp` on the best and its worktree is at exp.commit. */
  freshOn?: string,
): Promise<void> {
  const { program, ledger, run, workspace: ws, judge } = deps;
  const metric = program.objective.metric;
  const exps = ledger.listExperiments(run.id);
  const best = bestOf(exps);
  const bestMetric = best ? objectiveOf(best, metric) : undefined;
  // A parallel run judges against the parent and merges at decision time: no stale check here.
  const bestCommit = freshOn ?? (deps.parallel ? exp.parentCommit : await ws.bestCommit());

  if (exp.n !== 0 && exp.parentCommit !== bestCommit) {
    // Serially this cannot happen; with parallel slots a stale candidate is rebased (see org).
    const reason = `stale: built on ${exp.parentCommit.slice(0, 8)} but the best is now ${bestCommit.slice(0, 8)}`;
    ledger.decide(exp.id, { action: "reject", reason, mechanismConfirmed: null });
    emit({
      type: "decision",
      n: exp.n,
      action: "reject",
      reason,
      best: { n: best?.n ?? 0, metric: bestMetric ?? Number.NaN },
    });
    return;
  }

  if (!freshOn) await ws.resetTo(exp.commit);
  // Trials that finished before a crash are not run again: they count, only the rest is missing.
  const finished = (): TrialResult[] =>
    (ledger.getExperiment(run.id, exp.n)?.trials ?? [])
      .filter((t) => isFullBudget(program, t)) // the proxy ladder's cheaper rungs are not the judge's
      .map((t) => t.result)
      .filter((r): r is NonNullable<typeof r> => r !== undefined && r.status !== "interrupted");
  /** Runs the next trial; false when it was interrupted (the experiment stays pending). */
  const another = async (): Promise<boolean> => {
    const r = await runTrial(deps, exp.n, finished().length, emit, signal);
    return r.status !== "interrupted";
  };

  if (exp.n !== 0 && !best && deps.parallel?.baselineDecided) {
    // Built while the baseline is measured: its first trial runs now, on a slot the baseline
    // does not use (not with a ladder: its rungs rank against the baseline's). Judging it waits
    // for the baseline, without holding the slot: it goes back to the queue once the baseline
    // is kept.
    if (!program.ladder && finished().length === 0 && !(await another())) return;
    if (!bestOf(ledger.listExperiments(run.id))) {
      deps.parallel.afterBaseline?.(exp);
      return;
    }
    const now = ledger.getExperiment(run.id, exp.n);
    if (now && !now.decision) await evaluateExperiment(deps, now, emit, signal);
    return;
  }

  if (exp.n === 0) {
    // With a proxy ladder, the baseline first measures every cheaper rung (candidates rank against it).
    const rungs = await climbLadder(deps, exp, emit, (rung) => runTrial(deps, 0, 0, emit, signal, rung));
    if (rungs === "interrupted") return;
    // The baseline runs judge.baselineTrials times with different seeds: that is the noise sample.
    while (
      rungs === "top" &&
      finished().length < judge.baselineTrials &&
      finished().every((r) => r.status === "ok")
    ) {
      if (!(await another())) return;
    }
    const results = finished();
    const bad =
      rungs === "top" ? results.find((r) => r.status !== "ok") : { reason: rungs.reason, status: "crash" };
    const values = results.map((r) => r.metrics[metric] as number);
    const mean = values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);
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
    return;
  }

  if (!best || bestMetric === undefined) throw new AutolabError("NO_BEST", "the run has no measured best.");
  // Judged against the best it was built on (in a parallel run the best may have moved since).
  const parent = exps.find((e) => e.commit === exp.parentCommit && e.decision?.action === "keep") ?? best;
  const parentMetric = objectiveOf(parent, metric) ?? bestMetric;
  // The full-budget ok trials of an experiment, in order (values and trials must stay aligned:
  // the judge pairs candidate and best trials by seed).
  const okTrials = (e: ExperimentRecord | undefined): TrialResult[] =>
    (e?.trials ?? [])
      .filter((t) => isFullBudget(program, t))
      .map((t) => t.result)
      .filter((r): r is NonNullable<typeof r> => r?.status === "ok");
  const okValues = (e: ExperimentRecord | undefined) => okTrials(e).map((r) => r.metrics[metric] as number);
  /** The judge's view of the run now: re-read after an incumbent trial adds to the best. */
  const judgeInput = () => {
    const now = ledger.listExperiments(run.id);
    const p = now.find((e) => e.n === parent.n) ?? parent;
    return {
      program,
      best: { n: p.n, metric: parentMetric, values: okValues(p), trials: okTrials(p) },
      baseline: okValues(now.find((e) => e.n === 0)),
      // Every configuration's repeats inform σ (the noise model pools them).
      run: now.filter((e) => e.n !== exp.n).map((e) => ({ n: e.n, values: okValues(e) })),
      // The share of the run's budget left (this experiment counts as started).
      ...(deps.budget ? { budget: budgetLeft(deps.budget, now, exp.n) } : {}),
    };
  };
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
        ...(values.length ? { metric: values.reduce((a, b) => a + b, 0) / values.length } : {}),
        mechanismConfirmed: false,
      };
    } else if (verdict.incumbent && remeasure) {
      // The incumbent is evidence too: its next seed, in this worktree, before the challenger's.
      const r = await runTrial(deps, parent.n, "next", emit, signal, undefined, exp.n);
      if (r.status === "interrupted") return;
      if (r.status !== "ok") {
        remeasure = false; // not again for this challenger: its other trials decide
        ledger.addNote(
          run.id,
          parent.id,
          `the incumbent #${parent.n} failed when re-measured on seed ${r.seed} (${r.status}${r.reason ? `: ${r.reason}` : ""}); it is judged on its other trials`,
        );
      }
    } else if (trials.length >= judge.maxTrials) {
      decision = {
        action: "discard",
        reason: `${verdict.reason}; no trials left (${judge.maxTrials})`,
        mechanismConfirmed: false,
      };
    } else if (!(await another())) return;
  }
  const decided = decision;
  const record = () => recordDecision(deps, exp, decided, emit);
  await (deps.parallel ? deps.parallel.lock(record) : record());
}

/** Writes the decision and moves the ratchet; in a parallel run a winner on an old best is merged. */
async function recordDecision(
  deps: LoopDeps,
  exp: ExperimentRecord,
  decision: Decision,
  emit: (e: LoopEvent) => void,
): Promise<void> {
  const { program, ledger, run, workspace: ws } = deps;
  const metric = program.objective.metric;
  const exps = ledger.listExperiments(run.id);
  const best = bestOf(exps);
  const bestMetric = best ? objectiveOf(best, metric) : undefined;
  if (!best || bestMetric === undefined) throw new AutolabError("NO_BEST", "the run has no measured best.");
  const bestCommit = best.commit;
  await verifyRatchet(deps, bestCommit, exp, emit);
  if (decision.action === "keep" && exp.parentCommit !== bestCommit && deps.parallel) {
    await mergeOnto(deps, exp, decision, best, exps, emit);
    return;
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

/**
 * A candidate that beat the best it was built on, while the best moved on (parallel runs): its
 * change is rebased onto the current best as a new experiment, evaluated again before it can
 * be kept; a conflict rejects it as stale. Write order: merge commit + ref, merge row, then this
 * experiment's decision — a crash in between is resumed by adopting the ref (adoptOrphans) or
 * by finding the merge row (below), never by merging twice.
 */
async function mergeOnto(
  deps: LoopDeps,
  exp: ExperimentRecord,
  decision: Decision,
  best: ExperimentRecord,
  exps: ExperimentRecord[],
  emit: (e: LoopEvent) => void,
): Promise<void> {
  const { ledger, run, workspace: ws, parallel } = deps;
  if (!parallel) throw new AutolabError("NOT_PARALLEL", "merging needs a parallel run.");
  const bestNow = { n: best.n, metric: objectiveOf(best, deps.program.objective.metric) ?? Number.NaN };
  const beat = decision.reason.replace(/\.$/, "");
  let merged = exps.find((e) => e.rebaseOf === exp.n);
  if (!merged) {
    const m = parallel.allocate();
    const proposal: Proposal = {
      hypothesis: `${firstLine(exp.hypothesis)} (#${exp.n} rebased onto #${best.n})`,
      ...(exp.mechanism ? { mechanism: exp.mechanism } : {}),
      ...(exp.params ? { params: { ...(best.params ?? {}), ...changedParams(exp, exps) } } : {}),
    };
    const message = commitMessage(run.tag, m, exp.agent, proposal, {
      ...(exp.role ? { role: exp.role } : {}),
      rebaseOf: exp.n,
    });
    let res = await ws.rebase(m, exp.commit, best.commit, message);
    // A tuner's change is a set of knob values: on conflicting knob lines, it is the values
    // that are rebased (written into the new best's files), not the lines.
    if ("conflicts" in res && parallel.rebaseKnobs) {
      const byKnobs = await parallel.rebaseKnobs({ workspace: ws, exp, onto: best.commit, n: m, message });
      if (byKnobs) res = byKnobs;
    }
    if ("alreadyIn" in res) {
      const reason = `${beat}; the same change is already in the new best #${best.n}`;
      ledger.decide(exp.id, { action: "discard", reason, mechanismConfirmed: null });
      emit({ type: "decision", n: exp.n, action: "discard", reason, best: bestNow });
      return;
    }
    if ("conflicts" in res) {
      const reason = `stale: ${beat}, but its change conflicts with the new best #${best.n} in ${res.conflicts.join(", ") || "the same lines"}`;
      ledger.decide(exp.id, { action: "reject", reason, mechanismConfirmed: null });
      emit({ type: "decision", n: exp.n, action: "reject", reason, best: bestNow });
      return;
    }
    crashPoint("after-merge-commit");
    merged = ledger.addExperiment({
      runId: run.id,
      n: m,
      agent: exp.agent,
      ...(exp.role ? { role: exp.role } : {}),
      parentCommit: best.commit,
      commit: res.commit,
      ref: res.ref,
      hypothesis: proposal.hypothesis,
      ...(proposal.mechanism ? { mechanism: proposal.mechanism } : {}),
      ...(proposal.params ? { params: proposal.params } : {}),
      diff: res.diff,
      rebaseOf: exp.n,
    });
    emit({ type: "experiment_created", n: m, hypothesis: merged.hypothesis, commit: res.commit });
    parallel.onMerged(merged);
  }
  const reason = `${beat}; the best moved to #${best.n} meanwhile, so it was rebased onto it as #${merged.n}, which is evaluated again`;
  ledger.decide(exp.id, { action: "discard", reason, mechanismConfirmed: null });
  emit({ type: "decision", n: exp.n, action: "discard", reason, best: bestNow });
}

/** The knob values an experiment changed relative to its parent. */
function changedParams(exp: ExperimentRecord, exps: ExperimentRecord[]): Params {
  const parent = exps.find((e) => e.commit === exp.parentCommit)?.params ?? {};
  const out: Params = {};
  for (const [k, v] of Object.entries(exp.params ?? {})) if (parent[k] !== v) out[k] = v;
  return out;
}

/** "± sd" of a few values, for reasons people read. */
function spread(values: number[]): string {
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  const sd = Math.sqrt(values.reduce((a, b) => a + (b - mean) ** 2, 0) / Math.max(1, values.length - 1));
  return `${formatMetric(mean)} ± ${formatMetric(sd)}`;
}

/**
 * Runs one trial of experiment n. `seedIndex` is the number of trials already finished: trial
 * k of every experiment gets seed run.seed + k, so candidates and baseline share their seeds.
 * `rung`: a cheaper budget of the proxy ladder (default run.budget); such trials are not pruned.
 */
export async function runTrial(
  deps: LoopDeps,
  n: number,
  /**
   * Which seed (run.seed + index). "next": the first index no full-budget trial of the
   * experiment holds or is running — counted right before the start is recorded, so slots that
   * re-measure the same incumbent at once take different seeds.
   */
  seedIndex: number | "next",
  emit: (e: LoopEvent) => void,
  signal: AbortSignal | undefined,
  rung?: Rung,
  /** The incumbent is re-measured for this challenger (said in the trial_started event). */
  against?: number,
): Promise<TrialResult> {
  const { program, ledger, run, workspace: ws, executor } = deps;
  const budgetMs = rung?.budgetMs ?? program.run.budgetMs;
  const exp0 = ledger.getExperiment(run.id, n);
  if (!exp0) throw new AutolabError("NO_EXPERIMENT", `experiment #${n} is not in the notebook.`);
  // Whatever an earlier trial or researcher left behind is gone: the committed tree, setup's
  // files and declared caches, nothing else (docs/security.md).
  const setupFiles = setupFilesOf(deps);
  const caches = deps.confinement?.projectCaches ?? [];
  await ws.cleanTree(exp0.commit, [...setupFiles, ...caches]);
  // A previous trial may have scribbled over a protected file: restore the pristine copy.
  // Untracked files that may lie in a protected directory without being a tamper: setup's, the
  // caches', and the declared outputs (present between command and evaluate).
  const allowed = [...setupFiles, ...caches, ...program.outputs];
  let stillBad = await ws.verifyProtected(allowed);
  if (stillBad) {
    await ws.restoreProtected(allowed);
    stillBad = await ws.verifyProtected(allowed);
  }
  if (stillBad) {
    throw new AutolabError(
      "PROTECTED_CHANGED",
      `${stillBad} in the run's base commit cannot be restored.`,
      "The repository may be corrupt; start a new run.",
    );
  }
  const exp = ledger.getExperiment(run.id, n) ?? exp0;
  const attempt = exp.trials.length + 1;
  const seed = run.seed + (seedIndex === "next" ? nextSeedIndex(program, run.seed, exp) : seedIndex);
  const logDir = join(deps.logDir, String(exp.n), String(attempt));
  // No await between counting the attempts and recording the start: parallel trials of one
  // experiment (the baseline's) must not take the same attempt number.
  const env = {
    ...(deps.slot?.env ?? {}),
    AUTOLAB_SEED: String(seed),
    AUTOLAB_BUDGET_S: String(budgetMs / 1000),
    [TRIAL_TOKEN]: randomBytes(12).toString("hex"),
  };
  const trialId = ledger.startTrial({
    experimentId: exp.id,
    attempt,
    seed,
    command: program.run.command,
    commit: exp.commit,
    budgetMs,
    env,
    ...(deps.slot ? { slot: deps.slot.index } : {}),
  });
  await mkdir(logDir, { recursive: true });
  crashPoint("after-trial-start");
  emit({
    type: "trial_started",
    n: exp.n,
    attempt,
    seed,
    budgetMs,
    startedAt: Date.now(),
    hypothesis: exp.hypothesis,
    ...(deps.slot ? { slot: deps.slot.index } : {}),
    ...(against !== undefined ? { against } : {}),
  });
  // Learning-curve pruning: compare this trial's progress with the best's at the same point.
  const progressName = program.metrics.progress;
  const curve: Array<[number, number]> = [];
  const startedAt = Date.now();
  const bestExp = bestOf(ledger.listExperiments(run.id));
  const bestCurve = bestExp?.trials.find(
    (t) => isFullBudget(program, t) && t.result?.status === "ok" && t.result.progress?.length,
  )?.result?.progress;
  const pruner: TrialPruner | undefined =
    progressName && deps.makePruner && bestCurve && bestExp && bestExp.n !== n && !rung
      ? deps.makePruner(bestCurve)
      : undefined;
  const prune = new AbortController();
  const sandbox = deps.confinement?.trial(ws, setupFiles, deps.slot?.env ?? {});
  const result = await executor.runTrial({
    cwd: ws.projectDir,
    command: program.run.command,
    ...(program.run.evaluate ? { evaluate: program.run.evaluate } : {}),
    budgetMs,
    graceMs: rung?.graceMs ?? program.run.graceMs,
    evaluateTimeoutMs: program.run.evaluateTimeoutMs,
    seed,
    logDir,
    env,
    objective: program.objective.metric,
    beforeEvaluate: async () => {
      const tampered = await ws.verifyProtected(allowed);
      if (tampered) return { status: "tampered", reason: tampered };
      // Evaluate runs on a pristine tree: the commit, setup's files and the declared outputs.
      await ws.cleanTree(exp.commit, [...setupFiles, ...caches, ...program.outputs], program.outputs);
      const missing = program.outputs.filter((o) => !existsSync(join(ws.projectDir, o)));
      if (missing.length === 0) return undefined;
      return {
        status: "crash",
        reason: `the command did not write its declared output${missing.length > 1 ? "s" : ""} ${missing.join(", ")} (outputs: in program.md; a symlink does not count)`,
      };
    },
    ...(sandbox ? { sandbox } : {}),
    onMetric: (name, value) => {
      if (name !== progressName) return;
      const x = (Date.now() - startedAt) / budgetMs;
      curve.push([x, value]);
      emit({ type: "progress", n: exp.n, name, value });
      if (pruner && !prune.signal.aborted) {
        const verdict = pruner.observe(x, value);
        if (verdict.prune) prune.abort(verdict.reason);
      }
    },
    ...(pruner ? { prune: prune.signal } : {}),
    ...(signal ? { signal } : {}),
  });
  if (curve.length) result.progress = curve;
  if (
    result.status === "crash" &&
    result.reason?.startsWith("evaluate step failed") &&
    !program.outputs.length
  ) {
    result.reason += `; evaluate runs on a pristine tree (the committed files and setup's): if it reads a file the command wrote, declare it under \`outputs:\` in program.md`;
  }
  ledger.finishTrial(trialId, result, logDir);
  crashPoint("after-trial-result");
  if (result.status === "tampered") await ws.restoreProtected(allowed);
  const value = result.metrics[program.objective.metric];
  emit({
    type: "trial_finished",
    n: exp.n,
    attempt,
    status: result.status,
    ...(value !== undefined ? { metric: value } : {}),
    wallS: result.wallS,
    ...(result.reason ? { reason: result.reason } : {}),
  });
  return result;
}

/**
 * Trials started but never finished (the harness was killed): kill whatever is left of their
 * processes — nobody owns their clock any more — and record them as interrupted.
 */
export async function closeOpenTrials(deps: LoopDeps, exp: ExperimentRecord): Promise<void> {
  const { ledger, executor } = deps;
  for (const t of exp.trials) {
    if (t.result) continue;
    const token = t.env[TRIAL_TOKEN];
    if (token && executor.reap) await executor.reap(token);
    ledger.finishTrial(
      t.id,
      {
        status: "interrupted",
        reason: "the harness stopped while this trial ran; it is run again",
        exitCode: null,
        signal: null,
        wallS: 0,
        cpuS: 0,
        peakRssMb: 0,
        metrics: {},
        selfReported: false,
        seed: t.seed,
        command: t.command,
        stdoutPath: "",
        stderrPath: "",
        logTail: "",
      },
      "",
    );
  }
}

/**
 * Makes the branch match the ledger: the last kept experiment's commit, or the base. A branch
 * one keep behind is a harness killed between its decision and the branch (docs/loop.md); a
 * branch anywhere else was moved by something other than autolab: tampering, reported.
 */
export async function reconcileBranch(
  deps: LoopDeps,
  exps: ExperimentRecord[],
  emit: (e: LoopEvent) => void = () => {},
): Promise<void> {
  const { workspace: ws, run } = deps;
  const target = bestOf(exps)?.commit ?? run.baseCommit;
  const current = await ws.bestCommit();
  if (current !== target) {
    const known = new Set([
      run.baseCommit,
      ...exps.filter((e) => e.decision?.action === "keep").map((e) => e.commit),
    ]);
    if (!known.has(current)) await reportRatchetMove(deps, current, target, undefined, emit);
    await ws.advance(target, current);
  }
  await ws.resetTo(target);
}

/**
 * The ratchet is checked at every decision: only autolab moves it, so a branch that is not at
 * the best is tampering — reported (who and what, from git's reflog), repaired, and the run
 * goes on from the best the notebook holds.
 */
async function verifyRatchet(
  deps: LoopDeps,
  bestCommit: string,
  exp: ExperimentRecord,
  emit: (e: LoopEvent) => void,
): Promise<void> {
  const current = await deps.workspace.bestCommit();
  if (current === bestCommit) return;
  await reportRatchetMove(deps, current, bestCommit, exp, emit);
  await deps.workspace.advance(bestCommit, current);
}

async function reportRatchetMove(
  deps: LoopDeps,
  current: string,
  expected: string,
  exp: ExperimentRecord | undefined,
  emit: (e: LoopEvent) => void,
): Promise<void> {
  const { workspace: ws, run } = deps;
  const how = await ws.ratchetLastMove();
  const reason = `${ws.branch} was moved to ${current.slice(0, 8)} outside autolab${how ? ` (git reflog: ${how})` : ""}; restored to the best ${expected.slice(0, 8)}`;
  deps.ledger.addNote(run.id, exp?.id ?? null, `ALARM tamper:ratchet: ${reason}`);
  emit({ type: "alarm", kind: "tamper:ratchet", reason, ...(exp ? { n: exp.n } : {}) });
}

export async function runSetup(
  deps: LoopDeps,
  emit: (e: LoopEvent) => void,
  signal?: AbortSignal,
): Promise<void> {
  const { program, workspace: ws, executor } = deps;
  const setup = program.run.setup;
  if (!setup || validStamp(deps.setupStamp)) return;
  emit({ type: "setup_started", command: setup });
  const logDir = join(
    deps.logDir,
    deps.slot && deps.slot.index > 0 ? `setup-slot${deps.slot.index}` : "setup",
  );
  await mkdir(logDir, { recursive: true });
  // Setup runs on the base commit in a clean tree, so that what it leaves is exactly its files.
  const caches = deps.confinement?.projectCaches ?? [];
  await ws.cleanTree(deps.run.baseCommit, caches);
  const res = await executor.setup(
    ws.projectDir,
    setup,
    program.run.setupTimeoutMs,
    logDir,
    signal,
    deps.confinement?.setup(ws, deps.slot?.env ?? {}),
  );
  if (res.status === "interrupted") return;
  emit({
    type: "setup_finished",
    ok: res.status === "ok",
    wallS: res.wallS,
    ...(res.reason ? { reason: res.reason } : {}),
  });
  if (res.status !== "ok") {
    const tail = res.logTail.trim().split("\n").slice(-8).join("\n");
    throw new AutolabError(
      "SETUP_FAILED",
      `setup \`${setup}\` failed: ${res.reason ?? res.status}${tail ? `\n--- last lines of its log ---\n${tail}` : ""}`,
      `Fix it so that \`${setup}\` succeeds in a fresh checkout, commit, and run again. Logs: ${logDir}`,
    );
  }
  const files = (await ws.untrackedPaths())
    .map((p) => p.replace(/\/$/, ""))
    .filter((p) => !caches.includes(p));
  const stamp: SetupStamp = { at: new Date().toISOString(), command: setup, files };
  writeFileSync(deps.setupStamp, `${JSON.stringify(stamp)}\n`);
  setupFilesCache.set(deps.setupStamp, files);
  await ws.resetTo(await ws.bestCommit());
}

/** A stamp of this autolab's format (older ones did not list setup's files: setup runs again). */
function validStamp(path: string): boolean {
  if (!existsSync(path)) return false;
  try {
    return Array.isArray((JSON.parse(readFileSync(path, "utf8")) as SetupStamp).files);
  } catch {
    return false;
  }
}

/** What runSetup records: the untracked files setup left in the worktree (kept, read-only, in every trial). */
interface SetupStamp {
  at: string;
  command: string;
  files: string[];
}

const setupFilesCache = new Map<string, string[]>();

/** The files setup made in this worker's worktree (project-relative); none without a setup step. */
export function setupFilesOf(deps: LoopDeps): string[] {
  if (!deps.program.run.setup) return [];
  const cached = setupFilesCache.get(deps.setupStamp);
  if (cached) return cached;
  let files: string[] = [];
  try {
    files = (JSON.parse(readFileSync(deps.setupStamp, "utf8")) as SetupStamp).files ?? [];
  } catch {
    // No stamp yet (setup has not run), or one from an older autolab: runSetup runs it again.
  }
  setupFilesCache.set(deps.setupStamp, files);
  return files;
}

/** Which changed paths a candidate may not touch; undefined when the change is in scope. */
async function scopeViolation(
  ws: Workspace,
  program: Program,
  changed: string[],
): Promise<string | undefined> {
  const rules = fileRules(program.files);
  const outside = changed.filter((p) => p.startsWith("../"));
  const prot = changed.filter((p) => !p.startsWith("../") && rules.protected(p));
  const holdout = changed.filter((p) => !p.startsWith("../") && !prot.includes(p) && rules.holdout(p));
  const editable = changed.filter((p) => rules.editable(p));
  const other = changed.filter(
    (p) => !editable.includes(p) && !p.startsWith("../") && !prot.includes(p) && !holdout.includes(p),
  );
  const links = await ws.symlinks(editable);
  const parts: string[] = [];
  if (prot.length) parts.push(`changed protected file${prot.length > 1 ? "s" : ""} ${prot.join(", ")}`);
  if (holdout.length)
    parts.push(`changed holdout file${holdout.length > 1 ? "s" : ""} ${holdout.join(", ")}`);
  if (other.length) parts.push(`changed non-editable file${other.length > 1 ? "s" : ""} ${other.join(", ")}`);
  if (outside.length) parts.push(`changed files outside the project: ${outside.join(", ")}`);
  if (links.length) parts.push(`made symlinks: ${links.join(", ")}`);
  if (!parts.length) return undefined;
  return `scope: ${parts.join("; ")} (editable: ${program.files.editable.join(", ")})`;
}

/** The commit message carries the proposal, so a candidate committed just before a crash can be adopted. */
export function commitMessage(
  tag: string,
  n: number,
  agent: string,
  p: Proposal,
  extra: { role?: string; rebaseOf?: number } = {},
): string {
  const subject = (p.hypothesis.split("\n")[0] ?? "").slice(0, 100);
  const body = [p.hypothesis !== subject ? p.hypothesis : "", p.mechanism ? `Mechanism: ${p.mechanism}` : ""]
    .filter(Boolean)
    .join("\n\n");
  const trailers = [
    `Autolab-Run: ${tag}`,
    `Autolab-Experiment: ${n}`,
    `Autolab-Agent: ${agent}`,
    ...(extra.role ? [`Autolab-Role: ${extra.role}`] : []),
    ...(extra.rebaseOf !== undefined ? [`Autolab-Rebase-Of: ${extra.rebaseOf}`] : []),
    `Autolab-Proposal: ${JSON.stringify(p)}`,
  ].join("\n");
  return `autolab #${n}: ${subject}\n\n${body ? `${body}\n\n` : ""}${trailers}\n`;
}

async function adoptOrphan(deps: LoopDeps, exps: ExperimentRecord[]): Promise<void> {
  if (exps.length === 0) return;
  await adoptCandidate(deps, Math.max(...exps.map((e) => e.n)) + 1);
}

/**
 * Records candidate n from its commit message (the proposal travels in trailers) when its ref
 * exists but its experiment row does not: the harness died between the two writes.
 */
export async function adoptCandidate(deps: LoopDeps, n: number): Promise<void> {
  const { ledger, run, workspace: ws, program } = deps;
  const commit = await ws.candidateRef(n);
  if (!commit) return;
  const message = await ws.commitMessage(commit);
  const trailer = (key: string) =>
    message
      .split("\n")
      .find((l) => l.startsWith(`${key}: `))
      ?.slice(key.length + 2);
  const line = trailer("Autolab-Proposal");
  const role = trailer("Autolab-Role");
  const rebaseOf = trailer("Autolab-Rebase-Of");
  if (!line) return;
  let proposal: Proposal;
  try {
    proposal = JSON.parse(line) as Proposal;
  } catch {
    return;
  }
  const parent = await ws.parentOf(commit);
  const exp = ledger.addExperiment({
    runId: run.id,
    n,
    agent: trailer("Autolab-Agent") ?? "unknown",
    ...(role ? { role } : {}),
    ...(rebaseOf !== undefined && Number.isInteger(Number(rebaseOf)) ? { rebaseOf: Number(rebaseOf) } : {}),
    parentCommit: parent,
    commit,
    ref: `refs/autolab/${run.tag}/${n}`,
    hypothesis: proposal.hypothesis,
    ...(proposal.mechanism ? { mechanism: proposal.mechanism } : {}),
    ...(proposal.params ? { params: proposal.params } : {}),
    diff: await ws.diffStats(parent, commit),
  });
  // The scope check ran before the commit, but its verdict was not recorded yet: check again.
  const changed = await ws.changedPaths(parent, commit);
  const reject = changed.length === 0 ? NO_CHANGE : await scopeViolation(ws, program, changed);
  if (reject) ledger.decide(exp.id, { action: "reject", reason: reject, mechanismConfirmed: null });
}

const DEFAULT_MAX_AGENT_FAILURES = 5;
/** Changed lines (added + removed) a candidate may have; more is rejected as out of scope. */
const DEFAULT_MAX_DIFF_LINES = 5000;

/** Every process of a trial carries this variable; how a resumed harness finds a dead one's leftovers. */
const TRIAL_TOKEN = "AUTOLAB_TRIAL_TOKEN";

const NO_CHANGE = "no change: the researcher left the files as they were";
