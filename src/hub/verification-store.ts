/**
 * The verifier driver's SQL (src/hub/verifier.ts): every read and write it makes of the hub's
 * tables (src/hub/schema.ts). Plain functions over a `pg` client or pool and the schema name;
 * the driver decides, these only move rows. Writes that must happen together take one client
 * inside a transaction the driver opened (`inTransaction`).
 */
import type pg from "pg";
import type { HubTrial, VerifierRun, VerifierVerdict } from "./verification-policy.ts";

export type Queryable = pg.Pool | pg.PoolClient | pg.Client;
export type Side = "agreement" | "parent" | "candidate";

export interface ClaimRow {
  id: string;
  seq: number;
  contributor: string;
  parent: string;
  commit: string;
  kind: "frontier" | "finding";
  status: string;
  against: string | null;
  claimedValue: number;
  reason: string | null;
  /** The signed claim as stored (`{claim, signature}`). */
  signed: unknown;
}

/**
 * A stored verdict: the policy's; or a verifier stopped because its claim was decided without it
 * ('cancelled'); or one whose trial the harness could not run ('not-run': no verdict on the
 * claim, a replacement verifier is dispatched).
 */
export type StoredVerdict =
  | VerifierVerdict
  | { outcome: "cancelled" | "not-run"; reason: string; trials: number };

/** Sets a claim's reason without deciding it (why it waits). */
export async function noteClaim(
  q: Queryable,
  schema: string,
  claimId: string,
  reason: string,
): Promise<void> {
  await q.query(`UPDATE ${t(schema, "hub_claims")} SET reason = $2 WHERE id = $1`, [claimId, reason]);
}

export interface VerificationRow {
  id: number;
  claimId: string;
  round: number;
  idx: number;
  against: string;
  fresh: number[];
  trials: VerifierRun;
  state: "running" | "done";
  verdict: StoredVerdict | null;
}

export interface ChainRow {
  seq: number;
  commit: string;
  claimId: string | null;
  contributor: string | null;
  value: number | null;
  gain: number;
  withdrawn: boolean;
}

export interface IdentityRep {
  keyId: string;
  consecutive: number;
  unconfirmedRun: number;
  quarantined: boolean;
}

const t = (schema: string, table: string) => `${schema}.${table}`;

function claimOf(r: Record<string, unknown>): ClaimRow {
  return {
    id: r.id as string,
    seq: Number(r.seq),
    contributor: r.contributor as string,
    parent: r.parent as string,
    commit: r.commit_sha as string,
    kind: r.kind as ClaimRow["kind"],
    status: r.status as string,
    against: (r.against as string | null) ?? null,
    claimedValue: Number(r.claimed_value),
    reason: (r.reason as string | null) ?? null,
    signed: r.signed,
  };
}

function verificationOf(r: Record<string, unknown>): VerificationRow {
  const trials = (r.trials ?? {}) as Partial<Record<Side, HubTrial[]>>;
  return {
    id: Number(r.id),
    claimId: r.claim_id as string,
    round: Number(r.round),
    idx: Number(r.idx),
    against: r.against as string,
    fresh: (r.fresh as number[]) ?? [],
    trials: {
      agreement: trials.agreement ?? [],
      parent: trials.parent ?? [],
      candidate: trials.candidate ?? [],
    },
    state: r.state as VerificationRow["state"],
    verdict: (r.verdict as StoredVerdict | null) ?? null,
  };
}

function chainOf(r: Record<string, unknown>): ChainRow {
  return {
    seq: Number(r.seq),
    commit: r.commit_sha as string,
    claimId: (r.claim_id as string | null) ?? null,
    contributor: (r.contributor as string | null) ?? null,
    value: r.value === null || r.value === undefined ? null : Number(r.value),
    gain: Number(r.gain),
    withdrawn: r.withdrawn_at !== null && r.withdrawn_at !== undefined,
  };
}

/** Runs `fn` in one transaction on a client of its own; rolled back when it throws. */
export { inTransaction } from "../fleet/db.ts";

/**
 * Claims the driver owns, oldest first: frontier claims in 'verifying', findings in 'checking'.
 * Unless `all`, only those whose state can have changed: no verifier running (new, between
 * rounds, every verifier returned) or named in `also` (a verifier of theirs just returned).
 */
