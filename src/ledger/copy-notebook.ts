import { AutolabError } from "../core/errors.ts";
import type { Ledger } from "../core/ledger.ts";
import type { PgLedger } from "./pg/pg-ledger.ts";
import type { SqliteLedger } from "./sqlite-ledger.ts";

/** Every notebook table, parents before children (foreign keys), with whether it has an identity `id`. */
const TABLES: { name: string; identity: boolean }[] = [
  { name: "runs", identity: true },
  { name: "experiments", identity: true },
  { name: "trial_starts", identity: true },
  { name: "trial_results", identity: false },
  { name: "decisions", identity: false },
  { name: "notes", identity: true },
  { name: "sessions", identity: true },
  { name: "imported_results", identity: true },
  { name: "hook_runs", identity: true },
  { name: "advice", identity: true },
  { name: "proposal_contexts", identity: false },
];

export interface CopyCounts {
  [table: string]: number;
}

/**
 * Copies a SQLite notebook into an empty PostgreSQL one (`autolab db import`, docs/distributed.md):
 * every table in foreign-key order, inside one transaction, with the ids it had (foreign keys
 * point at them), rows in rowid order so the commit clock stamps them in the order they were
 * first committed; then each identity moves past its largest id. Refuses a target that holds
 * anything (DB_NOT_EMPTY). The source is only read.
 */
export function copyNotebook(from: SqliteLedger, to: PgLedger): CopyCounts {
  const held = to.pg.query<{ n: number }>(
    `SELECT ${TABLES.map((t) => `(SELECT COUNT(*) FROM ${t.name})`).join(" + ")} AS n`,
  )[0];
  if (Number(held?.n) > 0) {
    throw new AutolabError(
      "DB_NOT_EMPTY",
      `the notebook ${to.shown} already holds ${held?.n} rows; a lab is imported only into an empty one.`,
      "Name another schema (?schema=<name> in the URL) or another database.",
    );
  }
  const counts: CopyCounts = {};
  to.pg.query("BEGIN");
  try {
    for (const t of TABLES) {
      const rows = from.db.prepare(`SELECT * FROM ${t.name} ORDER BY rowid`).all() as Record<
        string,
        unknown
      >[];
      counts[t.name] = rows.length;
      for (const row of rows) {
        const cols = Object.keys(row);
        to.pg.query(
          `INSERT INTO ${t.name} (${cols.join(", ")}) VALUES (${cols.map((_, i) => `$${i + 1}`).join(", ")})`,
          cols.map((c) => row[c]),
        );
      }
      if (t.identity && rows.length > 0) {
        to.pg.query(
          `SELECT setval(pg_get_serial_sequence('${t.name}', 'id'), (SELECT MAX(id) FROM ${t.name}))`,
        );
      }
    }
    to.pg.query("COMMIT");
  } catch (err) {
    to.pg.query("ROLLBACK");
    throw err;
  }
  return counts;
}

/**
 * Where two notebooks differ, read through the Ledger interface (what every viewer sees): runs,
 * each run's experiments with their trials and decisions and the contexts their researchers were
 * shown, notes, sessions, hook runs, advice and imported results. Empty when they hold the same records.
 */
export function notebookDifferences(a: Ledger, b: Ledger): string[] {
  const out: string[] = [];
  const same = (what: string, x: unknown, y: unknown) => {
    if (JSON.stringify(x) !== JSON.stringify(y)) out.push(what);
  };
  const runs = a.listRuns();
  same("runs", runs, b.listRuns());
  for (const r of runs) {
    const exps = a.listExperiments(r.id);
    same(`run ${r.tag}: experiments`, exps, b.listExperiments(r.id));
    const contexts = (l: Ledger) => exps.map((e) => l.proposalContext?.(r.id, e.n) ?? null);
    same(`run ${r.tag}: proposal contexts`, contexts(a), contexts(b));
    same(`run ${r.tag}: notes`, a.listNotes(r.id), b.listNotes(r.id));
    same(`run ${r.tag}: sessions`, a.listSessions(r.id), b.listSessions(r.id));
    same(`run ${r.tag}: hook runs`, a.listHookRuns(r.id), b.listHookRuns(r.id));
    same(`run ${r.tag}: advice`, a.listAdvice(r.id), b.listAdvice(r.id));
  }
  same("imported results", a.listImportedResults(), b.listImportedResults());
  return out;
}
