/**
 * What a parallel run adds to the serial rules, as a Coordination (loop-deps.ts) the phases ask:
 * numbers reserved at proposal start, one decision at a time, candidates judged on the best they
 * were built on (a winner on a best that moved is merged, merge.ts), and candidates built while
 * the baseline is measured. Only the scheduler builds one; the serial loop never reaches this file.
 */
import { AutolabError } from "./errors.ts";
import { evaluateAndDecide } from "./evaluate.ts";
import type { LoopEvent } from "./events.ts";
import { bestOf } from "./experiments.ts";
import type { DiffStats, ExperimentRecord } from "./ledger.ts";
import { type Coordination, frontierNode, type LoopDeps, type Trials } from "./loop-deps.ts";
import { mergeOnto } from "./merge.ts";
import type { Workspace } from "./workspace.ts";

/**
 * What a parallel run adds to the serial rules. A candidate is judged against its parent (the
 * best it was built on); when the best moved meanwhile, a winner is rebased onto the new best
 * as a new experiment that is evaluated again (a conflict rejects it as stale). With a branching
 * frontier the parent is whichever kept node was drawn, and a winner is decided on the tree as
 * serially: no merge (decide.ts onTree, docs/loop.md "The tree frontier").
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

/** The Coordination of a parallel run over the scheduler's hooks (shared by all its workers). */
export function parallelCoordination(hooks: ParallelHooks): Coordination {
  return {
    lock: (fn) => hooks.lock(fn),
    allocate: () => hooks.allocate(),
    buildsOn: (deps, exps, n) => {
      // The best, or with a branching frontier the node drawn for n, as serially.
      const node = frontierNode(deps, exps, n);
      if (node || !hooks.baselineDecided) return node;
      // Proposing while the baseline is still measured: candidates build on it.
      const baseline = exps.find((e) => e.n === 0);
      return baseline ? { exp: baseline, metric: Number.NaN } : undefined;
    },
    judgedOn: async (exp) => exp.parentCommit,
    beforeBaseline: async (deps, exp, trials, emit, signal) => {
      // Only while the baseline is measured: a run that starts with no best stops before this.
      if (!hooks.baselineDecided) throw new AutolabError("NO_BEST", "the run has no measured best.");
      return trialBeforeBaseline(deps, exp, hooks, trials, emit, signal);
    },
    keepOnMovedBest: (deps, exp, decision, best, exps, emit) =>
      mergeOnto(deps, hooks, exp, decision, best, exps, emit),
  };
}

/**
 * Built while the baseline is measured: its first trial runs now, on a slot the baseline does
 * not use (not with a ladder: its rungs rank against the baseline's). Judging it waits for the
 * baseline, without holding the slot: it goes back to the queue once the baseline is kept.
 */
async function trialBeforeBaseline(
  deps: LoopDeps,
  exp: ExperimentRecord,
  hooks: ParallelHooks,
  { finished, another }: Trials,
  emit: (e: LoopEvent) => void,
  signal: AbortSignal | undefined,
): Promise<void> {
  const { program, ledger, run } = deps;
  if (!program.ladder && finished().length === 0 && !(await another())) return;
  if (!bestOf(ledger.listExperiments(run.id))) {
    hooks.afterBaseline?.(exp);
    return;
  }
  const now = ledger.getExperiment(run.id, exp.n);
  // The outer evaluateExperiment runs the after hook once this returns.
  if (now && !now.decision) await evaluateAndDecide(deps, now, emit, signal);
}
