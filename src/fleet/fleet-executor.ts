/**
 * The coordinator's side of the fleet: an `Executor` whose trials run on `autolab worker`s. A
 * trial is a job keyed by its AUTOLAB_TRIAL_TOKEN (the notebook's trial start carries it): the
 * candidate's commit is bundled (once per commit) and stored in the fleet's database, the job is
 * enqueued, and the result awaited. Metric lines are polled back and fed to `onMetric`, so the
 * pruner works remotely; a prune or a stop sets the job's cancel flag, which the worker reads with
 * its heartbeat. Setup runs on each worker (once per slot worktree), not here.
 */
import { randomBytes } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import type pg from "pg";
import type { Executor, SandboxSpec, TrialResult, TrialSpec } from "../core/types.ts";
import { TOKEN_ENV } from "../runner/process-tree.ts";
import { git } from "../workspace/git.ts";
import { type BundleRef, storeBundle } from "./bundles.ts";
import { type FleetUrl, openFleetDb, transient, WORKER_LIVE_S, whileReachable } from "./db.ts";
import { type JobOutcome, LOG_FILES, notRunResult, type TrialJob } from "./job.ts";
import { HEARTBEAT_S, TrialQueue } from "./queue.ts";

/** What the executor needs to know of the run (set by createRun once the run is open). */
export interface FleetRun {
  repoRoot: string;
  prefix: string;
  programFile: string;
  programText: string;
  baseCommit: string;
  tag: string;
  /** The code is not the operator's (the hub's claims): workers run it sandboxed and offline only (TrialJob.untrusted). */
  untrusted?: boolean;
}

export interface FleetExecutorOptions {
  /** How often a running trial's metrics, result and flags are read (ms). Default 250. */
  pollMs?: number;
  /** Said when a trial waits in the queue with no live worker (the run's progress line). */
  onWait?: (message: string) => void;
}

export class FleetExecutor implements Executor {
  readonly url: FleetUrl;
  readonly #pool: pg.Pool;
  readonly #queue: TrialQueue;
  readonly #opts: FleetExecutorOptions;
  #run: FleetRun | undefined;
  readonly #bundles = new Map<string, Promise<BundleRef>>();
  #warnedAt = 0;
  /** The live workers' slots as last read (capacity()); followed by #liveTimer. */
  #liveSlots = 0;
  #liveTimer: NodeJS.Timeout | undefined;

  private constructor(url: FleetUrl, pool: pg.Pool, queue: TrialQueue, opts: FleetExecutorOptions) {
    this.url = url;
    this.#pool = pool;
    this.#queue = queue;
    this.#opts = opts;
  }

  /** Connects (FLEET_UNREACHABLE with the fix when it cannot) and migrates the fleet's tables. */
  static async open(url: FleetUrl, opts: FleetExecutorOptions = {}): Promise<FleetExecutor> {
    const pool = await openFleetDb(url);
    try {
      return new FleetExecutor(url, pool, await TrialQueue.open(url), opts);
    } catch (err) {
      await pool.end().catch(() => {});
      throw err;
    }
  }

  bind(run: FleetRun): void {
    this.#run = run;
  }

  set onWait(f: ((message: string) => void) | undefined) {
    if (f) this.#opts.onWait = f;
    else delete this.#opts.onWait;
  }

  /**
   * The coordinator sees the fleet's slots as its own: the live workers' slots as last read, kept
   * current every `everyMs` once followLiveSlots() started (the scheduler parks the run's slots
   * above it and uses them again as workers join). A database that does not answer keeps the
   * last count.
   */
  capacity(): number {
    return this.#liveSlots;
  }

