import { isBetter as isBetterIn } from "./frontier.ts";
import type { Decision, Program, TrialResult } from "./types.ts";

export interface JudgeInput {
  program: Program;
  /** The candidate's finished trials, oldest first (interrupted ones excluded). */
  trials: TrialResult[];
  best: {
    n: number;
    /** The value the best carries (for a kept candidate: the noise-corrected one). */
    metric: number;
    /** Objective values of every finished ok trial of the best. */
    values: number[];
    /**
     * The same trials with their seeds (optional): the noise judge compares the candidate's
     * trial k with the best's trial of the same seed as a pair. Without them, unpaired.
     */
    trials?: TrialResult[];
  };
  /** Objective values of the baseline's ok trials (repeated with different seeds): the noise sample. */
  baseline: number[];
  /**
   * Every other configuration of the run (experiment number and the objective values of its
   * full-budget ok trials), the baseline and the best included: the noise judge pools their
   * repeats into σ. Without it, the judge sees only the baseline, the best and the candidate.
   */
  run?: { n: number; values: number[] }[];
  /**
   * How much of the run's budget is left, in whatever unit bounds the run (experiments under
   * --max-experiments, trials in a simulation): the judge explores while much is left (a
   * candidate that is not promising after one trial costs no more) and confirms at the end.
   * Absent: an unbounded run, judged the same way throughout.
   */
  budget?: { left: number; total: number };
  /**
   * Several objectives (src/trust/objectives-judge.ts): every other experiment of the run with
   * its full-budget ok trials (all metrics) and whether it was kept — the front and each
   * metric's noise come from them. Single-objective judges ignore it.
   */
  experiments?: { n: number; kept: boolean; trials: TrialResult[] }[];
}

/** Another trial is wanted before deciding (a first result inside the noise band). */
export interface MoreTrials {
  action: "more";
  reason: string;
  /**
   * Run a trial of the best (the incumbent) first, with its next seed: the challenger is about
   * to have more trials than the incumbent, and both are judged on as many. The judge is asked
   * again after it, before the challenger's next trial.
   */
  incumbent?: boolean;
  /**
   * The trial is a confirmation: on a seed no trial of the run has used (src/core/trial-seeds.ts),
   * not the next slot's, so code that remembers the seeds it has seen cannot recognise it. With
   * `incumbent`, the challenger's fresh trial runs first and the incumbent's on the same seed.
   */
  fresh?: boolean;
}

/**
 * The acceptance rule: turns a candidate's trials into a decision, always with a reason, or
 * asks for one more trial. The loop runs trial k on the run's k-th secret seed (a slot seed,
 * src/core/trial-seeds.ts), so candidate and baseline share their seeds (common random numbers),
 * except a candidate's first trial and those the rule asks to be fresh (never-used seeds); it
 * never runs more than maxTrials.
 */
export interface Judge {
  readonly name: string;
  /** Trials of the baseline (different seeds) before any candidate: the noise estimate. */
  readonly baselineTrials: number;
  /** Upper bound of trials per candidate. */
  readonly maxTrials: number;
  decide(input: JudgeInput): Decision | MoreTrials;
}

/** True when a is strictly better than b in the program's direction. */
export function isBetter(program: Program, a: number, b: number): boolean {
  return isBetterIn(a, b, program.objective.direction);
}
