/**
 * The fleet's database: one PostgreSQL schema holding the workers, the code bundles, the trial
 * jobs' payloads, their metric lines, cancel flags and results (docs/distributed.md "Worker
 * fleet"). The queue itself (leases, heartbeats, retries) is pg-boss's, in a schema of its own
 * (src/fleet/queue.ts). Reached with the async `pg` driver: the worker and the coordinator's
 * executor are async code; the coordinator's notebook stays whatever it is.
 */
import pg from "pg";
import { AutolabError } from "../core/errors.ts";
import { maskUrl } from "../ledger/pg/url.ts";

/** What `--db` / `--fleet` name: the connection, and the schema the fleet's tables live in. */
export interface FleetUrl {
  /** The connection string without autolab's own `schema` parameter. */
  connectionString: string;
  /** `?schema=<name>` of the URL; default `autolab_fleet` (the hub's: `autolab_hub`). pg-boss uses `<schema>_queue`. */
  schema: string;
  /** The URL as it may be shown: the password replaced by `***`. */
  shown: string;
}

const SCHEMA = /^[a-z_][a-z0-9_]{0,40}$/;

/**
 * Parses a `postgres://` URL; a clear error for anything else. `defaultSchema` is the schema
 * when the URL names none (the fleet's `autolab_fleet`; the hub's `autolab_hub`).
 */
export function parseFleetUrl(url: string, flag = "--db", defaultSchema = "autolab_fleet"): FleetUrl {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new AutolabError(
      "FLEET_URL_INVALID",
      `${flag} ${JSON.stringify(maskUrl(url))} is not a URL.`,
      "Give the fleet's PostgreSQL database as postgres://user@host[:port]/database (the password from PGPASSWORD or ~/.pgpass).",
    );
  }
  if (u.protocol !== "postgres:" && u.protocol !== "postgresql:") {
    throw new AutolabError(
      "FLEET_URL_INVALID",
      `${flag} ${JSON.stringify(maskUrl(url))} is not a PostgreSQL URL (${u.protocol}//).`,
      "The fleet's queue lives in PostgreSQL: postgres://user@host[:port]/database.",
    );
  }
  const schema = u.searchParams.get("schema") ?? defaultSchema;
  if (!SCHEMA.test(schema)) {
    throw new AutolabError(
      "FLEET_URL_INVALID",
      `${flag}: schema ${JSON.stringify(schema)} is not a plain lower-case SQL name.`,
      "Use letters, digits and underscores, e.g. ?schema=autolab_fleet.",
    );
  }
  u.searchParams.delete("schema");
  return { connectionString: u.toString(), schema, shown: maskUrl(url) };
}

/** The one masking of a database URL's password (src/ledger/pg/url.ts), for the fleet's modules. */
export { maskUrl };

/**
 * A pool on the fleet's database with its schema migrated. Unreachable: `FLEET_UNREACHABLE`,
 * naming the URL (password masked) and the fix.
 */
export async function openFleetDb(url: FleetUrl, max = 4): Promise<pg.Pool> {
  const pool = new pg.Pool({
    connectionString: url.connectionString,
    max,
    connectionTimeoutMillis: 10_000,
    application_name: applicationName(url),
  });
  // An idle client whose server went away must not take the process down: queries report it.
  pool.on("error", () => {});
  try {
    await migrate(pool, url.schema);
  } catch (err) {
    await pool.end().catch(() => {});
    throw unreachable(url, err);
  }
  return pool;
}

/** What the fleet's connections call themselves (pg_stat_activity): `autolab-fleet/<schema>`. */
export function applicationName(url: FleetUrl): string {
  return `autolab-fleet/${url.schema}`;
}

/** A connection failure as the error the user sees. */
export function unreachable(url: FleetUrl, err: unknown): AutolabError {
  if (err instanceof AutolabError) return err;
  const msg = err instanceof Error ? err.message : String(err);
  return new AutolabError(
    "FLEET_UNREACHABLE",
    `the fleet's database ${url.shown} cannot be used: ${msg.replaceAll(url.connectionString, url.shown)}`,
    "Check that PostgreSQL runs there and accepts this user (pg_isready -h <host>; the password comes from PGPASSWORD or ~/.pgpass, never from program.md).",
  );
}

