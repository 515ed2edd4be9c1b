import type { ReadableNotebook } from "../core/notebook-reader.ts";
import { PgLedger } from "./pg/pg-ledger.ts";
import { isPgUrl, maskUrl } from "./pg/url.ts";
import { damagedNotebook, isDamaged, SqliteLedger } from "./sqlite-ledger.ts";

/**
 * Opens the notebook at `where` — a SQLite file (created, with its directory, if missing) or a
 * `postgres://` URL (its schema created if missing) — migrated to the current schema. The one
 * place outside tests that picks a notebook implementation: the app, server and CLI hold what
 * it returns only as Ledger & NotebookReader.
 */
export function openNotebook(where: string): ReadableNotebook {
  return isPgUrl(where) ? new PgLedger(where) : new SqliteLedger(where);
}

/**
 * Whether an error thrown by a notebook says its file is damaged, and the error to show for it
 * (the store's own errors stay inside ledger/: the CLI asks here).
 */
/** Whether a notebook address is PostgreSQL's, and how to show it (password masked). */
export { damagedNotebook, isDamaged, isPgUrl, maskUrl };
