/**
 * The hub's HTTP API (docs/hub.md "The hub's API"): a hono app over the hub's store (store.ts)
 * and repository (repo.ts). Every refusal is a 4xx JSON `{error: {code, message}}`; anything
 * else a handler throws is a bug, logged and answered 500 (the fuzz test, test/hub-fuzz.test.ts,
 * asserts none happens).
 *
 * POST /api/claims runs the gates of the design cheapest first: body size (declared, then
 * counted), the address's rate limit (in memory, before any query), token, quarantine, the
 * identity's rate limit and daily quota, the signature (verifyClaim), freshness, replay, the
 * hub's terms, the parent, the bundle (stored, then admitted by git), scope and protected files,
 * duplicates; then the claim is classified (frontier / finding, `shouldCheck` for findings) and
 * written with its commit and event in one transaction.
 */
import { randomBytes as cryptoRandomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { type Context, Hono } from "hono";
import { streamSSE } from "hono/streaming";
import { freshness, verifyClaim, verifyClaimWithKey } from "./claim.ts";
import {
  addressKey,
  bearer,
  checkClaimedValue,
  checkDeclaredLength,
  checkTerms,
  claimedValue,
  classify,
  DEFAULT_LIMITS,
  HubError,
  type HubLimits,
  parseJson,
  readLimited,
  sha256Hex,
} from "./gates.ts";
import { type PublicKey, parsePublicKey } from "./identity.ts";
import { hubPage } from "./page.ts";
import { RateLimiter } from "./rate-limit.ts";
import type { HubRepo } from "./repo.ts";
import type { HubIdentity, HubStore } from "./store.ts";
import { NEW_REPUTATION, shouldCheck } from "./verification-policy.ts";

export interface HubAppDeps {
  store: HubStore;
  repo: HubRepo;
  /** Where uploaded bundles are kept: `<dir>/<sha256>.bundle`. */
  bundlesDir: string;
  /** The one hardware class this hub verifies on. */
  hardwareClass: string;
  limits?: Partial<HubLimits>;
  /** The verifier driver's wake: called after a claim is stored (every kind and status). */
  onClaim?: (id: string, kind: "frontier" | "finding", status: string) => void;
  /** ms since the epoch (default Date.now). */
  clock?: () => number;
  /** A uniform draw in [0, 1) for the sampled re-checks of findings (default Math.random). */
  random?: () => number;
  /** Random bytes for tokens (default node:crypto). */
  randomBytes?: (n: number) => Buffer;
  /** Where an unexpected error (a 500: a bug) is reported (default console.error). */
  log?: (message: string) => void;
  /** How often the event feed looks for new events written elsewhere (ms, default 1000). */
  feedPollMs?: number;
  /** SSE keep-alive comment interval (ms, default 15000). */
  heartbeatMs?: number;
  /**
   * How long a token's identity (its key, quarantine and claims of the day) is served from memory
   * (ms, default 1000; 0: every request asks the database). The insert of a claim re-reads the
   * identity's row, locked, in its own transaction: a claim of a quarantined identity, or one
   * over the daily quota, is never stored; the cache only delays the cheap refusal by up to this
   * long after the verifier quarantines an identity in another transaction.
   */
  identityCacheMs?: number;
}

/** A token's identity as the claims route keeps it for `identityCacheMs`. */
interface CachedIdentity {
  identity: HubIdentity;
  /** The public key, parsed once (an Ed25519 key object). */
  key: PublicKey | undefined;
  /** Claims stored in the 24 h before `clockAt`, plus those this server stored since. */
  claimsToday: number;
  /** performance.now() when read. */
  readAt: number;
  /** The hub's clock (`clock`) when read: a test's clock that jumps invalidates the entry. */
  clockAt: number;
}

/** Cached identities at most (a bound, not a tuning knob: 200 bytes or so each). */
const IDENTITY_CACHE_MAX = 100_000;

export type HubApp = Hono & { close(): void };

const COMMIT = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
const SHA256 = /^[0-9a-f]{64}$/;
/** Events per page of /api/findings and per read of the feed. */
const EVENT_PAGE = 500;

function fail(
  status: HubError["status"],
  code: string,
  message: string,
  headers?: Record<string, string>,
): never {
  throw new HubError(status, code, message, headers);
}

function commitParam(c: Context, name = "sha"): string {
  const v = c.req.param(name) ?? "";
  if (!COMMIT.test(v))
    fail(400, "malformed", `${name} must be a full commit id (40 or 64 lower-case hex digits)`);
  return v;
}

function seqParam(v: string | undefined, what: string): number {
  if (v === undefined || v === "") return 0;
  if (!/^\d{1,15}$/.test(v)) fail(400, "malformed", `${what} must be a whole number of at most 15 digits`);
  return Number(v);
}

/**
 * Whether an error says the database cannot be reached (connection refused, reset, timed out;
 * SQLSTATE class 08 connection exceptions, 57P0x shutdowns, 53 insufficient resources): a 503 the
 * client may retry, not a bug.
 */
export function unavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (
    typeof code === "string" &&
    /^(?:08|57P0|53|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND|EPIPE)/.test(code)
  )
    return true;
  return /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error/.test(
    err.message,
  );
}

