import type { Decision, Program, TrialResult } from "./types.ts";

export interface JudgeInput {
  program: Program;
  /** The candidate's finished trials (interrupted ones excluded). */
  trials: TrialResult[];
  best: { n: number; metric: number };
}

/** The acceptance rule: turns a candidate's trials into a decision, always with a reason. */
export interface Judge {
  readonly name: string;
  decide(input: JudgeInput): Decision;
}

/** True when a is strictly better than b in the program's direction. */
export function isBetter(program: Program, a: number, b: number): boolean {
  return program.objective.direction === "minimize" ? a < b : a > b;
}
