/**
 * What every phase of the research loop works with (the serial loop in loop.ts, the scheduler
 * in scheduler.ts, and the phases both run: startup.ts, propose.ts, evaluate.ts, trial-step.ts,
 * decide.ts, merge.ts), and the stop reasons and defaults they share.
 */
import type { Confinement } from "./confinement.ts";
import type { LoopEventListener } from "./events.ts";
import type { Judge } from "./judge.ts";
import type { DiffStats, ExperimentRecord, Ledger, RunRecord } from "./ledger.ts";
import type { RunBudget } from "./run-budget.ts";
import type { Agent, Alarm, Executor, Program, TrialPruner } from "./types.ts";
import type { Workspace } from "./workspace.ts";

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

/**
 * Where the phases meet other workers: experiment numbers, the decision lock, and which best a
 * candidate is judged on. `coordinationOf` gives the serial loop's (one worker) or a parallel
 * run's (its ParallelHooks), so the phases themselves do not branch on the kind of run.
 */
export interface Coordination {
  /** Serializes decide → advance (serially: runs `fn`, nobody else decides). */
  lock<T>(fn: () => Promise<T>): Promise<T>;
  /** The next experiment number, reserved together with reading the best (kept ones come in order of n). */
  allocate(): number;
  /**
   * The commit a candidate is judged on. Serially the branch's best: a candidate built on
   * another is stale. In a parallel run its parent: the best may have moved since, and a winner
   * is merged at decision time (merge.ts).
   */
  judgedOn(exp: ExperimentRecord): Promise<string>;
}

export function coordinationOf(deps: LoopDeps): Coordination {
  const hooks = deps.parallel;
  if (hooks) {
    return {
      lock: (fn) => hooks.lock(fn),
      allocate: () => hooks.allocate(),
      judgedOn: async (exp) => exp.parentCommit,
    };
  }
  return {
    lock: (fn) => fn(),
    allocate: () => Math.max(...deps.ledger.listExperiments(deps.run.id).map((e) => e.n)) + 1,
    judgedOn: () => deps.workspace.bestCommit(),
  };
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

export const STOPPED_BY_SIGNAL = "stopped by a signal (Ctrl-C); `autolab run` resumes";
