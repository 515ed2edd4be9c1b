import type { Sql, SqlValue } from "../sql.ts";
import { PgStatementError, type SyncPg } from "./bridge.ts";

/**
 * The natural key of each notebook table with one: a write sent again after a lost connection
 * that meets a unique violation on it was committed the first time, and the row it wrote is
 * found by these columns (docs/distributed.md "Writes are safe to retry"). Results and decisions
 * are keyed by their trial / experiment (run() takes the violation as success); tables without a
 * key (notes, sessions, hook runs, advice) can, in that one case, get a row twice.
 */
const NATURAL_KEYS: Record<string, string[]> = {
  runs: ["tag"],
  experiments: ["run_id", "n"],
  trial_starts: ["experiment_id", "attempt"],
  imported_results: ["source", "seq"],
};

/** An INSERT into a notebook table (every one has `commit_seq`, stamped by the clock's trigger). */
const STAMPED = /^\s*INSERT INTO (?!schema_migrations\b)/i;

type Stamp = { commit_seq: number };

/** `Sql` over PostgreSQL through the synchronous bridge. */
export class PgSql implements Sql {
  readonly dialect = "postgres";
  readonly order = "commit_seq";
  private readonly pg: SyncPg;
  private readonly translated = new Map<string, string>();
  private depth = 0;
  /** The notebook clock as last seen (syncToken), extended by own writes that follow it. */
  private seen = -1;
  private token = "";

  constructor(pg: SyncPg) {
    this.pg = pg;
  }

  get<R>(sql: string, ...args: SqlValue[]): R | undefined {
    return this.pg.query<R>(this.translate(sql), args)[0];
  }

  all<R>(sql: string, ...args: SqlValue[]): R[] {
    return this.pg.query<R>(this.translate(sql), args);
  }

  run(sql: string, ...args: SqlValue[]): void {
    const stamped = STAMPED.test(sql);
    try {
      const row = this.pg.query<Stamp>(
        `${this.translate(sql)}${stamped ? " RETURNING commit_seq" : ""}`,
        args,
      )[0];
      if (stamped) this.ownWrite(row);
    } catch (err) {
      if (!committedBefore(err)) throw err;
    }
  }

  insert(sql: string, ...args: SqlValue[]): number {
    try {
      const row = this.pg.query<Stamp & { id: number }>(
        `${this.translate(sql)} RETURNING id, commit_seq`,
        args,
      )[0];
      this.ownWrite(row);
      return Number(row?.id);
    } catch (err) {
      if (!committedBefore(err)) throw err;
      return this.recover(sql, args, err as Error);
    }
  }

  exec(sql: string): void {
    this.pg.query(sql);
  }

  write<T>(fn: () => T): T {
    return this.transaction("BEGIN", fn);
  }

  read<T>(fn: () => T): T {
    return this.transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", fn);
  }

  /** The notebook clock: moves with every row anyone commits (a trigger on every table). */
  changeToken(): string {
    return String(this.get<{ v: number }>("SELECT v FROM notebook_clock")?.v ?? 0);
  }

  /**
   * Like SQLite's data_version: moves with other connections' commits, not with this one's own
   * (the read cache has those already). Each own write returns the clock value it took; while
   * those follow the clock value last seen without a gap, nobody else committed in between, and
   * the token stays. A gap, or a clock past the last own write, is someone else: a new token.
   */
  syncToken(): string {
    const v = Number(this.changeToken());
    if (v !== this.seen) {
      this.seen = v;
      this.token = String(v);
    }
    return this.token;
  }

  /** The clock value an own write took (see syncToken). */
  private ownWrite(row: Stamp | undefined): void {
    const seq = Number(row?.commit_seq);
    if (this.seen >= 0 && seq === this.seen + 1) this.seen = seq;
  }

  close(): void {
    this.pg.close();
  }

  /** Transactions nest into an open one (the event feed's read inside a caller's). */
  private transaction<T>(begin: string, fn: () => T): T {
    if (this.depth > 0) return fn();
    this.pg.query(begin);
    this.depth++;
    try {
      const out = fn();
      this.depth--;
      this.pg.query("COMMIT");
      return out;
    } catch (err) {
      if (this.depth > 0) {
        this.depth--;
        try {
          this.pg.query("ROLLBACK");
        } catch {
          // The connection is gone: the server rolled the transaction back itself.
        }
      }
      throw err;
    }
  }

  /** The id of the row an INSERT sent twice wrote the first time, found by its natural key. */
  private recover(sql: string, args: SqlValue[], err: Error): number {
    const m = /INSERT INTO (\w+) \(([^)]*)\)/.exec(sql);
    const keys = m ? NATURAL_KEYS[m[1] as string] : undefined;
    if (!m || !keys) throw err;
    const columns = (m[2] as string).split(",").map((c) => c.trim());
    const where = keys.map((k, i) => `${k} = $${i + 1}`).join(" AND ");
    const values = keys.map((k) => args[columns.indexOf(k)] ?? null);
    const row = this.pg.query<{ id: number }>(`SELECT id FROM ${m[1]} WHERE ${where}`, values)[0];
    if (!row) throw err;
    return Number(row.id);
  }

  /** `?` placeholders as `$1, $2, …` (none sit inside the notebook's string literals; skipped anyway). */
  private translate(sql: string): string {
    let out = this.translated.get(sql);
    if (out === undefined) {
      let n = 0;
      out = sql.replace(/'(?:[^']|'')*'|\?/g, (tok) => (tok === "?" ? `$${++n}` : tok));
      this.translated.set(sql, out);
    }
    return out;
  }
}

/** A unique violation on a write sent again after a lost connection: the first attempt committed. */
function committedBefore(err: unknown): boolean {
  return err instanceof PgStatementError && err.retried && err.code === "23505";
}
