import { spawn } from "node:child_process";
import { afterAll, describe, expect, it } from "vitest";
import { AutolabError } from "../src/core/errors.ts";
import type { Ledger } from "../src/core/ledger.ts";
import { MIGRATIONS } from "../src/ledger/migrations.ts";
import { PG_MIGRATIONS } from "../src/ledger/pg/migrations.ts";
import { PgLedger } from "../src/ledger/pg/pg-ledger.ts";
import { maskUrl, parsePgUrl } from "../src/ledger/pg/url.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { ledgerContract, newExperiment, newRun, newTrial, trialResult } from "./contracts/ledger-contract.ts";
import { notebookReaderContract } from "./contracts/notebook-reader-contract.ts";
import { dropSchemas, freshSchemaUrl, PG_SKIP, PG_SKIP_REASON, pgQuery, schemaOf } from "./helpers/pg.ts";

// The same contract suites SqliteLedger passes (test/ledger.contract.test.ts), against PostgreSQL:
// each notebook in a schema of its own.
const urls = new WeakMap<Ledger, string>();
const fresh = (opts: { cache?: boolean } = {}) => {
  const url = freshSchemaUrl();
  const l = new PgLedger(url, opts);
  urls.set(l, url);
  return l;
};
const openAnother = (l: Ledger) => new PgLedger(urls.get(l) as string);
const readNotes = (l: Ledger, runId: number) =>
  (l as PgLedger).pg
    .query<{ experiment_id: number | null; text: string }>(
      "SELECT experiment_id, text FROM notes WHERE run_id = $1 ORDER BY id",
      [runId],
    )
    .map((r) => ({ experimentId: r.experiment_id, text: r.text }));

afterAll(dropSchemas);

