/**
 * Slurm's job states, as the Slurm executor reads them from squeue/sacct: waiting, running or
 * ended, and what an end that is not the command's own exit means for the trial.
 */
import type { TrialStatus } from "../../core/types.ts";

export type Phase = "waiting" | "running" | "ended";

const WAITING = new Set([
  "PENDING",
  "CONFIGURING",
  "REQUEUED",
  "REQUEUE_HOLD",
  "REQUEUE_FED",
  "RESV_DEL_HOLD",
]);
const ENDED = new Set([
  "COMPLETED",
  "FAILED",
  "TIMEOUT",
  "CANCELLED",
  "NODE_FAIL",
  "OUT_OF_MEMORY",
  "BOOT_FAIL",
  "DEADLINE",
  "PREEMPTED",
  "REVOKED",
  "SPECIAL_EXIT",
]);

/** Where a job is: COMPLETING and the rest count as running (its processes may still be alive). */
export function phaseOf(state: string): Phase {
  if (WAITING.has(state)) return "waiting";
  if (ENDED.has(state)) return "ended";
  return "running";
}

/** What a state that ended the job from outside the command means, by state. */
const FOREIGN_ENDS: Record<string, string> = {
  NODE_FAIL: "its node failed",
  OUT_OF_MEMORY: "it ran out of memory (the job's memory limit: --mem in extra_args)",
  BOOT_FAIL: "its node failed to boot",
  DEADLINE: "it reached its --deadline",
  PREEMPTED: "it was preempted by another job",
  REVOKED: "it was revoked (federation)",
  SPECIAL_EXIT: "it ended in SPECIAL_EXIT",
};

/**
 * The trial's status for an ended job that autolab did not cancel, or undefined for COMPLETED
 * and FAILED (the command's own exit: the exit status decides). TIMEOUT is Slurm's `--time`.
 */
export function outcomeOfEnd(
  state: string,
  jobId: string,
  nodes: string,
): { status: TrialStatus; reason: string } | undefined {
  const on = nodes ? ` on ${nodes}` : "";
  if (state === "COMPLETED" || state === "FAILED") return undefined;
  if (state === "TIMEOUT")
    return { status: "timeout", reason: `Slurm ended job ${jobId}${on} at its time limit (state TIMEOUT)` };
  if (state === "CANCELLED")
    return {
      status: "crash",
      reason: `Slurm job ${jobId}${on} was cancelled outside autolab (state CANCELLED: scancel by someone, or an administrator)`,
    };
  const what = FOREIGN_ENDS[state] ?? `it ended in state ${state}`;
  return { status: "crash", reason: `Slurm job ${jobId}${on} did not finish: ${what} (state ${state})` };
}

/**
 * `--time` for a limit in ms: `minutes:seconds`, rounded up to whole seconds (Slurm itself
 * counts whole minutes, so it kills at the next minute at the earliest; the executor's own
 * clock enforces budget + grace to the poll).
 */
export function slurmTime(ms: number): string {
  const s = Math.max(1, Math.ceil(ms / 1000));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}
