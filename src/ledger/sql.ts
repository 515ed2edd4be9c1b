/**
 * The one seam between the notebook's logic (sql-ledger.ts, sql-event-feed.ts) and a database.
 * Synchronous, like the Ledger it serves: SQLite answers in the calling thread, PostgreSQL through
 * a worker thread the caller blocks on (pg/bridge.ts, docs/distributed.md). SQL is written once,
 * with `?` placeholders and the standard SQL both dialects share; what differs is named here.
 */
export type SqlValue = string | number | null;

export interface Sql {
  readonly dialect: "sqlite" | "postgres";
  /**
   * The column that orders a table's rows by commit: SQLite's rowid `id` (one writer at a time),
   * PostgreSQL's `commit_seq`, stamped from a one-row clock whose lock is held to commit (an identity
   * value is taken at insert, so ids can commit out of order; docs/distributed.md).
   */
  readonly order: "id" | "commit_seq";
  get<R>(sql: string, ...args: SqlValue[]): R | undefined;
  all<R>(sql: string, ...args: SqlValue[]): R[];
  /** Runs a statement that returns nothing. */
  run(sql: string, ...args: SqlValue[]): void;
  /** Runs an INSERT into a table with an `id` column and returns the new row's id. */
  insert(sql: string, ...args: SqlValue[]): number;
  /** Runs statements without arguments (a migration's DDL). */
  exec(sql: string): void;
  /** Runs `fn` in one write transaction (committed when it returns, rolled back when it throws). */
  write<T>(fn: () => T): T;
  /** Runs `fn` in one read transaction: every query sees the same snapshot. Nests into an open one. */
  read<T>(fn: () => T): T;
  /**
   * Changes whenever a write commits, by this connection or another one (SQLite: data_version
   * and total_changes; PostgreSQL: the notebook clock).
   */
  changeToken(): string;
  /**
   * Moves at least whenever another connection commits (it may move with this one's writes too):
   * the read cache syncs when it moves. SQLite: data_version; PostgreSQL: the notebook clock.
   */
  syncToken(): string;
  close(): void;
}

/** `?, ?, …` for `n` values (an IN list; callers keep n ≤ 500). */
export function placeholders(n: number): string {
  return Array.from({ length: n }, () => "?").join(",");
}

/** JSON cannot hold NaN/Infinity; keep them as strings so a non-finite metric is still on record. */
export function finiteOrString(_key: string, value: unknown): unknown {
  return typeof value === "number" && !Number.isFinite(value) ? String(value) : value;
}
