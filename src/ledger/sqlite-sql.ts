import type { DatabaseSync, SQLInputValue, StatementSync } from "node:sqlite";
import type { Sql, SqlValue } from "./sql.ts";

/** `Sql` over node:sqlite: statements prepared once per SQL text. */
export class SqliteSql implements Sql {
  readonly dialect = "sqlite";
  readonly order = "id";
  private readonly statements = new Map<string, StatementSync>();

  readonly db: DatabaseSync;

  constructor(db: DatabaseSync) {
    this.db = db;
  }

  get<R>(sql: string, ...args: SqlValue[]): R | undefined {
    return this.stmt(sql).get(...(args as SQLInputValue[])) as R | undefined;
  }

  all<R>(sql: string, ...args: SqlValue[]): R[] {
    return this.stmt(sql).all(...(args as SQLInputValue[])) as unknown as R[];
  }

  run(sql: string, ...args: SqlValue[]): void {
    this.stmt(sql).run(...(args as SQLInputValue[]));
  }

  insert(sql: string, ...args: SqlValue[]): number {
    return Number(this.stmt(sql).run(...(args as SQLInputValue[])).lastInsertRowid);
  }

  write<T>(fn: () => T): T {
    return this.transaction("BEGIN IMMEDIATE", fn);
  }

  /** WAL readers never block the writer. */
  read<T>(fn: () => T): T {
    return this.db.isTransaction ? fn() : this.transaction("BEGIN", fn);
  }

  /** Another connection's commit moves PRAGMA data_version; this connection's own writes move total_changes. */
  changeToken(): string {
    const v = this.get<{ data_version: number }>("PRAGMA data_version") as { data_version: number };
    const c = this.get<{ c: number }>("SELECT total_changes() AS c") as { c: number };
    return `${v.data_version}:${c.c}`;
  }

  /** PRAGMA data_version alone: moves only with another connection's commit. */
  syncToken(): string {
    return String(
      (this.get<{ data_version: number }>("PRAGMA data_version") as { data_version: number }).data_version,
    );
  }

  exec(sql: string): void {
    this.db.exec(sql);
  }

  close(): void {
    this.statements.clear();
    if (this.db.isOpen) this.db.close();
  }

  private transaction<T>(begin: string, fn: () => T): T {
    this.db.exec(begin);
    try {
      const out = fn();
      this.db.exec("COMMIT");
      return out;
    } catch (err) {
      if (this.db.isTransaction) this.db.exec("ROLLBACK");
      throw err;
    }
  }

  private stmt(sql: string): StatementSync {
    let s = this.statements.get(sql);
    if (!s) {
      s = this.db.prepare(sql);
      this.statements.set(sql, s);
    }
    return s;
  }
}
