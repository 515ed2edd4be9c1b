// @ts-check
// The PostgreSQL side of the bridge (bridge.ts): a worker thread holding one `pg` client. The
// main thread posts a request on `port` and blocks on `flag` (Atomics.wait); this answers with
// one message and wakes it. Plain JavaScript: the published package runs it as is (Node strips
// no types inside node_modules).
//
// A lost connection is waited out here, not in the main thread: a request that fails for want of
// a connection is retried after reconnecting, every `retryMs`, until `waitMs` has passed; each
// wait is announced on stderr (written synchronously: the main thread is blocked and cannot
// forward the worker's stdio). Whether a write that was in flight when the connection dropped
// committed is unknown; it is retried too, and its answer says `retried: true`, so that a unique
// violation on the retry means the first attempt committed (pg-sql.ts uses the row it wrote).
import { writeSync } from "node:fs";
import { workerData } from "node:worker_threads";

const {
  url,
  schema,
  shown,
  port,
  events,
  flag: flagBuffer,
  waitMs,
  retryMs,
  statementTimeoutMs,
} = workerData;
const flag = new Int32Array(flagBuffer);

/** @param {object} msg */
function answer(msg) {
  port.postMessage(msg);
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
}

/** @type {any} */
let pg;
/** @type {any} */
let client;

// Errors that mean "no usable connection" (node's socket errors, the server going away), as
// opposed to an error of the statement itself (a constraint, bad SQL).
const CONNECTION_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EHOSTUNREACH",
  "EAI_AGAIN",
  "57P01", // admin_shutdown
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now (starting up, shutting down)
  "08000",
  "08003",
  "08006",
  "08001",
  "08004",
]);

/** @param {any} err */
function isConnectionError(err) {
  if (!err) return false;
  if (CONNECTION_CODES.has(err.code)) return true;
  const m = String(err.message ?? "");
  return /Connection terminated|connection is closed|Client has encountered a connection error|not queryable|timeout expired/i.test(
    m,
  );
}

async function connect() {
  const c = new pg.Client({
    connectionString: url,
    connectionTimeoutMillis: 10_000,
    statement_timeout: statementTimeoutMs,
    application_name: "autolab",
  });
  // An idle client whose server goes away emits 'error'; without a listener that would kill the worker.
  c.on("error", () => {
    if (client === c) client = undefined;
  });
  await c.connect();
  await c.query(`SET search_path TO "${schema}"`);
  return c;
}

/** @param {number} ms */
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Runs `fn` with a connected client; waits out a lost connection (see the top of the file).
 * @param {(c: any) => Promise<any>} fn
 * @param {boolean} inTransaction a lost connection inside a transaction cannot be retried: the server rolled it back
 */
async function withClient(fn, inTransaction) {
  const deadline = Date.now() + waitMs;
  let announced = false;
  let retried = false;
  for (;;) {
    try {
      if (!client) client = await connect();
      const out = await fn(client);
      if (announced) writeSync(2, `autolab: the database ${shown} answers again; going on.\n`);
      return { out, retried };
    } catch (err) {
      if (!isConnectionError(err)) throw Object.assign(/** @type {object} */ (err), { retried });
      client?.end().catch(() => {});
      client = undefined;
      if (inTransaction || Date.now() >= deadline)
        throw Object.assign(new Error(String(/** @type {any} */ (err).message)), {
          code: "DB_UNAVAILABLE",
          cause: err,
        });
      if (!announced) {
        writeSync(
          2,
          `autolab: the database ${shown} does not answer (${/** @type {any} */ (err).message}); waiting up to ${Math.round(waitMs / 1000)} s for it to come back.\n`,
        );
        announced = true;
      }
      retried = true;
      await sleep(retryMs);
    }
  }
}

let inTransaction = false;

/**
 * The LISTEN connection (asked for by the first onChange subscriber): every notification on the
 * lab's channel is posted on `events`. Lost, it reconnects every `retryMs` and posts a wake-up
 * once back (notifications sent meanwhile are gone: the reader polls once).
 * @type {any}
 */
let listener;
let listening = false;

async function listen() {
  listening = true;
  for (;;) {
    try {
      const c = await connect();
      c.on("notification", (/** @type {any} */ n) => events.postMessage(n.payload ?? ""));
      c.on("error", () => {
        if (listener === c) listener = undefined;
        c.end().catch(() => {});
        if (listening) setTimeout(() => void listen(), retryMs);
      });
      await c.query(`LISTEN "autolab_${schema}"`);
      listener = c;
      return;
    } catch {
      await sleep(retryMs);
      events.postMessage("reconnected");
    }
  }
}

port.on("message", async (/** @type {any} */ m) => {
  try {
    if (m.op === "listen") {
      if (!listening) await listen();
      answer({ ok: true });
      return;
    }
    if (m.op === "close") {
      listening = false;
      await listener?.end().catch(() => {});
      await client?.end().catch(() => {});
      client = undefined;
      answer({ ok: true });
      port.close();
      events.close();
      return;
    }
    const sql = String(m.sql);
    const { out, retried } = await withClient((c) => c.query(sql, m.params), inTransaction);
    if (/^\s*BEGIN/i.test(sql)) inTransaction = true;
    else if (/^\s*(COMMIT|ROLLBACK)/i.test(sql)) inTransaction = false;
    const rows = Array.isArray(out) ? out.flatMap((r) => r.rows ?? []) : out.rows;
    answer({ ok: true, rows, retried });
  } catch (err) {
    const e = /** @type {any} */ (err);
    if (/^\s*(COMMIT|ROLLBACK)/i.test(String(m.sql)) || e.code === "DB_UNAVAILABLE") inTransaction = false;
    answer({ ok: false, code: e.code, message: String(e.message ?? e), retried: e.retried === true });
  }
});

(async () => {
  try {
    pg = (await import("pg")).default;
  } catch (err) {
    answer({ ok: false, code: "PG_DRIVER_MISSING", message: String(/** @type {any} */ (err).message) });
    return;
  }
  // Numbers as numbers: int8 (counts, ids) and numeric come back as strings otherwise. Ids and
  // counts stay far below 2^53.
  pg.types.setTypeParser(20, (/** @type {string} */ v) => Number(v));
  pg.types.setTypeParser(1700, (/** @type {string} */ v) => Number(v));
  // Opening fails fast (a wrong URL, a server that is down, a refused password): the caller says
  // so before a run starts. Waiting out a lost connection is for later requests.
  try {
    client = await connect();
    answer({ ok: true });
  } catch (err) {
    const e = /** @type {any} */ (err);
    answer({
      ok: false,
      code: isConnectionError(e) ? "DB_UNAVAILABLE" : e.code,
      message: String(e.message ?? e),
    });
  }
})();

process.on("uncaughtException", (err) =>
  answer({ ok: false, code: "INTERNAL", message: String(err.message) }),
);