export function createHubApp(deps: HubAppDeps): HubApp {
  const limits: HubLimits = { ...DEFAULT_LIMITS, ...deps.limits };
  const clock = deps.clock ?? Date.now;
  const random = deps.random ?? Math.random;
  const randomBytes = deps.randomBytes ?? cryptoRandomBytes;
  const log = deps.log ?? ((m: string) => console.error(m));
  const { store, repo } = deps;
  const program = repo.program;
  const budgetS = program.run.budgetMs / 1000;
  const direction = program.objective.direction;
  const metric = program.objective.metric;
  const byIdentity = new RateLimiter(limits.identityRate, clock);
  const byAddress = new RateLimiter(limits.addressRate, clock);
  const feed = new FeedWaker(store, deps.feedPollMs ?? 1000);
  const heartbeatMs = deps.heartbeatMs ?? 15_000;
  /** Open feed streams per address. */
  const feeds = new Map<string, number>();
  const identityCacheMs = deps.identityCacheMs ?? 1000;
  /** Token sha256 → identity (see HubAppDeps.identityCacheMs). */
  const identities = new Map<string, CachedIdentity>();
  /** Admissions by (bundle, parent): the same bundle is looked at by git once. */
  const admitted = new Map<string, ReturnType<HubRepo["admit"]>>();

  const app = new Hono();

  app.onError((err, c) => {
    if (err instanceof HubError) {
      for (const [k, v] of Object.entries(err.headers)) c.header(k, v);
      return c.json({ error: { code: err.code, message: err.message } }, err.status);
    }
    if (unavailable(err)) {
      // The database is down or restarting: no bug, and nothing the client did; retry later.
      log(`hub: ${c.req.method} ${c.req.path}: the database is unavailable: ${(err as Error).message}`);
      c.header("Retry-After", "5");
      return c.json(
        {
          error: {
            code: "unavailable",
            message: "the hub's database is unavailable; retry in a few seconds",
          },
        },
        503,
      );
    }
    log(
      `hub: ${c.req.method} ${c.req.path}: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`,
    );
    return c.json({ error: { code: "internal", message: "the hub failed on this request (logged)" } }, 500);
  });
  app.notFound((c) =>
    c.json({ error: { code: "not_found", message: `no route ${c.req.method} ${c.req.path}` } }, 404),
  );

  const address = (c: Context): string =>
    addressKey(
      (c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined)?.incoming?.socket
        ?.remoteAddress,
    );

  const limitAddress = (c: Context): void => {
    const t = byAddress.take(address(c));
    if (!t.ok)
      fail(429, "rate_limited", `too many requests from this address; retry in ${t.retryAfterS} s`, {
        "Retry-After": String(t.retryAfterS),
      });
  };

  /**
   * The token's identity (gates 3-5 of POST /api/claims; PUT /api/bundles too): from memory when
   * read less than `identityCacheMs` ago by both the monotonic clock and the hub's clock, else
   * by one query that also counts the identity's claims of the day.
   */
  const authenticate = async (c: Context): Promise<CachedIdentity> => {
    const token = bearer(c.req.header("authorization"));
    if (!token)
      fail(
        401,
        "token",
        "no token: send `Authorization: Bearer <token>` with the token POST /api/register gave you",
        {
          "WWW-Authenticate": "Bearer",
        },
      );
    const tokenSha = sha256Hex(token);
    const mono = performance.now();
    const now = clock();
    let entry = identities.get(tokenSha);
    if (
      !entry ||
      mono - entry.readAt >= identityCacheMs ||
      now - entry.clockAt >= identityCacheMs ||
      now < entry.clockAt
    ) {
      const found = await store.identityWithClaimsToday(tokenSha, new Date(now));
      if (!found) {
        identities.delete(tokenSha);
        fail(401, "token", "unknown token: register your key with POST /api/register", {
          "WWW-Authenticate": "Bearer",
        });
      }
      const { claimsToday, ...identity } = found;
      const key = parsePublicKey(identity.publicKey);
      entry = { identity, key: key.ok ? key.value : undefined, claimsToday, readAt: mono, clockAt: now };
      if (identityCacheMs > 0) {
        identities.delete(tokenSha);
        identities.set(tokenSha, entry);
        if (identities.size > IDENTITY_CACHE_MAX) identities.delete(identities.keys().next().value as string);
      }
    }
    const identity = entry.identity;
    if (identity.quarantinedAt) quarantined(identity.quarantineReason);
    const t = byIdentity.take(identity.keyId);
    if (!t.ok)
      fail(429, "rate_limited", `too many requests from this identity; retry in ${t.retryAfterS} s`, {
        "Retry-After": String(t.retryAfterS),
      });
    return entry;
  };

  const quarantined = (reason: string | null): never =>
    fail(
      403,
      "quarantined",
      `this identity is quarantined${reason ? `: ${reason}` : ""}; the hub takes no more claims from it`,
    );
  const overQuota = (n: number): never =>
    fail(429, "quota", `this identity made ${n} claims in the last 24 h; at most ${limits.claimsPerDay}`, {
      "Retry-After": "3600",
    });

  // --- registration ------------------------------------------------------------------------

  app.post("/api/register", async (c) => {
    checkDeclaredLength(c.req.header("content-length"), limits.registerBytes, "a registration");
    limitAddress(c);
    const body = parseJson(
      await readLimited(c.req.raw, limits.registerBytes, "a registration"),
      "the registration",
    );
    const publicKey = (body as { publicKey?: unknown } | null)?.publicKey;
    if (typeof publicKey !== "string")
      fail(400, "malformed", 'send {"publicKey": "<base64url of your Ed25519 public key: 43 characters>"}');
    const key = parsePublicKey(publicKey);
    if (!key.ok) fail(400, "malformed", `publicKey: ${key.reason}`);
    const now = new Date(clock());
    const addr = address(c);
    const n = await store.registrationsSince(addr, now);
    if (n >= limits.registrationsPerDay)
      fail(
        429,
        "quota",
        `this address registered ${n} identities in the last 24 h; at most ${limits.registrationsPerDay}`,
        { "Retry-After": "3600" },
      );
    const token = randomBytes(32).toString("base64url");
    const r = await store.register({
      keyId: key.value.keyId,
      publicKey,
      tokenSha256: sha256Hex(token),
      address: addr,
      at: now,
    });
    if (r === "registered")
      fail(
        409,
        "registered",
        "this key is registered already; its token was shown once (register a new key to get another)",
      );
    return c.json({ keyId: key.value.keyId, token }, 201);
  });

  // --- reading -----------------------------------------------------------------------------

  app.get("/api/health", (c) => c.json({ ok: true }));
  // The page people open in a browser (src/hub/page.ts: escaping and CSP there).
  app.get("/", hubPage({ store, repo, hardwareClass: deps.hardwareClass }));

  app.get("/api/program", async (c) => {
    const head = await store.head();
    return c.json({
      rootCommit: repo.rootCommit,
      head: head?.commit ?? repo.rootCommit,
      headValue: head?.value ?? null,
      hardwareClass: deps.hardwareClass,
      budgetS,
      objective: { metric, direction },
      editable: program.files.editable,
      protected: program.files.protected,
      seedsMin: limits.seedsMin,
      limits: { bundleBytes: limits.bundleBytes, claimBytes: limits.claimBytes },
    });
  });

  app.get("/api/bundle/:sha", async (c) => {
    // The one expensive read (a bundle of a whole history, made once per commit): limited too.
    limitAddress(c);
    const sha = commitParam(c);
    if (!(await store.hasCommit(sha))) fail(404, "not_found", `commit ${sha} is not in the hub's DAG`);
    const data = await repo.bundleOf(sha);
    return c.body(new Uint8Array(data), 200, {
      "Content-Type": "application/octet-stream",
      "Content-Disposition": `attachment; filename="${sha}.bundle"`,
    });
  });

  app.get("/api/dag/leaves", async (c) => c.json({ commits: await store.leaves() }));
  app.get("/api/dag/children/:sha", async (c) => c.json({ commits: await store.children(commitParam(c)) }));
  app.get("/api/dag/lineage/:sha", async (c) => {
    const sha = commitParam(c);
    const commits = await store.lineage(sha);
    if (commits.length === 0) fail(404, "not_found", `commit ${sha} is not in the hub's DAG`);
    return c.json({ commits });
  });

  app.get("/api/claims/:id", async (c) => {
    const id = c.req.param("id");
    if (!SHA256.test(id)) fail(400, "malformed", "a claim id is 64 lower-case hex digits");
    const claim = await store.claim(id);
    if (!claim) fail(404, "not_found", `no claim ${id}`);
    return c.json(claim);
  });

  app.get("/api/chain", async (c) => c.json({ chain: await store.chain() }));
  app.get("/api/leaderboard", async (c) => c.json({ entries: await store.leaderboard() }));

  app.get("/api/findings", async (c) => {
    const after = seqParam(c.req.query("after"), "after");
    const events = await store.eventsAfter(after, EVENT_PAGE);
    return c.json({ events, next: events.at(-1)?.seq ?? after });
  });

  app.get("/api/feed", async (c) => {
    const resume = c.req.header("last-event-id");
    let cursor = seqParam(resume !== undefined ? resume.trim() : c.req.query("after"), "Last-Event-ID");
    const addr = address(c);
    const open = feeds.get(addr) ?? 0;
    if (open >= limits.feedsPerAddress)
      fail(
        429,
        "rate_limited",
        `${open} feeds are open from this address; at most ${limits.feedsPerAddress}`,
        {
          "Retry-After": "60",
        },
      );
    feeds.set(addr, open + 1);
    let closed = false;
    return streamSSE(
      c,
      async (stream) => {
        try {
          stream.onAbort(() => {
            closed = true;
            // Wake the waiting loop now, so the stream ends (and frees its place) at once.
            feed.poke(0);
          });
          await stream.writeSSE({ event: "ready", data: JSON.stringify({ after: cursor }) });
          while (!closed) {
            const events = await store.eventsAfter(cursor, EVENT_PAGE);
            for (const e of events) {
              if (closed) break;
              await stream.writeSSE({ id: String(e.seq), event: e.kind, data: JSON.stringify(e) });
              cursor = e.seq;
            }
            if (events.length === EVENT_PAGE) continue;
            const woke = await feed.wait(cursor, heartbeatMs, () => closed);
            if (!woke && !closed) await stream.write(": ping\n\n");
          }
        } finally {
          const n = (feeds.get(addr) ?? 1) - 1;
          if (n > 0) feeds.set(addr, n);
          else feeds.delete(addr);
        }
      },
      async (err) => {
        // A write to a client that went away is no error of the hub's.
        if (!closed) log(`hub: /api/feed: ${err.message}`);
      },
    );
  });

  // --- writing -----------------------------------------------------------------------------

  app.put("/api/bundles/:sha256", async (c) => {
    checkDeclaredLength(c.req.header("content-length"), limits.bundleBytes, "a bundle");
    limitAddress(c);
    const name = c.req.param("sha256");
    if (!SHA256.test(name))
      fail(400, "malformed", "PUT /api/bundles/<sha256 of the bundle's bytes, 64 lower-case hex>");
    const { identity } = await authenticate(c);
    const now = new Date(clock());
    const declared = Number(c.req.header("content-length") ?? 0) || 0;
    const used = await store.bundleBytesSince(identity.keyId, now);
    if (used + declared > limits.bundleBytesPerDay)
      fail(
        429,
        "quota",
        `this identity uploaded ${used} bundle bytes in the last 24 h; at most ${limits.bundleBytesPerDay}`,
        { "Retry-After": "3600" },
      );
    const data = await readLimited(c.req.raw, limits.bundleBytes, "a bundle");
    const actual = sha256Hex(data);
    if (actual !== name)
      fail(
        400,
        "bundle_hash",
        `the bytes hash to ${actual}, not to ${name}: upload the bundle under its own sha256`,
      );
    if (used + data.length > limits.bundleBytesPerDay)
      fail(
        429,
        "quota",
        `this upload would pass the identity's ${limits.bundleBytesPerDay} bundle bytes per 24 h`,
        {
          "Retry-After": "3600",
        },
      );
    const file = join(deps.bundlesDir, `${name}.bundle`);
    if ((await store.bundle(name)) && existsSync(file))
      return c.json({ sha256: name, size: data.length }, 200);
    await mkdir(deps.bundlesDir, { recursive: true });
    const tmp = `${file}.${randomBytes(6).toString("hex")}.tmp`;
    try {
      await writeFile(tmp, data);
      await rename(tmp, file);
    } finally {
      await rm(tmp, { force: true });
    }
    const fresh = await store.addBundle({
      sha256: name,
      size: data.length,
      uploader: identity.keyId,
      at: now,
    });
    return c.json({ sha256: name, size: data.length }, fresh ? 201 : 200);
  });

  app.post("/api/claims", async (c) => {
    // 1. size: declared, then counted while reading (before any parsing).
    checkDeclaredLength(c.req.header("content-length"), limits.claimBytes, "a claim");
    const body = await readLimited(c.req.raw, limits.claimBytes, "a claim");
    // 2-3. address limit (memory), token, quarantine, identity limit, daily quota.
    limitAddress(c);
    const who = await authenticate(c);
    const identity = who.identity;
    const now = clock();
    if (who.claimsToday >= limits.claimsPerDay) overQuota(who.claimsToday);
    // 4. shape, key, signature.
    const raw = parseJson(body, "the claim");
    const checked = who.key ? verifyClaimWithKey(raw, who.key) : verifyClaim(raw, identity.publicKey);
    if (!checked.ok) {
      if (checked.reason === "malformed")
        fail(
          400,
          "malformed",
          `not a valid signed claim: ${checked.issues
            .slice(0, 10)
            .map((i) => `${i.path}: ${i.message}`)
            .join("; ")}`,
        );
      if (checked.reason === "wrong_key")
        fail(
          403,
          "wrong_key",
          `the claim names contributor ${checked.claimed}, the token's key is ${checked.key}`,
        );
      fail(403, "bad_signature", checked.message);
    }
    const { claim, claimId: id } = checked;
    // 5. freshness, then replay.
    const fresh = freshness(claim.createdAt, now, limits.freshnessMs);
    if (!fresh.ok)
      fail(
        400,
        fresh.reason,
        fresh.reason === "too_old"
          ? `the claim was signed more than ${limits.freshnessMs / 1000} s ago; sign it again with the current time`
          : `the claim's createdAt is more than ${limits.freshnessMs / 1000} s ahead of the hub's clock; check your clock`,
      );
    // One query for the replay and the parent gates (their order below is the gates' order).
    const { seen, parentKnown } = await store.claimAndParent(id, claim.parent);
    if (seen) return c.json({ id, kind: seen.kind, status: seen.status, replay: true }, 200);
    // 6. the hub's terms.
    checkTerms(claim, {
      hardwareClass: deps.hardwareClass,
      budgetS,
      seedsMin: limits.seedsMin,
      metric,
      bounds: limits.bounds,
    });
    // 7. the parent.
    if (!parentKnown)
      fail(
        404,
        "unknown_parent",
        `the parent ${claim.parent} is not in the hub's DAG; build on a commit GET /api/dag/leaves lists`,
      );
    // 8. the bundle: uploaded, then admitted by git (9: scope and protected files with it).
    const bundleFile = join(deps.bundlesDir, `${claim.bundleSha256}.bundle`);
    if (!(await store.bundle(claim.bundleSha256)) || !existsSync(bundleFile))
      fail(
        409,
        "bundle_missing",
        `bundle ${claim.bundleSha256} was not uploaded: PUT /api/bundles/${claim.bundleSha256} first`,
      );
    const key = `${claim.bundleSha256}:${claim.parent}`;
    let admission = admitted.get(key);
    if (!admission) {
      admission = repo.admit(bundleFile, claim.parent);
      admitted.set(key, admission);
      admission.catch(() => admitted.delete(key));
      if (admitted.size > 1000) admitted.delete(admitted.keys().next().value as string);
    }
    const a = await admission;
    if (!a.ok) fail(422, a.code, a.reason);
    // 10. duplicates.
    const dup = await store.duplicateOf(a.value.tree, claim.parent, a.value.commit);
    if (dup) {
      // This very claim, stored by a request that raced this one since the replay gate: a replay.
      const s = await store.claim(id);
      if (s) return c.json({ id, kind: s.kind, status: s.status, replay: true }, 200);
      fail(
        409,
        "duplicate",
        `already claimed: ${dup} (the same commit, or the same tree on this parent or in the chain)`,
      );
    }
    // Classification: frontier when it would beat the head's recorded value.
    const value = claimedValue(claim, metric);
    checkClaimedValue(value, metric);
    const head = await store.head();
    const kind = classify(value, head?.value ?? null, direction);
    // A finding's check is drawn from the identity's consecutive count as the insert's locked
    // read of its row gives it (the cached identity may be up to identityCacheMs old).
    const statusOf = (consecutive: number): "verifying" | "checking" | "recorded" =>
      kind === "frontier"
        ? "verifying"
        : shouldCheck({ ...NEW_REPUTATION, consecutive, quarantined: false }, random())
          ? "checking"
          : "recorded";
    const payloadOf = (status: string) => ({
      claimId: id,
      contributor: identity.keyId,
      parent: claim.parent,
      commit: a.value.commit,
      subject: a.value.subject,
      metric,
      claimedValue: value,
      kind,
      status,
    });
    const stored = await store.insertClaim(
      {
        id,
        contributor: identity.keyId,
        parent: claim.parent,
        commit: a.value.commit,
        tree: a.value.tree,
        subject: a.value.subject,
        bundleSha256: claim.bundleSha256,
        signed: { claim, signature: (raw as { signature: string }).signature },
        claimedValue: value,
        kind,
        at: new Date(now),
      },
      {
        claimsPerDay: limits.claimsPerDay,
        // A finding recorded without a check is a refuted idea at once; the rest are claims under way.
        decide: (consecutive) => {
          const status = statusOf(consecutive);
          return {
            status,
            event: { kind: status === "recorded" ? "refuted" : "claim", payload: payloadOf(status) },
          };
        },
      },
    );
    if (!stored.ok) {
      if (stored.why === "exists") {
        const s = await store.claim(id);
        return c.json({ id, kind: s?.kind ?? kind, status: s?.status ?? "verifying", replay: true }, 200);
      }
      if (stored.why === "quarantined") {
        who.identity = { ...identity, quarantinedAt: new Date(now), quarantineReason: stored.reason };
        quarantined(stored.reason);
      }
      if (stored.why === "quota") {
        who.claimsToday = stored.claimsToday;
        overQuota(stored.claimsToday);
      }
      fail(409, "duplicate", "this tree was claimed on this parent already (by a claim stored a moment ago)");
    }
    who.claimsToday++;
    const status = stored.status;
    feed.poke(stored.eventSeq);
    try {
      deps.onClaim?.(id, kind, status);
    } catch (err) {
      log(`hub: onClaim: ${err instanceof Error ? err.message : String(err)}`);
    }
    return c.json({ id, kind, status }, 202);
  });

  return Object.assign(app, { close: () => feed.close() });
}

