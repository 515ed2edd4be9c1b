/**
 * The root's value, measured by the hub's own verifiers at its first start. Until the head has a
 * value the server cannot tell a frontier claim from a finding (it compares the claimed value
 * with the head's), so every claim would go to full verification and an honest contributor's
 * shared discards would count as unconfirmed frontier claims against its reputation. The root is
 * run on `n` seeds drawn like any verifier's (never shown), through the same `HubTrials`, and
 * its mean recorded only while the root row still has none (a verification that measured it
 * first wins). Resumable: the trial keys are deterministic, so a hub restarted mid-way
 * re-attaches to the same fleet jobs.
 */
import { randomInt } from "node:crypto";
import type pg from "pg";
import type { HubTrials } from "./hub-trials.ts";
import { head, setRootValue } from "./verification-store.ts";

export interface RootValue {
  value: number;
  trials: number;
}

/** Seeds of the root's measurement: drawn once per hub and kept in hub_meta (never shown). */
async function rootSeeds(pool: pg.Pool, schema: string, n: number): Promise<number[]> {
  const drawn = Array.from({ length: n }, () => randomInt(1, 2 ** 31));
  await pool.query(
    `INSERT INTO ${schema}.hub_meta (key, value) VALUES ('root_seeds', $1) ON CONFLICT (key) DO NOTHING`,
    [JSON.stringify(drawn)],
  );
  const r = await pool.query<{ value: string }>(
    `SELECT value FROM ${schema}.hub_meta WHERE key = 'root_seeds'`,
  );
  return JSON.parse(r.rows[0]?.value ?? "[]") as number[];
}

/**
 * Measures the root when the chain's head is the root without a value; returns undefined when
 * there is nothing to do (already measured, or the chain has moved on). A failed root trial is
 * the operator's problem (the program does not run on the verifiers): thrown with its reason.
 */
export async function measureRoot(o: {
  pool: pg.Pool;
  schema: string;
  trials: HubTrials;
  n?: number;
  signal?: AbortSignal;
}): Promise<RootValue | undefined> {
  const h = await head(o.pool, o.schema);
  if (!h || h.claimId !== null || h.value !== null) return undefined;
  const seeds = await rootSeeds(o.pool, o.schema, o.n ?? 5);
  const values = await Promise.all(
    seeds.map(async (seed) => {
      const t = await o.trials.run({
        key: `hub-root-${h.commit.slice(0, 16)}-${seed}`,
        commit: h.commit,
        seed,
        label: `root ${h.commit.slice(0, 8)}`,
        ...(o.signal ? { signal: o.signal } : {}),
      });
      if (t.value === undefined) throw new Error(`the root failed on a verifier: ${t.failure ?? "no value"}`);
      return t.value;
    }),
  );
  const value = values.reduce((a, b) => a + b, 0) / values.length;
  await setRootValue(o.pool, o.schema, h.seq, value);
  return { value, trials: values.length };
}
