/**
 * What every phase of the research loop works with (the serial loop in loop.ts, the scheduler
 * in scheduler.ts, and the phases both run: startup.ts, propose.ts, evaluate.ts, trial-step.ts,
 * decide.ts, merge.ts), and the stop reasons and defaults they share.
 */
import type { Confinement } from "./confinement.ts";
import type { LoopEvent, LoopEventListener } from "./events.ts";
import { bestOf, objectiveOf } from "./experiments.ts";
import { chooseNode, frontierRandom, parentNodeOf, treeNodesOf } from "./frontier.ts";
import type { Judge } from "./judge.ts";
import type { PriorWorkSource } from "./knowledge.ts";
import type { ExperimentRecord, Ledger, RunRecord } from "./ledger.ts";
import type { RunBudget } from "./run-budget.ts";
import type {
  Agent,
  Alarm,
  Decision,
  Executor,
  Program,
  TrialGrader,
  TrialPruner,
  TrialResult,
} from "./types.ts";
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
  /**
   * Rubric grading of a trial's files (program.md `evaluate: { rubric: … }`; src/rubric/), set by
   * the composition root. A program with a rubric and no grader fails its trials, saying so.
   */
  grade?: TrialGrader;
  /** Alarms over the notebook (e.g. the holdout canary), checked after every kept change. */
  checkAlarms?: (exps: ExperimentRecord[]) => Alarm[];
  /** The slot this worker's trials run on (parallel runs): recorded per trial, its env added. */
  slot?: { index: number; env: Record<string, string> };
  /** The org role proposing through this worker (recorded on its experiments). */
  role?: string;
  /** The role's instructions (its file's body), appended to the context its agent reads. */
  instructions?: string;
  /**
   * How this worker meets the others (parallel-coordination.ts, set by the scheduler); absent in
   * the serial loop, which is then coordinated by serialCoordination.
   */
  coordination?: Coordination;
  /**
   * The advisor (program.md `advisor:`, src/core/advisor.ts): asked between experiments when the
   * run stalls, for ideas or a stop verdict. Absent: no advisor.
   */
  advisor?: Agent;
  /** How setup, trials and researchers are confined (src/app/confinement.ts); absent: unsandboxed. */
  confinement?: Confinement;
  /**
   * The run's budget (--max-experiments, --max-trials, --max-time): the loop stops when it is
   * spent, and the judge is told how much of it is left (JudgeInput.budget). Absent: unbounded.
   */
  budget?: RunBudget;
  /**
   * Prior work: the closest results of other runs on this machine, shown to the researcher
   * (core/knowledge.ts). Absent: off (--no-prior-work, `prior_work: false`, or no store).
   */
  priorWork?: PriorWorkSource;
}

/** The full-budget trials of one experiment: those that count, and running the next one. */
export interface Trials {
  /** Finished trials (a crash's included) at run.budget; an interrupted one does not count. */
  finished(): TrialResult[];
  /**
   * Runs the next trial; false when it was interrupted (the experiment stays pending). `fresh`:
   * on a seed no trial of the run has used (a confirmation trial), not the next slot's.
   */
  another(fresh?: boolean): Promise<boolean>;
}

/**
 * Where the phases meet other workers: experiment numbers, the decision lock, which best a
 * candidate builds on and is judged on, and the two cases only a parallel run has (a candidate
 * before the baseline is kept, a winner on a best that moved). `coordinationOf` gives the serial
 * loop's (one worker, below) or a parallel run's (parallel-coordination.ts), so the phases
 * themselves never branch on the kind of run.
 */
