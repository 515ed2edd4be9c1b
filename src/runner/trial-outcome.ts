/**
 * What the executors (local-executor.ts, slurm-executor.ts) share about a trial's outcome: the
 * checks before it runs, how a failed process is described, the result of a trial that never ran.
 */
import { mkdir, stat } from "node:fs/promises";
import { constants as osConstants } from "node:os";
import { join } from "node:path";
import type { TrialResult, TrialSpec, TrialStatus } from "../core/types.ts";

/** A result with `reason` only when there is one. */
export function done(
  status: TrialStatus,
  reason: string | undefined,
  fields: Omit<TrialResult, "status" | "reason">,
): TrialResult {
  return reason === undefined ? { ...fields, status } : { ...fields, status, reason };
}

/** How a process ended, as far as describing a failure needs. */
export interface ProcessEnd {
  exitCode: number | null;
  signal: string | null;
  /** The last non-blank line it wrote to stderr. */
  lastStderrLine: string;
}

/** Checks the trial's directories; returns why it cannot run, or undefined. */
export async function prepare(cwd: string, logDir: string): Promise<string | undefined> {
  try {
    if (!(await stat(cwd)).isDirectory()) return `working directory is not a directory: ${cwd}`;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return `working directory does not exist: ${cwd}`;
    return `cannot use working directory ${cwd}: ${errorMessage(err)}`;
  }
  try {
    await mkdir(logDir, { recursive: true });
  } catch (err) {
    return `cannot create log directory ${logDir}: ${errorMessage(err)}`;
  }
  return undefined;
}

/** Why a process that ran to its end failed, or undefined when it exited 0. */
export function failure(out: ProcessEnd, quoteStderr = true): string | undefined {
  if (out.exitCode === 0) return undefined;
  const last = out.lastStderrLine.trim();
  if (out.exitCode === 127) {
    // dash: "/bin/sh: 1: foo: not found"; bash: "sh: line 1: foo: command not found"
    const m = /:\s*([^:]+?):\s*(?:command\s+)?not found\s*$/.exec(last);
    if (m) return quoteStderr ? `command not found: ${m[1]}` : "command not found";
  }
  if (out.exitCode === 126 && /permission denied|cannot execute/i.test(last)) {
    return `command not executable${quoteStderr ? `: ${clip(last)}` : ""}`;
  }
  const how =
    out.exitCode !== null
      ? `exited with code ${out.exitCode}${signalHint(out.exitCode)}`
      : `killed by ${out.signal ?? "a signal"}`;
  if (!quoteStderr) return how;
  return last ? `${how}: ${clip(last)}` : `${how} (no stderr output)`;
}

/** Shells report a child killed by signal N as exit code 128 + N: name the signal (137 is often the OOM killer). */
function signalHint(code: number): string {
  if (code <= 128 || code > 128 + 64) return "";
  const name = Object.entries(osConstants.signals).find(([, n]) => n === code - 128)?.[0];
  return name ? ` (= 128 + ${name})` : "";
}

export function notRun() {
  return {
    exitCode: null,
    signal: null,
    wallS: 0,
    cpuS: 0,
    peakRssMb: 0,
    logTail: "",
    metrics: {},
  };
}

/**
 * What every executor's runTrial does first: its durations checked, the log paths, and the
 * result's fields that do not depend on how the trial ends.
 */
export function trialBase(spec: TrialSpec): {
  stdoutPath: string;
  stderrPath: string;
  base: { seed: number; command: string; stdoutPath: string; stderrPath: string; selfReported: boolean };
} {
  checkDuration("budgetMs", spec.budgetMs);
  checkDuration("graceMs", spec.graceMs);
  checkDuration("evaluateTimeoutMs", spec.evaluateTimeoutMs);
  const stdoutPath = join(spec.logDir, "stdout.log");
  const stderrPath = join(spec.logDir, "stderr.log");
  return {
    stdoutPath,
    stderrPath,
    base: {
      seed: spec.seed,
      command: spec.command,
      stdoutPath,
      stderrPath,
      selfReported: spec.evaluate === undefined && !(spec.grade && /^rubric[_.]/.test(spec.objective)),
    },
  };
}

export function interruptReason(signal: AbortSignal | undefined): string {
  const r: unknown = signal?.reason;
  const detail = typeof r === "string" ? r : r instanceof Error ? r.message : undefined;
  return detail ? `interrupted: ${detail}` : "interrupted";
}

export function checkDuration(name: string, ms: number): void {
  if (!Number.isFinite(ms) || ms < 0)
    throw new TypeError(`${name} must be a finite number of ms >= 0, got ${ms}`);
}

export function clip(s: string, max = 300): string {
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
