import type { ChildProcess } from "node:child_process";
import { performance } from "node:perf_hooks";
import type { SandboxSpec } from "../core/types.ts";
import { CappedLog } from "./capped-log.ts";
import { LogTail } from "./log-tail.ts";
import { LineSplitter, parseMetricLine } from "./metrics.ts";
import {
  DEADLINE_EXIT_CODE,
  type KillReport,
  newTreeToken,
  ProcessTree,
  spawnGroup,
  TOKEN_ENV,
} from "./process-tree.ts";
import { createLimitGroup, type LimitGroup, probeSandbox, sandboxLimitsNote } from "./sandbox.ts";

export interface RunProcessOptions {
  command: string;
  cwd: string;
  /** The environment. With a sandbox, the environment inside is `sandbox.env` + this (+ AUTOLAB_TRIAL_TOKEN), nothing else. */
  env: NodeJS.ProcessEnv;
  /**
   * Runs the command in this sandbox (src/runner/sandbox.ts). Fails closed: where no sandbox can
   * be made, the command does not run (`spawnError` says why).
   */
  sandbox?: SandboxSpec;
  stdoutPath: string;
  stderrPath: string;
  /** The tree is killed this many ms after the start (SIGTERM, then SIGKILL after killGraceMs). */
  killAfterMs: number;
  killGraceMs: number;
  logCapBytes: number;
  sampleIntervalMs: number;
  tailLines: number;
  tailChars: number;
  signal?: AbortSignal;
  /** Called for each metric on stdout as it arrives. */
  onMetric?: (name: string, value: number) => void;
}

/** What happened to one process tree. Never thrown: every outcome of the process is data. */
export interface ProcessOutcome {
  exitCode: number | null;
  signal: string | null;
  /** From spawn to the exit of the root process. */
  wallS: number;
  cpuS: number;
  peakRssMb: number;
  timedOut: boolean;
  interrupted: boolean;
  /** Set when the process could not be started at all. */
  spawnError?: string;
  /** Metrics from stdout; the last value of a name wins. */
  metrics: Map<string, number>;
  lastStderrLine: string;
  logTail: string;
  /** How the tree was killed at the time limit or on abort. */
  kill?: KillReport;
  /** An exception thrown by onMetric: a bug of the caller, rethrown by the executor. */
  callbackError?: unknown;
  /** The sandbox's limits that could not be enforced here (also written at the top of the stderr log). */
  sandboxNote?: string;
}

/** setTimeout fires at once for longer delays; ~24.8 days is the longest limit the runner enforces. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** How long to wait for stdout/stderr to close after the whole tree is gone before giving up on them. */
const STREAM_CLOSE_TIMEOUT_MS = 2000;

/**
 * Runs `command` under `/bin/sh -c` in its own process group with a time limit, logs its output
 * with a size cap, parses metric lines from stdout, samples its resource use, and makes sure no
 * process of its tree outlives it: processes left behind by a command that exited on its own are
 * killed too, since they would otherwise hold the slot's resources and the log pipes. With
 * `sandbox`, the command runs inside bubblewrap (sandbox.ts) and its cgroup limits, if any.
 */
