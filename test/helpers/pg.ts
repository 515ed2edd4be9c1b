import { randomBytes } from "node:crypto";
import pg from "pg";

/**
 * PostgreSQL for tests: AUTOLAB_TEST_PG_URL names a database the tests may create schemas in.
 * Unset, the PostgreSQL tests skip with that reason, except where AUTOLAB_REQUIRE_PG=1 (CI,
 * .ci/run): there a missing URL fails them, as the sandbox tests assert in CI rather than skip.
 */
export const PG_URL = process.env.AUTOLAB_TEST_PG_URL;
export const PG_REQUIRED = process.env.AUTOLAB_REQUIRE_PG === "1";
/** Whether to skip the PostgreSQL tests (no URL, and not required). */
export const PG_SKIP = !PG_URL && !PG_REQUIRED;
export const PG_SKIP_REASON = "AUTOLAB_TEST_PG_URL unset: PostgreSQL tests skipped";

/** The test database's URL, or a failure saying why it is needed (CI without a URL). */
export function pgUrl(): string {
  if (!PG_URL) throw new Error("AUTOLAB_REQUIRE_PG=1 but AUTOLAB_TEST_PG_URL is unset (.ci/run sets both)");
  return PG_URL;
}

const made: string[] = [];

/** A notebook URL in a schema of its own (dropped by dropSchemas), so parallel test files never share tables. */
export function freshSchemaUrl(prefix = "t"): string {
  const schema = `${prefix}_${randomBytes(6).toString("hex")}`;
  made.push(schema);
  const u = new URL(pgUrl());
  u.searchParams.set("schema", schema);
  return u.toString();
}

/** The schema a URL of freshSchemaUrl names. */
export function schemaOf(url: string): string {
  return new URL(url).searchParams.get("schema") ?? "autolab";
}

/** Runs one statement on the test database (async `pg`, outside any ledger). */
export async function pgQuery<R extends pg.QueryResultRow = pg.QueryResultRow>(
  sql: string,
  params: unknown[] = [],
): Promise<R[]> {
  const c = new pg.Client({ connectionString: pgUrl() });
  await c.connect();
  try {
    return (await c.query<R>(sql, params)).rows;
  } finally {
    await c.end();
  }
}

/** Drops every schema this test file made. */
export async function dropSchemas(): Promise<void> {
  if (!PG_URL || made.length === 0) return;
  const c = new pg.Client({ connectionString: pgUrl() });
  await c.connect();
  try {
    // One at a time: dropping many schemas in one transaction runs out of lock slots.
    for (const s of made.splice(0)) await c.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
  } finally {
    await c.end();
  }
}
