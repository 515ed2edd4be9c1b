import { SqlLedger, type SqlLedgerOptions } from "../sql-ledger.ts";
import { SyncPg, type SyncPgOptions } from "./bridge.ts";
import { PG_MIGRATIONS } from "./migrations.ts";
import { PgSql } from "./pg-sql.ts";
import { parsePgUrl } from "./url.ts";

export type PgLedgerOptions = SqlLedgerOptions & SyncPgOptions;

/**
 * The notebook on PostgreSQL (`--db postgres://…`, docs/distributed.md): SqlLedger's logic over
 * the synchronous bridge, in the lab's own schema (`?schema=`, default `autolab`), migrated on
 * open like SQLite's. Every write is its own transaction, committed (synchronous_commit on)
 * before the call returns.
 */
export class PgLedger extends SqlLedger {
  /** For src/ledger/ and for tests (raw rows): nothing else touches it. */
  readonly pg: SyncPg;
  /** Where it lives, password masked. */
  readonly shown: string;

  constructor(url: string, opts: PgLedgerOptions = {}) {
    const target = parsePgUrl(url);
    const pg = new SyncPg(target, opts);
    super(new PgSql(pg), opts);
    this.pg = pg;
    this.shown = target.shown;
    try {
      // Processes opening one notebook together (a fleet starting) migrate it once.
      this.migrate(PG_MIGRATIONS, () => {
        this.pg.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`autolab.migrate.${target.schema}`]);
        this.pg.query(`CREATE SCHEMA IF NOT EXISTS "${target.schema}"`);
      });
    } catch (err) {
      pg.close();
      throw err;
    }
  }

  onChange(listener: () => void): () => void {
    return this.pg.onChange(listener);
  }
}
