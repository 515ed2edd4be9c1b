/**
 * The fleet's workers for people (status, watch, the dashboard): host, slots, current trials,
 * last heartbeat. Ages come from the database's clock, so a viewer's or a worker's skewed clock
 * shows no false "stale".
 */
import pg from "pg";
import { AutolabError } from "../core/errors.ts";
import { type FleetUrl, parseFleetUrl, unreachable, WORKER_LIVE_S } from "./db.ts";

export interface WorkerView {
  name: string;
  host: string;
  slots: number;
  gpus: string | null;
  version: string;
  /** Seconds since its last heartbeat (database clock). */
  heartbeatAgeS: number;
  state: "live" | "stale" | "stopped";
  /** Trials it runs now: "<tag> #<n>.<attempt>" on slot i. */
  current: Array<{ slot: number; label: string }>;
}

/** Workers seen in the last hour (stopped ones included), live ones first. */
export async function readWorkers(url: FleetUrl): Promise<WorkerView[]> {
  const c = new pg.Client({ connectionString: url.connectionString, connectionTimeoutMillis: 5000 });
  c.on("error", () => {});
  try {
    await c.connect();
    const exists = await c.query("SELECT to_regclass($1) AS t", [`${url.schema}.fleet_workers`]);
    if (!exists.rows[0]?.t) return [];
    const r = await c.query<{
      name: string;
      host: string;
      slots: number;
      gpus: string | null;
      version: string;
      age: number;
      stopped: boolean;
      current: string;
    }>(
      `SELECT name, host, slots, gpus, version, current, stopped_at IS NOT NULL AS stopped,
              extract(epoch FROM now() - heartbeat_at)::float8 AS age
       FROM ${url.schema}.fleet_workers
       WHERE heartbeat_at > now() - interval '1 hour'
       ORDER BY stopped_at IS NOT NULL, heartbeat_at DESC, name`,
    );
    return r.rows.map((w) => ({
      name: w.name,
      host: w.host,
      slots: w.slots,
      gpus: w.gpus,
      version: w.version,
      heartbeatAgeS: Math.max(0, w.age),
      state: w.stopped ? "stopped" : w.age > WORKER_LIVE_S ? "stale" : "live",
      current: (JSON.parse(w.current) as Array<{ slot: number; label: string }>).map((x) => ({
        slot: x.slot,
        label: x.label,
      })),
    }));
  } catch (err) {
    throw unreachable(url, err);
  } finally {
    await c.end().catch(() => {});
  }
}

/** Lines for the terminal: one per worker. */
export function workerLines(workers: WorkerView[], shown: string): string[] {
  const live = workers.filter((w) => w.state === "live");
  const slots = live.reduce((a, w) => a + w.slots, 0);
  const out = [
    `Workers (${shown}): ${live.length} live, ${slots} slot${slots === 1 ? "" : "s"}${workers.length > live.length ? `; ${workers.length - live.length} stale or stopped in the last hour` : ""}`,
  ];
  for (const w of workers) {
    const busy = w.current.length
      ? w.current.map((c) => `slot ${c.slot}: ${c.label}`).join(", ")
      : w.state === "live"
        ? "idle"
        : "—";
    out.push(
      `  ${w.name}@${w.host}  ${w.slots} slot${w.slots === 1 ? "" : "s"}${w.gpus ? ` (GPUs ${w.gpus})` : ""}  ${w.state}, heartbeat ${Math.round(w.heartbeatAgeS)}s ago  ${busy}`,
    );
  }
  return out;
}

/**
 * The fleet a viewer shows: `--fleet`, else $AUTOLAB_FLEET_DB, else program.md's
 * `executor.fleet.db`; undefined when the run uses none.
 */
export function viewerFleetUrl(
  flag: string | undefined,
  programDb: string | undefined,
): FleetUrl | undefined {
  const url = flag ?? process.env.AUTOLAB_FLEET_DB ?? programDb;
  if (url === undefined) return undefined;
  return parseFleetUrl(
    url,
    flag !== undefined
      ? "--fleet"
      : process.env.AUTOLAB_FLEET_DB
        ? "AUTOLAB_FLEET_DB"
        : "program.md executor.fleet.db",
  );
}

/** Workers as lines, or one line saying why they cannot be read (a viewer never fails on them). */
export async function workerLinesOrProblem(url: FleetUrl): Promise<string[]> {
  try {
    return workerLines(await readWorkers(url), url.shown);
  } catch (err) {
    return [`Workers: ${err instanceof AutolabError ? err.message : String(err)}`];
  }
}
