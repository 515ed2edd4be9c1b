/**
 * `autolab worker`: one machine's slots serving the fleet's trial queue. It registers in
 * `fleet_workers`, leases jobs (one per free slot), runs each with the local executor
 * (src/fleet/worker-trial.ts), and every TOUCH_S seconds: records its heartbeat and current
 * trials, touches its jobs' leases, and reads their cancel flags (a prune or a stop from the
 * coordinator). Metric lines go to `fleet_metrics` as they appear; the result is written once per
 * trial (`fleet_results`, keyed by the trial: a job that ran twice counts once). Stopping (SIGTERM,
 * `signal`): no new lease, the running trials are stopped and their jobs given back, to be leased
 * again at once by another worker. A trial whose code could not be prepared for a reason that is
 * not the candidate's (the database or network went away during a bundle fetch, a checkout in the
 * cache failed) is given back too, not recorded, and its slot pauses before it leases again; only
 * on the job's last lease (RETRY_LIMIT) is that reason recorded as the trial's crash.
 */
import { randomBytes } from "node:crypto";
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { homedir, hostname } from "node:os";
import { join } from "node:path";
import { AUTOLAB_VERSION } from "../app/init.ts";
import { acquireLock, lockHolder } from "../app/lock.ts";
import { AutolabError } from "../core/errors.ts";
import { LocalExecutor } from "../runner/local-executor.ts";
import { newTreeToken } from "../runner/process-tree.ts";
import { type FleetUrl, openFleetDb, whileReachable } from "./db.ts";
import { type JobOutcome, notRunResult, type TrialJob } from "./job.ts";
import { type LeasedJob, RETRY_LIMIT, TOUCH_S, TrialQueue } from "./queue.ts";
import { runJob, type WorkerSlot } from "./worker-trial.ts";

export interface WorkerOptions {
  url: FleetUrl;
  /** Slots without GPUs (default 1); `gpus` instead gives one slot per GPU. */
  slots?: number;
  gpus?: string[];
  /** Shown in status (default: the host name). */
  name?: string;
  /** Cache repositories and worktrees (default $XDG_CACHE_HOME/autolab/fleet or ~/.cache/autolab/fleet). */
  cacheDir?: string;
  /** Stops the worker (SIGTERM in the CLI): running trials are stopped and their jobs given back. */
  signal?: AbortSignal;
  /** One line per event, for the terminal. */
  log?: (line: string) => void;
  /** How long a slot waits before asking the queue again when it was empty (ms). Default 500. */
  pollMs?: number;
  /** Called once the worker has registered and its slots start leasing. */
  onReady?: () => void;
}

/** The longest a slot waits before leasing again after it put a job back. */
const PUT_BACK_MAX_MS = 30_000;

interface Running {
  job: LeasedJob;
  label: string;
  slot: number;
  stop: AbortController;
  prune: AbortController;
}

