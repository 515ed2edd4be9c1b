import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { AutolabError } from "../src/core/errors.ts";
import type { Ledger } from "../src/core/ledger.ts";
import { MIGRATIONS } from "../src/ledger/migrations.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { ledgerContract, newExperiment, newRun, trialResult } from "./contracts/ledger-contract.ts";
import { notebookReaderContract } from "./contracts/notebook-reader-contract.ts";

const root = mkdtempSync(join(tmpdir(), "autolab-ledger-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let counter = 0;
/** A fresh notebook path in a directory that does not exist yet (the ledger creates it). */
const dbPath = () => join(root, `lab-${++counter}`, ".autolab", "lab.db");

const readNotes = (l: Ledger, runId: number) =>
  (l as SqliteLedger).db
    .prepare("SELECT experiment_id, text FROM notes WHERE run_id = ? ORDER BY id")
    .all(runId)
    .map((r) => ({ experimentId: r.experiment_id as number | null, text: r.text as string }));

/** Where each file ledger lives, so the contract can open another one on the same file. */
const paths = new WeakMap<Ledger, string>();
const atNewPath = (opts: { cache?: boolean } = {}) => {
  const path = dbPath();
  const l = new SqliteLedger(path, opts);
  paths.set(l, path);
  return l;
};
const openAnother = (l: Ledger) => new SqliteLedger(paths.get(l) as string);

ledgerContract("SqliteLedger (file)", () => atNewPath(), { readNotes, openAnother });
ledgerContract("SqliteLedger (:memory:)", () => new SqliteLedger(":memory:"), { readNotes });
ledgerContract("SqliteLedger (file, uncached reads)", () => atNewPath({ cache: false }), {
  readNotes,
  openAnother,
});

const openAnotherReader = (l: Ledger) => new SqliteLedger(paths.get(l) as string);
notebookReaderContract("SqliteLedger (file)", () => atNewPath(), { openAnother: openAnotherReader });
notebookReaderContract("SqliteLedger (:memory:)", () => new SqliteLedger(":memory:"));

describe("SqliteLedger on disk", () => {
  const open: SqliteLedger[] = [];
  const openAt = (path: string) => {
    const l = new SqliteLedger(path);
    open.push(l);
    return l;
  };
  afterEach(() => {
    for (const l of open.splice(0)) l.close();
  });

  const migrationRows = (l: SqliteLedger) =>
    l.db.prepare("SELECT version, applied_at FROM schema_migrations ORDER BY version").all();

  it("keeps everything across close and reopen, without applying migrations again", () => {
    const path = dbPath();
    const a = openAt(path);
    const run = a.createRun(newRun());
    const exp = a.addExperiment(newExperiment(run.id, 0, { params: { LR: 0.1 } }));
    const trial = a.startTrial({
      experimentId: exp.id,
      attempt: 1,
      seed: 7,
      command: "node train.ts",
      commit: exp.commit,
      budgetMs: 1000,
      env: {},
    });
    a.finishTrial(trial, trialResult({ metrics: { val_bpb: Number.NaN } }), "/logs");
    a.startTrial({
      experimentId: exp.id,
      attempt: 2,
      seed: 7,
      command: "x",
      commit: exp.commit,
      budgetMs: 1,
      env: {},
    });
    a.decide(exp.id, { action: "keep", reason: "baseline", metric: 1 });
    const before = a.listExperiments(run.id);
    const migrations = migrationRows(a);
    expect(migrations.map((r) => r.version)).toEqual(MIGRATIONS.map((_, i) => i + 1));
    a.close();

    const b = openAt(path);
    expect(b.listRuns()).toEqual([run]);
    expect(b.listExperiments(run.id)).toEqual(before);
    expect(Number.isNaN(b.getExperiment(run.id, 0)?.trials[0]?.result?.metrics.val_bpb)).toBe(true);
    expect(b.getExperiment(run.id, 0)?.trials[1]?.result).toBeUndefined();
    // Same rows, same timestamps: nothing was re-applied.
    expect(migrationRows(b)).toEqual(migrations);
  });

  it("lets a second connection (e.g. `autolab status` during a run) read committed rows", () => {
    const path = dbPath();
    const writer = openAt(path);
    const reader = openAt(path);
    const run = writer.createRun(newRun());
    writer.addExperiment(newExperiment(run.id, 0));
    expect(reader.getRun("nov22")).toEqual(run);
    expect(reader.listExperiments(run.id).map((e) => e.n)).toEqual([0]);
  });

  it("reads a cached run again whole when another connection added more than it re-reads piecemeal", () => {
    const path = dbPath();
    const reader = openAt(path);
    const writer = openAt(path);
    const run = writer.createRun(newRun());
    const other = writer.createRun(newRun({ tag: "other", branch: "autolab/other" }));
    writer.addExperiment(newExperiment(run.id, 0));
    expect(reader.listExperiments(run.id)).toHaveLength(1);
    expect(reader.listExperiments(other.id)).toHaveLength(0);
    writer.db.exec("BEGIN");
    for (let n = 1500; n > 0; n--) {
      const e = writer.addExperiment(newExperiment(n % 2 ? run.id : other.id, n));
      writer.decide(e.id, { action: "discard", reason: "worse", metric: n });
    }
    writer.db.exec("COMMIT");
    const truth = openAt(path);
    expect(reader.listExperiments(run.id)).toEqual(truth.listExperiments(run.id));
    expect(reader.listExperiments(run.id)).toHaveLength(751);
    expect(reader.getExperiment(other.id, 2)).toEqual(truth.getExperiment(other.id, 2));
    expect(reader.listExperiments(other.id)).toEqual(truth.listExperiments(other.id));
  });

  it("refuses a notebook written by a newer autolab: LEDGER_TOO_NEW", () => {
    const path = dbPath();
    openAt(path).close();
    const raw = new DatabaseSync(path);
    raw
      .prepare("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)")
      .run(MIGRATIONS.length + 1, "x");
    raw.close();
    let err: unknown;
    try {
      openAt(path);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(AutolabError);
    expect((err as AutolabError).code).toBe("LEDGER_TOO_NEW");
    expect((err as AutolabError).message).toContain(`schema version ${MIGRATIONS.length + 1}`);
    // The refused notebook is left as it was.
    const check = new DatabaseSync(path);
    expect(check.prepare("SELECT MAX(version) AS v FROM schema_migrations").get()?.v).toBe(
      MIGRATIONS.length + 1,
    );
    check.close();
  });

  it("says LEDGER_OPEN_FAILED when the notebook cannot be created", () => {
    // A regular file where a directory should be: fails for root too (unlike chmod).
    const blocker = join(root, `blocker-${++counter}`);
    writeFileSync(blocker, "not a directory");
    for (const path of [join(blocker, "lab.db"), join(blocker, ".autolab", "lab.db")]) {
      let err: unknown;
      try {
        openAt(path);
      } catch (e) {
        err = e;
      }
      expect(err, path).toBeInstanceOf(AutolabError);
      expect((err as AutolabError).code).toBe("LEDGER_OPEN_FAILED");
      expect((err as AutolabError).message).toContain(path);
    }
  });

  it("says NOTEBOOK_DAMAGED for a file that is not a database: where it is and how to go on", () => {
    const path = join(root, `garbage-${++counter}.db`);
    writeFileSync(path, "this is not an SQLite database, just some text that is long enough ".repeat(20));
    let err: unknown;
    try {
      openAt(path);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(AutolabError);
    expect((err as AutolabError).code).toBe("NOTEBOOK_DAMAGED");
    expect((err as AutolabError).message).toContain(`${path} is damaged`);
    expect((err as AutolabError).hint).toMatch(/Move it aside/);
  });
});