export async function claimsToDrive(
  q: Queryable,
  schema: string,
  o: { all: boolean; also: string[] } = { all: true, also: [] },
): Promise<{ id: string; kind: ClaimRow["kind"] }[]> {
  const r = await q.query(
    `SELECT c.id, c.kind FROM ${t(schema, "hub_claims")} c
     WHERE c.status IN ('verifying', 'checking')
       AND ($1::boolean OR c.against IS NULL OR c.id = ANY($2::text[]) OR NOT EXISTS (
         SELECT 1 FROM ${t(schema, "hub_verifications")} v WHERE v.claim_id = c.id AND v.state = 'running'))
     ORDER BY c.seq`,
    [o.all, o.also],
  );
  return r.rows.map((row) => ({ id: row.id as string, kind: row.kind as ClaimRow["kind"] }));
}

export async function claimById(
  q: Queryable,
  schema: string,
  id: string,
  lock = false,
): Promise<ClaimRow | null> {
  const r = await q.query(
    `SELECT * FROM ${t(schema, "hub_claims")} WHERE id = $1${lock ? " FOR UPDATE" : ""}`,
    [id],
  );
  return r.rows[0] ? claimOf(r.rows[0]) : null;
}

/**
 * Serialises everything that moves the head (accept, withdraw): a transaction-level advisory
 * lock per schema, so two drivers never both accept over the same head.
 */
export async function lockHead(c: pg.PoolClient, schema: string): Promise<void> {
  await c.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [`autolab-hub:${schema}:head`]);
}

/** The head: the last chain row not withdrawn; null before the root is recorded. */
export async function head(q: Queryable, schema: string): Promise<ChainRow | null> {
  const r = await q.query(
    `SELECT * FROM ${t(schema, "hub_chain")} WHERE withdrawn_at IS NULL ORDER BY seq DESC LIMIT 1`,
  );
  return r.rows[0] ? chainOf(r.rows[0]) : null;
}

/** The chain's root row from hub_meta's root_commit when the server has not written it yet. */
export async function ensureRoot(q: Queryable, schema: string): Promise<void> {
  await q.query(
    `INSERT INTO ${t(schema, "hub_chain")} (commit_sha, claim_id, contributor, value, gain)
     SELECT value, NULL, NULL, NULL, 0 FROM ${t(schema, "hub_meta")} WHERE key = 'root_commit'
       AND NOT EXISTS (SELECT 1 FROM ${t(schema, "hub_chain")})
     ON CONFLICT (commit_sha) DO NOTHING`,
  );
}

export async function verificationsOf(
  q: Queryable,
  schema: string,
  claimId: string,
): Promise<VerificationRow[]> {
  const r = await q.query(
    `SELECT * FROM ${t(schema, "hub_verifications")} WHERE claim_id = $1 ORDER BY round, idx`,
    [claimId],
  );
  return r.rows.map(verificationOf);
}

export async function verificationById(
  q: Queryable,
  schema: string,
  id: number,
): Promise<VerificationRow | null> {
  const r = await q.query(`SELECT * FROM ${t(schema, "hub_verifications")} WHERE id = $1`, [id]);
  return r.rows[0] ? verificationOf(r.rows[0]) : null;
}

/** Verifications still running whose claim the driver owns (ids): what a restarted driver resumes. */
export async function runningVerificationIds(q: Queryable, schema: string): Promise<number[]> {
  const r = await q.query(
    `SELECT v.id FROM ${t(schema, "hub_verifications")} v JOIN ${t(schema, "hub_claims")} c ON c.id = v.claim_id
     WHERE v.state = 'running' AND c.status IN ('verifying', 'checking') ORDER BY v.id`,
  );
  return r.rows.map((row) => Number(row.id));
}

/** New verifier rows; an (claim, round, idx) that exists already is skipped (another driver's). */
export async function insertVerifications(
  q: Queryable,
  schema: string,
  rows: { claimId: string; round: number; idx: number; against: string; fresh: number[] }[],
): Promise<VerificationRow[]> {
  const out: VerificationRow[] = [];
  for (const v of rows) {
    const r = await q.query(
      `INSERT INTO ${t(schema, "hub_verifications")} (claim_id, round, idx, against, fresh, state)
       VALUES ($1, $2, $3, $4, $5::jsonb, 'running')
       ON CONFLICT (claim_id, round, idx) DO NOTHING RETURNING *`,
      [v.claimId, v.round, v.idx, v.against, JSON.stringify(v.fresh)],
    );
    if (r.rows[0]) out.push(verificationOf(r.rows[0]));
  }
  return out;
}

