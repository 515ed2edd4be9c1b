/**
 * The hub's cheap gates (src/hub/server.ts, gates.ts), attacked one by one over real HTTP on
 * 127.0.0.1 against real PostgreSQL and real git: each attack is refused with its status and
 * code, stores nothing, and an honest request passes the same gate. Limits that count per
 * address are attacked on apps sharing the hub's store and repository, with the client's address
 * given as node-server gives it (`env.incoming.socket.remoteAddress`).
 */
import { randomBytes } from "node:crypto";
import { readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { canonicalBytes } from "../src/hub/canonical-json.ts";
import { claimId, type SignedClaim } from "../src/hub/claim.ts";
import { sha256Hex } from "../src/hub/gates.ts";
import { type StartedHub, startHub } from "../src/hub/hub.ts";
import { generateIdentity, type Identity } from "../src/hub/identity.ts";
import { createHubApp, type HubAppDeps } from "../src/hub/server.ts";
import { HubStore } from "../src/hub/store.ts";
import { cleanupTemp, gitSync, tempDir } from "./helpers/git-project.ts";
import { candidate, hubProject, signedClaimFor } from "./helpers/hub-project.ts";
import { dropSchemas, freshSchemaUrl, PG_SKIP, PG_SKIP_REASON, pgQuery } from "./helpers/pg.ts";

/** A JSON answer as the tests read it (shapes are asserted, not typed). */
// biome-ignore lint/suspicious/noExplicitAny: test answers are checked by expect, not by the compiler
type Json = Record<string, any>;

async function codeOf(r: Response): Promise<string> {
  return ((await r.json()) as { error: { code: string } }).error.code;
}

interface Who {
  id: Identity;
  token: string;
}

describe.skipIf(PG_SKIP)(`the hub's gates${PG_SKIP ? ` (${PG_SKIP_REASON})` : ""}`, () => {
  const p = hubProject();
  const root = p.head as string;
  let hub: StartedHub;
  let dataDir: string;
  let schema: string;
  const now = Date.parse("2026-11-25T10:00:00.000Z");
  let draw = 0.5;
  const woken: Array<[string, string, string]> = [];

  const api = (path: string, init?: RequestInit) => fetch(`${hub.url}${path}`, init);
  const json = async (r: Response) => ({ status: r.status, body: (await r.json()) as Json });

  async function register(): Promise<Who> {
    const id = generateIdentity();
    const r = await json(
      await api("/api/register", { method: "POST", body: JSON.stringify({ publicKey: id.publicKey }) }),
    );
    expect(r.status).toBe(201);
    expect(r.body.keyId).toBe(id.keyId);
    return { id, token: r.body.token };
  }

  const auth = (who: Who) => ({ authorization: `Bearer ${who.token}` });

  async function upload(who: Who, bundle: string): Promise<string> {
    const data = readFileSync(bundle);
    const sha = sha256Hex(data);
    const r = await api(`/api/bundles/${sha}`, { method: "PUT", headers: auth(who), body: data });
    expect([200, 201]).toContain(r.status);
    return sha;
  }

  async function post(who: Who, body: unknown): Promise<{ status: number; body: Json }> {
    return json(
      await api("/api/claims", {
        method: "POST",
        headers: { ...auth(who), "content-type": "application/json" },
        body: typeof body === "string" ? body : JSON.stringify(body),
      }),
    );
  }

  /** An honest candidate on `parent`, uploaded; the claim is signed but not sent. */
  async function prepared(
    who: Who,
    files: Record<string, string | null> = { "train.py": `LR = ${Math.random()}\n` },
    o: { parent?: string; values?: number[]; over?: Parameters<typeof signedClaimFor>[1]["over"] } = {},
  ): Promise<{ claim: SignedClaim; commit: string }> {
    const parent = o.parent ?? root;
    const c = candidate(p, parent, files);
    const sha = await upload(who, c.bundle);
    return {
      commit: c.commit,
      claim: signedClaimFor(who.id, {
        parent,
        bundleSha256: sha,
        createdAt: now,
        ...(o.values ? { values: o.values } : {}),
        ...(o.over ? { over: o.over } : {}),
      }),
    };
  }

  async function counts(): Promise<{ claims: number; events: number; commits: number }> {
    const [r] = await pgQuery<{ claims: string; events: string; commits: string }>(
      `SELECT (SELECT count(*) FROM ${schema}.hub_claims) AS claims, (SELECT count(*) FROM ${schema}.hub_events) AS events,
              (SELECT count(*) FROM ${schema}.hub_commits) AS commits`,
    );
    return { claims: Number(r?.claims), events: Number(r?.events), commits: Number(r?.commits) };
  }

  /** Sends `body` as `who` and expects a refusal that stores nothing. */
  async function refused(who: Who, body: unknown, status: number, code: string, message?: RegExp) {
    const before = await counts();
    const r = await post(who, body);
    expect(r.body.error?.code, JSON.stringify(r.body)).toBe(code);
    expect(r.status).toBe(status);
    expect(typeof r.body.error.message).toBe("string");
    if (message) expect(r.body.error.message).toMatch(message);
    expect(await counts()).toEqual(before);
    return r;
  }

  let alice: Who;
  let bob: Who;

  beforeAll(async () => {
    const url = freshSchemaUrl("hubg");
    schema = new URL(url).searchParams.get("schema") as string;
    dataDir = tempDir("autolab-hub-data-");
    hub = await startHub({
      db: url,
      projectDir: p.root,
      dataDir,
      port: 0,
      clock: () => now,
      random: () => draw,
      log: (m) => {
        throw new Error(`unexpected 500: ${m}`);
      },
      onClaim: (id, kind, status) => woken.push([id, kind, status]),
      limits: {
        bundleBytes: 256 * 1024,
        identityRate: { capacity: 10_000, refillPerS: 1 },
        addressRate: { capacity: 10_000, refillPerS: 1 },
        registrationsPerDay: 1000,
        bounds: { val_loss: { min: 0, max: 1e6 } },
        // An operator who wants more of the claim's own seeds (the default is 1).
        seedsMin: 3,
      },
    });
    alice = await register();
    bob = await register();
  });

  afterAll(async () => {
    await hub?.close();
    await dropSchemas();
    cleanupTemp();
  });

  describe("first start", () => {
    it("records the root in hub_meta, the DAG and the chain, and serves the program", async () => {
      const meta = await pgQuery<{ key: string; value: string }>(`SELECT key, value FROM ${schema}.hub_meta`);
      expect(Object.fromEntries(meta.map((m) => [m.key, m.value]))).toMatchObject({
        root_commit: root,
        hardware_class: "cpu",
      });
      const prog = await json(await api("/api/program"));
      expect(prog.body).toMatchObject({
        rootCommit: root,
        head: root,
        headValue: null,
        hardwareClass: "cpu",
        budgetS: 60,
        objective: { metric: "val_loss", direction: "minimize" },
        editable: ["train.py", "src"],
        protected: ["evaluate.py", "data"],
        seedsMin: 3,
      });
      expect((await json(await api("/api/chain"))).body.chain).toMatchObject([
        { seq: 1, commit: root, value: null },
      ]);
      expect((await json(await api("/api/dag/leaves"))).body.commits).toMatchObject([
        { sha: root, claim: null },
      ]);
    });

    it("a second start on the same database and data directory finds the same hub; another hardware class is refused", async () => {
      const url = new URL(freshSchemaUrl("unused"));
      url.searchParams.set("schema", schema);
      const again = await startHub({ db: url.toString(), projectDir: p.root, dataDir, port: 0 });
      try {
        expect(((await (await fetch(`${again.url}/api/program`)).json()) as Json).rootCommit).toBe(root);
      } finally {
        await again.close();
      }
      await expect(
        startHub({ db: url.toString(), projectDir: p.root, dataDir, port: 0, hardwareClass: "h100" }),
      ).rejects.toMatchObject({ code: "HUB_STATE_MISMATCH" });
      await expect(
        startHub({ db: url.toString(), projectDir: p.root, dataDir: tempDir(), port: 0 }),
      ).rejects.toMatchObject({ code: "HUB_STATE_MISMATCH" });
    });
  });

  describe("an honest claim", () => {
    it("passes every gate: 202 verifying, in the DAG, an event, the verifier woken", async () => {
      const { claim, commit } = await prepared(alice, { "train.py": "LR = 0.05\n" });
      const before = await counts();
      const r = await post(alice, claim);
      expect(r).toEqual({ status: 202, body: { id: claimId(claim), kind: "frontier", status: "verifying" } });
      expect(await counts()).toEqual({
        claims: before.claims + 1,
        events: before.events + 1,
        commits: before.commits + 1,
      });
      expect(woken.at(-1)).toEqual([claimId(claim), "frontier", "verifying"]);
      const state = await json(await api(`/api/claims/${claimId(claim)}`));
      expect(state.body).toMatchObject({
        id: claimId(claim),
        kind: "frontier",
        status: "verifying",
        contributor: alice.id.keyId,
        parent: root,
        commit,
        claimedValue: 0.9,
        verifiers: [],
      });
      const children = await json(await api(`/api/dag/children/${root}`));
      expect(children.body.commits).toContainEqual({
        sha: commit,
        parent: root,
        subject: "candidate",
        claim: { id: claimId(claim), status: "verifying", contributor: alice.id.keyId },
      });
      const lineage = await json(await api(`/api/dag/lineage/${commit}`));
      expect(lineage.body.commits.map((c: { sha: string }) => c.sha)).toEqual([root, commit]);
      const events = await json(await api("/api/findings?after=0"));
      expect(events.body.events.at(-1)).toMatchObject({
        kind: "claim",
        payload: { claimId: claimId(claim), commit, kind: "frontier" },
      });
      // A bundle of the whole history of any commit in the DAG.
      const b = await api(`/api/bundle/${commit}`);
      expect(b.status).toBe(200);
      const file = join(tempDir(), "h.bundle");
      writeFileSync(file, Buffer.from(await b.arrayBuffer()));
      const clone = tempDir();
      gitSync(clone, "init", "-q");
      gitSync(clone, "fetch", "-q", file, `refs/hub/c/${commit}:refs/heads/x`);
      expect(gitSync(clone, "rev-parse", "x")).toBe(commit);
    });

    it("a replay (the same claim, re-encoded) answers 200 with its state and stores nothing", async () => {
      const { claim } = await prepared(alice);
      expect((await post(alice, claim)).status).toBe(202);
      const before = await counts();
      const calls = woken.length;
      // Another key order and whitespace: the same claim id.
      const reencoded = `{ "signature": ${JSON.stringify(claim.signature)}, "claim": ${new TextDecoder().decode(canonicalBytes(claim.claim))} }`;
      const r = await post(alice, reencoded);
      expect(r).toEqual({
        status: 200,
        body: { id: claimId(claim), kind: "frontier", status: "verifying", replay: true },
      });
      expect(await counts()).toEqual(before);
      expect(woken.length).toBe(calls);
    });

    it("frontier when the claim beats the head's recorded value, else a finding: checked for a new identity, sampled for a trusted one", async () => {
      await pgQuery(`UPDATE ${schema}.hub_chain SET value = 0.95 WHERE seq = 1`);
      try {
        const better = await prepared(bob, undefined, { values: [0.9, 0.9, 0.9] });
        expect((await post(bob, better.claim)).body).toMatchObject({ kind: "frontier", status: "verifying" });
        draw = 0.99;
        const worse = await prepared(bob, undefined, { values: [1, 1, 1] });
        // A new identity's findings are always checked (fewer than 10 verified in a row).
        expect((await post(bob, worse.claim)).body).toMatchObject({ kind: "finding", status: "checking" });
        await pgQuery(`UPDATE ${schema}.hub_identities SET consecutive = 100 WHERE key_id = $1`, [
          bob.id.keyId,
        ]);
        const sampled = await prepared(bob, undefined, { values: [1, 1, 1] });
        const r = await post(bob, sampled.claim);
        expect(r.body).toMatchObject({ kind: "finding", status: "recorded" });
        // A finding not sampled is a refuted idea in the feed at once.
        const events = await json(await api("/api/findings?after=0"));
        expect(events.body.events.at(-1)).toMatchObject({ kind: "refuted", payload: { claimId: r.body.id } });
        draw = 0.01;
        const checked = await prepared(bob, undefined, { values: [1, 1, 1] });
        expect((await post(bob, checked.claim)).body).toMatchObject({ kind: "finding", status: "checking" });
      } finally {
        draw = 0.5;
        await pgQuery(`UPDATE ${schema}.hub_chain SET value = NULL WHERE seq = 1`);
      }
    });
  });

  describe("gate 1: body size", () => {
    it("refuses a claim over 64 KiB from its Content-Length, before reading it", async () => {
      const before = await counts();
      const r = await api("/api/claims", {
        method: "POST",
        headers: auth(alice),
        body: "x".repeat(70 * 1024),
      });
      expect(r.status).toBe(413);
      expect(await codeOf(r)).toBe("too_large");
      expect(await counts()).toEqual(before);
    });

    it("refuses a chunked claim (no Content-Length) once it passes 64 KiB", async () => {
      const chunk = new Uint8Array(16 * 1024).fill(120);
      let sent = 0;
      const body = new ReadableStream<Uint8Array>({
        pull(ctl) {
          if (sent++ < 8) ctl.enqueue(chunk);
          else ctl.close();
        },
      });
      const r = await api("/api/claims", {
        method: "POST",
        headers: auth(alice),
        body,
        duplex: "half",
      } as RequestInit);
      expect(r.status).toBe(413);
      expect(await codeOf(r)).toBe("too_large");
    });

    it("refuses an oversized bundle, declared or not", async () => {
      const big = randomBytes(300 * 1024);
      const sha = sha256Hex(big);
      const r = await api(`/api/bundles/${sha}`, { method: "PUT", headers: auth(alice), body: big });
      expect(r.status).toBe(413);
      expect(await codeOf(r)).toBe("too_large");
      let i = 0;
      const body = new ReadableStream<Uint8Array>({
        pull(ctl) {
          if (i++ < 5) ctl.enqueue(big.subarray(0, 64 * 1024));
          else ctl.close();
        },
      });
      const r2 = await api(`/api/bundles/${sha}`, {
        method: "PUT",
        headers: auth(alice),
        body,
        duplex: "half",
      } as RequestInit);
      expect(r2.status).toBe(413);
      expect((await pgQuery(`SELECT 1 FROM ${schema}.hub_bundles WHERE sha256 = $1`, [sha])).length).toBe(0);
    });
  });

  describe("gate 2: token and quarantine", () => {
    it("refuses no token and an unknown token (401 token)", async () => {
      const { claim } = await prepared(alice);
      const before = await counts();
      for (const headers of [
        {},
        { authorization: `Bearer ${randomBytes(32).toString("base64url")}` },
        { authorization: "Basic x" },
      ]) {
        const r = await api("/api/claims", { method: "POST", headers, body: JSON.stringify(claim) });
        expect(r.status).toBe(401);
        expect(await codeOf(r)).toBe("token");
      }
      const put = await api(`/api/bundles/${"0".repeat(64)}`, { method: "PUT", body: "x" });
      expect(put.status).toBe(401);
      expect(await counts()).toEqual(before);
    });

    it("refuses a quarantined identity (403 quarantined)", async () => {
      const eve = await register();
      const { claim } = await prepared(eve);
      await pgQuery(
        `UPDATE ${schema}.hub_identities SET quarantined_at = now(), quarantine_reason = 'a contradicted claim' WHERE key_id = $1`,
        [eve.id.keyId],
      );
      await refused(eve, claim, 403, "quarantined", /contradicted/);
    });
  });

  describe("gate 4: shape, key, signature", () => {
    it("refuses what is not a signed claim (400 malformed)", async () => {
      await refused(alice, "not json", 400, "malformed", /not JSON/);
      await refused(alice, { claim: {}, signature: "x" }, 400, "malformed");
      await refused(alice, [], 400, "malformed");
      const { claim } = await prepared(alice);
      await refused(alice, { ...claim, extra: 1 }, 400, "malformed");
      // 1e400 is valid JSON and reads as Infinity: refused before any signature check.
      const text = JSON.stringify(claim).replace(/"val_loss":\[[^\]]*\]/, '"val_loss":[1e400,1,1]');
      await refused(alice, text, 400, "malformed", /finite|number/);
    });

    it("refuses a claim signed by another key (403 wrong_key)", async () => {
      const { claim } = await prepared(alice);
      await refused(bob, claim, 403, "wrong_key");
    });

    it("refuses a forged signature and a claim altered after signing (403 bad_signature)", async () => {
      const { claim } = await prepared(alice);
      const altered = { ...claim, claim: { ...claim.claim, metrics: { val_loss: [0.1, 0.1, 0.1] } } };
      await refused(alice, altered, 403, "bad_signature");
      const forged = { ...claim, signature: randomBytes(64).toString("base64url") };
      await refused(alice, forged, 403, "bad_signature");
    });
  });

  describe("gate 5: freshness", () => {
    it("refuses a stale claim and one from the future (400 too_old / in_future); a skew inside the window passes", async () => {
      const old = await prepared(alice, undefined, {
        over: { createdAt: new Date(now - 11 * 60_000).toISOString() },
      });
      await refused(alice, old.claim, 400, "too_old");
      const future = await prepared(alice, undefined, {
        over: { createdAt: new Date(now + 11 * 60_000).toISOString() },
      });
      await refused(alice, future.claim, 400, "in_future");
      const skewed = await prepared(alice, undefined, {
        over: { createdAt: new Date(now + 9 * 60_000).toISOString() },
      });
      expect((await post(alice, skewed.claim)).status).toBe(202);
    });
  });

  describe("gate 6: the hub's terms", () => {
    it("refuses another hardware class, budget, too few seeds, no objective, values outside the bounds", async () => {
      const cases: Array<[Parameters<typeof prepared>[2], string]> = [
        [{ over: { hardwareClass: "h100-80g" } }, "hardware_class"],
        [{ over: { budgetS: 30 } }, "budget"],
        [{ values: [0.9, 0.9] }, "seeds"],
        [{ over: { seeds: [1, 2, 3], metrics: { accuracy: [1, 1, 1] } } }, "metric"],
        [{ values: [0.9, 1e300, 0.9] }, "bounds"],
        [{ values: [0.9, -1, 0.9] }, "bounds"],
      ];
      for (const [o, code] of cases) {
        const { claim } = await prepared(alice, undefined, o);
        await refused(alice, claim, 422, code);
      }
    });
  });

  describe("gate 7: the parent", () => {
    it("refuses a parent the hub does not know (404 unknown_parent)", async () => {
      const { claim } = await prepared(alice, undefined, { over: { parent: "b".repeat(40) } });
      await refused(alice, claim, 404, "unknown_parent");
    });
  });

  describe("gates 8-9: the bundle, the scope", () => {
    it("refuses a bundle never uploaded (409 bundle_missing)", async () => {
      const c = candidate(p, root, { "train.py": "LR = 7\n" });
      const claim = signedClaimFor(alice.id, {
        parent: root,
        bundleSha256: sha256Hex(readFileSync(c.bundle)),
        createdAt: now,
      });
      await refused(alice, claim, 409, "bundle_missing");
    });

    it("refuses an upload whose bytes do not hash to its name (400 bundle_hash)", async () => {
      const c = candidate(p, root, { "train.py": "LR = 8\n" });
      const r = await api(`/api/bundles/${"c".repeat(64)}`, {
        method: "PUT",
        headers: auth(alice),
        body: readFileSync(c.bundle),
      });
      expect(r.status).toBe(400);
      expect(await codeOf(r)).toBe("bundle_hash");
      expect(
        (await pgQuery(`SELECT 1 FROM ${schema}.hub_bundles WHERE sha256 = $1`, ["c".repeat(64)])).length,
      ).toBe(0);
    });

    it("a bundle uploaded twice: 201 then 200", async () => {
      const c = candidate(p, root, { "train.py": "LR = 9\n" });
      const data = readFileSync(c.bundle);
      const sha = sha256Hex(data);
      const put = () => api(`/api/bundles/${sha}`, { method: "PUT", headers: auth(alice), body: data });
      expect((await put()).status).toBe(201);
      expect((await put()).status).toBe(200);
    });

    async function claimOfBundle(who: Who, bundle: string) {
      const sha = await upload(who, bundle);
      return signedClaimFor(who.id, { parent: root, bundleSha256: sha, createdAt: now });
    }

    it("refuses an unrelated history and a bundle with two heads (422 bundle)", async () => {
      const other = tempDir();
      gitSync(other, "init", "-q");
      writeFileSync(join(other, "train.py"), "evil\n");
      gitSync(other, "add", "-A");
      gitSync(other, "commit", "-q", "-m", "unrelated");
      const u = join(tempDir(), "u.bundle");
      gitSync(other, "bundle", "create", "-q", u, "HEAD");
      await refused(alice, await claimOfBundle(alice, u), 422, "bundle", /does not descend/);

      const t = Date.now();
      candidate(p, root, { "train.py": "LR = 3\n" }, { branch: `g-two-a-${t}` });
      candidate(p, root, { "train.py": "LR = 4\n" }, { branch: `g-two-b-${t}` });
      const two = join(tempDir(), "two.bundle");
      gitSync(p.root, "bundle", "create", "-q", two, `^${root}`, `g-two-a-${t}`, `g-two-b-${t}`);
      await refused(alice, await claimOfBundle(alice, two), 422, "bundle", /exactly one head/);

      const junk = join(tempDir(), "junk.bundle");
      writeFileSync(junk, randomBytes(1000));
      await refused(alice, await claimOfBundle(alice, junk), 422, "bundle", /not a git bundle/);
    });

    it("refuses an edit of a protected file (422 protected) and edits or new files outside editable (422 scope)", async () => {
      const prot = await prepared(alice, { "train.py": "LR = 1\n", "evaluate.py": "print('val_loss: 0')\n" });
      await refused(alice, prot.claim, 422, "protected", /evaluate\.py/);
      const out = await prepared(alice, { "README.md": "mine now\n" });
      await refused(alice, out.claim, 422, "scope", /README\.md/);
      const added = await prepared(alice, { "train.py": "LR = 2\n", "helper.py": "x = 1\n" });
      await refused(alice, added.claim, 422, "scope", /helper\.py/);
    });

    it("refuses a symbolic link out of the project and a submodule (422 bundle)", async () => {
      const branch = `g-link-${Date.now()}`;
      gitSync(p.root, "checkout", "-q", "-b", branch, root);
      symlinkSync("/etc/passwd", join(p.root, "src", "passwd.py"));
      p.commitAll("link");
      const f = join(tempDir(), "l.bundle");
      gitSync(p.root, "bundle", "create", "-q", f, `${root}..${branch}`);
      gitSync(p.root, "checkout", "-q", "--detach", root);
      await refused(alice, await claimOfBundle(alice, f), 422, "bundle", /symbolic link/);

      const b2 = `g-sub-${Date.now()}`;
      gitSync(p.root, "checkout", "-q", "-b", b2, root);
      gitSync(p.root, "update-index", "--add", "--cacheinfo", `160000,${root},src/vendor`);
      gitSync(p.root, "commit", "-q", "--no-verify", "-m", "gitlink");
      const f2 = join(tempDir(), "s.bundle");
      gitSync(p.root, "bundle", "create", "-q", f2, `${root}..${b2}`);
      gitSync(p.root, "checkout", "-q", "-f", "--detach", root);
      await refused(alice, await claimOfBundle(alice, f2), 422, "bundle", /submodule/);
    });
  });

  describe("gate 10: duplicates", () => {
    it("refuses the same tree on the same parent, by the same identity and by another (409 duplicate)", async () => {
      const files = { "train.py": "LR = 0.123\n" };
      const first = await prepared(alice, files);
      expect((await post(alice, first.claim)).status).toBe(202);
      // The same bundle, a new nonce: a new claim id, the same tree.
      const again = signedClaimFor(alice.id, {
        parent: root,
        bundleSha256: first.claim.claim.bundleSha256,
        createdAt: now,
      });
      await refused(alice, again, 409, "duplicate");
      // Another identity, another commit (another message), the same tree.
      const c = candidate(p, root, files, { message: "my own idea, honest" });
      const sha = await upload(bob, c.bundle);
      await refused(
        bob,
        signedClaimFor(bob.id, { parent: root, bundleSha256: sha, createdAt: now }),
        409,
        "duplicate",
      );
    });
  });

  describe("races", () => {
    it("the same claim sent 6 times at once: one 202, the rest 200 with its state, one row", async () => {
      const { claim } = await prepared(alice);
      const before = await counts();
      const answers = await Promise.all(Array.from({ length: 6 }, () => post(alice, claim)));
      expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 200, 200, 202]);
      expect(new Set(answers.map((a) => a.body.id))).toEqual(new Set([claimId(claim)]));
      expect(await counts()).toEqual({
        claims: before.claims + 1,
        events: before.events + 1,
        commits: before.commits + 1,
      });
    });

    it("the same tree claimed by two identities at once: one 202, one 409 duplicate", async () => {
      const files = { "train.py": `LR = ${Math.random()}\n` };
      const a = await prepared(alice, files);
      const c = candidate(p, root, files, { message: "bob's copy" });
      const sha = await upload(bob, c.bundle);
      const b = signedClaimFor(bob.id, { parent: root, bundleSha256: sha, createdAt: now });
      const before = await counts();
      const answers = await Promise.all([post(alice, a.claim), post(bob, b)]);
      expect(answers.map((x) => x.status).sort()).toEqual([202, 409]);
      expect(answers.find((x) => x.status === 409)?.body.error.code).toBe("duplicate");
      expect((await counts()).claims).toBe(before.claims + 1);
    });

    it("a commit already in the DAG, claimed again on an older ancestor: 409 duplicate", async () => {
      const c1 = await prepared(alice, { "train.py": "LR = 0.31\n" });
      expect((await post(alice, c1.claim)).status).toBe(202);
      const c2 = await prepared(alice, { "src/model.py": "W = 31\n" }, { parent: c1.commit });
      expect((await post(alice, c2.claim)).status).toBe(202);
      // The same commit c2, bundled from the root, claimed on the root.
      const f = join(tempDir(), "again.bundle");
      gitSync(p.root, "branch", "-f", `again-${Date.now()}`, c2.commit);
      gitSync(p.root, "bundle", "create", "-q", f, `${root}..${c2.commit}`, "--branches=again-*");
      const sha = await upload(alice, f);
      const again = signedClaimFor(alice.id, { parent: root, bundleSha256: sha, createdAt: now });
      await refused(alice, again, 409, "duplicate", new RegExp(`commit ${c2.commit}`));
    });
  });

  describe("registration", () => {
    it("refuses a key registered already (409 registered) and a malformed key (400 malformed)", async () => {
      const r = await api("/api/register", {
        method: "POST",
        body: JSON.stringify({ publicKey: alice.id.publicKey }),
      });
      expect(r.status).toBe(409);
      expect(await codeOf(r)).toBe("registered");
      for (const body of ['{"publicKey":"abc"}', "{}", "nope", '{"publicKey":[1]}']) {
        const m = await api("/api/register", { method: "POST", body });
        expect(m.status).toBe(400);
        expect(await codeOf(m)).toBe("malformed");
      }
      const big = await api("/api/register", { method: "POST", body: "x".repeat(5000) });
      expect(big.status).toBe(413);
    });
  });

  describe("limits per address and per identity (apps sharing the hub's store, addresses as node-server gives them)", () => {
    let t = now;
    function app(limits: HubAppDeps["limits"], o: { identityCacheMs?: number } = {}) {
      return createHubApp({
        store: hub.store,
        repo: hub.repo,
        bundlesDir: join(dataDir, "bundles"),
        hardwareClass: "cpu",
        clock: () => t,
        log: (m) => {
          throw new Error(m);
        },
        limits,
        ...o,
      });
    }
    const from = (address: string) => ({ incoming: { socket: { remoteAddress: address } } });
    const registerAt = (a: ReturnType<typeof app>, address: string) =>
      a.request(
        "/api/register",
        { method: "POST", body: JSON.stringify({ publicKey: generateIdentity().publicKey }) },
        from(address),
      );

    it("a registration flood from one address: the daily quota (429 quota), while another address registers", async () => {
      const a = app({ registrationsPerDay: 3, addressRate: { capacity: 100, refillPerS: 1 } });
      for (let i = 0; i < 3; i++) expect((await registerAt(a, "203.0.113.7")).status).toBe(201);
      const r = await registerAt(a, "203.0.113.7");
      expect(r.status).toBe(429);
      expect(await codeOf(r)).toBe("quota");
      expect(r.headers.get("retry-after")).toBeTruthy();
      // IPv6: a /64 is one address (one host usually holds the whole /64).
      for (let i = 0; i < 3; i++) expect((await registerAt(a, `2001:db8:1:2::${i + 1}`)).status).toBe(201);
      expect((await registerAt(a, "2001:db8:1:2:ffff::9")).status).toBe(429);
      expect((await registerAt(a, "2001:db8:1:3::1")).status).toBe(201);
      expect((await registerAt(a, "198.51.100.1")).status).toBe(201);
      a.close();
    });

    it("the rate limit per address (429 rate_limited with Retry-After), refilled by the clock", async () => {
      const a = app({ addressRate: { capacity: 2, refillPerS: 0.5 }, registrationsPerDay: 100 });
      expect((await registerAt(a, "192.0.2.1")).status).toBe(201);
      expect((await registerAt(a, "192.0.2.1")).status).toBe(201);
      const r = await registerAt(a, "192.0.2.1");
      expect(r.status).toBe(429);
      expect(await codeOf(r)).toBe("rate_limited");
      expect(r.headers.get("retry-after")).toBe("2");
      expect((await registerAt(a, "192.0.2.2")).status).toBe(201);
      t += 2000;
      expect((await registerAt(a, "192.0.2.1")).status).toBe(201);
      a.close();
    });

    it("the rate limit per identity (429 rate_limited) across addresses", async () => {
      const a = app({ identityRate: { capacity: 2, refillPerS: 0.001 } });
      const { claim } = await prepared(alice);
      const send = (address: string) =>
        a.request(
          "/api/claims",
          { method: "POST", headers: auth(alice), body: JSON.stringify(claim) },
          from(address),
        );
      expect((await send("192.0.2.10")).status).toBe(202);
      expect((await send("192.0.2.11")).status).toBe(200); // a replay, still counted
      const r = await send("192.0.2.12");
      expect(r.status).toBe(429);
      expect(await codeOf(r)).toBe("rate_limited");
      a.close();
    });

    it("the daily claim quota per identity (429 quota), counted from the tables", async () => {
      const [row] = await pgQuery<{ n: string }>(
        `SELECT count(*) AS n FROM ${schema}.hub_claims WHERE contributor = $1`,
        [alice.id.keyId],
      );
      const a = app({ claimsPerDay: Number(row?.n) });
      const { claim } = await prepared(alice);
      const r = await a.request(
        "/api/claims",
        { method: "POST", headers: auth(alice), body: JSON.stringify(claim) },
        from("192.0.2.20"),
      );
      expect(r.status).toBe(429);
      expect(await codeOf(r)).toBe("quota");
      // A day later the same identity may claim again.
      t = now + 25 * 3600_000;
      const later = signedClaimFor(alice.id, {
        parent: root,
        bundleSha256: claim.claim.bundleSha256,
        createdAt: t,
      });
      const ok = await a.request(
        "/api/claims",
        { method: "POST", headers: auth(alice), body: JSON.stringify(later) },
        from("192.0.2.20"),
      );
      expect(ok.status).toBe(202);
      t = now;
      a.close();
    });

    // The server keeps a token's identity in memory for identityCacheMs (an hour here, so the
    // stale view is certain): the insert re-reads the identity's row, locked, in its transaction.
    const sendAs = (a: ReturnType<typeof app>, who: Who, body: unknown, address: string) =>
      a.request(
        "/api/claims",
        { method: "POST", headers: auth(who), body: JSON.stringify(body) },
        from(address),
      );
    const unknownParent = (who: Who) =>
      signedClaimFor(who.id, { parent: "f".repeat(40), bundleSha256: "b".repeat(64), createdAt: t });

    it("an identity quarantined after the server cached it: its next claim is refused at the insert (403 quarantined), nothing stored", async () => {
      const eve = await register();
      const { claim } = await prepared(eve);
      const a = app({}, { identityCacheMs: 3_600_000 });
      // The server reads eve's identity (not quarantined) and keeps it.
      expect(await codeOf(await sendAs(a, eve, unknownParent(eve), "192.0.2.60"))).toBe("unknown_parent");
      await pgQuery(
        `UPDATE ${schema}.hub_identities SET quarantined_at = now(), quarantine_reason = 'a contradicted claim' WHERE key_id = $1`,
        [eve.id.keyId],
      );
      const before = await counts();
      const r = await sendAs(a, eve, claim, "192.0.2.60");
      expect(r.status).toBe(403);
      expect(((await r.json()) as Json).error).toMatchObject({
        code: "quarantined",
        message: /contradicted/,
      });
      expect(await counts()).toEqual(before);
      // The refusal updates the server's view: the next claim is refused at the cheap gate.
      expect(await codeOf(await sendAs(a, eve, unknownParent(eve), "192.0.2.60"))).toBe("quarantined");
      a.close();
    });

    it("the daily quota across two servers on one database: the insert counts under the identity's row lock (429 quota)", async () => {
      const carol = await register();
      const one = app({ claimsPerDay: 1 }, { identityCacheMs: 3_600_000 });
      const two = app({ claimsPerDay: 1 }, { identityCacheMs: 3_600_000 });
      // The first server reads carol's identity with 0 claims today and keeps it.
      expect(await codeOf(await sendAs(one, carol, unknownParent(carol), "192.0.2.61"))).toBe(
        "unknown_parent",
      );
      // The second server stores carol's one claim of the day.
      expect((await sendAs(two, carol, (await prepared(carol)).claim, "192.0.2.62")).status).toBe(202);
      const { claim } = await prepared(carol);
      const before = await counts();
      const r = await sendAs(one, carol, claim, "192.0.2.61");
      expect(r.status).toBe(429);
      expect(await codeOf(r)).toBe("quota");
      expect(await counts()).toEqual(before);
      one.close();
      two.close();
    });

    it("values near the largest double: the mean is taken without overflow (no bounds set: taken, the verifiers judge it)", async () => {
      const a = app({ bounds: {} });
      const { claim } = await prepared(alice, undefined, { values: [1.7e308, 1.7e308, 1.7e308] });
      const ok = await prepared(alice, undefined, { values: [1.7e308, -1.7e308, 1] });
      const send = (body: unknown) =>
        a.request(
          "/api/claims",
          { method: "POST", headers: auth(alice), body: JSON.stringify(body) },
          from("192.0.2.40"),
        );
      const r = await send(claim);
      // Σ v/n never overflows where Σ v would (3 × 1.7e308).
      expect(r.status).toBe(202);
      expect((await send(ok.claim)).status).toBe(202);
      a.close();
    });

    it("event feeds open at once per address (429 rate_limited); a closed one frees its place", async () => {
      const a = app({ feedsPerAddress: 2 });
      const open = () => a.request("/api/feed", {}, from("192.0.2.50"));
      const f1 = await open();
      const f2 = await open();
      expect([f1.status, f2.status]).toEqual([200, 200]);
      const f3 = await open();
      expect(f3.status).toBe(429);
      expect(await codeOf(f3)).toBe("rate_limited");
      expect((await a.request("/api/feed", {}, from("192.0.2.51"))).status).toBe(200);
      // The first stream's reader goes away: its place is free again once the stream ends.
      const reader = (f1.body as ReadableStream<Uint8Array>).getReader();
      await reader.read();
      await reader.cancel();
      let again = await open();
      for (let i = 0; i < 250 && again.status === 429; i++) {
        await new Promise((r) => setTimeout(r, 20));
        again = await open();
      }
      expect(again.status).toBe(200);
      a.close();
    });

    it("the daily bundle bytes per identity (429 quota)", async () => {
      const a = app({ bundleBytesPerDay: 1 });
      const c = candidate(p, root, { "train.py": "LR = 0.777\n" });
      const data = readFileSync(c.bundle);
      const r = await a.request(
        `/api/bundles/${sha256Hex(data)}`,
        { method: "PUT", headers: auth(bob), body: data },
        from("192.0.2.30"),
      );
      expect(r.status).toBe(429);
      expect(await codeOf(r)).toBe("quota");
      a.close();
    });
  });

  describe("the wrapper", () => {
    it("answers an unexpected error (a bug) with a logged 500 JSON, no stack trace", async () => {
      const logs: string[] = [];
      const broken = Object.create(hub.store, {
        leaderboard: {
          value: async () => {
            throw new Error("boom at /secret/path");
          },
        },
      });
      const a = createHubApp({
        store: broken,
        repo: hub.repo,
        bundlesDir: join(dataDir, "bundles"),
        hardwareClass: "cpu",
        log: (m) => logs.push(m),
      });
      const r = await a.request("/api/leaderboard");
      expect(r.status).toBe(500);
      const text = await r.text();
      expect(JSON.parse(text)).toEqual({
        error: { code: "internal", message: "the hub failed on this request (logged)" },
      });
      expect(text).not.toMatch(/boom|secret/);
      expect(logs.join("\n")).toMatch(/GET \/api\/leaderboard: unexpected error: Error: boom/);
      a.close();
    });
  });

  describe("the database down", () => {
    it("answers 503 unavailable with Retry-After (not a 500: nothing is broken in the hub)", async () => {
      const logs: string[] = [];
      const dead = new pg.Pool({
        connectionString: "postgres://nobody@127.0.0.1:1/none",
        connectionTimeoutMillis: 2000,
      });
      dead.on("error", () => {});
      const a = createHubApp({
        store: new HubStore(dead, schema),
        repo: hub.repo,
        bundlesDir: join(dataDir, "bundles"),
        hardwareClass: "cpu",
        log: (m) => logs.push(m),
      });
      for (const path of ["/api/chain", "/api/program"]) {
        const r = await a.request(path);
        expect(r.status, path).toBe(503);
        expect(r.headers.get("retry-after")).toBe("5");
        expect(await codeOf(r)).toBe("unavailable");
      }
      const claim = await a.request("/api/claims", { method: "POST", headers: auth(alice), body: "{}" });
      expect(claim.status).toBe(503);
      expect(logs.join("\n")).toMatch(/database is unavailable/);
      a.close();
      await dead.end();
    });
  });

  describe("reading", () => {
    it("answers malformed ids and unknown ones with 400 / 404 JSON", async () => {
      for (const [path, status] of [
        ["/api/claims/zz", 400],
        [`/api/claims/${"d".repeat(64)}`, 404],
        ["/api/dag/children/xyz", 400],
        [`/api/dag/lineage/${"e".repeat(40)}`, 404],
        [`/api/bundle/${"e".repeat(40)}`, 404],
        ["/api/findings?after=-1", 400],
        ["/api/nothing", 404],
      ] as const) {
        const r = await api(path);
        expect(r.status, path).toBe(status);
        expect(typeof (await codeOf(r))).toBe("string");
      }
    });

    it("the leaderboard counts claims per contributor", async () => {
      const board = (await json(await api("/api/leaderboard"))).body.entries as Array<
        Record<string, unknown>
      >;
      expect(board.find((e) => e.contributor === alice.id.keyId)).toMatchObject({ accepted: 0, credit: 0 });
      expect(Number(board.find((e) => e.contributor === alice.id.keyId)?.claims)).toBeGreaterThan(1);
    });

    it("the feed sends the events as SSE and resumes after Last-Event-ID", async () => {
      const all = (await json(await api("/api/findings?after=0"))).body.events as Array<{
        seq: number;
        kind: string;
      }>;
      expect(all.length).toBeGreaterThan(2);
      const second = all[1] as { seq: number };
      const ctl = new AbortController();
      const r = await api("/api/feed", {
        headers: { "last-event-id": String(second.seq) },
        signal: ctl.signal,
      });
      expect(r.headers.get("content-type")).toMatch(/text\/event-stream/);
      const reader = (r.body as ReadableStream<Uint8Array>).getReader();
      let text = "";
      const want = all.at(-1) as { seq: number };
      while (!text.includes(`id: ${want.seq}\n`)) {
        const { value, done } = await reader.read();
        if (done) break;
        text += new TextDecoder().decode(value);
      }
      ctl.abort();
      const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
      expect(ids).toEqual(all.slice(2).map((e) => e.seq));
      expect(text).toMatch(/event: (claim|refuted)\n/);
    });
  });
});
