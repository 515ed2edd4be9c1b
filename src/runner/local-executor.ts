import { join } from "node:path";
import { formatLimitSeconds } from "../core/format.ts";
import type { Executor, SandboxSpec, TrialResult, TrialSpec } from "../core/types.ts";
import { findByToken } from "./process-tree.ts";
import { type ProcessOutcome, type RunProcessOptions, runProcess } from "./run-process.ts";
import {
  checkDuration,
  done,
  errorMessage,
  failure,
  interruptReason,
  notRun,
  prepare,
  trialBase,
} from "./trial-outcome.ts";

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
    const { stdoutPath, stderrPath, base } = trialBase(spec);
    if (spec.signal?.aborted)
      return done("interrupted", interruptReason(spec.signal), { ...base, ...notRun() });
    const unusable = await prepare(spec.cwd, spec.logDir);
    if (unusable) return done("crash", unusable, { ...base, ...notRun() });

    // Sandboxed, the harness's environment stays out: runProcess adds the sandbox's env instead.
    const env = trialEnv(spec);
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

    return this.scoreCommand(spec, { ...base, ...measured(cmd) }, metrics);
  }

  /**
   * What follows a command that exited 0, wherever it ran (here, or a Slurm job: slurm-executor.ts):
   * `beforeEvaluate` (the pristine-tree check), then the protected evaluate step on this machine
   * under its sandbox, then the objective. `fields` describe the command; `metrics` are what it
   * printed (changed here: evaluate's win, and an objective only the command printed is dropped).
   */
  async scoreCommand(
    spec: TrialSpec,
    fields0: Omit<TrialResult, "status" | "reason" | "metrics">,
    metrics: Map<string, number>,
  ): Promise<TrialResult> {
    const fields = () => ({ ...fields0, metrics: Object.fromEntries(metrics) });
    const env = trialEnv(spec);
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

    if (spec.grade) {
      // The harness owns the rubric's metrics: the editable command cannot print them.
      for (const name of [...metrics.keys()]) if (/^rubric[_.]/.test(name)) metrics.delete(name);
      let g: Awaited<ReturnType<NonNullable<TrialSpec["grade"]>>>;
      try {
        g = await spec.grade();
      } catch (err) {
        g = {
          status: "crash",
          reason: `rubric grading failed: ${errorMessage(err)}`,
          metrics: {},
          warnings: [],
        };
      }
      if (spec.signal?.aborted) return done("interrupted", interruptReason(spec.signal), fields());
      for (const [name, value] of Object.entries(g.metrics)) metrics.set(name, value);
      if (g.status === "crash") return done("crash", g.reason ?? "rubric grading failed", fields());
    }

    const value = metrics.get(spec.objective);
    if (value === undefined) {
      const where =
        spec.grade && /^rubric[_.]/.test(spec.objective)
          ? "among the rubric's metrics (rubric_score, rubric_pass, rubric.<criterion>, …: docs/learning.md)"
          : spec.evaluate !== undefined
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

/**
 * The environment of a trial's command and evaluate step: sandboxed, the harness's environment
 * stays out (the sandbox's env is added by whoever starts it); AUTOLAB_SEED and AUTOLAB_BUDGET_S
 * always. Exported for the Slurm executor, which sets them the same way.
 */
export function trialEnv(spec: TrialSpec): NodeJS.ProcessEnv {
  return {
    ...(spec.sandbox ? {} : process.env),
    ...spec.env,
    AUTOLAB_SEED: String(spec.seed),
    AUTOLAB_BUDGET_S: String(spec.budgetMs / 1000),
  };
}

export function createLocalExecutor(opts: LocalExecutorOptions = {}): LocalExecutor {
  return new LocalExecutor(opts);
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