export async function runProcess(opts: RunProcessOptions): Promise<ProcessOutcome> {
  const metrics = new Map<string, number>();
  const tail = new LogTail(opts.tailLines, opts.tailChars);
  let lastStderrLine = "";
  let callbackError: unknown;

  const outLog = new CappedLog(opts.stdoutPath, opts.logCapBytes);
  let errLog: CappedLog;
  try {
    errLog = new CappedLog(opts.stderrPath, opts.logCapBytes);
  } catch (err) {
    outLog.close();
    throw err;
  }
  const outLines = new LineSplitter((line, redrawn) => {
    tail.push(line, redrawn);
    for (const [name, value] of parseMetricLine(line)) {
      metrics.set(name, value);
      if (opts.onMetric && callbackError === undefined) {
        try {
          opts.onMetric(name, value);
        } catch (err) {
          callbackError = err;
        }
      }
    }
  });
  const errLines = new LineSplitter((line, redrawn) => {
    tail.push(line, redrawn);
    if (line.trim() !== "") lastStderrLine = line;
  });
  const finish = (
    partial: Omit<ProcessOutcome, "metrics" | "lastStderrLine" | "logTail" | "callbackError">,
  ) => {
    outLines.end();
    errLines.end();
    outLog.close();
    errLog.close();
    for (const log of [outLog, errLog]) {
      if (log.error)
        tail.push(
          `[autolab: writing ${log.path} failed (${log.error.code ?? log.error.message}); the log is incomplete]`,
          false,
        );
    }
    return { ...partial, metrics, lastStderrLine, logTail: tail.text(), callbackError };
  };
  const notStarted = (spawnError: string, interrupted = false) =>
    finish({
      exitCode: null,
      signal: null,
      wallS: 0,
      cpuS: 0,
      peakRssMb: 0,
      timedOut: false,
      interrupted,
      spawnError,
    });

  if (opts.signal?.aborted) return notStarted("aborted before start", true);

  // The caller may name the token (the loop records it with the trial start, so a harness
  // that died can find and kill what is left of the trial on resume).
  const token = opts.env[TOKEN_ENV] || newTreeToken();
  let group: LimitGroup | undefined;
  let sandboxNote: string | undefined;
  if (opts.sandbox) {
    const probe = probeSandbox();
    if (!probe.ok) return notStarted(`no sandbox can be made here: ${probe.reason}. ${probe.hint}`);
    sandboxNote = sandboxLimitsNote(opts.sandbox.limits);
    if (sandboxNote) errLog.write(Buffer.from(`[autolab: ${sandboxNote}]\n`));
    try {
      group = createLimitGroup(opts.sandbox.limits);
    } catch (err) {
      return notStarted(err instanceof Error ? err.message : String(err));
    }
  }
  const start = performance.now();
  let child: ChildProcess;
  try {
    child = spawnGroup(opts.command, {
      cwd: opts.cwd,
      env: { ...opts.env, [TOKEN_ENV]: token },
      ...(opts.sandbox ? { sandbox: opts.sandbox } : {}),
      ...(group ? { limitGroup: group } : {}),
      deadline: { afterMs: opts.killAfterMs, graceMs: opts.killGraceMs },
    });
  } catch (err) {
    // Invalid arguments (a NUL byte in the command or env, a sandbox path that does not exist) throw synchronously.
    await group?.remove();
    return notStarted(err instanceof Error ? err.message : String(err));
  }
  const spawnFailed = new Promise<Error>((resolve) => child.once("error", resolve));
  if (child.pid === undefined) {
    const message = (await spawnFailed).message;
    await group?.remove();
    return notStarted(message);
  }

  const tree = new ProcessTree(child.pid, token, { sandboxed: opts.sandbox !== undefined });
  tree.startSampling(opts.sampleIntervalMs);
  child.stdout?.on("data", (chunk: Buffer) => {
    outLog.write(chunk);
    outLines.push(chunk);
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    errLog.write(chunk);
    errLines.push(chunk);
  });
  const closed = new Promise<void>((resolve) => child.once("close", () => resolve()));
  const exited = new Promise<{ code: number | null; signal: string | null; at: number }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal, at: performance.now() })),
  );

  let timedOut = false;
  let interrupted = false;
  let killing: Promise<KillReport> | undefined;
  const timer = setTimeout(
    () => {
      if (!interrupted) timedOut = true;
      killing ??= tree.kill(opts.killGraceMs);
    },
    Math.min(opts.killAfterMs, MAX_TIMER_MS),
  );
  const onAbort = () => {
    if (!timedOut) interrupted = true;
    killing ??= tree.kill(opts.killGraceMs);
  };
  opts.signal?.addEventListener("abort", onAbort, { once: true });

  try {
    const exit = await exited;
    clearTimeout(timer);
    opts.signal?.removeEventListener("abort", onAbort);
    tree.stopSampling();
    const kill = killing ? await killing : undefined;
    // The root is gone; anything of its tree still running (a background job, a daemon) goes too.
    if (tree.alive()) await tree.kill(opts.killGraceMs);
    await waitForClose(closed, child);
    const usage = tree.usage;
    // The backstop deadline (spawnGroup) fired before this process's timer did (its event loop
    // was held up): still a timeout, not an exit status of the command.
    if (
      !opts.sandbox &&
      exit.code === DEADLINE_EXIT_CODE &&
      exit.at - start >= opts.killAfterMs &&
      !interrupted
    )
      timedOut = true;
    return finish({
      exitCode: exit.code,
      signal: exit.signal,
      wallS: (exit.at - start) / 1000,
      cpuS: usage.cpuS,
      peakRssMb: usage.peakRssMb,
      timedOut,
      interrupted,
      ...(kill ? { kill } : {}),
      ...(sandboxNote ? { sandboxNote } : {}),
    });
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener("abort", onAbort);
    tree.release();
    await group?.remove();
  }
}

/** Waits for stdout/stderr to close; if something outside the tree still holds them, stops reading. */
async function waitForClose(closed: Promise<void>, child: ChildProcess) {
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      child.stdout?.destroy();
      child.stderr?.destroy();
      resolve();
    }, STREAM_CLOSE_TIMEOUT_MS);
  });
  await Promise.race([closed, gaveUp]);
  clearTimeout(timer);
}
