/**
 * The hub end to end, as its users meet it: `autolab hub` serving a program with in-process
 * verifier slots on a real PostgreSQL, an honest contributor running `autolab contribute` with
 * the built-in researcher, and a cheater sending claims by hand. What counts is what the hub's
 * verifiers measured, never what a claim said.
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signClaim } from "../src/hub/claim.ts";
import { HubClient, HubRefused } from "../src/hub/client.ts";
import { generateIdentity } from "../src/hub/identity.ts";
import { dropSchemas, freshSchemaUrl, PG_SKIP, PG_SKIP_REASON, pgQuery, schemaOf } from "./helpers/pg.ts";
import { type CliProcess, runCli, spawnCli } from "./helpers/toy-project.ts";
import { git } from "./helpers/value-project.ts";

/**
 * The hub's program: minimize (X − 2)² plus seeded noise of about 0.03 (so the acceptance rule
 * has a noise to measure); X is the built-in optimizer's knob in value.mjs (editable); run.mjs
 * and the evaluator are protected.
 */
function hubProgram(): string {
  const dir = mkdtempSync(join(tmpdir(), "autolab-hub-e2e-"));
  writeFileSync(join(dir, "value.mjs"), "export const X = 6;\n");
  writeFileSync(
    join(dir, "run.mjs"),
    `import { writeFileSync } from "node:fs";
import { X } from "./value.mjs";
const seed = Number(process.env.AUTOLAB_SEED ?? 0);
const u = (((seed * 2654435761) >>> 0) % 10007) / 10007;
writeFileSync("out.txt", String((X - 2) ** 2 + 0.06 * (u - 0.5)));
`,
  );
  writeFileSync(
    join(dir, "evaluate.mjs"),
    `import { readFileSync } from "node:fs";\nconsole.log(\`score: \${Number(readFileSync("out.txt", "utf8"))}\`);\n`,
  );
  writeFileSync(join(dir, ".gitignore"), "out.txt\n");
  writeFileSync(
    join(dir, "program.md"),
    `---
name: hub-e2e
objective: { metric: score, direction: minimize }
run:
  command: node run.mjs
  evaluate: node evaluate.mjs
  budget: 10s
files:
  editable: [value.mjs]
  protected: [run.mjs, evaluate.mjs]
outputs: [out.txt]
acceptance: noise
agent: builtin
search:
  X: { low: 0, high: 10 }
---
Lower the score.
`,
  );
  git(dir, "init", "-q", "-b", "main");
  git(dir, "add", "-A");
  git(dir, "commit", "-qm", "init");
  return dir;
}