/**
 * Appends one trial to a running verification, only if that side still holds `expected`
 * trials (compare-and-set): a second writer of the same step (a driver stopped while its
 * trial ran, and the one that resumed it) appends nothing. False when nothing was appended.
 */
export async function appendTrial(
  q: Queryable,
  schema: string,
  id: number,
  side: Side,
  expected: number,
  trial: HubTrial,
): Promise<boolean> {
  const r = await q.query(
    `UPDATE ${t(schema, "hub_verifications")}
       SET trials = jsonb_set(trials, ARRAY[$2::text], COALESCE(trials -> $2::text, '[]'::jsonb) || jsonb_build_array($3::jsonb))
     WHERE id = $1 AND state = 'running' AND jsonb_array_length(COALESCE(trials -> $2::text, '[]'::jsonb)) = $4`,
    [id, side, JSON.stringify(trial), expected],
  );
  return (r.rowCount ?? 0) === 1;
}

/** A verifier's verdict: state 'done'. False when it was done already. */
export async function finishVerification(
  q: Queryable,
  schema: string,
  id: number,
  verdict: StoredVerdict,
): Promise<boolean> {
  const r = await q.query(
    `UPDATE ${t(schema, "hub_verifications")} SET state = 'done', verdict = $2::jsonb, done_at = now()
     WHERE id = $1 AND state = 'running'`,
    [id, JSON.stringify(verdict)],
  );
  return (r.rowCount ?? 0) === 1;
}

/** Stops a claim's running verifiers (the claim was decided without them). */
export async function cancelRunning(
  q: Queryable,
  schema: string,
  claimId: string,
  reason: string,
): Promise<number> {
  const r = await q.query(
    `UPDATE ${t(schema, "hub_verifications")}
       SET state = 'done', done_at = now(),
           verdict = jsonb_build_object('outcome', 'cancelled', 'reason', $2::text,
             'trials', jsonb_array_length(trials -> 'agreement') + jsonb_array_length(trials -> 'parent') + jsonb_array_length(trials -> 'candidate'))
     WHERE claim_id = $1 AND state = 'running'`,
    [claimId, reason],
  );
  return r.rowCount ?? 0;
}

export async function setAgainst(
  q: Queryable,
  schema: string,
  claimId: string,
  against: string | null,
): Promise<void> {
  await q.query(`UPDATE ${t(schema, "hub_claims")} SET against = $2 WHERE id = $1`, [claimId, against]);
}

export async function decideClaim(
  q: Queryable,
  schema: string,
  claimId: string,
  d: { status: string; reason: string; recordedValue?: number | null },
): Promise<void> {
  await q.query(
    `UPDATE ${t(schema, "hub_claims")} SET status = $2, reason = $3, recorded_value = $4, decided_at = now() WHERE id = $1`,
    [claimId, d.status, d.reason, d.recordedValue ?? null],
  );
}

export async function setRootValue(q: Queryable, schema: string, seq: number, value: number): Promise<void> {
  await q.query(`UPDATE ${t(schema, "hub_chain")} SET value = $2 WHERE seq = $1 AND value IS NULL`, [
    seq,
    value,
  ]);
}

/**
 * Appends an accepted commit to the chain. A commit withdrawn by a quarantine and accepted
 * again gets its row back at the end (a new seq: it is the head now), not a second row.
 */
export async function appendChain(
  q: Queryable,
  schema: string,
  row: { commit: string; claimId: string; contributor: string; value: number; gain: number },
): Promise<number> {
  const r = await q.query(
    `INSERT INTO ${t(schema, "hub_chain")} (commit_sha, claim_id, contributor, value, gain)
     VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (commit_sha) DO UPDATE SET seq = DEFAULT, claim_id = EXCLUDED.claim_id,
       contributor = EXCLUDED.contributor, value = EXCLUDED.value, gain = EXCLUDED.gain,
       accepted_at = now(), withdrawn_at = NULL
     RETURNING seq`,
    [row.commit, row.claimId, row.contributor, row.value, row.gain],
  );
  return Number(r.rows[0].seq);
}

/** The subject the hub stored for a commit of its DAG (undefined when it has none). */
export async function commitSubject(q: Queryable, schema: string, sha: string): Promise<string | undefined> {
  const r = await q.query<{ subject: string }>(
    `SELECT subject FROM ${t(schema, "hub_commits")} WHERE sha = $1`,
    [sha],
  );
  return r.rows[0]?.subject;
}

