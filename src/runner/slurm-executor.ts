/**
 * Runs each trial's command as one Slurm job (docs/distributed.md "Slurm"): `sbatch` with
 * `--time` = budget + grace, the job's output on the shared file system, the command inside the
 * same sandbox the local executor builds; then `beforeEvaluate` and the protected evaluate step
 * on this machine, exactly as the local executor does them (LocalExecutor.scoreCommand).
 *
 * The harness keeps the clock and the score: it polls the job (squeue), tails its output for
 * metrics (pruning works), and cancels it (scancel) on prune, on the run's stop signal, at budget
 * + grace after it started running, and when it has been pending past `pendingLimitMs`. Every
 * outcome is a TrialResult, never an exception.
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { formatDuration, formatLimitSeconds } from "../core/format.ts";
import type { Executor, SandboxSpec, SlurmConfig, TrialResult, TrialSpec } from "../core/types.ts";
import { readUntrustedText } from "../core/untrusted-file.ts";
import { LocalExecutor, type LocalExecutorOptions } from "./local-executor.ts";
import { LogTail } from "./log-tail.ts";
import { LineSplitter, parseMetricLine } from "./metrics.ts";
import { newTreeToken, TOKEN_ENV } from "./process-tree.ts";
import { probeSandbox } from "./sandbox.ts";
import { type JobInfo, type SlurmToolOptions, SlurmTools } from "./slurm/cli.ts";
import { FileFollower } from "./slurm/file-follower.ts";
import { EMPTY_FILE, EXIT_STATUS_FILE, jobScript, parseExitStatus } from "./slurm/job-script.ts";
import { outcomeOfEnd, phaseOf, slurmTime } from "./slurm/states.ts";
import { done, errorMessage, failure, interruptReason, notRun, prepare, trialBase } from "./trial-outcome.ts";

export interface SlurmExecutorOptions extends SlurmToolOptions {
  /** Between two looks at the job (squeue) and its output files. Default 1000. */
  pollIntervalMs?: number;
  /** How long a cancelled job may take to end before the trial is recorded anyway. Default 120 000. */
  cancelWaitMs?: number;
  /** How long squeue may fail in a row (slurmctld unreachable) before the job is given up. Default 300 000. */
  unreachableLimitMs?: number;
  /** Setup and the evaluate step run on this machine, with the local executor's settings. */
  local?: LocalExecutorOptions;
  /** Size of TrialResult.logTail. Defaults 40 lines, 4096 characters (as the local executor). */
  tailLines?: number;
  tailChars?: number;
}

/** The prefix of every trial job's name: `autolab-<trial token>` (reap finds leftovers by it). */
export const JOB_NAME_PREFIX = "autolab-";

type Cause = "prune" | "stop" | "budget" | "pending" | "unreachable" | "callback";

export class SlurmExecutor implements Executor {
  readonly #config: SlurmConfig;
  readonly #tools: SlurmTools;
  readonly #local: LocalExecutor;
  readonly #pollMs: number;
  readonly #cancelWaitMs: number;
  readonly #unreachableMs: number;
  readonly #tailLines: number;
  readonly #tailChars: number;

  constructor(config: SlurmConfig, opts: SlurmExecutorOptions = {}) {
    this.#config = config;
    this.#tools = new SlurmTools(opts);
    this.#local = new LocalExecutor(opts.local);
    this.#pollMs = opts.pollIntervalMs ?? 1000;
    this.#cancelWaitMs = opts.cancelWaitMs ?? 120_000;
    this.#unreachableMs = opts.unreachableLimitMs ?? 300_000;
    this.#tailLines = opts.tailLines ?? 40;
    this.#tailChars = opts.tailChars ?? 4096;
  }

  /**
   * Setup runs on this machine, in the worktree on the shared file system (what it installs
   * there is what the jobs see), under the local executor's clock and sandbox.
   */
  setup(
    cwd: string,
    command: string,
    timeoutMs: number,
    logDir: string,
    signal?: AbortSignal,
    sandbox?: SandboxSpec,
  ): Promise<TrialResult> {
    return this.#local.setup(cwd, command, timeoutMs, logDir, signal, sandbox);
  }

  /** Cancels the jobs of a trial whose harness died (named `autolab-<token>`); returns how many. */
  async reap(token: string): Promise<number> {
    const ids = await this.#tools.named(JOB_NAME_PREFIX + token);
    if (typeof ids === "string" || ids.length === 0) return 0;
    await this.#tools.cancel(ids);
    return ids.length;
  }

