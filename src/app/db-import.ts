import { existsSync } from "node:fs";
import { AutolabError } from "../core/errors.ts";
import { type CopyCounts, copyNotebook, notebookDifferences } from "../ledger/copy-notebook.ts";
import { isPgUrl, openNotebook } from "../ledger/open-notebook.ts";
import { PgLedger } from "../ledger/pg/pg-ledger.ts";
import { maskUrl } from "../ledger/pg/url.ts";
import { SqliteLedger } from "../ledger/sqlite-ledger.ts";

export interface ImportOutcome {
  /** Rows copied per table. */
  counts: CopyCounts;
  /** The target, password masked. */
  target: string;
}

/**
 * `autolab db import`: moves a SQLite lab into PostgreSQL. Copies (copy-notebook.ts), then reads
 * both back through the Ledger interface and compares every record; a difference is an error
 * naming it (and the target keeps what was copied, for inspection: it was empty before). The
 * SQLite file is only read (an older one is first brought to the current schema, as every
 * autolab command does).
 */
export function importNotebook(file: string, url: string): ImportOutcome {
  if (!isPgUrl(url)) {
    throw new AutolabError(
      "DB_URL_INVALID",
      `db import moves a lab into PostgreSQL; ${maskUrl(url)} is not a postgres:// URL.`,
      "Pass --db postgres://user@host/db[?schema=lab] (or set AUTOLAB_DB).",
    );
  }
  if (!existsSync(file)) {
    throw new AutolabError(
      "NO_NOTEBOOK",
      `no lab notebook at ${file}.`,
      "Name the SQLite file: autolab db import path/to/.autolab/lab.db --db postgres://…",
    );
  }
  const from = new SqliteLedger(file);
  try {
    const to = new PgLedger(url);
    try {
      const counts = copyNotebook(from, to);
      const fresh = openNotebook(url); // a new instance: nothing cached from the copy
      try {
        const diff = notebookDifferences(from, fresh);
        if (diff.length > 0) {
          throw new AutolabError(
            "INTERNAL",
            `the copy in ${to.shown} does not read back as ${file} does: ${diff.join("; ")}.`,
          );
        }
      } finally {
        fresh.close();
      }
      return { counts, target: to.shown };
    } finally {
      to.close();
    }
  } finally {
    from.close();
  }
}
