import { mkdir, stat } from "node:fs/promises";
import { constants as osConstants } from "node:os";
import { join } from "node:path";
import { formatLimitSeconds } from "../core/format.ts";
import type { Executor, SandboxSpec, TrialResult, TrialSpec, TrialStatus } from "../core/types.ts";
import { findByToken } from "./process-tree.ts";
import { type ProcessOutcome, type RunProcessOptions, runProcess } from "./run-process.ts";

export interface LocalExecutorOptions {
  /** Between SIGTERM and SIGKILL when a tree is killed. Default 2000. */
  killGraceMs?: number;
  /** Cap of each log file (head + `[autolab: N bytes elided]` + tail). Default 5 MB. */
  logCapBytes?: number;
  /** Resource sampling interval. Default 100. */
  sampleIntervalMs?: number;
  /** Size of TrialResult.logTail. Defaults 40 lines, 4096 characters. */
  tailLines?: number;
  tailChars?: number;
}

/**
 * Runs trials as local processes. The harness owns the clock: the command's whole process tree
 * is killed at budget + grace, whatever the command does with signals, sessions or forks. It
 * owns the score: when the program has an evaluate step, the objective must come from it.
 *
 * Every outcome of the trial's processes is returned as a TrialResult, never thrown. What throws
 * is a bug of the caller: an invalid spec, or an exception from `onMetric`.
 *
 * `wallS`, `cpuS` and `peakRssMb` describe the command only; the evaluate step is the harness's
 * cost, not the experiment's. `logTail` is the command's output only: evaluate output may carry
 * holdout metrics and evaluator internals, which agents must never see (it stays in
 * evaluate.stdout.log / evaluate.stderr.log).
 *
 * With `TrialSpec.sandbox` (and setup's `sandbox`), each process runs in its sandbox
 * (sandbox.ts), and its environment is only the sandbox's `env`, `TrialSpec.env` and what the
 * runner sets (AUTOLAB_SEED, AUTOLAB_BUDGET_S, AUTOLAB_TRIAL_TOKEN): nothing of the harness's own.
 */
export class LocalExecutor implements Executor {
  readonly #opts: Required<LocalExecutorOptions>;

