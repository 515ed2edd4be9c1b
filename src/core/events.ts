import type { DecisionAction, TrialStatus } from "./types.ts";

/**
 * The one event union the loop emits. The CLI's progress line, the dashboard's SSE stream
 * and reports all subscribe to it; the ledger is written by the loop itself, before the
 * matching event, so an event never announces something the notebook does not hold.
 */
export type LoopEvent =
  | {
      type: "run_started";
      tag: string;
      branch: string;
      metric: string;
      resumed: boolean;
      experiments: number;
      /** "bubblewrap 0.8.0" or "unsandboxed: <why>" (docs/security.md). */
      sandbox?: string;
      /** How to get a sandbox, when the run has none. */
      sandboxHint?: string;
    }
  | { type: "setup_started"; command: string }
  | { type: "setup_finished"; ok: boolean; wallS: number; reason?: string }
  /** `parent`: the kept node it builds on, when a branching frontier chose one other than the best. */
  | { type: "proposal_started"; n: number; agent: string; parent?: number }
  | { type: "experiment_created"; n: number; hypothesis: string; commit: string }
  | {
      type: "trial_started";
      n: number;
      attempt: number;
      seed: number;
      budgetMs: number;
      startedAt: number;
      hypothesis: string;
      /** The slot it runs on (parallel runs). */
      slot?: number;
      /** A trial of the incumbent, re-measured for this challenger (docs/noise.md). */
      against?: number;
    }
  | { type: "progress"; n: number; name: string; value: number }
  | {
      type: "trial_finished";
      n: number;
      attempt: number;
      status: TrialStatus;
      metric?: number;
      wallS: number;
      reason?: string;
      /** Seconds the command ran past its budget and within the grace window (accepted, said). */
      overrunS?: number;
    }
  | {
      type: "decision";
      n: number;
      action: DecisionAction;
      reason: string;
      /**
       * A researcher that failed: the last lines of its output and, when they point at a path
       * its sandbox hides, a hint. For the person at the terminal only: never recorded in the
       * notebook nor shown to another researcher (it is the failed researcher's own text).
       */
      failure?: { lines: string[]; hint?: string };
      metric?: number;
      best: { n: number; metric: number };
    }
  | { type: "advice_started"; trigger: string; agent: string }
  | {
      type: "advice";
      agent: string;
      trigger: string;
      afterN: number;
      verdict: "ideas" | "stop" | "garbage";
      ideas: readonly string[];
      reason: string;
    }
  | { type: "warning"; message: string }
  | { type: "alarm"; kind: string; reason: string; n?: number }
  | { type: "run_finished"; reason: string; best: { n: number; metric: number } | undefined };

export type LoopEventListener = (event: LoopEvent) => void;