describe.skipIf(PG_SKIP)(`the hub end to end${PG_SKIP ? ` (${PG_SKIP_REASON})` : ""}`, () => {
  let hub: CliProcess;
  let url: string;
  let project: string;
  const home = mkdtempSync(join(tmpdir(), "autolab-hub-home-"));
  const env = {
    XDG_CONFIG_HOME: join(home, "config"),
    XDG_CACHE_HOME: join(home, "cache"),
    AUTOLAB_KNOWLEDGE: join(home, "knowledge.db"),
  };

  let db: string;
  async function startHubCli(): Promise<void> {
    hub = spawnCli(["hub", project, "--db", db, "--port", "0", "--workers", "2"], {
      cwd: project,
      env,
      timeoutMs: 600_000,
    });
    await hub.waitFor(/at http:\/\/127\.0\.0\.1:\d+/, 60_000);
    url = (hub.stdout().match(/at (http:\/\/127\.0\.0\.1:\d+)/) as RegExpMatchArray)[1] as string;
  }

  beforeAll(async () => {
    project = hubProgram();
    db = freshSchemaUrl("hub_e2e");
    await startHubCli();
    // The hub measures its root on its own verifiers first: until then it cannot tell a frontier
    // claim from a finding.
    await hub.waitFor(/the root measured on the verifiers: score (\S+)/, 120_000);
    const root = Number(hub.stdout().match(/the root measured on the verifiers: score (\S+)/)?.[1]);
    expect(Math.abs(root - 16)).toBeLessThan(0.1);
  }, 180_000);

  afterAll(async () => {
    hub?.child.kill("SIGTERM");
    await hub?.done.catch(() => {});
    await dropSchemas();
  }, 60_000);

  it("an honest contributor's kept experiments are verified and accepted at the verifiers' value", async () => {
    const r = await runCli(["contribute", "--hub", url, join(home, "clone"), "-n", "3", "--wait"], {
      cwd: home,
      env,
      timeoutMs: 420_000,
    });
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/registered with the hub as [0-9a-f]{16}/);
    expect(r.stdout).toMatch(/claim [0-9a-f]{12} frontier, verifying/);
    expect(r.stdout).toMatch(/: accepted at /);

    const client = new HubClient(url);
    const chain = (await (await fetch(`${url}/api/chain`)).json()) as {
      chain: { commit: string; claimId: string | null; value: number | null; gain: number }[];
    };
    // The root, then at least one accepted move, each better than the one before.
    expect(chain.chain.length).toBeGreaterThanOrEqual(2);
    const moves = chain.chain.slice(1);
    for (const m of moves) {
      const claim = await client.claim(m.claimId as string);
      expect(claim.status).toBe("accepted");
      // The recorded value is the verifiers', never the claim's own mean.
      expect(claim.recordedValue).toBe(m.value);
      expect(m.gain).toBeGreaterThan(0);
    }
    const board = (await (await fetch(`${url}/api/leaderboard`)).json()) as {
      entries: { contributor: string; accepted: number; credit: number }[];
    };
    expect(board.entries[0]?.accepted).toBe(moves.length);
    expect(board.entries[0]?.credit).toBeGreaterThan(0);

    // The findings feed carries the frontier moves, with the commit's subject for other agents.
    const feed = (await client.findings(0)).events;
    const frontier = feed.filter((e) => e.kind === "frontier");
    expect(frontier.length).toBe(moves.length);
    for (const e of frontier) expect(e.payload.subject).toMatch(/X 6\.0 → /);
  }, 480_000);

  it("a cheater's fake metrics are contradicted by the verifiers, and the identity is quarantined", async () => {
    const client = new HubClient(url);
    const program = await client.program();
    const me = generateIdentity();
    const { token } = await client.register(me.publicKey);
    // A change that changes nothing (a comment), claimed to score far better than the head.
    const work = mkdtempSync(join(tmpdir(), "autolab-hub-cheat-"));
    git(work, "init", "-q");
    writeFileSync(join(work, "h.bundle"), await client.bundle(program.head));
    git(work, "fetch", "-q", join(work, "h.bundle"), "+refs/*:refs/hub/*");
    git(work, "checkout", "-q", "-B", "cheat", program.head);
    writeFileSync(join(work, "value.mjs"), `${git(work, "show", "HEAD:value.mjs")}\n// tuned\n`);
    git(work, "commit", "-qam", "tuned (trust me)");
    const commit = git(work, "rev-parse", "HEAD");
    git(work, "bundle", "create", "-q", join(work, "c.bundle"), `${program.head}..cheat`);
    const bundle = (await import("node:fs")).readFileSync(join(work, "c.bundle"));
    const sha = createHash("sha256").update(bundle).digest("hex");
    await client.putBundle(token, sha, bundle);
    const fake = (program.headValue ?? 1) - 5;
    const signed = signClaim(
      {
        parent: program.head,
        bundleSha256: sha,
        harnessVersion: "0.9.0",
        hardwareClass: program.hardwareClass,
        budgetS: program.budgetS,
        seeds: [11, 12, 13],
        metrics: { score: [fake, fake, fake] },
        logSha256: "0".repeat(64),
        contributor: me.keyId,
        nonce: randomBytes(16).toString("base64url"),
        createdAt: new Date().toISOString(),
      },
      me.privateKey,
    );
    const sent = await client.postClaim(token, signed);
    expect(sent).toMatchObject({ kind: "frontier", status: "verifying" });
    // The hub is killed (-9) while its verifiers work, and started again on the same database:
    // the claim is neither lost nor decided without its verification.
    await new Promise((r) => setTimeout(r, 1500));
    hub.child.kill("SIGKILL");
    await hub.done.catch(() => {});
    expect(
      (
        await pgQuery<{ status: string }>(`SELECT status FROM ${schemaOf(db)}.hub_claims WHERE id = $1`, [
          sent.id,
        ])
      )[0]?.status,
    ).toBe("verifying");
    await startHubCli();
    const again0 = new HubClient(url);
    let state = await again0.claim(sent.id);
    for (let i = 0; i < 150 && state.status === "verifying"; i++) {
      await new Promise((r) => setTimeout(r, 2000));
      state = await again0.claim(sent.id);
    }
    expect(state.status).toBe("rejected");
    const chain = (await (await fetch(`${url}/api/chain`)).json()) as { chain: { commit: string }[] };
    expect(chain.chain.map((c) => c.commit)).not.toContain(commit);
    // Quarantined: the next claim is refused at the gate, before any compute.
    const again = signClaim({ ...signed.claim, nonce: randomBytes(16).toString("base64url") }, me.privateKey);
    const refused = await again0.postClaim(token, again).catch((e) => e);
    expect(refused).toBeInstanceOf(HubRefused);
    expect(refused).toMatchObject({ status: 403, code: "quarantined" });
  }, 360_000);
});
