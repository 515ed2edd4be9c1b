import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { AutolabError } from "../core/errors.ts";
import { MIGRATIONS } from "./migrations.ts";
import { SqlLedger, type SqlLedgerOptions } from "./sql-ledger.ts";
import { SqliteSql } from "./sqlite-sql.ts";

export type SqliteLedgerOptions = SqlLedgerOptions;

/**
 * The embedded notebook: `.autolab/lab.db`. WAL mode, so a harness killed at any moment leaves
 * every committed row intact; each write is its own transaction. The notebook's logic (and its
 * read cache) is SqlLedger's; this is the file, its pragmas and its migrations.
 */
export class SqliteLedger extends SqlLedger {
  /** For src/ledger/ and for tests and benchmarks (bulk transactions, raw rows): nothing else touches it. */
  readonly db: DatabaseSync;

  constructor(path: string, opts: SqliteLedgerOptions = {}) {
    const db = openDatabase(path);
    super(new SqliteSql(db), opts);
    this.db = db;
    try {
      this.migrate(MIGRATIONS);
    } catch (err) {
      // A refused notebook (too new, broken) must not stay open: the caller never gets `this`.
      this.db.close();
      throw isDamaged(err) ? damagedNotebook(path, err) : err;
    }
    if (path !== ":memory:") opened.add(path);
  }
}

/** Opens (creating it and its directory if needed) and configures the database; any failure is LEDGER_OPEN_FAILED. */
function openDatabase(path: string): DatabaseSync {
  let db: DatabaseSync | undefined;
  try {
    if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
    db = new DatabaseSync(path);
    db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;");
    db.exec("PRAGMA busy_timeout = 5000;");
    return db;
  } catch (err) {
    if (db?.isOpen) db.close();
    if (isDamaged(err)) throw damagedNotebook(path, err);
    throw new AutolabError(
      "LEDGER_OPEN_FAILED",
      `cannot open the lab notebook ${path}: ${(err as Error).message}`,
      "Check that the directory is writable and the disk is not full.",
    );
  }
}

// SQLite's primary result codes for a file that is not (or no longer) a readable database.
const SQLITE_CORRUPT = 11;
const SQLITE_NOTADB = 26;

/** Notebooks this process opened: a damaged page met by a later query names the file. */
const opened = new Set<string>();

/** Whether `err` says the database file is damaged or not a database at all. */
export function isDamaged(err: unknown): boolean {
  const e = err as { code?: string; errcode?: number } | undefined;
  if (e?.code !== "ERR_SQLITE_ERROR" || typeof e.errcode !== "number") return false;
  const primary = e.errcode & 0xff;
  return primary === SQLITE_CORRUPT || primary === SQLITE_NOTADB;
}

/**
 * A damaged notebook as a person can act on it: which file, and how to get going again
 * without losing what git still holds. `path` defaults to the notebook this process opened.
 */
export function damagedNotebook(path: string | undefined, err: unknown): AutolabError {
  const file = path ?? (opened.size === 1 ? [...opened][0] : undefined) ?? ".autolab/lab.db";
  const dir = dirname(file);
  return new AutolabError(
    "NOTEBOOK_DAMAGED",
    `the lab notebook ${file} is damaged: SQLite says "${(err as { errstr?: string }).errstr ?? (err as Error).message}". Its records cannot be read.`,
    `Move it aside (mkdir -p ${dir}/damaged && mv ${file}* ${dir}/damaged/), then \`autolab run\` starts a new notebook and a new run. The code of every kept experiment survives in git (branches autolab/<tag>, refs refs/autolab/<tag>/<n>); \`sqlite3 ${dir}/damaged/lab.db .recover\` may save rows of the old notebook.`,
  );
}