describe.skipIf(PG_SKIP)(`PgLedger (${PG_SKIP ? PG_SKIP_REASON : "PostgreSQL"})`, () => {
  ledgerContract("PgLedger", () => fresh(), { readNotes, openAnother });
  ledgerContract("PgLedger (uncached reads)", () => fresh({ cache: false }), { readNotes, openAnother });
  notebookReaderContract("PgLedger", () => fresh(), { openAnother });

  it("has the same tables and columns as a SQLite notebook at the same version", async () => {
    expect(PG_MIGRATIONS.length).toBe(MIGRATIONS.length);
    const pgl = fresh();
    const sqlite = new SqliteLedger(":memory:");
    try {
      const lite = sqlite.db
        .prepare(
          `SELECT m.name AS t, p.name AS c, p.type AS type, p."notnull" AS nn, p.pk AS pk
           FROM sqlite_master m, pragma_table_info(m.name) p WHERE m.type = 'table' ORDER BY 1, 2`,
        )
        .all()
        .map((r) => `${r.t}.${r.c} ${logical(String(r.type))}${r.nn || isKey(r) ? " not null" : ""}`);
      const pgCols = (
        await pgQuery<{ t: string; c: string; type: string; nullable: string }>(
          `SELECT table_name AS t, column_name AS c, data_type AS type, is_nullable AS nullable
           FROM information_schema.columns WHERE table_schema = $1 AND table_name <> 'notebook_clock'
             AND column_name <> 'commit_seq' ORDER BY 1, 2`,
          [schemaOf(urls.get(pgl) as string)],
        )
      ).map((r) => `${r.t}.${r.c} ${logical(r.type)}${r.nullable === "NO" ? " not null" : ""}`);
      expect(pgCols).toEqual(lite);
    } finally {
      pgl.close();
      sqlite.close();
    }
  });

  it("orders rows by commit, not by id: a reader that saw a later id still sees an earlier one committed after it", async () => {
    const writer = fresh();
    const reader = openAnother(writer) as PgLedger;
    try {
      const run = writer.createRun(newRun());
      expect(reader.listExperiments(run.id)).toEqual([]);
      const url = urls.get(writer) as string;
      // Another session (psql: this thread blocks in the bridge, so not a client of this process)
      // takes an experiment id inside a transaction and commits a second later.
      const slow = spawn(
        "psql",
        [
          url.replace(/\?.*$/, ""),
          "-v",
          "ON_ERROR_STOP=1",
          "-c",
          `SET search_path TO "${schemaOf(url)}"`,
          "-c",
          `BEGIN; INSERT INTO experiments (run_id, n, agent, parent_commit, commit_sha, ref, hypothesis, diff_files,
             diff_insertions, diff_deletions, created_at) VALUES (${run.id}, 1, 'x', 'p', 'c', 'r', 'slow', 1, 0, 0, '${new Date().toISOString()}');
           SELECT pg_sleep(1); COMMIT;`,
        ],
        { stdio: "ignore" },
      );
      const done = new Promise<number | null>((resolve) => slow.on("exit", resolve));
      // Wait until its insert holds the clock (it is then sleeping inside its transaction).
      for (let i = 0; i < 100; i++) {
        const [row] = await pgQuery<{ n: string }>(
          "SELECT count(*) AS n FROM pg_stat_activity WHERE query LIKE '%pg_sleep(1)%' AND pid <> pg_backend_pid()",
        );
        if (Number(row?.n) > 0) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      writer.addExperiment(newExperiment(run.id, 2, { hypothesis: "fast" })); // waits on the clock until psql commits
      expect(await done).toBe(0);
      const ids = Object.fromEntries(reader.listExperiments(run.id).map((e) => [e.hypothesis, e.id]));
      expect(Object.keys(ids).sort()).toEqual(["fast", "slow"]);
      // The slow experiment took its id first; the fast one waited on the clock and committed after it.
      expect(ids.slow).toBeLessThan(ids.fast as number);
      const seq = await pgQuery<{ hypothesis: string; commit_seq: number }>(
        `SELECT hypothesis, commit_seq FROM "${schemaOf(url)}".experiments ORDER BY commit_seq`,
      );
      expect(seq.map((r) => r.hypothesis)).toEqual(["slow", "fast"]);
    } finally {
      reader.close();
    }
  });

  it("wakes a reader when another process commits (LISTEN/NOTIFY), and stops when unsubscribed", async () => {
    const writer = fresh();
    const reader = openAnother(writer) as PgLedger;
    try {
      let wakes = 0;
      let woken: () => void = () => {};
      const stop = reader.onChange(() => {
        wakes++;
        woken();
      });
      const next = () =>
        new Promise<void>((resolve, reject) => {
          const t = setTimeout(() => reject(new Error("no notification within 10 s")), 10_000);
          woken = () => {
            clearTimeout(t);
            resolve();
          };
        });
      const first = next();
      const run = writer.createRun(newRun());
      await first;
      const feed = reader.eventFeed();
      expect(feed.poll().map((e) => e.type)).toEqual(["run_started"]);
      const second = next();
      writer.addExperiment(newExperiment(run.id, 0));
      await second;
      stop();
      const before = wakes;
      writer.addNote(run.id, null, "after unsubscribing");
      await new Promise((r) => setTimeout(r, 300));
      expect(wakes).toBe(before);
    } finally {
      reader.close();
    }
  });

  it("reconnects after its connection is killed, and the write lands once", async () => {
    const l = fresh();
    try {
      const run = l.createRun(newRun());
      const e = l.addExperiment(newExperiment(run.id, 1));
      // Only this ledger's connection: other test files share the server.
      const [{ pid } = { pid: 0 }] = l.pg.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
      const [killed] = await pgQuery<{ ok: boolean }>("SELECT pg_terminate_backend($1) AS ok", [pid]);
      expect(killed?.ok).toBe(true);
      const trial = l.startTrial(newTrial(e.id, 1));
      l.finishTrial(trial, trialResult(), "/logs");
      const got = l.getExperiment(run.id, 1);
      expect(got?.trials.map((t) => t.result?.status)).toEqual(["ok"]);
    } finally {
      l.close();
    }
  });
});

describe("PostgreSQL notebook addresses", () => {
  it("masks the password wherever the address is shown", () => {
    expect(maskUrl("postgres://u:s3cret@db.example:5432/lab")).toBe("postgres://u:***@db.example:5432/lab");
    expect(parsePgUrl("postgresql://u:s3cret@h/lab?schema=night").shown).not.toContain("s3cret");
  });

  it("takes the lab's schema from ?schema= and refuses one that is not a plain identifier", () => {
    expect(parsePgUrl("postgres://u@h/lab").schema).toBe("autolab");
    expect(parsePgUrl("postgres://u@h/lab?schema=night_2").schema).toBe("night_2");
    expect(parsePgUrl("postgres://u@h/lab?schema=night_2").connectionString).toBe("postgres://u@h/lab");
    expect(() => parsePgUrl('postgres://u@h/lab?schema=x";drop')).toThrow(/schema/);
    expect(() => parsePgUrl("mysql://u@h/lab")).toThrow(AutolabError);
    expect(() => parsePgUrl("postgres://")).toThrow(/DB_URL_INVALID|not a PostgreSQL URL/);
  });

  it("says the database is unavailable, with the fix, when nothing listens (no hang)", () => {
    let err: unknown;
    try {
      new PgLedger("postgres://u:hunter2@127.0.0.1:1/lab");
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(AutolabError);
    expect((err as AutolabError).code).toBe("DB_UNAVAILABLE");
    expect((err as AutolabError).message).toContain("postgres://u:***@127.0.0.1:1/lab");
    expect((err as AutolabError).message).not.toContain("hunter2");
    expect((err as AutolabError).hint).toMatch(/pg_isready/);
  });
});

/** SQLite's declared types and information_schema's data types as one vocabulary. */
function logical(type: string): string {
  const t = type.toUpperCase();
  if (t.includes("INT")) return "integer";
  if (t === "REAL" || t.includes("DOUBLE")) return "real";
  if (t === "BOOLEAN") return "boolean";
  return "text";
}

/** SQLite's INTEGER PRIMARY KEY is NOT NULL without saying so. */
function isKey(r: Record<string, unknown>): boolean {
  return Boolean(r.pk);
}