  /** Reads the live slots now and then every `everyMs` (until close()). */
  async followLiveSlots(everyMs = 2000): Promise<{ workers: number; slots: number }> {
    const live = await this.liveSlots();
    this.#liveSlots = live.slots;
    if (!this.#liveTimer) {
      this.#liveTimer = setInterval(() => {
        this.liveSlots().then(
          (l) => {
            this.#liveSlots = l.slots;
          },
          () => {},
        );
      }, everyMs);
      this.#liveTimer.unref();
    }
    return live;
  }

  /** The slots of the live workers (heartbeat younger than WORKER_LIVE_S, by the database's clock). */
  async liveSlots(): Promise<{ workers: number; slots: number }> {
    const r = await this.#pool.query<{ workers: string; slots: string | null }>(
      `SELECT count(*) AS workers, sum(slots) AS slots FROM ${this.url.schema}.fleet_workers
       WHERE stopped_at IS NULL AND heartbeat_at > now() - make_interval(secs => $1)`,
      [WORKER_LIVE_S],
    );
    const row = r.rows[0];
    return { workers: Number(row?.workers ?? 0), slots: Number(row?.slots ?? 0) };
  }

  async setup(
    _cwd: string,
    command: string,
    _timeoutMs: number,
    logDir: string,
    _signal?: AbortSignal,
    _sandbox?: SandboxSpec,
  ): Promise<TrialResult> {
    // Each worker runs setup once in each of its slot worktrees, before its first trial there.
    await mkdir(logDir, { recursive: true });
    const ok = notRunResult({ seed: 0, command }, "ok", "");
    delete ok.reason;
    return ok;
  }

  async runTrial(spec: TrialSpec): Promise<TrialResult> {
    if (!this.#run) throw new Error("FleetExecutor.runTrial before bind(): createRun binds the run");
    if (spec.signal?.aborted) return notRunResult(spec, "interrupted", "interrupted");
    return this.runAt((await git(spec.cwd, ["rev-parse", "HEAD"])).trim(), spec);
  }

  /**
   * Runs `commit` of the bound repository as one trial (runTrial reads it from `spec.cwd`'s HEAD;
   * the hub names the commit itself: its repository is bare). `spec.cwd` is not read here. The
   * trial's key is its AUTOLAB_TRIAL_TOKEN (`spec.env`): a trial run again with the same key
   * finds the job it already has (running, or with its result) instead of running twice.
   * `label` replaces the default one (`<tag> #<n>.<attempt>` from the log directory). `detach`
   * stops the waiting, not the trial (unlike `spec.signal`): runAt throws `TrialDetached` and the
   * job goes on, its result kept for the next runAt with the same key (a hub that stops re-attaches
   * when it starts again).
   */
  async runAt(
    commit: string,
    spec: TrialSpec,
    opts: { label?: string; detach?: AbortSignal } = {},
  ): Promise<TrialResult> {
    const run = this.#run;
    if (!run) throw new Error("FleetExecutor.runAt before bind(): createRun binds the run");
    const key = spec.env?.[TOKEN_ENV] ?? randomBytes(12).toString("hex");
    const job0 = { seed: spec.seed, command: spec.command };
    if (spec.signal?.aborted)
      return notRunResult(
        job0,
        "interrupted",
        `interrupted: ${reasonOf(spec.signal, "stopped")} (before a worker started it)`,
      );
    // A restarted or briefly unreachable database is waited out (saying so), never a failed run.
    const waits = [spec.signal, opts.detach].filter((s): s is AbortSignal => s !== undefined);
    const signal = waits.length > 1 ? AbortSignal.any(waits) : waits[0];
    const reachable = <T>(f: () => Promise<T>) =>
      whileReachable(f, {
        url: this.url,
        ...(signal ? { signal } : {}),
        ...(this.#opts.onWait ? { onWait: this.#opts.onWait } : {}),
      });
    try {
      return await this.#runJob(spec, run, key, commit, reachable, opts);
    } catch (err) {
      if (opts.detach?.aborted && !spec.signal?.aborted && transient(err)) throw new TrialDetached(key);
      if (spec.signal?.aborted && transient(err)) {
        return notRunResult(job0, "interrupted", "interrupted while the fleet's database was unreachable");
      }
      throw err;
    }
  }

  async #runJob(
    spec: TrialSpec,
    run: FleetRun,
    key: string,
    commit: string,
    reachable: <T>(f: () => Promise<T>) => Promise<T>,
    opts: { label?: string; detach?: AbortSignal } = {},
  ): Promise<TrialResult> {
    const detached = () => {
      if (opts.detach?.aborted) throw new TrialDetached(key);
    };
    detached();
    const { schema } = this.url;
    const job0 = { seed: spec.seed, command: spec.command };
    const bundles = [await reachable(() => this.#bundle(run, run.baseCommit))];
    if (commit !== run.baseCommit)
      bundles.push(await reachable(() => this.#bundle(run, commit, run.baseCommit)));
    const [n, attempt] = spec.logDir.split("/").slice(-2);
    const job: TrialJob = {
      key,
      label: opts.label ?? `${run.tag} #${n}.${attempt}`,
      project: projectKey(run),
      tag: run.tag,
      prefix: run.prefix,
      programFile: run.programFile,
      programText: run.programText,
      baseCommit: run.baseCommit,
      commit,
      bundles,
      command: spec.command,
      ...(spec.evaluate !== undefined ? { evaluate: spec.evaluate } : {}),
      budgetMs: spec.budgetMs,
      graceMs: spec.graceMs,
      evaluateTimeoutMs: spec.evaluateTimeoutMs,
      seed: spec.seed,
      env: {
        ...(spec.env ?? {}),
        AUTOLAB_SEED: String(spec.seed),
        AUTOLAB_BUDGET_S: String(spec.budgetMs / 1000),
      },
      objective: spec.objective,
      ...(run.untrusted ? { untrusted: true } : {}),
    };
    const queueId = await reachable(async () => {
      const r = await this.#pool.query<{ queue_id: string | null }>(
        `INSERT INTO ${schema}.fleet_jobs (key, label, payload) VALUES ($1, $2, $3)
         ON CONFLICT (key) DO UPDATE SET key = EXCLUDED.key RETURNING queue_id`,
        [key, job.label, JSON.stringify(job)],
      );
      // Enqueued once per trial, also when this is tried again after a dropped connection.
      const known = r.rows[0]?.queue_id;
      if (known) return known;
      const id = await this.#queue.enqueue(key);
      await this.#pool.query(`UPDATE ${schema}.fleet_jobs SET queue_id = $2 WHERE key = $1`, [key, id]);
      return id;
    });

    let lastMetric = 0;
    let flagged: "prune" | "stop" | undefined;
    let stopAskedAt = 0;
    let lastStateCheck = Date.now();
    const enqueuedAt = Date.now();
    for (;;) {
      detached();
      const out = await reachable(async (): Promise<TrialResult | undefined> => {
        const metrics = await this.#pool.query<{
          id: string;
          name: string;
          value: number;
          elapsed_ms: number | null;
        }>(
          `SELECT id, name, value, elapsed_ms FROM ${schema}.fleet_metrics WHERE key = $1 AND id > $2 ORDER BY id`,
          [key, lastMetric],
        );
        for (const m of metrics.rows) {
          lastMetric = Number(m.id);
          // The worker's clock of the command's run: the time in the queue is not the trial's.
          if (m.elapsed_ms === null) spec.onMetric?.(m.name, m.value);
          else spec.onMetric?.(m.name, m.value, m.elapsed_ms);
        }
        const done = await this.#pool.query<{ result: string; logs: string }>(
          `SELECT result, logs FROM ${schema}.fleet_results WHERE key = $1`,
          [key],
        );
        const row = done.rows[0];
        if (row) return this.#finish(spec, { result: JSON.parse(row.result), logs: JSON.parse(row.logs) });

        if (spec.signal?.aborted && flagged !== "stop") {
          flagged = "stop";
          stopAskedAt = Date.now();
          await this.#flag(key, "stop", reasonOf(spec.signal, "interrupted"));
          const st = await this.#queue.state(queueId);
          if (!st || st.state === "created" || st.state === "retry") {
            await this.#queue.cancel(queueId).catch(() => {});
            return notRunResult(
              job0,
              "interrupted",
              `interrupted: ${reasonOf(spec.signal, "stopped")} (before a worker started it)`,
            );
          }
        } else if (spec.prune?.aborted && !flagged) {
          flagged = "prune";
          await this.#flag(key, "prune", reasonOf(spec.prune, "pruned"));
        }
        if (flagged === "stop" && Date.now() - stopAskedAt > (HEARTBEAT_S * 2 + 10) * 1000 + spec.graceMs) {
          return notRunResult(job0, "interrupted", "interrupted: its worker did not answer the stop");
        }

        if (Date.now() - lastStateCheck > 2000) {
          lastStateCheck = Date.now();
          const st = await this.#queue.state(queueId);
          if (st?.state === "failed" || st?.state === "cancelled") {
            // A last look: the result may have landed between the two reads.
            const late = await this.#pool.query(`SELECT 1 FROM ${schema}.fleet_results WHERE key = $1`, [
              key,
            ]);
            if (!late.rowCount) {
              return notRunResult(
                job0,
                st.state === "failed" ? "crash" : "interrupted",
                st.state === "failed"
                  ? `its job was leased ${st.retryCount + 1} times and no worker finished it (workers died or gave it back)`
                  : "interrupted: its job was cancelled in the queue",
              );
            }
          }
          if ((st?.state === "created" || st?.state === "retry") && Date.now() - enqueuedAt > 5000) {
            await this.#warnIfNoWorkers(job.label);
          }
        }
        return undefined;
      });
      if (out) return out;
      await sleep(this.#opts.pollMs ?? 250, spec.signal, spec.prune, opts.detach);
    }
  }

  /** A trial whose coordinator died: its job is cancelled and its worker told to stop it. */
  async reap(token: string): Promise<number> {
    const r = await this.#pool.query<{ queue_id: string | null }>(
      `UPDATE ${this.url.schema}.fleet_jobs SET cancel_kind = 'stop', cancel_reason = 'the coordinator stopped while this trial ran'
       WHERE key = $1 RETURNING queue_id`,
      [token],
    );
    const id = r.rows[0]?.queue_id;
    if (id) await this.#queue.cancel(id).catch(() => {});
    return r.rowCount ?? 0;
  }

  async close(): Promise<void> {
    clearInterval(this.#liveTimer);
    this.#liveTimer = undefined;
    await this.#queue.close();
    await this.#pool.end().catch(() => {});
  }

  async #flag(key: string, kind: "prune" | "stop", reason: string): Promise<void> {
    await this.#pool.query(
      `UPDATE ${this.url.schema}.fleet_jobs SET cancel_kind = $2, cancel_reason = $3 WHERE key = $1`,
      [key, kind, reason],
    );
  }

  #bundle(run: FleetRun, commit: string, base?: string): Promise<BundleRef> {
    let p = this.#bundles.get(commit);
    if (!p) {
      p = storeBundle(this.#pool, this.url.schema, run.repoRoot, commit, base);
      p.catch(() => this.#bundles.delete(commit));
      this.#bundles.set(commit, p);
    }
    return p;
  }

  async #warnIfNoWorkers(label: string): Promise<void> {
    if (!this.#opts.onWait || Date.now() - this.#warnedAt < 60_000) return;
    const live = await this.liveSlots();
    if (live.workers > 0) return;
    this.#warnedAt = Date.now();
    this.#opts.onWait(
      `fleet: no live worker on ${this.url.shown}; trial ${label} waits in the queue (start one: autolab worker --db ${this.url.shown})`,
    );
  }

  /** The worker's logs into the trial's log directory here; paths as the notebook expects them. */
  async #finish(spec: TrialSpec, out: JobOutcome): Promise<TrialResult> {
    await mkdir(spec.logDir, { recursive: true });
    for (const f of LOG_FILES) {
      const text = out.logs[f];
      if (text !== undefined) await writeFile(join(spec.logDir, f), text);
    }
    return {
      ...out.result,
      stdoutPath: join(spec.logDir, "stdout.log"),
      stderrPath: join(spec.logDir, "stderr.log"),
    };
  }
}

/** runAt stopped waiting (its `detach` signal): the trial's job goes on in the fleet. */
export class TrialDetached extends Error {
  readonly key: string;
  constructor(key: string) {
    super(`stopped waiting for trial ${key}; its job goes on and a later run with the same key finds it`);
    this.name = "TrialDetached";
    this.key = key;
  }
}

/** The workers' cache repository for this run's project: the repository's name and the run's base commit. */
function projectKey(run: FleetRun): string {
  return `${basename(run.repoRoot)}-${run.baseCommit.slice(0, 12)}`;
}

function reasonOf(signal: AbortSignal, fallback: string): string {
  const r: unknown = signal.reason;
  return typeof r === "string" ? r : r instanceof Error ? r.message : fallback;
}

function sleep(ms: number, ...signals: Array<AbortSignal | undefined>): Promise<void> {
  return new Promise((resolve) => {
    const live = signals.filter((s): s is AbortSignal => s !== undefined && !s.aborted);
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      for (const s of live) s.removeEventListener("abort", done);
      resolve();
    }
    for (const s of live) s.addEventListener("abort", done, { once: true });
  });
}
