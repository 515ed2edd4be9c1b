/** What a trial job carries to a worker (`fleet_jobs.payload`) and brings back (`fleet_results`). */
import type { TrialResult } from "../core/types.ts";
import type { BundleRef } from "./bundles.ts";

export interface TrialJob {
  /** The trial's identity: its AUTOLAB_TRIAL_TOKEN, recorded with the trial's start in the notebook. */
  key: string;
  /** For people: "<tag> #<n>.<attempt>". */
  label: string;
  /** The worker's cache repository for this project (one per project, shared by its runs). */
  project: string;
  tag: string;
  /** program.md's directory inside the repository ("" at the top). */
  prefix: string;
  /** program.md's file name in that directory. */
  programFile: string;
  /** program.md as the run started from it (its base commit's). */
  programText: string;
  baseCommit: string;
  commit: string;
  /** Fetched in order: the base commit's whole history, then the candidate's commits after it. */
  bundles: BundleRef[];
  command: string;
  evaluate?: string;
  budgetMs: number;
  graceMs: number;
  evaluateTimeoutMs: number;
  seed: number;
  env: Record<string, string>;
  objective: string;
  /**
   * Code from outside the fleet's operator (the hub's claims): the worker runs the command only
   * in the sandbox (a worker without one records the trial as not run) and without the network,
   * whatever program.md's `sandbox:` says.
   */
  untrusted?: boolean;
}

/** The log files a worker sends back (capped), written into the coordinator's trial log directory. */
export const LOG_FILES = ["stdout.log", "stderr.log", "evaluate.stdout.log", "evaluate.stderr.log"] as const;
export const LOG_BACK_BYTES = 256 * 1024;

export interface JobOutcome {
  result: TrialResult;
  /** File name (LOG_FILES) → its last LOG_BACK_BYTES. */
  logs: Record<string, string>;
}

/** Where fleet modules import it from (core/trial-values.ts). */
export { notRunResult } from "../core/trial-values.ts";
