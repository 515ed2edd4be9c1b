import { MessageChannel, type MessagePort, receiveMessageOnPort, Worker } from "node:worker_threads";
import { AutolabError } from "../../core/errors.ts";
import type { PgTarget } from "./url.ts";

/** What the worker answers (pg-worker.js). */
interface Answer {
  ok: boolean;
  rows?: Record<string, unknown>[];
  code?: string;
  message?: string;
  /** The request was sent again after a lost connection. */
  retried?: boolean;
}

/** A statement PostgreSQL refused (constraint, syntax): its SQLSTATE and message. */
export class PgStatementError extends Error {
  readonly code: string | undefined;
  /** Sent again after a lost connection: a unique violation then means the first attempt committed. */
  readonly retried: boolean;
  constructor(message: string, code: string | undefined, retried: boolean) {
    super(message);
    this.code = code;
    this.retried = retried;
  }
}

export interface SyncPgOptions {
  /** How long a request waits for a lost connection to come back (default 10 min, AUTOLAB_DB_WAIT_S). */
  waitMs?: number;
  /** Between reconnection attempts (default 1 s). */
  retryMs?: number;
  /** The server's statement_timeout (default 30 s). */
  statementTimeoutMs?: number;
}

/**
 * Synchronous queries over the asynchronous `pg` driver (docs/distributed.md, option b): the
 * driver runs in a worker thread; the calling thread posts a request and blocks on a shared flag
 * (Atomics.wait) until the worker has answered. One request at a time, as the Ledger is used.
 * The wait is bounded: a worker that never answers (dead, hung) becomes DB_UNAVAILABLE, never a
 * hang.
 */
export class SyncPg {
  private readonly worker: Worker;
  private readonly port: MessagePort;
  /** Notifications of the LISTEN connection (listen()). */
  private readonly events: MessagePort;
  private readonly changeListeners = new Set<() => void>();
  private readonly flag = new Int32Array(new SharedArrayBuffer(4));
  /** Never notified: Atomics.wait on it is a synchronous sleep. */
  private readonly pause = new Int32Array(new SharedArrayBuffer(4));
  private readonly target: PgTarget;
  private readonly bound: number;
  private closed = false;

  constructor(target: PgTarget, opts: SyncPgOptions = {}) {
    this.target = target;
    const waitMs = opts.waitMs ?? Number(process.env.AUTOLAB_DB_WAIT_S ?? 600) * 1000;
    const statementTimeoutMs = opts.statementTimeoutMs ?? 30_000;
    // The worker gives up on its own after waitMs; this bound only catches a worker that died.
    this.bound = waitMs + statementTimeoutMs + 30_000;
    const channel = new MessageChannel();
    const events = new MessageChannel();
    this.port = channel.port1;
    this.events = events.port1;
    this.worker = new Worker(new URL("./pg-worker.js", import.meta.url), {
      workerData: {
        url: target.connectionString,
        schema: target.schema,
        shown: target.shown,
        port: channel.port2,
        events: events.port2,
        flag: this.flag.buffer,
        waitMs,
        retryMs: opts.retryMs ?? 1000,
        statementTimeoutMs,
      },
      transferList: [channel.port2, events.port2],
      // Its stdout/stderr would pass through this (blocked) thread; it writes to fd 2 itself.
      stdout: false,
      stderr: false,
    });
    this.worker.unref();
    const first = this.wait(20_000);
    if (!first.ok) {
      void this.worker.terminate();
      throw this.failure(first);
    }
  }

  /** One statement (`$n` placeholders); its rows. */
  query<R>(sql: string, params: unknown[] = []): R[] {
    return (this.request({ op: "query", sql, params }).rows ?? []) as R[];
  }

  private request(msg: Record<string, unknown>): Answer {
    if (this.closed) throw new AutolabError("INTERNAL", "the PostgreSQL notebook was used after close().");
    Atomics.store(this.flag, 0, 0);
    this.port.postMessage(msg);
    const a = this.wait(this.bound);
    if (!a.ok) throw this.failure(a);
    return a;
  }

  /**
   * Calls `fn` after any write to the lab's notebook commits, by any process (LISTEN/NOTIFY; the
   * listening connection opens with the first subscriber). A wake-up only: read what changed.
   * Never keeps the process alive. Returns the unsubscribe.
   */
  onChange(fn: () => void): () => void {
    if (this.changeListeners.size === 0) {
      this.request({ op: "listen" });
      this.events.on("message", this.wake);
      this.events.unref();
    }
    this.changeListeners.add(fn);
    return () => {
      this.changeListeners.delete(fn);
      if (this.changeListeners.size === 0) this.events.off("message", this.wake);
    };
  }

  private readonly wake = () => {
    for (const fn of [...this.changeListeners]) fn();
  };

  close(): void {
    if (this.closed) return;
    this.closed = true;
    Atomics.store(this.flag, 0, 0);
    this.port.postMessage({ op: "close" });
    this.wait(5_000);
    this.port.close();
    this.events.close();
    void this.worker.terminate();
  }

  private wait(ms: number): Answer {
    if (Atomics.wait(this.flag, 0, 0, ms) === "timed-out") {
      return { ok: false, code: "DB_UNAVAILABLE", message: `no answer in ${Math.round(ms / 1000)} s` };
    }
    // The answer is posted before the flag is set; should it not be visible yet, give it a moment.
    for (let i = 0; i < 200; i++) {
      const got = receiveMessageOnPort(this.port);
      if (got) return got.message as Answer;
      Atomics.wait(this.pause, 0, 0, 5);
    }
    return { ok: false, code: "INTERNAL", message: "the database worker signalled without an answer" };
  }

  private failure(a: Answer): Error {
    const shown = this.target.shown;
    if (a.code === "PG_DRIVER_MISSING") {
      return new AutolabError(
        "PG_DRIVER_MISSING",
        `the PostgreSQL driver (pg) cannot be loaded: ${a.message}`,
        "Install it next to autolab: npm install pg",
      );
    }
    if (a.code === "DB_UNAVAILABLE" || a.code === "28P01" || a.code === "3D000" || a.code === "28000") {
      return new AutolabError(
        "DB_UNAVAILABLE",
        `the notebook database ${shown} is not available: ${a.message}`,
        a.code === "28P01" || a.code === "28000"
          ? "Check the user and the password (PGPASSWORD or ~/.pgpass)."
          : a.code === "3D000"
            ? "Create the database (createdb), or name one that exists."
            : "Check that PostgreSQL is running and reachable at that address (pg_isready); nothing recorded so far is lost, and `autolab run` resumes the run once it answers.",
      );
    }
    if (a.code === "INTERNAL")
      return new AutolabError("INTERNAL", `the database worker failed: ${a.message}`);
    return new PgStatementError(`postgres: ${a.message}`, a.code, a.retried === true);
  }
}
