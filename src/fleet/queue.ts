/**
 * The trial queue on pg-boss (docs/distributed.md "Worker fleet": why pg-boss). A job carries
 * only the trial's key; its payload, metric lines, cancel flag and result live in the fleet's
 * own tables (src/fleet/db.ts). Leases: a worker touches each job it holds every
 * `TOUCH_S` seconds; a job not touched for `HEARTBEAT_S` seconds (its worker was killed, or lost
 * the database) is put back by pg-boss's monitor and leased again by another worker.
 */
import { PgBoss } from "pg-boss";
import { applicationName, type FleetUrl, unreachable } from "./db.ts";

export const QUEUE = "autolab-trials";
/** pg-boss's heartbeat: a leased job not touched for this long is retried (its minimum is 10). */
export const HEARTBEAT_S = 10;
/** How often a worker touches its jobs and reads their cancel flags. */
export const TOUCH_S = 2;
/** How many times a job is leased again after its worker died or gave it back. */
export const RETRY_LIMIT = 5;

export interface LeasedJob {
  id: string;
  key: string;
  /** 0 on the first lease, then one more for each lease after a dead or stopping worker. */
  retryCount: number;
}

export type JobState = "created" | "retry" | "active" | "completed" | "cancelled" | "failed";

/** One pg-boss instance: the coordinator enqueues and supervises, a worker leases. */
export class TrialQueue {
  readonly #boss: PgBoss;

  private constructor(boss: PgBoss) {
    this.#boss = boss;
  }

  static async open(url: FleetUrl): Promise<TrialQueue> {
    const boss = new PgBoss({
      connectionString: url.connectionString,
      schema: `${url.schema}_queue`,
      application_name: applicationName(url),
      // Every instance supervises: with the coordinator dead, the workers still put back a dead
      // peer's job. Short intervals are what makes the heartbeat's expiry seconds, not minutes.
      supervise: true,
      superviseIntervalSeconds: 2,
      monitorIntervalSeconds: 2,
      max: 2,
    });
    boss.on("error", () => {
      // Connection trouble surfaces on the next call; pg-boss retries its own maintenance.
    });
    try {
      await boss.start();
    } catch (err) {
      await boss.stop({ graceful: false, close: true }).catch(() => {});
      throw unreachable(url, err);
    }
    await boss
      .createQueue(QUEUE, {
        heartbeatSeconds: HEARTBEAT_S,
        retryLimit: RETRY_LIMIT,
        retryDelay: 0,
        // The heartbeat decides, not the lease's total length; pg-boss caps that at 24 hours, so a
        // trial longer than a day is leased again (docs/distributed.md "Worker fleet").
        expireInSeconds: 24 * 3600,
      })
      .catch(async (err: unknown) => {
        // Several instances create it at once: the loser's "already exists" is fine.
        if (/exist/i.test(String((err as Error)?.message))) return;
        await boss.stop({ graceful: false, close: true }).catch(() => {});
        throw err;
      });
    return new TrialQueue(boss);
  }

  async enqueue(key: string): Promise<string> {
    const id = await this.#boss.send(QUEUE, { key });
    if (!id) throw new Error(`pg-boss did not accept the job of trial ${key}`);
    return id;
  }

  /** The next job, or undefined when the queue is empty. */
  async lease(): Promise<LeasedJob | undefined> {
    const [job] = await this.#boss.fetch<{ key: string }>(QUEUE, { batchSize: 1 });
    if (!job) return undefined;
    return { id: job.id, key: job.data.key, retryCount: job.retryCount };
  }

  async touch(jobs: LeasedJob[]): Promise<void> {
    if (jobs.length === 0) return;
    await this.#boss.touch(
      QUEUE,
      jobs.map((j) => ({ id: j.id, retryCount: j.retryCount })),
    );
  }

  async complete(job: LeasedJob): Promise<void> {
    await this.#boss.complete(QUEUE, { id: job.id, retryCount: job.retryCount });
  }

  /** Gives a job back: it is leased again at once (one retry spent). */
  async giveBack(job: LeasedJob): Promise<void> {
    await this.#boss.fail(
      QUEUE,
      { id: job.id, retryCount: job.retryCount },
      { reason: "the worker stopped" },
    );
  }

  /** Takes a job that no worker holds out of the queue (a stopped run, a reaped trial). */
  async cancel(id: string): Promise<void> {
    await this.#boss.cancel(QUEUE, id);
  }

  async state(id: string): Promise<{ state: JobState; retryCount: number } | undefined> {
    const job = await this.#boss.getJobById(QUEUE, id);
    return job ? { state: job.state, retryCount: job.retryCount } : undefined;
  }

  async close(): Promise<void> {
    await this.#boss.stop({ graceful: false, close: true }).catch(() => {});
  }
}
