/**
 * Every query of the hub's server (docs/hub.md "The hub's API") over the tables of
 * src/hub/schema.ts, with the async `pg` pool. Times that quotas count by are written from the
 * server's clock (`at` parameters), so a quota window and the rows it counts agree, also under a
 * test's clock. A claim, its commit in the DAG and its event are written in one transaction.
 */
import type pg from "pg";
import { inTransaction } from "../fleet/db.ts";

export interface HubIdentity {
  keyId: string;
  publicKey: string;
  address: string;
  consecutive: number;
  quarantinedAt: Date | null;
  quarantineReason: string | null;
}

export interface HubCommitRow {
  sha: string;
  parent: string | null;
  subject: string;
  claim: { id: string; status: string; contributor: string } | null;
}

export interface HubClaimState {
  id: string;
  kind: string;
  status: string;
  contributor: string;
  parent: string;
  commit: string;
  claimedValue: number;
  recordedValue: number | null;
  reason: string | null;
  createdAt: string;
  verifiers: Array<{ round: number; idx: number; verdict?: unknown }>;
}

export type NewClaimStatus = "verifying" | "recorded" | "checking";

export interface NewClaim {
  id: string;
  contributor: string;
  parent: string;
  commit: string;
  tree: string;
  subject: string;
  bundleSha256: string;
  signed: unknown;
  claimedValue: number;
  kind: "frontier" | "finding";
  at: Date;
}

/** The claim's status and event, decided on the contributor's row as the insert locked it. */
export type DecideClaim = (consecutive: number) => {
  status: NewClaimStatus;
  event: { kind: string; payload: unknown };
};

export interface HubEvent {
  seq: number;
  kind: string;
  payload: unknown;
  at: string;
}

export interface ChainEntry {
  seq: number;
  commit: string;
  claimId: string | null;
  contributor: string | null;
  value: number | null;
  gain: number;
  acceptedAt: string;
}

export interface LeaderboardEntry {
  contributor: string;
  accepted: number;
  credit: number;
  claims: number;
  rejected: number;
}

const DAY_MS = 24 * 3600 * 1000;
/** DAG answers list at most this many commits (the newest). */
export const DAG_PAGE = 1000;

export class HubStore {
  readonly pool: pg.Pool;
  readonly schema: string;
  readonly #t: (name: string) => string;

  constructor(pool: pg.Pool, schema: string) {
    if (!/^[a-z_][a-z0-9_]{0,40}$/.test(schema)) throw new Error(`not a schema name: ${schema}`);
    this.pool = pool;
    this.schema = schema;
    this.#t = (name) => `${schema}.${name}`;
  }

  // --- meta and the root -------------------------------------------------------------------

  async meta(key: string): Promise<string | undefined> {
    const r = await this.pool.query<{ value: string }>(
      `SELECT value FROM ${this.#t("hub_meta")} WHERE key = $1`,
      [key],
    );
    return r.rows[0]?.value;
  }

