import { advisorStopReason, consultAdvisor } from "./advisor.ts";
import { agentFailing, DEFAULT_MAX_AGENT_FAILURES } from "./agent-streak.ts";
import { evaluateExperiment } from "./evaluate.ts";
import type { LoopEvent } from "./events.ts";
import { bestOf, objectiveOf } from "./experiments.ts";
import type { AdviceRecord, ExperimentRecord } from "./ledger.ts";
import { type LoopDeps, type LoopOptions, type LoopSummary, STOPPED_BY_SIGNAL } from "./loop-deps.ts";
import { type ParallelHooks, parallelCoordination } from "./parallel-coordination.ts";
import { runStep } from "./propose.ts";
import { experimentsSpent } from "./run-budget.ts";
import { assertBaselineOk, finishRun, startUp, withBudget } from "./startup.ts";
import { runTrial } from "./trial-step.ts";
import { trialsFailing } from "./trial-streak.ts";
import { isFullBudget } from "./trial-values.ts";
import type { Agent, Program } from "./types.ts";
import type { Workspace } from "./workspace.ts";

/**
 * The parallel research loop: several slots run trials at once, each in its own worktree,
 * while proposers prepare the next candidates in theirs — a bounded queue between them, so a
 * slot that frees up finds a candidate waiting instead of waiting for an agent.
 *
 *   proposers ──(candidate commits + rows)──▶ queue (≤ slots) ──▶ slots ──▶ decide ──▶ ratchet
 *
 * Every write goes through the same functions as the serial loop (loop.ts), in the same order,
 * so a kill -9 anywhere leaves a notebook that resume completes: candidates without a decision
 * are queued again, candidate refs without a row are adopted, leftover trial processes reaped.
 * What parallelism adds (ParallelHooks): experiment numbers reserved at proposal start; each
 * candidate judged against the best it was built on; a winner on an old best rebased onto the
 * new best and evaluated again (with a branching frontier: built on the node frontierNode draws,
 * and decided on the tree, not merged); decide → advance serialized by one lock.
 */

/** One way of proposing: a role of the org, or the program's single researcher. */
export interface Researcher {
  /** The role's name; undefined without an org. */
  role?: string;
  /** The program as this researcher sees it (a role's editable subset applied). */
  program: Program;
  /** The role's instructions, appended to its agent's context. */
  instructions?: string;
  /** An agent for proposer worker `worker`: concurrent proposals never share one agent's state. */
  agentFor(worker: number): Promise<Agent>;
}

/** Picks which role proposes next and learns from outcomes (src/org/orchestrator.ts). */
export interface Chooser {
  next(): string;
  record(role: string, outcome: { improvement: number; compute: number }): void;
}

export interface Slot {
  workspace: Workspace;
  /** Setup ran in this worktree when this file exists. */
  setupStamp: string;
  /** Added to every trial's environment, e.g. CUDA_VISIBLE_DEVICES. */
  env: Record<string, string>;
}

export interface ParallelDeps extends LoopDeps {
  /** Where trials run; slot 0 is usually deps.workspace itself. */
  slots: Slot[];
  /** Worktrees where proposals are made, one per concurrent proposal. */
  proposers: Workspace[];
  /**
   * Every researcher proposes instantly (Agent.instant): one proposal at a time, only for a
   * free slot. Otherwise proposals run ahead, up to one per slot waiting beside the running
   * trials, so slots never idle while an agent thinks.
   */
  instantProposals?: boolean;
  researchers: Researcher[];
  /** Without one, the first researcher always proposes. */
  chooser?: Chooser;
  /** Rebases a tuner's conflicting knob values (ParallelHooks.rebaseKnobs). */
  rebaseKnobs?: ParallelHooks["rebaseKnobs"];
  /**
   * How many slots may run trials now (Executor.capacity: a worker fleet's live slots): slot j
   * waits while j is not below it, proposals stop at it, and the scheduler looks again every
   * CAPACITY_POLL_MS. Absent: every slot. Never taken below 1.
   */
  activeSlots?: () => number;
}

/** How often a run whose capacity changes (activeSlots) looks at it again. */
const CAPACITY_POLL_MS = 2000;