  constructor(opts: LocalExecutorOptions = {}) {
    this.#opts = {
      killGraceMs: opts.killGraceMs ?? 2000,
      logCapBytes: opts.logCapBytes ?? 5 * 1024 * 1024,
      sampleIntervalMs: opts.sampleIntervalMs ?? 100,
      tailLines: opts.tailLines ?? 40,
      tailChars: opts.tailChars ?? 4096,
    };
  }

  async setup(
    cwd: string,
    command: string,
    timeoutMs: number,
    logDir: string,
    signal?: AbortSignal,
    sandbox?: SandboxSpec,
  ): Promise<TrialResult> {
    checkDuration("timeoutMs", timeoutMs);
    const stdoutPath = join(logDir, "setup.stdout.log");
    const stderrPath = join(logDir, "setup.stderr.log");
    const base = { seed: 0, command, stdoutPath, stderrPath, selfReported: false };
    const unusable = await prepare(cwd, logDir);
    if (unusable) return { ...base, ...notRun(), status: "crash", reason: unusable };
    const out = await this.#run({
      command,
      cwd,
      env: sandbox ? {} : { ...process.env },
      stdoutPath,
      stderrPath,
      killAfterMs: timeoutMs,
      ...(signal ? { signal } : {}),
      ...(sandbox ? { sandbox } : {}),
    });
    if (typeof out === "string") return { ...base, ...notRun(), status: "crash", reason: out };
    const fields = { ...base, ...measured(out), metrics: Object.fromEntries(out.metrics) };
    if (out.interrupted) return { ...fields, status: "interrupted", reason: "interrupted during setup" };
    if (out.timedOut) {
      return {
        ...fields,
        status: "timeout",
        reason: `setup exceeded its time limit ${formatLimitSeconds(timeoutMs)}; killed`,
      };
    }
    const failed = failure(out);
    if (failed) return { ...fields, status: "crash", reason: `setup failed: ${failed}` };
    return { ...fields, status: "ok" };
  }

  /** Kills every process still carrying `AUTOLAB_TRIAL_TOKEN=<token>` (left by a harness killed with -9). */
  async reap(token: string): Promise<number> {
    const pids = findByToken(token, 0);
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    return pids.length;
  }

  async runTrial(spec: TrialSpec): Promise<TrialResult> {
    checkDuration("budgetMs", spec.budgetMs);
    checkDuration("graceMs", spec.graceMs);
    checkDuration("evaluateTimeoutMs", spec.evaluateTimeoutMs);
    const stdoutPath = join(spec.logDir, "stdout.log");
    const stderrPath = join(spec.logDir, "stderr.log");
    const base = {
      seed: spec.seed,
      command: spec.command,
      stdoutPath,
      stderrPath,
      selfReported: spec.evaluate === undefined,
    };
    const done = (
      status: TrialStatus,
      reason: string | undefined,
      fields: Omit<TrialResult, "status" | "reason">,
    ) => (reason === undefined ? { ...fields, status } : { ...fields, status, reason });

    if (spec.signal?.aborted)
      return done("interrupted", interruptReason(spec.signal), { ...base, ...notRun() });
    const unusable = await prepare(spec.cwd, spec.logDir);
    if (unusable) return done("crash", unusable, { ...base, ...notRun() });

    // Sandboxed, the harness's environment stays out: runProcess adds the sandbox's env instead.
    const env: NodeJS.ProcessEnv = {
      ...(spec.sandbox ? {} : process.env),
      ...spec.env,
      AUTOLAB_SEED: String(spec.seed),
      AUTOLAB_BUDGET_S: String(spec.budgetMs / 1000),
    };
    // The pruner stops the command the way Ctrl-C does; its result then says "pruned".
    const commandSignal =
      spec.signal && spec.prune ? AbortSignal.any([spec.signal, spec.prune]) : (spec.signal ?? spec.prune);
    const cmd = await this.#run({
      command: spec.command,
      cwd: spec.cwd,
      env,
      stdoutPath,
      stderrPath,
      killAfterMs: spec.budgetMs + spec.graceMs,
      ...(commandSignal ? { signal: commandSignal } : {}),
      ...(spec.onMetric ? { onMetric: spec.onMetric } : {}),
      ...(spec.sandbox ? { sandbox: spec.sandbox.command } : {}),
    });
    if (typeof cmd === "string") return done("crash", cmd, { ...base, ...notRun() });
    if (cmd.callbackError !== undefined) throw cmd.callbackError;

    const metrics = new Map(cmd.metrics);
    const fields = () => ({ ...base, ...measured(cmd), metrics: Object.fromEntries(metrics) });
    if (cmd.interrupted && spec.prune?.aborted && !spec.signal?.aborted) {
      return done("pruned", String(spec.prune.reason ?? "pruned"), fields());
    }
    if (cmd.interrupted) return done("interrupted", interruptReason(spec.signal), fields());
    if (cmd.timedOut) {
      const how =
        cmd.kill && cmd.kill.killed > 0
          ? ` (SIGKILL: SIGTERM was not obeyed within ${formatLimitSeconds(this.#opts.killGraceMs)})`
          : " (SIGTERM)";
      const reason = `exceeded budget ${formatLimitSeconds(spec.budgetMs)} + grace ${formatLimitSeconds(spec.graceMs)}; killed${how}`;
      return done("timeout", reason, fields());
    }
    const failed = failure(cmd);
    if (failed) return done("crash", failed, fields());

    if (spec.beforeEvaluate) {
      let verdict: { status: "tampered" | "crash"; reason: string } | undefined;
      try {
        verdict = await spec.beforeEvaluate();
      } catch (err) {
        // Fail closed: a trial whose protected files or tree cannot be verified is not scored.
        verdict = { status: "tampered", reason: `the pristine-tree check failed: ${errorMessage(err)}` };
      }
      if (verdict) return done(verdict.status, verdict.reason, fields());
    }
    if (spec.signal?.aborted) return done("interrupted", interruptReason(spec.signal), fields());

    if (spec.evaluate !== undefined) {
      const ev = await this.#run({
        command: spec.evaluate,
        cwd: spec.cwd,
        env,
        stdoutPath: join(spec.logDir, "evaluate.stdout.log"),
        stderrPath: join(spec.logDir, "evaluate.stderr.log"),
        killAfterMs: spec.evaluateTimeoutMs,
        ...(spec.signal ? { signal: spec.signal } : {}),
        ...(spec.sandbox ? { sandbox: spec.sandbox.evaluate } : {}),
      });
      // Reasons never quote evaluate output (see the class comment); they point at its log instead.
      if (typeof ev === "string") return done("crash", `evaluate step failed: ${ev}`, fields());
      if (ev.interrupted) return done("interrupted", interruptReason(spec.signal), fields());
      if (ev.timedOut) {
        const reason = `evaluate step failed: exceeded its time limit ${formatLimitSeconds(spec.evaluateTimeoutMs)}; killed`;
        return done("crash", reason, fields());
      }
      const evFailed = failure(ev, false);
      if (evFailed)
        return done("crash", `evaluate step failed: ${evFailed} (see evaluate.stderr.log)`, fields());
      // The harness owns the score: an objective printed by the editable command does not count.
      if (!ev.metrics.has(spec.objective)) metrics.delete(spec.objective);
      for (const [name, value] of ev.metrics) metrics.set(name, value);
    }

    const value = metrics.get(spec.objective);
    if (value === undefined) {
      const where =
        spec.evaluate !== undefined
          ? `on the evaluate step's stdout (\`${spec.evaluate}\`); a value printed by the command does not count`
          : `on the command's stdout (a line like "${spec.objective}: 0.123" or "METRIC ${spec.objective}=0.123")`;
      return done("missing_metric", `objective metric ${spec.objective} was not found ${where}`, fields());
    }
    if (!Number.isFinite(value)) {
      return done("nonfinite_metric", `objective metric ${spec.objective} is ${value}`, fields());
    }
    return done("ok", undefined, fields());
  }

  /** runProcess with this executor's settings; a string is a failure to run at all (e.g. unwritable logs). */
  async #run(o: Omit<RunProcessOptions, keyof LocalExecutorOptions>): Promise<ProcessOutcome | string> {
    try {
      const out = await runProcess({ ...this.#opts, ...o });
      if (out.spawnError !== undefined && !out.interrupted)
        return `could not start ${o.sandbox ? "the sandbox" : "/bin/sh"}: ${out.spawnError}`;
      return out;
    } catch (err) {
      return `could not run the command: ${errorMessage(err)}`;
    }
  }
}

export function createLocalExecutor(opts: LocalExecutorOptions = {}): LocalExecutor {
  return new LocalExecutor(opts);
}

/** Checks the trial's directories; returns why it cannot run, or undefined. */
async function prepare(cwd: string, logDir: string): Promise<string | undefined> {
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
function failure(out: ProcessOutcome, quoteStderr = true): string | undefined {
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

function measured(out: ProcessOutcome) {
  return {
    exitCode: out.exitCode,
    signal: out.signal,
    wallS: out.wallS,
    cpuS: out.cpuS,
    peakRssMb: out.peakRssMb,
    logTail: out.logTail,
  };
}

function notRun() {
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

function interruptReason(signal: AbortSignal | undefined): string {
  const r: unknown = signal?.reason;
  const detail = typeof r === "string" ? r : r instanceof Error ? r.message : undefined;
  return detail ? `interrupted: ${detail}` : "interrupted";
}

function checkDuration(name: string, ms: number): void {
  if (!Number.isFinite(ms) || ms < 0)
    throw new TypeError(`${name} must be a finite number of ms >= 0, got ${ms}`);
}

function clip(s: string, max = 300): string {
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
