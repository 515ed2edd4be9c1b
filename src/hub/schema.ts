/**
 * The hub's tables (issue #14; docs/hub.md "Running a hub"): one PostgreSQL schema holds the
 * identities, uploaded bundles' records, the DAG of claimed commits, the claims, their
 * verifications, the accepted chain and the event feed. The fleet's tables (src/fleet/db.ts) and
 * pg-boss's queue (`<schema>_queue`) live beside them: the hub's verifiers are `autolab worker`s
 * on the same database. Idempotent, serialized by an advisory lock (several processes start
 * together); reached with the async `pg` driver, as the fleet is.
 *
 * Contracts the modules rely on:
 * - `hub_claims.id` is `claimId()` (src/hub/claim.ts): a replayed claim finds its row.
 * - `UNIQUE (tree, parent)`: the same tree on the same parent is claimed once (the duplicate gate).
 * - `hub_verifications.fresh` holds the seeds the hub drew for a verifier: never sent to anyone.
 * - `hub_chain` is the accepted commits in order; the root is its first row (claim_id NULL, its
 *   value NULL until a verification measured it). A row with `withdrawn_at` is out of the chain
 *   (its identity was quarantined) until re-verified; the head is the last row without it.
 * - `hub_events.seq` is the feed's event id (SSE `id:`, Last-Event-ID resumes).
 */
import type pg from "pg";
import { inTransaction } from "../fleet/db.ts";

export async function migrateHub(pool: pg.Pool, schema: string): Promise<void> {
  await inTransaction(pool, async (c) => {
    await c.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`autolab-hub:${schema}`]);
    await c.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await c.query(`
        CREATE TABLE IF NOT EXISTS ${schema}.hub_meta (
          key TEXT PRIMARY KEY,
          value TEXT NOT NULL
        );
        CREATE TABLE IF NOT EXISTS ${schema}.hub_identities (
          key_id TEXT PRIMARY KEY,
          public_key TEXT NOT NULL UNIQUE,
          token_sha256 TEXT NOT NULL UNIQUE,
          address TEXT NOT NULL,
          created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
          consecutive INTEGER NOT NULL DEFAULT 0,
          unconfirmed_run INTEGER NOT NULL DEFAULT 0,
          quarantined_at TIMESTAMPTZ,
          quarantine_reason TEXT
        );
        CREATE INDEX IF NOT EXISTS hub_identities_address ON ${schema}.hub_identities (address, created_at);
        CREATE TABLE IF NOT EXISTS ${schema}.hub_bundles (
          sha256 TEXT PRIMARY KEY,
          size INTEGER NOT NULL,
          uploader TEXT NOT NULL,
          created_at TIMESTAMPTZ NOT NULL DEFAULT now()
        );
        CREATE INDEX IF NOT EXISTS hub_bundles_uploader ON ${schema}.hub_bundles (uploader, created_at);
        CREATE TABLE IF NOT EXISTS ${schema}.hub_commits (
          sha TEXT PRIMARY KEY,
          parent TEXT,
          tree TEXT NOT NULL,
          subject TEXT NOT NULL,
          claim_id TEXT,
          created_at TIMESTAMPTZ NOT NULL DEFAULT now()
        );
        CREATE INDEX IF NOT EXISTS hub_commits_parent ON ${schema}.hub_commits (parent);
        CREATE TABLE IF NOT EXISTS ${schema}.hub_claims (
          id TEXT PRIMARY KEY,
          seq BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
          contributor TEXT NOT NULL,
          parent TEXT NOT NULL,
          commit_sha TEXT NOT NULL,
          tree TEXT NOT NULL,
          bundle_sha256 TEXT NOT NULL,
          signed JSONB NOT NULL,
          claimed_value DOUBLE PRECISION NOT NULL,
          kind TEXT NOT NULL CHECK (kind IN ('frontier', 'finding')),
          status TEXT NOT NULL CHECK (status IN ('verifying', 'accepted', 'rejected', 'superseded',
            'recorded', 'checking', 'checked', 'invalid')),
          against TEXT,
          recorded_value DOUBLE PRECISION,
          reason TEXT,
          created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
          decided_at TIMESTAMPTZ,
          UNIQUE (tree, parent)
        );
        CREATE INDEX IF NOT EXISTS hub_claims_status ON ${schema}.hub_claims (status);
        CREATE INDEX IF NOT EXISTS hub_claims_contributor ON ${schema}.hub_claims (contributor, created_at);
        CREATE TABLE IF NOT EXISTS ${schema}.hub_verifications (
          id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          claim_id TEXT NOT NULL,
          round INTEGER NOT NULL,
          idx INTEGER NOT NULL,
          against TEXT NOT NULL,
          fresh JSONB NOT NULL,
          trials JSONB NOT NULL DEFAULT '{"agreement":[],"parent":[],"candidate":[]}',
          state TEXT NOT NULL CHECK (state IN ('running', 'done')),
          verdict JSONB,
          started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
          done_at TIMESTAMPTZ,
          UNIQUE (claim_id, round, idx)
        );
        CREATE INDEX IF NOT EXISTS hub_verifications_state ON ${schema}.hub_verifications (state);
        CREATE TABLE IF NOT EXISTS ${schema}.hub_chain (
          seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          commit_sha TEXT NOT NULL UNIQUE,
          claim_id TEXT,
          contributor TEXT,
          value DOUBLE PRECISION,
          gain DOUBLE PRECISION NOT NULL DEFAULT 0,
          accepted_at TIMESTAMPTZ NOT NULL DEFAULT now(),
          withdrawn_at TIMESTAMPTZ
        );
        CREATE TABLE IF NOT EXISTS ${schema}.hub_events (
          seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          kind TEXT NOT NULL,
          payload JSONB NOT NULL,
          at TIMESTAMPTZ NOT NULL DEFAULT now()
        );
      `);
  });
}