/**
 * Wakes the feed's streams when events arrive: at once for the server's own writes (`poke`), and
 * by one poll of max(seq) every `pollMs` while a stream waits, for events other processes wrote
 * (the verifier). One query per interval whatever the number of streams.
 */
class FeedWaker {
  #latest = 0;
  #waiters = new Set<() => void>();
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  readonly store: HubStore;
  readonly pollMs: number;
  constructor(store: HubStore, pollMs: number) {
    this.store = store;
    this.pollMs = pollMs;
  }

  poke(seq: number): void {
    if (seq > this.#latest) this.#latest = seq;
    for (const w of [...this.#waiters]) w();
  }

  /** Resolves true when an event after `cursor` exists, false after `timeoutMs` or on close. */
  wait(cursor: number, timeoutMs: number, closed: () => boolean): Promise<boolean> {
    if (this.#latest > cursor) return Promise.resolve(true);
    return new Promise((resolve) => {
      let timeout: NodeJS.Timeout | undefined;
      let check: NodeJS.Timeout | undefined;
      const done = (v: boolean) => {
        clearTimeout(timeout);
        clearInterval(check);
        this.#waiters.delete(wake);
        this.#schedule();
        resolve(v);
      };
      const wake = () => {
        if (this.#latest > cursor || this.#closed || closed()) done(this.#latest > cursor);
      };
      this.#waiters.add(wake);
      timeout = setTimeout(() => done(false), timeoutMs);
      timeout.unref();
      // A stream whose client went away notices within a poll interval.
      check = setInterval(wake, this.pollMs);
      check.unref();
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#closed || this.#waiters.size === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
      return;
    }
    if (this.#timer) return;
    this.#timer = setInterval(() => {
      this.store.pool
        .query<{ m: string | null }>(`SELECT max(seq) AS m FROM ${this.store.schema}.hub_events`)
        .then((r) => this.poke(Number(r.rows[0]?.m ?? 0)))
        .catch(() => {});
    }, this.pollMs);
    this.#timer.unref();
  }

  close(): void {
    this.#closed = true;
    for (const w of [...this.#waiters]) w();
    clearInterval(this.#timer);
  }
}
