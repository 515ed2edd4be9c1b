/**
 * The hub's API fuzzed (property-based, fast-check): arbitrary methods, paths, headers and
 * bodies — random JSON, random bytes, valid claims mutated (and re-signed, so they reach the
 * gates behind the signature), huge strings, deep nesting — against a real store (PostgreSQL)
 * and a real repository. The property: never a 5xx, and every error is JSON
 * `{error: {code, message}}`; the handler wrapper logs nothing (a logged error is a 500: a bug).
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { serve } from "@hono/node-server";
import fc from "fast-check";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Claim, signClaim } from "../src/hub/claim.ts";
import { sha256Hex } from "../src/hub/gates.ts";
import { generateIdentity } from "../src/hub/identity.ts";
import { HubRepo } from "../src/hub/repo.ts";
import { migrateHub } from "../src/hub/schema.ts";
import { createHubApp, type HubApp } from "../src/hub/server.ts";
import { HubStore } from "../src/hub/store.ts";
import { cleanupTemp, gitSync, tempDir } from "./helpers/git-project.ts";
import { candidate, hubProject, signedClaimFor } from "./helpers/hub-project.ts";
import { dropSchemas, freshSchemaUrl, PG_SKIP, PG_SKIP_REASON } from "./helpers/pg.ts";

const ROUTES = [
  "/",
  "/api/register",
  "/api/program",
  "/api/bundle/:sha",
  "/api/dag/leaves",
  "/api/dag/children/:sha",
  "/api/dag/lineage/:sha",
  "/api/bundles/:sha256",
  "/api/claims",
  "/api/claims/:id",
  "/api/chain",
  "/api/leaderboard",
  "/api/findings",
  "/api/feed",
  "/api/health",
];

describe.skipIf(PG_SKIP)(`the hub's API under fuzzing${PG_SKIP ? ` (${PG_SKIP_REASON})` : ""}`, () => {
  const p = hubProject();
  const root = p.head as string;
  const logged: string[] = [];
  let pool: pg.Pool;
  let app: HubApp;
  let token: string;
  const me = generateIdentity();
  let bundleSha: string;
  let commit: string;
  let base: Claim;

  beforeAll(async () => {
    const url = new URL(freshSchemaUrl("hubf"));
    const schema = url.searchParams.get("schema") as string;
    url.searchParams.delete("schema");
    pool = new pg.Pool({ connectionString: url.toString(), max: 4 });
    await migrateHub(pool, schema);
    const dataDir = tempDir("autolab-hub-fuzz-");
    const repo = await HubRepo.open({ dataDir, projectDir: p.root });
    const store = new HubStore(pool, schema);
    await store.initRoot({
      root,
      tree: gitSync(p.root, "rev-parse", `${root}^{tree}`),
      subject: "init",
      hardwareClass: "cpu",
      at: new Date(),
    });
    app = createHubApp({
      store,
      repo,
      bundlesDir: join(dataDir, "bundles"),
      hardwareClass: "cpu",
      log: (m) => logged.push(m),
      heartbeatMs: 50,
      feedPollMs: 50,
      limits: {
        bundleBytes: 64 * 1024,
        identityRate: { capacity: 1e9, refillPerS: 1e9 },
        addressRate: { capacity: 1e9, refillPerS: 1e9 },
        registrationsPerDay: 1e9,
        bounds: { val_loss: { min: 0, max: 1e6 } },
      },
    });
    const reg = await app.request("/api/register", {
      method: "POST",
      body: JSON.stringify({ publicKey: me.publicKey }),
    });
    token = ((await reg.json()) as { token: string }).token;
    const c = candidate(p, root, { "train.py": "LR = 0.01\n" });
    commit = c.commit;
    const data = readFileSync(c.bundle);
    bundleSha = sha256Hex(data);
    const put = await app.request(`/api/bundles/${bundleSha}`, {
      method: "PUT",
      headers: { authorization: `Bearer ${token}` },
      body: data,
    });
    expect(put.status).toBe(201);
    base = signedClaimFor(me, { parent: root, bundleSha256: bundleSha, createdAt: Date.now() }).claim;
  });

  afterAll(async () => {
    app?.close();
    await pool?.end();
    await dropSchemas();
    cleanupTemp();
  });

  const hex = (n: number) => fc.stringMatching(new RegExp(`^[0-9a-f]{${n}}$`));
  const segment = () =>
    fc.oneof(
      hex(40),
      hex(64),
      fc.constant(root),
      fc.constantFrom("..", ".", "%", "%00", "%2e%2e", "%ff%fe", "a%2Fb", "null", "-1", "1e400", "😀", ""),
      fc.string({ maxLength: 80 }),
      fc.string({ unit: "binary", maxLength: 40 }).map(encodeURIComponent),
      fc.nat(2000).map((n) => "x".repeat(n * 10)),
    );
  const path = () =>
    fc.oneof(
      fc
        .tuple(fc.constantFrom(...ROUTES), segment(), fc.option(fc.string({ maxLength: 40 })))
        .map(
          ([r, s, q]) =>
            `${r.replace(/:[a-z0-9]+/, () => s)}${q === null ? "" : `?after=${encodeURIComponent(q)}`}`,
        ),
      fc.webPath(),
      fc.array(segment(), { maxLength: 6 }).map((s) => `/api/${s.join("/")}`),
    );

  /** A claim with one field replaced, re-signed when the result is still a valid claim. */
  const mutatedClaim = () =>
    fc
      .record({
        field: fc.constantFrom(...(Object.keys(base) as Array<keyof Claim>), "extra" as keyof Claim),
        value: fc.oneof(
          { arbitrary: fc.jsonValue(), weight: 2 },
          {
            arbitrary: fc.oneof(
              hex(40),
              hex(64),
              fc.constant(root),
              fc.constant(commit),
              fc.constant(bundleSha),
            ),
            weight: 3,
          },
          { arbitrary: fc.constantFrom("cpu", "h100", 60, 30, 0, -1, 1e308), weight: 3 },
          { arbitrary: fc.uniqueArray(fc.nat(0xffffffff), { maxLength: 70 }), weight: 2 },
          {
            arbitrary: fc.dictionary(
              fc.constantFrom("val_loss", "acc", "x"),
              fc.array(fc.double({ noNaN: true, noDefaultInfinity: true }), { minLength: 3, maxLength: 3 }),
            ),
            weight: 3,
          },
          { arbitrary: fc.date({ noInvalidDate: true }).map((d) => d.toISOString()), weight: 1 },
        ),
        resign: fc.oneof(
          { arbitrary: fc.constant(true), weight: 4 },
          { arbitrary: fc.constant(false), weight: 1 },
        ),
        fresh: fc.oneof(
          { arbitrary: fc.constant(true), weight: 4 },
          { arbitrary: fc.constant(false), weight: 1 },
        ),
      })
      .map(({ field, value, resign, fresh }) => {
        const claim = {
          ...base,
          nonce: randomBytes(16).toString("base64url"),
          createdAt: fresh ? new Date().toISOString() : base.createdAt,
          [field]: value,
        } as Claim;
        if (resign) {
          try {
            return JSON.stringify(signClaim(claim, me.privateKey));
          } catch {
            // not a valid claim: sent unsigned below
          }
        }
        return JSON.stringify({ claim, signature: randomBytes(64).toString("base64url") });
      });

  const body = () =>
    fc.oneof(
      fc.constant(undefined),
      fc.jsonValue({ maxDepth: 6 }).map((v) => JSON.stringify(v)),
      fc.uint8Array({ maxLength: 2048 }),
      mutatedClaim(),
      fc.nat(200).map((n) => "a".repeat(n * 1000)),
      fc.nat(50_000).map((n) => `${"[".repeat(n)}${"]".repeat(n)}`),
      fc.nat(5000).map((n) => `{"claim":${'{"a":'.repeat(n)}1${"}".repeat(n)},"signature":"x"}`),
      fc.constant(JSON.stringify({ publicKey: generateIdentity().publicKey })),
    );

  const headers = () =>
    fc.record(
      {
        authorization: fc.oneof(
          fc.constant("TOKEN"),
          fc.string({ maxLength: 200 }).map((s) => `Bearer ${s}`),
          fc.string({ maxLength: 100 }),
        ),
        "content-type": fc.constantFrom(
          "application/json",
          "text/plain",
          "application/octet-stream",
          "multipart/form-data; boundary=x",
        ),
        "last-event-id": fc.oneof(
          fc.nat().map(String),
          fc.string({ maxLength: 30 }),
          fc.constant("99999999999999999999"),
        ),
      },
      { requiredKeys: [] },
    );

  const method = () =>
    fc.oneof(
      fc.constantFrom("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"),
      fc.stringMatching(/^[A-Z]{1,10}$/),
    );

  /** Checks one answer: below 500, and an error is JSON {error: {code, message}}. */
  async function checkAnswer(
    status: number,
    contentType: string | null,
    text: () => Promise<string>,
    head: boolean,
  ): Promise<void> {
    expect(status).toBeLessThan(500);
    // HEAD: the headers of a GET, no body.
    if (status >= 400 && !head) {
      expect(contentType).toMatch(/json/);
      const j = JSON.parse(await text()) as { error?: { code?: unknown; message?: unknown } };
      expect(typeof j.error?.code).toBe("string");
      expect(typeof j.error?.message).toBe("string");
    }
  }

  it("answers every request with a status below 500 (in-process requests)", async () => {
    await fc.assert(
      fc.asyncProperty(method(), path(), headers(), body(), async (m, pth, h, b) => {
        const hs: Record<string, string> = {};
        for (const [k, v] of Object.entries(h)) {
          const value = v === "TOKEN" ? `Bearer ${token}` : v;
          if (/^[\t\x20-\x7e\x80-\xff]*$/.test(value)) hs[k] = value;
        }
        let req: Request;
        try {
          req = new Request(`http://hub.test${pth}`, {
            method: m,
            headers: hs,
            ...(b !== undefined && m !== "GET" && m !== "HEAD" ? { body: b } : {}),
          });
        } catch {
          return; // not a request a client can send
        }
        const r = await app.request(req);
        if (r.headers.get("content-type")?.includes("event-stream")) {
          await r.body?.cancel();
          expect(r.status).toBe(200);
          return;
        }
        await checkAnswer(r.status, r.headers.get("content-type"), () => r.text(), m === "HEAD");
      }),
      { numRuns: 400 },
    );
    expect(logged).toEqual([]);
  });

  it("answers mutated claims (re-signed: they reach the gates behind the signature) below 500", async () => {
    const codes = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(mutatedClaim(), fc.boolean(), async (text, chunk) => {
        const r = await app.request("/api/claims", {
          method: "POST",
          headers: { authorization: `Bearer ${token}` },
          body: chunk ? text : text.replace(/^\{/, '{"claim":null,'),
        });
        const j = (await r.json()) as { error?: { code: string; message: string }; status?: string };
        const code = j.error?.code ?? `${r.status}`;
        codes.set(code, (codes.get(code) ?? 0) + 1);
        await checkAnswer(r.status, r.headers.get("content-type"), async () => JSON.stringify(j), false);
      }),
      { numRuns: 400 },
    );
    // The runs went past the signature: the hub's terms, the parent, the bundle, duplicates.
    const deep = [
      "hardware_class",
      "budget",
      "seeds",
      "metric",
      "bounds",
      "unknown_parent",
      "bundle_missing",
      "duplicate",
      "202",
    ];
    expect(deep.filter((c) => codes.has(c)).length, JSON.stringify([...codes])).toBeGreaterThanOrEqual(4);
    expect(logged).toEqual([]);
  });

  it("answers raw HTTP requests below 500 (node-server's parsing included)", async () => {
    const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
    await new Promise<void>((res) => server.once("listening", () => res()));
    const port = (server.address() as AddressInfo).port;
    try {
      await fc.assert(
        fc.asyncProperty(method(), path(), headers(), body(), async (m, pth, h, b) => {
          const hs: Record<string, string> = {};
          for (const [k, v] of Object.entries(h)) {
            const value = v === "TOKEN" ? `Bearer ${token}` : v;
            if (/^[\t\x20-\x7e]*$/.test(value)) hs[k] = value;
          }
          const answer = await new Promise<{ status: number; type: string | null; text: string } | undefined>(
            (res) => {
              let req: http.ClientRequest;
              try {
                req = http.request({
                  host: "127.0.0.1",
                  port,
                  method: m,
                  path: pth,
                  headers: hs,
                  agent: false,
                });
              } catch {
                res(undefined); // a path or header node's client refuses to send
                return;
              }
              req.on("response", (r) => {
                if (String(r.headers["content-type"]).includes("event-stream")) {
                  res({ status: r.statusCode ?? 0, type: "text/event-stream", text: "" });
                  r.destroy();
                  req.destroy();
                  return;
                }
                const chunks: Buffer[] = [];
                r.on("data", (d: Buffer) => chunks.push(d));
                r.on("end", () =>
                  res({
                    status: r.statusCode ?? 0,
                    type: (r.headers["content-type"] as string | undefined) ?? null,
                    text: Buffer.concat(chunks).toString("utf8"),
                  }),
                );
                r.on("error", () => res(undefined));
              });
              req.on("error", () => res(undefined)); // the server closed early (a 413 sent before the body)
              if (b !== undefined && m !== "GET" && m !== "HEAD") req.end(b);
              else req.end();
            },
          );
          if (!answer) return;
          // Node's HTTP parser answers what is not HTTP (a bad method, a path or headers over its
          // limits) with a bare 400 or 431 before any handler runs.
          if ((answer.status === 400 || answer.status === 431) && answer.type === null && answer.text === "")
            return;
          await checkAnswer(answer.status, answer.type, async () => answer.text, m === "HEAD");
        }),
        { numRuns: 150 },
      );
    } finally {
      (server as { closeAllConnections?: () => void }).closeAllConnections?.();
      await new Promise<void>((res) => server.close(() => res()));
    }
    expect(logged).toEqual([]);
  });
});