export async function insertEvent(
  q: Queryable,
  schema: string,
  kind: string,
  payload: unknown,
): Promise<number> {
  const r = await q.query(
    `INSERT INTO ${t(schema, "hub_events")} (kind, payload) VALUES ($1, $2::jsonb) RETURNING seq`,
    [kind, JSON.stringify(payload)],
  );
  return Number(r.rows[0].seq);
}

/** An identity's reputation, locked for the update that follows; null when unknown. */
/** An identity's verified results in a row (0 for one the hub does not know); no lock taken. */
export async function consecutiveOf(q: Queryable, schema: string, keyId: string): Promise<number> {
  const r = await q.query<{ consecutive: number }>(
    `SELECT consecutive FROM ${t(schema, "hub_identities")} WHERE key_id = $1`,
    [keyId],
  );
  return Number(r.rows[0]?.consecutive ?? 0);
}

export async function identityForUpdate(
  c: pg.PoolClient,
  schema: string,
  keyId: string,
): Promise<IdentityRep | null> {
  const r = await c.query(
    `SELECT key_id, consecutive, unconfirmed_run, quarantined_at FROM ${t(schema, "hub_identities")} WHERE key_id = $1 FOR UPDATE`,
    [keyId],
  );
  const row = r.rows[0];
  if (!row) return null;
  return {
    keyId: row.key_id,
    consecutive: Number(row.consecutive),
    unconfirmedRun: Number(row.unconfirmed_run),
    quarantined: row.quarantined_at !== null,
  };
}

export async function storeIdentity(
  c: pg.PoolClient,
  schema: string,
  rep: IdentityRep,
  quarantineReason?: string,
): Promise<void> {
  await c.query(
    `UPDATE ${t(schema, "hub_identities")} SET consecutive = $2, unconfirmed_run = $3,
       quarantined_at = CASE WHEN $4::text IS NOT NULL AND quarantined_at IS NULL THEN now() ELSE quarantined_at END,
       quarantine_reason = CASE WHEN $4::text IS NOT NULL AND quarantined_at IS NULL THEN $4::text ELSE quarantine_reason END
     WHERE key_id = $1`,
    [rep.keyId, rep.consecutive, rep.unconfirmedRun, quarantineReason ?? null],
  );
}

/**
 * The accepted claims on the chain (not withdrawn), in acceptance order, each with the nearest
 * accepted claim among its commit's ancestors in the DAG (hub_commits): what it was built on.
 */
export async function acceptedWithAncestry(
  q: Queryable,
  schema: string,
): Promise<{ id: string; identity: string; commit: string; parent?: string }[]> {
  const r = await q.query(
    `SELECT ch.claim_id, ch.contributor, ch.commit_sha, (
        WITH RECURSIVE up(sha, parent, claim_id, depth) AS (
          SELECT hc.sha, hc.parent, hc.claim_id, 0 FROM ${t(schema, "hub_commits")} hc WHERE hc.sha = ch.commit_sha
          UNION ALL
          SELECT p.sha, p.parent, p.claim_id, up.depth + 1 FROM ${t(schema, "hub_commits")} p JOIN up ON p.sha = up.parent
          WHERE up.depth < 100000
        )
        SELECT up.claim_id FROM up JOIN ${t(schema, "hub_chain")} a ON a.commit_sha = up.sha
        WHERE up.depth > 0 AND a.claim_id IS NOT NULL AND a.withdrawn_at IS NULL
        ORDER BY up.depth LIMIT 1
      ) AS built_on
     FROM ${t(schema, "hub_chain")} ch
     WHERE ch.claim_id IS NOT NULL AND ch.withdrawn_at IS NULL ORDER BY ch.seq`,
  );
  return r.rows.map((row) => ({
    id: row.claim_id,
    identity: row.contributor,
    commit: row.commit_sha,
    ...(row.built_on ? { parent: row.built_on as string } : {}),
  }));
}

/** Takes the named accepted claims out of the chain and sends them back to verification (a new round). */
export async function withdrawAndReverify(
  q: Queryable,
  schema: string,
  claimIds: string[],
  reason: string,
): Promise<void> {
  if (claimIds.length === 0) return;
  await q.query(
    `UPDATE ${t(schema, "hub_chain")} SET withdrawn_at = now() WHERE claim_id = ANY($1::text[]) AND withdrawn_at IS NULL`,
    [claimIds],
  );
  await q.query(
    `UPDATE ${t(schema, "hub_claims")} SET status = 'verifying', against = NULL, reason = $2, decided_at = NULL
     WHERE id = ANY($1::text[])`,
    [claimIds, reason],
  );
}