export interface Coordination {
  /** Serializes decide → advance (serially: runs `fn`, nobody else decides). */
  lock<T>(fn: () => Promise<T>): Promise<T>;
  /** The next experiment number, reserved together with reading the best (kept ones come in order of n). */
  allocate(): number;
  /**
   * What new candidate `n` builds on, and the value shown for it: the best, or with a branching
   * frontier the kept node drawn for `n` (frontierNode; absent: the number after the notebook's last). A parallel run whose baseline is still
   * measured builds on the baseline (value NaN). Undefined: nothing yet.
   */
  buildsOn(
    deps: LoopDeps,
    exps: ExperimentRecord[],
    n?: number,
  ): { exp: ExperimentRecord; metric: number } | undefined;
  /**
   * The commit a candidate is judged on. Serially the branch's best (a candidate built on
   * another is stale), or with a branching frontier the kept node it grew from. In a parallel
   * run its parent: the best may have moved since, and a winner is merged at decision time
   * (keepOnMovedBest) — or, with a branching frontier, decided on the tree (decide.ts onTree).
   */
  judgedOn(exp: ExperimentRecord): Promise<string>;
  /**
   * A candidate evaluated while the run has no best yet (built while the baseline is measured):
   * its first trial runs, its judging waits for the baseline. Serially a candidate never comes
   * before the baseline's decision, so this is absent and such a candidate is judged as usual.
   */
  beforeBaseline?(
    deps: LoopDeps,
    exp: ExperimentRecord,
    trials: Trials,
    emit: (e: LoopEvent) => void,
    signal: AbortSignal | undefined,
  ): Promise<void>;
  /**
   * A keep on a best other than `best` (the current one): rebased onto it as a new experiment
   * (merge.ts). Serially every candidate is judged on the current best, so this is absent; with
   * a branching frontier it is never asked (such a keep is decided on the tree, decide.ts).
   */
  keepOnMovedBest?(
    deps: LoopDeps,
    exp: ExperimentRecord,
    decision: Decision,
    best: ExperimentRecord,
    exps: ExperimentRecord[],
    emit: (e: LoopEvent) => void,
  ): Promise<void>;
}

/** The coordination of `deps`: a parallel run's (set by the scheduler), else the serial loop's. */
export function coordinationOf(deps: LoopDeps): Coordination {
  return deps.coordination ?? serialCoordination(deps);
}

/** One worker: numbers follow the notebook, nobody else decides, the branch holds the best. */
export function serialCoordination(deps: LoopDeps): Coordination {
  return {
    lock: (fn) => fn(),
    allocate: () => Math.max(...deps.ledger.listExperiments(deps.run.id).map((e) => e.n)) + 1,
    buildsOn: (d, exps, n) => frontierNode(d, exps, n),
    // A candidate the frontier built on another kept node is judged against that node.
    judgedOn: async (exp) => treeParent(deps, exp)?.commit ?? deps.workspace.bestCommit(),
  };
}

/** Whether program.md's `frontier:` may branch from a node other than the best. */
export function branches(program: Program): boolean {
  return program.frontier !== undefined && program.frontier.strategy !== "best";
}

/**
 * The kept node `exp` was built on when the frontier branches and that node is in the tree
 * (a keep or a tree node); undefined otherwise (the single-branch ratchet: judged on the best).
 */
export function treeParent(deps: LoopDeps, exp: ExperimentRecord): ExperimentRecord | undefined {
  if (!branches(deps.program)) return undefined;
  return parentNodeOf(deps.ledger.listExperiments(deps.run.id), exp);
}

/**
 * The node new candidate `n` builds on (program.md `frontier:`, src/core/frontier.ts): the
 * best, or with a branching strategy a kept node drawn from the tree with the run's seed and the
 * experiment's number (the same notebook draws the same node again). `n` defaults to the
 * number after the notebook's last (the serial loop's; a parallel run passes the one reserved).
 */
export function frontierNode(
  deps: LoopDeps,
  exps: ExperimentRecord[],
  n?: number,
): { exp: ExperimentRecord; metric: number } | undefined {
  const { program, run } = deps;
  const best = measuredBest(program, exps);
  if (!best || !program.frontier || !branches(program)) return best;
  const nodes = treeNodesOf(exps, program.objective.metric);
  const next = n ?? Math.max(0, ...exps.map((e) => e.n)) + 1;
  const node = chooseNode(
    program.frontier,
    nodes,
    best.exp.n,
    program.objective.direction,
    frontierRandom(run.seed, next),
  );
  const exp = exps.find((e) => e.n === node);
  const metric = exp ? objectiveOf(exp, program.objective.metric) : undefined;
  return exp && metric !== undefined ? { exp, metric } : best;
}

/** The best of `exps` with its objective value, if it has one. */
export function measuredBest(
  program: Program,
  exps: ExperimentRecord[],
): { exp: ExperimentRecord; metric: number } | undefined {
  const best = bestOf(exps);
  const metric = best ? objectiveOf(best, program.objective.metric) : undefined;
  return best && metric !== undefined ? { exp: best, metric } : undefined;
}

export interface LoopOptions {
  /** Stop once the run holds this many experiments besides the baseline. */
  maxExperiments?: number;
  /** Stop once the run has started this many trials, every kind counted (src/core/run-budget.ts). */
  maxTrials?: number;
  /** Start no trial after this many milliseconds of this invocation. */
  maxTimeMs?: number;
  /** USD the researchers may spend over the run (--max-cost; RunBudget.cost). */
  maxCostUsd?: number;
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
