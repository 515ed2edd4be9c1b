import type { ReadableNotebook } from "../core/notebook-reader.ts";
import { damagedNotebook, isDamaged, SqliteLedger } from "./sqlite-ledger.ts";

/**
 * Opens the notebook at `path` (created, with its directory, if missing; migrated to the
 * current schema). The one place outside tests that picks a notebook implementation: the app,
 * server and CLI hold what it returns only as Ledger & NotebookReader, so another store
 * (PostgreSQL, by URL) is a branch here and not a change to any of them.
 */
export function openNotebook(path: string): ReadableNotebook {
  return new SqliteLedger(path);
}

/**
 * Whether an error thrown by a notebook says its file is damaged, and the error to show for it
 * (the store's own errors stay inside ledger/: the CLI asks here).
 */
export { damagedNotebook, isDamaged };