export async function runWorker(opts: WorkerOptions): Promise<void> {
  const log = opts.log ?? (() => {});
  const slots: WorkerSlot[] = opts.gpus?.length
    ? opts.gpus.map((gpu, index) => ({ index, gpu }))
    : Array.from({ length: opts.slots ?? 1 }, (_, index) => ({ index }));
  const name = opts.name ?? hostname();
  const cacheDir =
    opts.cacheDir ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "autolab", "fleet");
  const { schema } = opts.url;
  // One worker per cache: its slot worktrees and repositories are this process's alone.
  await mkdir(join(cacheDir, "running"), { recursive: true });
  const lockPath = join(cacheDir, "worker.lock");
  const holder = lockHolder(lockPath);
  if (holder !== undefined && holder !== process.pid) {
    throw new AutolabError(
      "FLEET_OPTIONS_INVALID",
      `the cache ${cacheDir} is in use by the worker with process id ${holder}.`,
      "Give each worker on a machine its own --cache DIR (or one worker --slots N).",
    );
  }
  const releaseLock = acquireLock(lockPath, `the worker cache ${cacheDir}`);
  const executor = new LocalExecutor();
  // A worker killed with -9 leaves unsandboxed trials running (a sandboxed one dies with it):
  // their lease tokens were written here; kill what is left before taking new work. A lease token
  // is this worker's own (never the job's key, which a re-leased copy of the job on another worker
  // of this machine carries too): only what this cache's worker started is killed.
  for (const f of await readdir(join(cacheDir, "running"))) {
    const file = join(cacheDir, "running", f);
    const token = (await readFile(file, "utf8").catch(() => "")).trim();
    const killed = token ? await executor.reap(token) : 0;
    if (killed)
      log(
        `worker ${name}: killed ${killed} process${killed === 1 ? "" : "es"} of a trial a killed worker left`,
      );
    await rm(file, { force: true });
  }
  const pool = await openFleetDb(opts.url, slots.length + 2).catch((err: unknown) => {
    releaseLock();
    throw err;
  });
  let queue: TrialQueue;
  try {
    queue = await TrialQueue.open(opts.url);
  } catch (err) {
    await pool.end();
    releaseLock();
    throw err;
  }
  const id = `${name}:${process.pid}:${randomBytes(4).toString("hex")}`;

  const running = new Map<number, Running>();
  const stopping = new AbortController();
  const onStop = () => stopping.abort(opts.signal?.reason ?? "the worker stopped");
  if (opts.signal?.aborted) onStop();
  opts.signal?.addEventListener("abort", onStop, { once: true });
  stopping.signal.addEventListener("abort", () => {
    for (const r of running.values())
      r.stop.abort(`the worker ${name} stopped; the trial is run again elsewhere`);
  });

  const currentJson = () =>
    JSON.stringify([...running.values()].map((r) => ({ slot: r.slot, key: r.job.key, label: r.label })));
  /** What the slots run, as soon as it changes (viewers show it), besides every heartbeat. */
  const publishCurrent = () =>
    pool
      .query(`UPDATE ${schema}.fleet_workers SET heartbeat_at = now(), current = $2 WHERE id = $1`, [
        id,
        currentJson(),
      ])
      .then(
        () => {},
        () => {},
      );
  const beat = async () => {
    await pool.query(`UPDATE ${schema}.fleet_workers SET heartbeat_at = now(), current = $2 WHERE id = $1`, [
      id,
      currentJson(),
    ]);
    const jobs = [...running.values()];
    if (jobs.length === 0) return;
    await queue.touch(jobs.map((r) => r.job));
    const flags = await pool.query<{
      key: string;
      cancel_kind: "prune" | "stop";
      cancel_reason: string | null;
    }>(
      `SELECT key, cancel_kind, cancel_reason FROM ${schema}.fleet_jobs WHERE key = ANY($1) AND cancel_kind IS NOT NULL`,
      [jobs.map((r) => r.job.key)],
    );
    for (const f of flags.rows) {
      for (const r of jobs) {
        if (r.job.key !== f.key) continue;
        const why = f.cancel_reason ?? (f.cancel_kind === "prune" ? "pruned" : "stopped by the coordinator");
        if (f.cancel_kind === "prune") r.prune.abort(why);
        else r.stop.abort(why);
      }
    }
  };
  let beating = false;
  const timer = setInterval(() => {
    if (beating) return;
    beating = true;
    beat()
      .catch((err: unknown) => log(`worker ${name}: heartbeat failed: ${(err as Error).message}`))
      .finally(() => {
        beating = false;
      });
  }, TOUCH_S * 1000);

  const serveSlot = async (slot: WorkerSlot) => {
    let putBacks = 0;
    while (!stopping.signal.aborted) {
      let job: LeasedJob | undefined;
      try {
        job = await queue.lease();
      } catch (err) {
        log(`worker ${name}: leasing failed: ${(err as Error).message}`);
      }
      if (!job) {
        await sleep(opts.pollMs ?? 500, stopping.signal);
        continue;
      }
      let putBack = false;
      try {
        putBack = (await serveJob(job, slot)) === "put back";
      } catch (err) {
        // The database went away mid-job: the lease lapses and another worker runs it again.
        log(`worker ${name}: job ${job.key} abandoned: ${(err as Error).message}`);
        running.delete(slot.index);
      }
      // A slot whose trials could not be prepared waits longer each time before it leases again
      // (1 s, 2 s, 4 s … up to PUT_BACK_MAX_MS), so that a fault of this worker's own is not a
      // loop; another worker may lease the job meanwhile.
      putBacks = putBack ? putBacks + 1 : 0;
      if (putBack) await sleep(Math.min(PUT_BACK_MAX_MS, 1000 * 2 ** (putBacks - 1)), stopping.signal);
    }
  };

  /** Serves one leased job: its result written, or the job put back for another lease. */
  const serveJob = async (job: LeasedJob, slot: WorkerSlot): Promise<"done" | "put back"> => {
    const row = await pool.query<{
      payload: string;
      cancel_kind: string | null;
      cancel_reason: string | null;
    }>(`SELECT payload, cancel_kind, cancel_reason FROM ${schema}.fleet_jobs WHERE key = $1`, [job.key]);
    const done = await pool.query(`SELECT 1 FROM ${schema}.fleet_results WHERE key = $1`, [job.key]);
    const first = row.rows[0];
    if (!first || done.rowCount) {
      // A job without a payload, or whose trial already has its result: nothing to run again.
      await queue.complete(job);
      return "done";
    }
    const spec = JSON.parse(first.payload) as TrialJob;
    const run = job.retryCount + 1;
    if (first.cancel_kind) {
      const outcome: JobOutcome = {
        result: notRunResult(
          spec,
          "interrupted",
          `interrupted: ${first.cancel_reason ?? "stopped before it started"}`,
        ),
        logs: {},
      };
      await writeResult(job.key, run, outcome);
      await queue.complete(job);
      return "done";
    }
    await pool.query(
      `UPDATE ${schema}.fleet_jobs SET started_at = now(), worker_id = $2, runs = runs + 1 WHERE key = $1`,
      [job.key, id],
    );
    const r: Running = {
      job,
      label: spec.label,
      slot: slot.index,
      stop: new AbortController(),
      prune: new AbortController(),
    };
    running.set(slot.index, r);
    const tokenFile = join(cacheDir, "running", `slot-${slot.index}`);
    const leaseToken = newTreeToken();
    await writeFile(tokenFile, leaseToken);
    await publishCurrent();
    log(`worker ${name} slot ${slot.index}: ${spec.label} (run ${run})`);
    let metrics = Promise.resolve();
    const ran = await runJob(spec, slot, {
      pool,
      schema,
      cacheDir,
      gpus: opts.gpus ?? [],
      workerName: name,
      trialToken: leaseToken,
      executor,
      signal: r.stop.signal,
      prune: r.prune.signal,
      onMetric: (metric, value, elapsedMs) => {
        metrics = metrics
          .then(() =>
            pool.query(
              `INSERT INTO ${schema}.fleet_metrics (key, run, name, value, elapsed_ms) VALUES ($1, $2, $3, $4, $5)`,
              [job.key, run, metric, value, elapsedMs],
            ),
          )
          .then(
            () => {},
            () => {},
          );
      },
    });
    await metrics;
    await rm(tokenFile, { force: true });
    running.delete(slot.index);
    await publishCurrent();
    let outcome: JobOutcome;
    if ("putBack" in ran) {
      if (job.retryCount < RETRY_LIMIT || stopping.signal.aborted) {
        log(`worker ${name} slot ${slot.index}: ${spec.label} put back for another lease: ${ran.putBack}`);
        await giveBack(job);
        return "put back";
      }
      // The last lease: the reason is recorded rather than the queue's "no worker finished it".
      outcome = {
        result: notRunResult(
          spec,
          "crash",
          `${ran.putBack} (on worker ${name}, its lease ${run}, the last); the trial was not run`,
        ),
        logs: {},
      };
    } else outcome = ran;
    if (stopping.signal.aborted && outcome.result.status === "interrupted") {
      await queue.giveBack(job).catch(() => {});
      log(`worker ${name} slot ${slot.index}: ${spec.label} given back`);
      return "done";
    }
    await writeResult(job.key, run, outcome);
    await queue.complete(job).catch(() => {});
    log(`worker ${name} slot ${slot.index}: ${spec.label} ${outcome.result.status}`);
    return "done";
  };

  /**
   * Gives a job back once the database answers again (a restart is waited out, not turned into a
   * result); if it cannot be reached before the worker stops, the lease lapses after HEARTBEAT_S and
   * the job is leased again all the same.
   */
  const giveBack = async (job: LeasedJob) => {
    await whileReachable(() => queue.giveBack(job), {
      url: opts.url,
      signal: stopping.signal,
      onWait: (m) => log(`worker ${name}: ${m}`),
    }).catch((err: unknown) =>
      log(`worker ${name}: job ${job.key} not given back: ${(err as Error).message}`),
    );
  };

  /**
   * First result wins: a job that ran twice (a lease that lapsed under a live worker) counts once.
   * A database that went away meanwhile is waited for: the result is not thrown away.
   */
  const writeResult = async (key: string, run: number, outcome: JobOutcome) => {
    await whileReachable(
      () =>
        pool.query(
          `INSERT INTO ${schema}.fleet_results (key, worker_id, run, result, logs) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key) DO NOTHING`,
          [key, id, run, JSON.stringify(outcome.result), JSON.stringify(outcome.logs)],
        ),
      { url: opts.url, onWait: (m) => log(`worker ${name}: ${m}`) },
    );
  };

  try {
    await pool.query(
      `INSERT INTO ${schema}.fleet_workers (id, name, host, pid, slots, gpus, version) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [id, name, hostname(), process.pid, slots.length, opts.gpus?.join(",") ?? null, AUTOLAB_VERSION],
    );
    log(`worker ${name}: ${slots.length} slot${slots.length === 1 ? "" : "s"} on ${opts.url.shown}`);
    opts.onReady?.();
    await Promise.all(slots.map(serveSlot));
  } finally {
    clearInterval(timer);
    await pool
      .query(`UPDATE ${schema}.fleet_workers SET stopped_at = now(), current = '[]' WHERE id = $1`, [id])
      .catch(() => {});
    await queue.close();
    await pool.end().catch(() => {});
    releaseLock();
    log(`worker ${name}: stopped`);
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
