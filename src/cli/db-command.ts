import { importNotebook } from "../app/db-import.ts";
import { locateNotebook } from "../app/lab.ts";
import { AutolabError } from "../core/errors.ts";
import { isPgUrl, maskUrl } from "../ledger/open-notebook.ts";
import { PgLedger } from "../ledger/pg/pg-ledger.ts";

/** `autolab db migrate`: brings the PostgreSQL notebook to this autolab's schema, and says so. */
export function dbMigrateCommand(flags: { program?: string }): void {
  const { db } = locateNotebook(flags.program);
  if (!isPgUrl(db)) {
    throw new AutolabError(
      "DB_URL_INVALID",
      `db migrate is for a PostgreSQL notebook; this lab's notebook is the file ${db} (migrated whenever autolab opens it).`,
      "Pass --db postgres://user@host/db[?schema=lab], set AUTOLAB_DB, or put db: in program.md.",
    );
  }
  const l = new PgLedger(db);
  try {
    const { from, to } = l.schema;
    process.stdout.write(
      from === to
        ? `${l.shown}: schema version ${to}, up to date.\n`
        : `${l.shown}: schema version ${from} → ${to} (${to - from} migration${to - from === 1 ? "" : "s"} applied).\n`,
    );
  } finally {
    l.close();
  }
}

/** `autolab db import [file]`: moves a SQLite lab into the PostgreSQL notebook --db names. */
export function dbImportCommand(file: string | undefined, flags: { program?: string }): void {
  const located = locateNotebook(flags.program);
  const target = process.env.AUTOLAB_DB ?? located.db;
  const source = file ?? `${located.stateDir}/lab.db`;
  const { counts, target: shown } = importNotebook(source, target);
  const rows = Object.entries(counts)
    .filter(([, n]) => n > 0)
    .map(([t, n]) => `${n} ${t.replace(/_/g, " ")}`);
  process.stdout.write(
    `Imported ${source} into ${shown}: ${rows.join(", ") || "nothing (the notebook was empty)"}.\nRead back through the notebook interface: every run, experiment, trial, decision, note, session, hook run, advice and imported result is the same.\nUse it with --db ${maskUrl(target)} (or AUTOLAB_DB, or db: in program.md); ${source} is left as it was.\n`,
  );
}