export async function runParallel(deps: ParallelDeps, opts: LoopOptions = {}): Promise<LoopSummary> {
  const { program, ledger, run, workspace: ws } = deps;
  const metric = program.objective.metric;
  const emit = (e: LoopEvent) => opts.onEvent?.(e);
  const internal = new AbortController();
  const signal = opts.signal ? AbortSignal.any([opts.signal, internal.signal]) : internal.signal;
  const stopped = () => signal.aborted;
  const list = () => ledger.listExperiments(run.id);
  let fatal: { error: unknown } | undefined;
  const fail = (error: unknown) => {
    fatal ??= { error };
    internal.abort();
  };

  // Wake-ups: workers wait for "something changed" (queue, proposals, stop) instead of polling.
  let waiters: Array<() => void> = [];
  const wake = () => {
    const w = waiters;
    waiters = [];
    for (const f of w) f();
  };
  const changed = () => new Promise<void>((r) => waiters.push(r));
  signal.addEventListener("abort", wake, { once: true });

  const finish = async (reason: string): Promise<LoopSummary> => {
    await ws.resetTo(bestOf(list())?.commit ?? run.baseCommit);
    return finishRun(deps, reason, emit);
  };
  const stopReason = STOPPED_BY_SIGNAL;

  let lockChain: Promise<unknown> = Promise.resolve();
  let nextN = 0;
  const queue: ExperimentRecord[] = [];
  const hooks: ParallelHooks = {
    lock: <T>(fn: () => Promise<T>): Promise<T> => {
      const result = lockChain.then(fn);
      lockChain = result.catch(() => {});
      return result;
    },
    allocate: () => nextN++,
    onMerged: (exp) => {
      queue.unshift(exp);
      wake();
    },
    ...(deps.rebaseKnobs ? { rebaseKnobs: deps.rebaseKnobs } : {}),
  };
  const coordination = parallelCoordination(hooks);
  // One budget (one time window) for every slot.
  const budget = withBudget(deps, opts).budget;
  const slotDeps = deps.slots.map(
    (s, index): LoopDeps => ({
      ...deps,
      workspace: s.workspace,
      setupStamp: s.setupStamp,
      slot: { index, env: { ...s.env, AUTOLAB_SLOT: String(index) } },
      coordination,
      ...(budget ? { budget } : {}),
    }),
  );

  const started = await startUp(deps, slotDeps, emit, signal);
  if (started === "stopped") return finish(stopReason);
  const { exps, refs } = started;
  nextN = Math.max(0, ...exps.map((e) => e.n), ...refs) + 1;
  // While the baseline is measured, proposals already build on it and slots it leaves free run
  // their first trials (judged once the baseline is kept).
  const measuring = !exps.find((e) => e.n === 0)?.decision;
  // Slot 0 at least: the baseline's decision (and a ladder's rung trials) happen in its worktree.
  const baselineSlots = measuring ? Math.max(1, Math.min(deps.slots.length, baselineTrialsMissing(deps))) : 0;
  let baselineDone: (ok: boolean) => void = () => {};
  // Candidates whose first trial ran before the baseline was kept wait here for it; queued
  // again, they mostly need a decision, not a slot's time, so the queue's bound ignores them.
  const waitingForBaseline: ExperimentRecord[] = [];
  const toJudge = new Set<number>();
  if (measuring) {
    hooks.baselineDecided = new Promise<boolean>((r) => (baselineDone = r));
    hooks.afterBaseline = (exp) => {
      toJudge.add(exp.n);
      if (bestOf(list())) queue.unshift(exp);
      else waitingForBaseline.push(exp);
      wake();
    };
  }

  // Undecided candidates (a previous session stopped during them) go first, oldest first.
  queue.push(...exps.filter((e) => !e.decision && e.n !== 0));
  /** Why no further experiment may be proposed (the run's budget is spent), else undefined. */
  const spent = () => (budget ? experimentsSpent(budget, list(), issued) : undefined);
  let issued = exps.filter((e) => e.n > 0 && e.rebaseOf === undefined).length;
  let proposing = 0;
  let proposersLeft = deps.proposers.length;
  /** Slots that may run now: all of them, or as many as the executor can serve (activeSlots). */
  const capacity = () => Math.max(1, Math.min(deps.slots.length, deps.activeSlots?.() ?? deps.slots.length));
  // A capacity that changes wakes waiting proposers and parked slots now and then.
  const capacityTimer = deps.activeSlots ? setInterval(wake, CAPACITY_POLL_MS) : undefined;
  capacityTimer?.unref();
  /** Slots running an experiment (the baseline's measuring ones included). */
  let busy = measuring ? baselineSlots : 0;
  /** Whether a proposer must wait: the queue is full, or (instant proposals) no slot is free for one more. */
  const full = () => {
    const queued = queue.filter((e) => !toJudge.has(e.n)).length;
    if (deps.instantProposals) return proposing > 0 || queued + proposing >= capacity() - busy;
    return queued + proposing >= capacity();
  };
  const failures = new Map<string, string[]>();
  const maxFailures = opts.maxAgentFailures ?? DEFAULT_MAX_AGENT_FAILURES;
  const researcherOf = (role: string | undefined) =>
    deps.researchers.find((r) => r.role === role) ?? (deps.researchers[0] as Researcher);

  // The advisor (advisor.ts): asked by one proposer at a time in its worktree; the others wait
  // for its answer. A stop ends proposing; the slots finish what is queued, then the run ends.
  let advising: Promise<AdviceRecord | undefined> | undefined;
  let advisorStopped: string | undefined;
  const consult = async (i: number): Promise<void> => {
    advising ??= consultAdvisor(deps, { emit, signal, workspace: deps.proposers[i] as Workspace }).finally(
      () => {
        advising = undefined;
      },
    );
    const advice = await advising;
    if (advice?.verdict === "stop") {
      advisorStopped ??= advisorStopReason(advice);
      wake();
    }
  };

  const proposer = async (i: number): Promise<void> => {
    const agents = new Map<Researcher, Agent>();
    while (!stopped() && !spent() && !advisorStopped) {
      if (full()) {
        await changed();
        continue;
      }
      if (deps.advisor) {
        try {
          await consult(i);
        } catch (err) {
          fail(err);
          return;
        }
        if (stopped() || advisorStopped) return;
        // Others may have taken the room (or the budget) while this proposer waited for the advisor.
        if (full() || spent()) continue;
      }
      proposing++;
      issued++;
      const researcher = researcherOf(deps.chooser?.next());
      const key = researcher.role ?? "researcher";
      let step: Awaited<ReturnType<typeof runStep>>;
      try {
        let agent = agents.get(researcher);
        if (!agent) {
          agent = await researcher.agentFor(i);
          agents.set(researcher, agent);
        }
        step = await runStep(
          {
            ...deps,
            program: researcher.program,
            workspace: deps.proposers[i] as Workspace,
            agent,
            ...(researcher.role ? { role: researcher.role } : {}),
            ...(researcher.instructions ? { instructions: researcher.instructions } : {}),
            coordination,
          },
          {
            emit,
            signal,
            deferEvaluation: true,
            ...(opts.maxDiffLines !== undefined ? { maxDiffLines: opts.maxDiffLines } : {}),
          },
        );
      } catch (err) {
        fail(err);
        return;
      } finally {
        proposing--;
        wake();
      }
      if (!step) {
        issued--;
        return;
      }
      if (step.experiment) {
        failures.set(key, []);
        queue.push(step.experiment);
        wake();
        continue;
      }
      // Recorded and decided already: a failed or out-of-scope proposal.
      if (researcher.role) deps.chooser?.record(researcher.role, { improvement: 0, compute: 0 });
      if (!step.researcherFailed) continue;
      const list = failures.get(key) ?? [];
      list.push(`#${step.n} ${step.reason}`);
      failures.set(key, list);
      if (list.length >= maxFailures) {
        fail(agentFailing(list, researcher.role ? { role: researcher.role } : {}, deps.logDir));
        return;
      }
    }
  };

  const slotWorker = async (j: number): Promise<void> => {
    const d = slotDeps[j] as LoopDeps;
    while (!fatal) {
      if (j >= capacity()) {
        // Parked: the executor cannot serve this slot now (a fleet with fewer live slots).
        if (stopped() || (proposersLeft === 0 && proposing === 0 && queue.length === 0)) return;
        await changed();
        continue;
      }
      const exp = queue.shift();
      if (!exp) {
        if (stopped() || (proposersLeft === 0 && proposing === 0)) return;
        await changed();
        continue;
      }
      toJudge.delete(exp.n);
      wake(); // room in the queue: a proposer may start the next candidate
      if (stopped()) {
        queue.unshift(exp);
        return;
      }
      busy++;
      try {
        await evaluateExperiment({ ...d, ...(exp.role ? { role: exp.role } : {}) }, exp, emit, signal);
      } catch (err) {
        fail(err);
        return;
      } finally {
        busy--;
        wake(); // a free slot: an instant proposer may propose for it
      }
      credit(exp.n);
      const failing = trialsFailing(program, list(), opts.maxTrialFailures);
      if (failing) {
        fail(failing);
        return;
      }
    }
  };

  /** Tells the chooser what a decided experiment of a role brought and cost. */
  const credit = (n: number) => {
    const e = ledger.getExperiment(run.id, n);
    const outcome = e && roleOutcome(e, list(), metric);
    if (e?.role && outcome) deps.chooser?.record(e.role, outcome);
  };

  const proposers = deps.proposers.map((_, i) =>
    proposer(i).finally(() => {
      proposersLeft--;
      wake();
    }),
  );
  const early = deps.slots.map((_, j) => j).filter((j) => !measuring || j >= baselineSlots);
  const workers = [...proposers, ...early.map((j) => slotWorker(j))];
  if (measuring) {
    try {
      await measureBaseline(slotDeps.slice(0, baselineSlots), emit, signal);
      assertBaselineOk(program, list());
    } catch (err) {
      fail(err);
    }
    busy -= baselineSlots;
    const ok = !stopped() && list().find((e) => e.n === 0)?.decision?.action === "keep";
    baselineDone(ok);
    if (ok) queue.unshift(...waitingForBaseline.splice(0));
    wake();
    if (ok) for (let j = 0; j < baselineSlots; j++) workers.push(slotWorker(j));
  }
  await Promise.all(workers).finally(() => clearInterval(capacityTimer));
  await lockChain;
  if (fatal) {
    // Every worker has stopped (its trial recorded as interrupted): nothing is lost on resume.
    await ws.resetTo(bestOf(list())?.commit ?? run.baseCommit).catch(() => {});
    throw fatal.error;
  }
  if (stopped()) return finish(stopReason);
  return finish(advisorStopped ?? spent() ?? experimentsSpent(budget, list()) ?? "every proposer stopped");
}