/** `fn` in one transaction on a client of `pool`: committed when it returns, rolled back when it throws. */
export async function inTransaction<T>(pool: pg.Pool, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const c = await pool.connect();
  try {
    await c.query("BEGIN");
    const out = await fn(c);
    await c.query("COMMIT");
    return out;
  } catch (err) {
    await c.query("ROLLBACK").catch(() => {});
    throw err;
  } finally {
    c.release();
  }
}

/** The fleet's tables; idempotent, serialized by an advisory lock (workers start together). */
async function migrate(pool: pg.Pool, schema: string): Promise<void> {
  await inTransaction(pool, async (c) => {
    await c.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`autolab-fleet:${schema}`]);
    await c.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await c.query(`
        CREATE TABLE IF NOT EXISTS ${schema}.fleet_workers (
          id TEXT PRIMARY KEY,
          name TEXT NOT NULL,
          host TEXT NOT NULL,
          pid INTEGER NOT NULL,
          slots INTEGER NOT NULL,
          gpus TEXT,
          version TEXT NOT NULL,
          started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
          heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now(),
          stopped_at TIMESTAMPTZ,
          current TEXT NOT NULL DEFAULT '[]'
        );
        CREATE TABLE IF NOT EXISTS ${schema}.fleet_bundles (
          sha256 TEXT PRIMARY KEY,
          data BYTEA NOT NULL,
          created_at TIMESTAMPTZ NOT NULL DEFAULT now()
        );
        CREATE TABLE IF NOT EXISTS ${schema}.fleet_jobs (
          key TEXT PRIMARY KEY,
          queue_id TEXT,
          label TEXT NOT NULL,
          payload TEXT NOT NULL,
          enqueued_at TIMESTAMPTZ NOT NULL DEFAULT now(),
          started_at TIMESTAMPTZ,
          worker_id TEXT,
          runs INTEGER NOT NULL DEFAULT 0,
          cancel_kind TEXT CHECK (cancel_kind IN ('prune', 'stop')),
          cancel_reason TEXT
        );
        CREATE TABLE IF NOT EXISTS ${schema}.fleet_metrics (
          id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          key TEXT NOT NULL,
          run INTEGER NOT NULL,
          name TEXT NOT NULL,
          value DOUBLE PRECISION NOT NULL,
          elapsed_ms DOUBLE PRECISION,
          at TIMESTAMPTZ NOT NULL DEFAULT now()
        );
        ALTER TABLE ${schema}.fleet_metrics ADD COLUMN IF NOT EXISTS elapsed_ms DOUBLE PRECISION;
        CREATE INDEX IF NOT EXISTS fleet_metrics_key ON ${schema}.fleet_metrics (key, id);
        CREATE TABLE IF NOT EXISTS ${schema}.fleet_results (
          key TEXT PRIMARY KEY,
          worker_id TEXT NOT NULL,
          run INTEGER NOT NULL,
          result TEXT NOT NULL,
          logs TEXT NOT NULL,
          finished_at TIMESTAMPTZ NOT NULL DEFAULT now()
        );
      `);
  });
}

/** A worker counts as live while its heartbeat is younger than this (the database's clock, never a machine's). */
export const WORKER_LIVE_S = 15;

/** A failure that a restarted or briefly unreachable server explains: worth waiting out. */
export function transient(err: unknown): boolean {
  const code = String((err as { code?: unknown })?.code ?? "");
  if (code.startsWith("57P") || code.startsWith("08") || code === "53300") return true;
  if (["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "EAI_AGAIN"].includes(code))
    return true;
  return /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error/i.test(
    String((err as Error)?.message ?? err),
  );
}

/**
 * Runs `f`, waiting out transient database failures (a restart, a dropped connection): tries again
 * every second, calling `onWait` with what is wrong (at most once a minute), until `signal` aborts
 * (then the last error is thrown). Any other error is thrown at once.
 */
export async function whileReachable<T>(
  f: () => Promise<T>,
  o: { url: FleetUrl; signal?: AbortSignal; onWait?: (message: string) => void },
): Promise<T> {
  let saidAt = 0;
  for (;;) {
    try {
      return await f();
    } catch (err) {
      if (!transient(err) || o.signal?.aborted) throw err;
      if (o.onWait && Date.now() - saidAt > 60_000) {
        saidAt = Date.now();
        const msg = (err as Error)?.message ?? String(err);
        o.onWait(`fleet: the database ${o.url.shown} is unreachable (${msg}); waiting for it`);
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}