  /**
   * First start: records the root commit and hardware class, and the root as the DAG's first
   * commit and the chain's first row (value NULL until measured). Idempotent: a second start
   * (or two at once) changes nothing.
   */
  async initRoot(o: {
    root: string;
    tree: string;
    subject: string;
    hardwareClass: string;
    at: Date;
  }): Promise<void> {
    await inTransaction(this.pool, async (c) => {
      await c.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`autolab-hub-root:${this.schema}`]);
      const meta = this.#t("hub_meta");
      await c.query(
        `INSERT INTO ${meta} (key, value) VALUES ('root_commit', $1), ('hardware_class', $2), ('created_at', $3)
         ON CONFLICT (key) DO NOTHING`,
        [o.root, o.hardwareClass, o.at.toISOString()],
      );
      await c.query(
        `INSERT INTO ${this.#t("hub_commits")} (sha, parent, tree, subject, claim_id, created_at)
         VALUES ($1, NULL, $2, $3, NULL, $4) ON CONFLICT (sha) DO NOTHING`,
        [o.root, o.tree, o.subject, o.at],
      );
      const chain = await c.query(`SELECT 1 FROM ${this.#t("hub_chain")} LIMIT 1`);
      if (chain.rowCount === 0)
        await c.query(
          `INSERT INTO ${this.#t("hub_chain")} (commit_sha, claim_id, contributor, value, gain, accepted_at)
           VALUES ($1, NULL, NULL, NULL, 0, $2)`,
          [o.root, o.at],
        );
    });
  }

  // --- identities --------------------------------------------------------------------------

  /** Registers a key; `registered` when the key (or its id) is known already. */
  async register(o: {
    keyId: string;
    publicKey: string;
    tokenSha256: string;
    address: string;
    at: Date;
  }): Promise<"ok" | "registered"> {
    const r = await this.pool.query(
      `INSERT INTO ${this.#t("hub_identities")} (key_id, public_key, token_sha256, address, created_at)
       VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
      [o.keyId, o.publicKey, o.tokenSha256, o.address, o.at],
    );
    return r.rowCount === 1 ? "ok" : "registered";
  }

  async registrationsSince(address: string, now: Date): Promise<number> {
    const r = await this.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM ${this.#t("hub_identities")} WHERE address = $1 AND created_at > $2`,
      [address, new Date(now.getTime() - DAY_MS)],
    );
    return Number(r.rows[0]?.n ?? 0);
  }

  async identityByToken(tokenSha256: string): Promise<HubIdentity | undefined> {
    const r = await this.pool.query(
      `SELECT key_id, public_key, address, consecutive, quarantined_at, quarantine_reason
       FROM ${this.#t("hub_identities")} WHERE token_sha256 = $1`,
      [tokenSha256],
    );
    const row = r.rows[0];
    if (!row) return undefined;
    return {
      keyId: row.key_id,
      publicKey: row.public_key,
      address: row.address,
      consecutive: row.consecutive,
      quarantinedAt: row.quarantined_at,
      quarantineReason: row.quarantine_reason,
    };
  }

  /**
   * The identity a token names and the claims it made in the 24 h before `now`, in one query
   * (the server's token, quarantine and daily-quota gates). A prepared statement: it runs on
   * every claim that has no cached identity.
   */
  async identityWithClaimsToday(
    tokenSha256: string,
    now: Date,
  ): Promise<(HubIdentity & { claimsToday: number }) | undefined> {
    const r = await this.pool.query({
      name: `${this.schema}_identity_today`,
      text: `SELECT i.key_id, i.public_key, i.address, i.consecutive, i.quarantined_at, i.quarantine_reason,
                (SELECT count(*) FROM ${this.#t("hub_claims")} k WHERE k.contributor = i.key_id AND k.created_at > $2) AS today
              FROM ${this.#t("hub_identities")} i WHERE i.token_sha256 = $1`,
      values: [tokenSha256, new Date(now.getTime() - DAY_MS)],
    });
    const row = r.rows[0];
    if (!row) return undefined;
    return {
      keyId: row.key_id,
      publicKey: row.public_key,
      address: row.address,
      consecutive: row.consecutive,
      quarantinedAt: row.quarantined_at,
      quarantineReason: row.quarantine_reason,
      claimsToday: Number(row.today),
    };
  }

  // --- bundles -----------------------------------------------------------------------------

  async bundle(sha256: string): Promise<{ size: number } | undefined> {
    const r = await this.pool.query<{ size: number }>(
      `SELECT size FROM ${this.#t("hub_bundles")} WHERE sha256 = $1`,
      [sha256],
    );
    return r.rows[0];
  }

  /** Records an uploaded bundle; false when it was recorded already. */
  async addBundle(o: { sha256: string; size: number; uploader: string; at: Date }): Promise<boolean> {
    const r = await this.pool.query(
      `INSERT INTO ${this.#t("hub_bundles")} (sha256, size, uploader, created_at) VALUES ($1, $2, $3, $4)
       ON CONFLICT (sha256) DO NOTHING`,
      [o.sha256, o.size, o.uploader, o.at],
    );
    return r.rowCount === 1;
  }

  async bundleBytesSince(uploader: string, now: Date): Promise<number> {
    const r = await this.pool.query<{ n: string | null }>(
      `SELECT sum(size) AS n FROM ${this.#t("hub_bundles")} WHERE uploader = $1 AND created_at > $2`,
      [uploader, new Date(now.getTime() - DAY_MS)],
    );
    return Number(r.rows[0]?.n ?? 0);
  }

  // --- claims ------------------------------------------------------------------------------

  async claimsSince(contributor: string, now: Date): Promise<number> {
    const r = await this.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM ${this.#t("hub_claims")} WHERE contributor = $1 AND created_at > $2`,
      [contributor, new Date(now.getTime() - DAY_MS)],
    );
    return Number(r.rows[0]?.n ?? 0);
  }

  /** A claim's state as GET /api/claims/:id shows it (never the fresh seeds). */
  async claim(id: string): Promise<HubClaimState | undefined> {
    const r = await this.pool.query(
      `SELECT id, kind, status, contributor, parent, commit_sha, claimed_value, recorded_value, reason, created_at
       FROM ${this.#t("hub_claims")} WHERE id = $1`,
      [id],
    );
    const row = r.rows[0];
    if (!row) return undefined;
    const v = await this.pool.query(
      `SELECT round, idx, state, verdict FROM ${this.#t("hub_verifications")} WHERE claim_id = $1 ORDER BY round, idx`,
      [id],
    );
    return {
      id: row.id,
      kind: row.kind,
      status: row.status,
      contributor: row.contributor,
      parent: row.parent,
      commit: row.commit_sha,
      claimedValue: row.claimed_value,
      recordedValue: row.recorded_value,
      reason: row.reason,
      createdAt: new Date(row.created_at).toISOString(),
      verifiers: v.rows.map((x) => ({
        round: x.round,
        idx: x.idx,
        ...(x.verdict != null ? { verdict: publicVerdict(x.verdict) } : {}),
      })),
    };
  }

  /**
   * The replay and parent gates in one prepared query: the stored claim with this id (its kind
   * and status), and whether `parent` is in the DAG.
   */
  async claimAndParent(
    id: string,
    parent: string,
  ): Promise<{ seen: { kind: string; status: string } | undefined; parentKnown: boolean }> {
    const r = await this.pool.query<{ kind: string | null; status: string | null; parent_known: boolean }>({
      name: `${this.schema}_claim_and_parent`,
      text: `SELECT k.kind, k.status, EXISTS (SELECT 1 FROM ${this.#t("hub_commits")} WHERE sha = $2) AS parent_known
             FROM (SELECT 1) one LEFT JOIN ${this.#t("hub_claims")} k ON k.id = $1`,
      values: [id, parent],
    });
    const row = r.rows[0];
    return {
      seen: row?.kind != null && row.status != null ? { kind: row.kind, status: row.status } : undefined,
      parentKnown: row?.parent_known === true,
    };
  }

  /**
   * Whether `commit` is in the DAG already (claimed before, maybe on another ancestor), `tree`
   * was claimed on `parent` already, or is the tree of a commit in the chain.
   */
  async duplicateOf(tree: string, parent: string, commit: string): Promise<string | undefined> {
    const r = await this.pool.query<{ what: string }>(
      `SELECT 'commit ' || sha AS what FROM ${this.#t("hub_commits")} WHERE sha = $3
       UNION ALL
       SELECT 'claim ' || id FROM ${this.#t("hub_claims")} WHERE tree = $1 AND parent = $2
       UNION ALL
       SELECT 'accepted commit ' || ch.commit_sha FROM ${this.#t("hub_chain")} ch
         JOIN ${this.#t("hub_commits")} c ON c.sha = ch.commit_sha
         WHERE c.tree = $1 AND ch.withdrawn_at IS NULL
       LIMIT 1`,
      [tree, parent, commit],
    );
    return r.rows[0]?.what;
  }

  /**
   * Writes the claim, its commit (the DAG) and its event in one transaction; pg_notify tells
   * listeners of the events channel. `duplicate` when the same tree was claimed on the same
   * parent meanwhile; `exists` when this very claim id was stored meanwhile (a replay racing).
   */
  async insertClaim(
    c: NewClaim,
    o: { claimsPerDay?: number; decide: DecideClaim },
  ): Promise<
    | { ok: true; eventSeq: number; status: NewClaimStatus }
    | { ok: false; why: "duplicate" | "exists" }
    | { ok: false; why: "quarantined"; reason: string | null }
    | { ok: false; why: "quota"; claimsToday: number }
  > {
    const client = await this.pool.connect();
    try {
      await client.query("BEGIN");
      // The contributor's row, locked against the verifier's quarantine (it locks the row FOR
      // UPDATE) and against this identity's other inserts: a claim is stored only if its
      // identity is not quarantined and under its daily quota when the claim commits, whatever
      // the server's cached view of the identity said.
      const who = await client.query<{
        consecutive: number;
        quarantined_at: Date | null;
        quarantine_reason: string | null;
        today: string;
        stored: boolean;
      }>(
        `SELECT consecutive, quarantined_at, quarantine_reason,
                (SELECT count(*) FROM ${this.#t("hub_claims")} WHERE contributor = $1 AND created_at > $2) AS today,
                EXISTS (SELECT 1 FROM ${this.#t("hub_claims")} WHERE id = $3) AS stored
         FROM ${this.#t("hub_identities")} WHERE key_id = $1 FOR NO KEY UPDATE`,
        [c.contributor, new Date(c.at.getTime() - DAY_MS), c.id],
      );
      const row = who.rows[0];
      if (row?.stored) {
        // This very claim was stored meanwhile (a replay racing it): its state, not a refusal.
        await client.query("ROLLBACK");
        return { ok: false, why: "exists" };
      }
      if (row?.quarantined_at) {
        await client.query("ROLLBACK");
        return { ok: false, why: "quarantined", reason: row.quarantine_reason };
      }
      if (o.claimsPerDay !== undefined && Number(row?.today ?? 0) >= o.claimsPerDay) {
        await client.query("ROLLBACK");
        return { ok: false, why: "quota", claimsToday: Number(row?.today ?? 0) };
      }
      const { status, event } = o.decide(Number(row?.consecutive ?? 0));
      await client.query(
        `INSERT INTO ${this.#t("hub_commits")} (sha, parent, tree, subject, claim_id, created_at)
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (sha) DO NOTHING`,
        [c.commit, c.parent, c.tree, c.subject, c.id, c.at],
      );
      const ins = await client.query(
        `INSERT INTO ${this.#t("hub_claims")}
           (id, contributor, parent, commit_sha, tree, bundle_sha256, signed, claimed_value, kind, status, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT DO NOTHING`,
        [
          c.id,
          c.contributor,
          c.parent,
          c.commit,
          c.tree,
          c.bundleSha256,
          JSON.stringify(c.signed),
          c.claimedValue,
          c.kind,
          status,
          c.at,
        ],
      );
      if (ins.rowCount !== 1) {
        await client.query("ROLLBACK");
        const same = await this.pool.query(`SELECT 1 FROM ${this.#t("hub_claims")} WHERE id = $1`, [c.id]);
        return { ok: false, why: same.rowCount === 1 ? "exists" : "duplicate" };
      }
      const ev = await client.query<{ seq: string }>(
        `INSERT INTO ${this.#t("hub_events")} (kind, payload, at) VALUES ($1, $2, $3) RETURNING seq`,
        [event.kind, JSON.stringify(event.payload), c.at],
      );
      await client.query("SELECT pg_notify($1, $2)", [this.channel, String(ev.rows[0]?.seq)]);
      await client.query("COMMIT");
      return { ok: true, eventSeq: Number(ev.rows[0]?.seq), status };
    } catch (err) {
      await client.query("ROLLBACK").catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }

  /** The LISTEN/NOTIFY channel of new hub_events rows (the verifier may notify it too). */
  get channel(): string {
    return `${this.schema}_hub_events`;
  }

  // --- the DAG -----------------------------------------------------------------------------

  async hasCommit(sha: string): Promise<boolean> {
    const r = await this.pool.query(`SELECT 1 FROM ${this.#t("hub_commits")} WHERE sha = $1`, [sha]);
    return r.rowCount === 1;
  }

  #dagSelect(where: string, order = "c.created_at DESC, c.sha"): string {
    return `SELECT c.sha, c.parent, c.subject, k.id AS claim_id, k.status, k.contributor
      FROM ${this.#t("hub_commits")} c LEFT JOIN ${this.#t("hub_claims")} k ON k.id = c.claim_id
      WHERE ${where} ORDER BY ${order} LIMIT ${DAG_PAGE}`;
  }

  /** Commits nothing was built on yet (newest first). */
  async leaves(): Promise<HubCommitRow[]> {
    const r = await this.pool.query(
      this.#dagSelect(`NOT EXISTS (SELECT 1 FROM ${this.#t("hub_commits")} x WHERE x.parent = c.sha)`),
    );
    return r.rows.map(dagRow);
  }

  async children(sha: string): Promise<HubCommitRow[]> {
    const r = await this.pool.query(this.#dagSelect("c.parent = $1"), [sha]);
    return r.rows.map(dagRow);
  }

  /** root … sha; empty when sha is not in the DAG. */
  async lineage(sha: string): Promise<HubCommitRow[]> {
    const r = await this.pool.query(
      `WITH RECURSIVE up(sha, depth) AS (
         SELECT sha, 0 FROM ${this.#t("hub_commits")} WHERE sha = $1
         UNION ALL
         SELECT c.parent, up.depth + 1 FROM up JOIN ${this.#t("hub_commits")} c ON c.sha = up.sha
         WHERE c.parent IS NOT NULL AND up.depth < 100000
       )
       SELECT c.sha, c.parent, c.subject, k.id AS claim_id, k.status, k.contributor
       FROM up JOIN ${this.#t("hub_commits")} c ON c.sha = up.sha
       LEFT JOIN ${this.#t("hub_claims")} k ON k.id = c.claim_id
       ORDER BY up.depth DESC`,
      [sha],
    );
    return r.rows.map(dagRow);
  }

  // --- the chain, the head, the leaderboard ------------------------------------------------

  async chain(): Promise<ChainEntry[]> {
    const r = await this.pool.query(
      `SELECT seq, commit_sha, claim_id, contributor, value, gain, accepted_at FROM ${this.#t("hub_chain")}
       WHERE withdrawn_at IS NULL ORDER BY seq`,
    );
    return r.rows.map((x) => ({
      seq: Number(x.seq),
      commit: x.commit_sha,
      claimId: x.claim_id,
      contributor: x.contributor,
      value: x.value,
      gain: x.gain,
      acceptedAt: new Date(x.accepted_at).toISOString(),
    }));
  }

  /** The last chain entry not withdrawn: the commit frontier claims are measured against. */
  async head(): Promise<{ commit: string; value: number | null } | undefined> {
    const r = await this.pool.query<{ commit_sha: string; value: number | null }>(
      `SELECT commit_sha, value FROM ${this.#t("hub_chain")} WHERE withdrawn_at IS NULL ORDER BY seq DESC LIMIT 1`,
    );
    const row = r.rows[0];
    return row ? { commit: row.commit_sha, value: row.value } : undefined;
  }

  async leaderboard(): Promise<LeaderboardEntry[]> {
    const r = await this.pool.query(
      `SELECT k.contributor,
              count(*) AS claims,
              count(*) FILTER (WHERE k.status = 'accepted') AS accepted,
              count(*) FILTER (WHERE k.status IN ('rejected', 'invalid')) AS rejected,
              coalesce((SELECT sum(ch.gain) FROM ${this.#t("hub_chain")} ch
                        WHERE ch.contributor = k.contributor AND ch.withdrawn_at IS NULL), 0) AS credit
       FROM ${this.#t("hub_claims")} k GROUP BY k.contributor
       ORDER BY credit DESC, accepted DESC, claims DESC, k.contributor LIMIT 1000`,
    );
    return r.rows.map((x) => ({
      contributor: x.contributor,
      accepted: Number(x.accepted),
      credit: Number(x.credit),
      claims: Number(x.claims),
      rejected: Number(x.rejected),
    }));
  }

  // --- events ------------------------------------------------------------------------------

  async eventsAfter(seq: number, limit: number): Promise<HubEvent[]> {
    const r = await this.pool.query(
      `SELECT seq, kind, payload, at FROM ${this.#t("hub_events")} WHERE seq > $1 ORDER BY seq LIMIT $2`,
      [seq, limit],
    );
    return r.rows.map((x) => ({
      seq: Number(x.seq),
      kind: x.kind,
      payload: x.payload,
      at: new Date(x.at).toISOString(),
    }));
  }
}

function dagRow(x: {
  sha: string;
  parent: string | null;
  subject: string;
  claim_id: string | null;
  status: string | null;
  contributor: string | null;
}): HubCommitRow {
  return {
    sha: x.sha,
    parent: x.parent,
    subject: x.subject,
    claim: x.claim_id ? { id: x.claim_id, status: x.status ?? "", contributor: x.contributor ?? "" } : null,
  };
}

/** A verifier's verdict as the public sees it: what it decided and measured, never its seeds. */
function publicVerdict(v: unknown): unknown {
  if (!v || typeof v !== "object") return v;
  const { fresh: _fresh, seeds: _seeds, ...rest } = v as Record<string, unknown>;
  return rest;
}