/**
 * What a decided experiment brought its role: how far it moved the best (0 unless kept) and
 * the trial seconds it cost. Undefined while undecided, and for a winner rebased onto a newer
 * best — that one earns its credit when its merge is decided.
 */
export function roleOutcome(
  e: ExperimentRecord,
  exps: ExperimentRecord[],
  metric: string,
): { improvement: number; compute: number } | undefined {
  if (!e.decision) return undefined;
  if (e.decision.action === "discard" && exps.some((x) => x.rebaseOf === e.n)) return undefined;
  const compute = e.trials.reduce((a, t) => a + (t.result?.wallS ?? 0), 0);
  let improvement = 0;
  if (e.decision.action === "keep" && e.decision.metric !== undefined) {
    const parent = exps.find((x) => x.commit === e.parentCommit);
    const before = parent ? objectiveOf(parent, metric) : undefined;
    if (before !== undefined) improvement = Math.abs(before - e.decision.metric);
  }
  return { improvement, compute };
}

/** How many of the baseline's noise-sample trials are still to run (0 once it is decided). */
function baselineTrialsMissing(deps: LoopDeps): number {
  const baseline = deps.ledger.getExperiment(deps.run.id, 0);
  if (!baseline || baseline.decision) return 0;
  // Rung trials of a proxy ladder are not part of the noise sample (evaluateExperiment runs them).
  const done = baseline.trials.filter(
    (t) => t.result && t.result.status !== "interrupted" && isFullBudget(deps.program, t),
  ).length;
  return Math.max(0, deps.judge.baselineTrials - done);
}

/**
 * The baseline's repeated trials (the noise sample) run at once, one per slot, seeds 0..k-1;
 * then the usual decision. Trials finished in an earlier session count.
 */
async function measureBaseline(
  slotDeps: LoopDeps[],
  emit: (e: LoopEvent) => void,
  signal: AbortSignal,
): Promise<void> {
  const first = slotDeps[0] as LoopDeps;
  const { ledger, run, judge } = first;
  const baseline = ledger.getExperiment(run.id, 0);
  if (!baseline || baseline.decision) return;
  const missing = baselineTrialsMissing(first);
  const done = judge.baselineTrials - missing;
  for (let k = 0; k < missing && !signal.aborted; k += slotDeps.length) {
    const batch = slotDeps.slice(0, Math.min(slotDeps.length, missing - k));
    await Promise.all(
      batch.map(async (d, j) => {
        await d.workspace.resetTo(baseline.commit);
        await runTrial(d, 0, done + k + j, emit, signal);
      }),
    );
  }
  if (signal.aborted) return;
  const now = ledger.getExperiment(run.id, 0);
  if (now && !now.decision) await evaluateExperiment(first, now, emit, signal);
}