  async runTrial(spec: TrialSpec): Promise<TrialResult> {
    const { stdoutPath, stderrPath, base } = trialBase(spec);
    const notStarted = (status: "crash" | "interrupted", reason: string) =>
      done(status, reason, { ...base, ...notRun() });
    if (spec.signal?.aborted) return notStarted("interrupted", interruptReason(spec.signal));
    const unusable = await prepare(spec.cwd, spec.logDir);
    if (unusable) return notStarted("crash", unusable);
    const submitted = await this.#submit(spec, stdoutPath, stderrPath);
    if ("error" in submitted) return notStarted("crash", submitted.error);
    const { id } = submitted;

    // Cancelling is the harness's decision; what it was decides the status.
    let cause: Cause | undefined;
    let wake: (() => void) | undefined;
    const cancelFor = (c: Cause) => {
      cause ??= c;
      wake?.();
    };
    const onPrune = () => cancelFor("prune");
    const onStop = () => cancelFor("stop");
    spec.prune?.addEventListener("abort", onPrune, { once: true });
    spec.signal?.addEventListener("abort", onStop, { once: true });
    if (spec.prune?.aborted) cancelFor("prune");
    if (spec.signal?.aborted) cancelFor("stop");

    const metrics = new Map<string, number>();
    const tail = new LogTail(this.#tailLines, this.#tailChars);
    let lastStderrLine = "";
    let callbackError: unknown;
    const outLines = new LineSplitter((line, redrawn) => {
      tail.push(line, redrawn);
      for (const [name, value] of parseMetricLine(line)) {
        metrics.set(name, value);
        if (!spec.onMetric || callbackError !== undefined) continue;
        try {
          spec.onMetric(name, value);
        } catch (err) {
          callbackError = err;
          cancelFor("callback");
        }
      }
    });
    const errLines = new LineSplitter((line, redrawn) => {
      tail.push(line, redrawn);
      if (line.trim() !== "") lastStderrLine = line;
    });
    const out = new FileFollower(stdoutPath, (c) => outLines.push(c));
    const err = new FileFollower(stderrPath, (c) => errLines.push(c));

    const submittedAt = Date.now();
    let runningSince: number | undefined;
    let cancelledAt: number | undefined;
    let unreachableSince: number | undefined;
    let unreachable = "";
    let last: JobInfo | undefined;
    let forgotten = false;
    const limitMs = spec.budgetMs + spec.graceMs;
    try {
      for (;;) {
        await out.poll();
        await err.poll();
        if (cause !== undefined && cancelledAt === undefined) {
          cancelledAt = Date.now();
          await this.#tools.cancel([id]);
        }
        const info = await this.#tools.job(id);
        const now = Date.now();
        if (typeof info === "string") {
          unreachableSince ??= now;
          unreachable = info;
          if (now - unreachableSince > this.#unreachableMs) {
            cause ??= "unreachable";
            await this.#tools.cancel([id]);
            break;
          }
        } else if (info === undefined) {
          forgotten = true;
          break;
        } else {
          unreachableSince = undefined;
          last = info;
          const phase = phaseOf(info.state);
          if (phase === "ended") break;
          if (phase === "running") runningSince ??= now;
          if (phase === "waiting" && now - submittedAt > this.#config.pendingLimitMs) cancelFor("pending");
          if (runningSince !== undefined && now - runningSince > limitMs) cancelFor("budget");
          if (cancelledAt !== undefined && now - cancelledAt > this.#cancelWaitMs) break;
        }
        if (cause !== undefined && cancelledAt === undefined) continue;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, this.#pollMs);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = undefined;
      }
    } finally {
      spec.prune?.removeEventListener("abort", onPrune);
      spec.signal?.removeEventListener("abort", onStop);
    }
    await out.poll();
    await err.poll();
    outLines.end();
    errLines.end();
    if (callbackError !== undefined) throw callbackError;

    const statusFile = readUntrustedText(join(spec.logDir, EXIT_STATUS_FILE), { maxBytes: 64 * 1024 });
    const status = parseExitStatus(statusFile.ok ? statusFile.text : "");
    const accounted = forgotten && !status ? await this.#tools.accounted(id) : undefined;
    const state = last && phaseOf(last.state) === "ended" ? last.state : accounted?.state;
    const exitCode = status?.exitCode ?? accounted?.exitCode ?? null;
    const observedS = runningSince !== undefined ? (Date.now() - runningSince) / 1000 : 0;
    const fields = {
      ...base,
      exitCode,
      signal: null,
      wallS: status?.wallS ?? observedS,
      // Not measured on the node (docs/distributed.md: what a Slurm trial records).
      cpuS: 0,
      peakRssMb: 0,
      logTail: tail.text(),
    };
    const withMetrics = () => ({ ...fields, metrics: Object.fromEntries(metrics) });
    const job = `Slurm job ${id}${last?.nodes ? ` on ${last.nodes}` : ""}`;

    if (cause === "prune" && !spec.signal?.aborted)
      return done("pruned", String(spec.prune?.reason ?? "pruned"), withMetrics());
    if (cause === "stop" || spec.signal?.aborted)
      return done("interrupted", interruptReason(spec.signal), withMetrics());
    if (cause === "budget") {
      const reason = `exceeded budget ${formatLimitSeconds(spec.budgetMs)} + grace ${formatLimitSeconds(spec.graceMs)}; cancelled ${job} (scancel)`;
      return done("timeout", reason, withMetrics());
    }
    if (cause === "pending") return done("crash", this.#pendingReason(id, last), withMetrics());
    if (cause === "unreachable") {
      const reason = `${job}: Slurm did not answer for ${formatDuration(this.#unreachableMs)} (${unreachable}); the job was cancelled if it could be`;
      return done("crash", reason, withMetrics());
    }
    if (state !== undefined) {
      const ended = outcomeOfEnd(state, id, last?.nodes ?? "");
      if (ended?.status === "timeout") {
        const reason = `exceeded budget ${formatLimitSeconds(spec.budgetMs)} + grace ${formatLimitSeconds(spec.graceMs)}: ${ended.reason}`;
        return done("timeout", reason, withMetrics());
      }
      if (ended) return done(ended.status, ended.reason, withMetrics());
    }
    if (exitCode === null) {
      const reason = state
        ? `${job} ended in state ${state}${last?.reason && last.reason !== "None" ? ` (${last.reason})` : ""} without an exit status`
        : `${job} is no longer known to Slurm (squeue; sacct has no record) and left no exit status in ${EXIT_STATUS_FILE}`;
      return done("crash", reason, withMetrics());
    }
    const failed = failure({ exitCode, signal: null, lastStderrLine });
    if (failed) return done("crash", failed, withMetrics());
    return this.#local.scoreCommand(spec, fields, metrics);
  }

  /** Writes the job's script next to the logs and submits it; the job id, or why not. */
  async #submit(
    spec: TrialSpec,
    stdoutPath: string,
    stderrPath: string,
  ): Promise<{ id: string } | { error: string }> {
    if (spec.logDir.includes("%"))
      return {
        error: `the log directory ${spec.logDir} contains "%", which sbatch reads as a file name pattern`,
      };
    const notOption = this.#config.extraArgs.find((a) => !a.startsWith("-"));
    if (notOption !== undefined)
      return {
        error: `executor.slurm.extra_args item ${JSON.stringify(notOption)} is not an option: write each as --name=value`,
      };
    if (spec.sandbox) {
      const probe = probeSandbox();
      if (!probe.ok)
        return {
          error: `could not start the sandbox: no sandbox can be made here: ${probe.reason}. ${probe.hint}`,
        };
    }
    // As trialEnv (local-executor.ts) for a sandboxed trial; unsandboxed, the rest of the harness's
    // environment reaches the job through sbatch (`--export=ALL`, its default).
    const token = spec.env?.[TOKEN_ENV] || newTreeToken();
    const env: Record<string, string> = {
      ...(spec.env ?? {}),
      AUTOLAB_SEED: String(spec.seed),
      AUTOLAB_BUDGET_S: String(spec.budgetMs / 1000),
      [TOKEN_ENV]: token,
    };
    const script = join(spec.logDir, "job.sh");
    try {
      if (spec.sandbox) await writeEmpty(join(spec.logDir, EMPTY_FILE));
      const text = jobScript({
        command: spec.command,
        cwd: spec.cwd,
        logDir: spec.logDir,
        env,
        ...(spec.sandbox ? { sandbox: spec.sandbox.command } : {}),
      });
      await writeFile(script, text, { mode: 0o700 });
    } catch (err) {
      return { error: `could not write the job's script ${script}: ${errorMessage(err)}` };
    }
    const { partition, gres, account, extraArgs } = this.#config;
    // Each option and each value its own argv item: sbatch gets them from execFile, no shell.
    const args = [
      ...(partition !== undefined ? ["--partition", partition] : []),
      ...(gres !== undefined ? ["--gres", gres] : []),
      ...(account !== undefined ? ["--account", account] : []),
      ...extraArgs,
      "--job-name",
      JOB_NAME_PREFIX + token,
      "--time",
      slurmTime(spec.budgetMs + spec.graceMs),
      "--output",
      stdoutPath,
      "--error",
      stderrPath,
      "--chdir",
      spec.cwd,
      // A job requeued after a node failure would run the command again behind the harness's back.
      "--no-requeue",
    ];
    const r = await this.#tools.submit(args, script);
    if ("error" in r) {
      const where = partition !== undefined ? ` (partition ${partition})` : "";
      return { error: `sbatch refused the trial's job${where}: ${r.error}` };
    }
    return r;
  }

  #pendingReason(id: string, last: JobInfo | undefined): string {
    const partition = last?.partition || this.#config.partition || "the default partition";
    const why = last?.reason && last.reason !== "None" ? ` (Slurm's reason: ${last.reason})` : "";
    return (
      `Slurm job ${id} was still pending after ${formatDuration(this.#config.pendingLimitMs)} in partition ${partition}${why}; it was cancelled. ` +
      `Check the partition (sinfo -p ${partition}; squeue -p ${partition}), then choose another \`partition:\` ` +
      "or raise `pending_limit:` under executor.slurm in program.md"
    );
  }
}

/** The empty, read-only file the sandbox binds over hidden paths (see job-script.ts). */
async function writeEmpty(path: string): Promise<void> {
  try {
    await writeFile(path, "", { mode: 0o444, flag: "wx" });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
}
