/**
 * The fleet's tests need PostgreSQL: `AUTOLAB_TEST_PG_URL` names a database (each test file
 * makes its own schema there and drops it at the end). Unset, they skip with that reason, unless
 * `AUTOLAB_REQUIRE_PG=1` (CI), where a missing database fails them.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, it } from "vitest";

import { PG_REQUIRED, PG_SKIP, PG_URL } from "./pg.ts";

export { PG_URL };
export const REQUIRE_PG = PG_REQUIRED;
/** describe.skipIf(NO_PG): no database and none required (test/helpers/pg.ts). */
export const NO_PG = PG_SKIP;
export const NO_PG_REASON = "AUTOLAB_TEST_PG_URL unset: the fleet's tests need PostgreSQL (skipped)";

/** In CI (AUTOLAB_REQUIRE_PG=1) a missing database is a failure, not a skip. */
export function requirePgCase(): void {
  if (REQUIRE_PG && !PG_URL) {
    it("has a PostgreSQL database (AUTOLAB_REQUIRE_PG=1)", () => {
      throw new Error("AUTOLAB_REQUIRE_PG=1 but AUTOLAB_TEST_PG_URL is unset");
    });
  }
}

/** A schema of this test file's own in the test database (and pg-boss's `<schema>_queue`), dropped after its tests. */
export function fleetSchemaOfFile(): { url: string; schema: string } {
  const schema = `t_${randomBytes(5).toString("hex")}`;
  const base = PG_URL ?? "postgres://unset/unset";
  const u = new URL(base);
  u.searchParams.set("schema", schema);
  afterAll(async () => {
    if (!PG_URL) return;
    const c = new pg.Client({ connectionString: PG_URL });
    c.on("error", () => {});
    await c.connect();
    try {
      await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await c.query(`DROP SCHEMA IF EXISTS ${schema}_queue CASCADE`);
    } finally {
      await c.end();
    }
  });
  return { url: u.toString(), schema };
}

/** A client on the test database, for reading what the fleet wrote. */
export async function testClient(): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: PG_URL });
  // A server restarted under the test fails its next query, not the whole test run.
  c.on("error", () => {});
  await c.connect();
  return c;
}
