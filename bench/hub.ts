/**
 * The hub's gates under load (issue #14 item 6; docs/benchmarks.md "hub"): gated submissions per
 * second on loopback, with p50/p90/p99 latency. Target: ≥ 3,000/s (a fleet of 10,000 GPUs on
 * 5-minute experiments submits ~33/s).
 *
 * A hub started in-process (`startHub`) on a fresh schema of the database given (dropped after),
 * over a small project (the hub-toy program of test/helpers/hub-project.ts), with its rate limits
 * and quotas raised so that none binds (the bench measures the gates' cost, not their refusals),
 * and no verifier driver: stored claims stay 'verifying'. `--ids` identities (default 200) are
 * registered over HTTP. The load comes from `--threads` child processes (bench/_hub-load.ts;
 * `--load=thread`: worker threads of the hub's process), each with `--conns` keep-alive
 * connections to 127.0.0.1, POST /api/claims back to back.
 *
 * Scenarios, each `--warmup` s then `--seconds` s measured:
 *  a. unknown-parent: claims that pass every cheap gate (token, quarantine, limits, quota, JSON and
 *     shape, key, signature, freshness, replay lookup, terms) and are refused at the parent
 *     (404 unknown_parent): the cost of the cheap gates under an attacker's flood. Pre-signed
 *     (10 per identity, each a fresh nonce), cycled: a refused claim is not stored, so the hub
 *     does the whole work each time.
 *  b. forged: the same claims with another claim's signature (403 bad_signature).
 *  d. replay: one stored claim sent again and again by its contributor (200, nothing written).
 *  c. valid: full submissions, each a fresh candidate commit (one changed file on the root),
 *     through git admission, stored as 'verifying' (202). The bundles are made and uploaded
 *     before the timed loop (PUT /api/bundles, timed apart); each claim is sent once, so the
 *     scenario ends early when `--valid` claims run out.
 *
 * `npm run bench -- hub postgres://autolab:autolab@127.0.0.1/autolab [a,b,d,c] [--seconds=10]
 *   [--warmup=2] [--threads=1] [--load=process|thread] [--conns=32] [--ids=200] [--valid=600]`
 * Without a URL (argument or AUTOLAB_PG_URL) it says so and skips.
 */
import { execFileSync, fork, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { loadavg as osLoadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { Worker } from "node:worker_threads";
import pg from "pg";
import { type Claim, signClaim } from "../src/hub/claim.ts";
import { type StartedHub, startHub } from "../src/hub/hub.ts";
import { generateIdentity, type Identity } from "../src/hub/identity.ts";
import type { LoadJob, LoadResult } from "./_hub-load.ts";
import { flags, numberFlag } from "./_stats.ts";

type Figures = Record<string, number | string | boolean>;

const GIT_ENV = {
  ...process.env,
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_AUTHOR_NAME: "bench",
  GIT_AUTHOR_EMAIL: "bench@autolab",
  GIT_COMMITTER_NAME: "bench",
  GIT_COMMITTER_EMAIL: "bench@autolab",
};

const PROGRAM = `---
name: hub-toy
objective: { metric: val_loss, direction: minimize }
run:
  command: python train.py
  evaluate: python evaluate.py
  budget: 60s
files:
  editable: [train.py, src/]
  protected: [evaluate.py, data/]
---
Make val_loss smaller.
`;

interface Who {
  id: Identity;
  token: string;
}

interface Opts {
  seconds: number;
  warmup: number;
  threads: number;
  /** Where the load runs: child processes (default) or worker threads of the hub's process. */
  load: "process" | "thread";
  conns: number;
  ids: number;
  valid: number;
}

export async function main(args: string[]): Promise<Figures> {
  const url = args.find((a) => /^postgres(ql)?:\/\//.test(a)) ?? process.env.AUTOLAB_PG_URL;
  if (!url) {
    const reason =
      "no PostgreSQL URL; give one (npm run bench -- hub postgres://user:pw@127.0.0.1/db) or set AUTOLAB_PG_URL";
    console.log(`hub: skipped: ${reason}`);
    return { benchmark: "hub", skipped: reason };
  }
  const f = flags(args);
  const parts = (args.find((a) => /^[a-d](,[a-d])*$/.test(a)) ?? "a,b,d,c").split(",");
  const o: Opts = {
    seconds: numberFlag(f, "seconds", 10),
    warmup: numberFlag(f, "warmup", 2),
    threads: numberFlag(f, "threads", 1),
    load: f.load === "thread" ? "thread" : "process",
    conns: numberFlag(f, "conns", 32),
    ids: numberFlag(f, "ids", 200),
    valid: numberFlag(f, "valid", 600),
  };
  const figures: Figures = { benchmark: "hub" };
  const schema = `bench_hub_${randomBytes(4).toString("hex")}`;
  const u = new URL(url);
  u.searchParams.set("schema", schema);
  const tmp = mkdtempSync(join(tmpdir(), "autolab-bench-hub-"));
  const admin = new pg.Client({ connectionString: url });
  admin.on("error", () => {});
  await admin.connect();
  let hub: StartedHub | undefined;
  try {
    const pgVersion = (await admin.query("SHOW server_version")).rows[0].server_version;
    console.log(
      `PostgreSQL ${pgVersion}; Node ${process.version}; load average ${loadavg()}; ${o.threads} load ${o.load === "thread" ? "thread" : "process"}(es) × ${o.conns} keep-alive connections; ${o.ids} identities; ${o.warmup} s warm-up + ${o.seconds} s per scenario`,
    );
    figures.postgres = String(pgVersion);
    Object.assign(figures, {
      threads: o.threads,
      load: o.load,
      conns: o.conns,
      ids: o.ids,
      seconds: o.seconds,
    });
    const project = makeProject(join(tmp, "project"));
    hub = await startHub({
      db: u.toString(),
      projectDir: project.dir,
      dataDir: join(tmp, "data"),
      port: 0,
      // Raised so that no limit binds: the bench measures what each gate costs, not its refusals.
      limits: {
        identityRate: { capacity: 1e12, refillPerS: 1e12 },
        addressRate: { capacity: 1e12, refillPerS: 1e12 },
        claimsPerDay: 1e12,
        registrationsPerDay: 1e12,
        bundleBytesPerDay: 1e15,
      },
    });
    console.log(
      "limits raised so none binds: rate limits 1e12 tokens refilled at 1e12/s (per address and identity), 1e12 claims and registrations per day; no verifier driver (claims stay 'verifying')",
    );
    const port = hub.port;
    const who: Who[] = [];
    for (let i = 0; i < o.ids; i++) who.push(await register(port));
    const root = project.root;
    const now = Date.now();
    const sign = (w: Who, over: Partial<Claim>): string =>
      JSON.stringify(
        signClaim(
          {
            parent: root,
            bundleSha256: "b".repeat(64),
            harnessVersion: "0.9.0",
            hardwareClass: "cpu",
            budgetS: 60,
            seeds: [1, 2, 3],
            metrics: { val_loss: [0.9, 0.91, 0.89] },
            logSha256: "a".repeat(64),
            contributor: w.id.keyId,
            nonce: randomBytes(16).toString("base64url"),
            createdAt: new Date(now).toISOString(),
            ...over,
          },
          w.id.privateKey,
        ),
      );
    const results: Record<string, Scenario> = {};

    if (parts.includes("a") || parts.includes("b")) {
      const flood: Array<[string, string]> = [];
      for (let k = 0; k < 10; k++)
        for (const w of who) flood.push([w.token, sign(w, { parent: randomBytes(20).toString("hex") })]);
      if (parts.includes("a"))
        results.a = await scenario("a. unknown parent (404 after every cheap gate)", port, flood, true, o);
      if (parts.includes("b")) {
        // Another claim's signature: well-formed, 64 bytes, and not this claim's.
        const forged = flood.map(([t, body], i): [string, string] => {
          const other = JSON.parse((flood[(i + 1) % flood.length] as [string, string])[1]).signature;
          return [t, JSON.stringify({ ...JSON.parse(body), signature: other })];
        });
        results.b = await scenario("b. forged signature (403)", port, forged, true, o);
      }
    }

    const ADMIT_ALONE = 20;
    const made =
      parts.includes("c") || parts.includes("d")
        ? await makeBundles(project, o.valid + 1 + ADMIT_ALONE, tmp)
        : [];
    const bundles = made.slice(0, made.length - ADMIT_ALONE);
    if (parts.includes("c")) {
      // Git admission alone, one bundle at a time, no load: its wall time per claim, and how much
      // of it blocks the hub's event loop (spawning each git process forks the hub's process).
      const alone = made.slice(made.length - ADMIT_ALONE);
      const walls: number[] = [];
      const e0 = performance.eventLoopUtilization();
      const c0 = childCpuMs();
      for (const b of alone) {
        const t = performance.now();
        const a = await hub.repo.admit(b.file, root);
        walls.push(performance.now() - t);
        if (!a.ok) throw new Error(`admission refused a bench candidate: ${a.reason}`);
      }
      const busy = performance.eventLoopUtilization(e0).utilization;
      const gitCpu = (childCpuMs() - c0) / alone.length;
      walls.sort((x, y) => x - y);
      const median = walls[Math.floor(walls.length / 2)] as number;
      console.log(
        `\n== git admission alone (HubRepo.admit, ${alone.length} fresh bundles one at a time, no load): median ${ms(median)} a claim, the hub's event loop busy ${pct(busy)} of it (${ms(busy * median)} blocked), git's CPU ${ms(gitCpu)} a claim; hub's process ${Math.round(process.memoryUsage().rss / 1e6)} MB`,
      );
      Object.assign(figures, {
        admit_ms: round(median),
        admit_blocked_ms: round(busy * median),
        admit_git_cpu_ms: round(gitCpu),
      });
    }
    if (bundles.length > 0) {
      const t0 = performance.now();
      await uploadAll(port, who, bundles);
      const s = (performance.now() - t0) / 1000;
      console.log(
        `made ${bundles.length} candidate bundles (${Math.round(bundles.reduce((a, b) => a + b.bytes, 0) / bundles.length)} bytes each) and uploaded them in ${s.toFixed(1)} s (${Math.round(bundles.length / s)} PUT/s, 8 at a time)`,
      );
      figures.upload_per_s = Math.round(bundles.length / s);
    }
    const validClaim = (i: number): [string, string] => {
      const w = who[i % who.length] as Who;
      return [w.token, sign(w, { bundleSha256: (bundles[i] as { sha256: string }).sha256 })];
    };

    if (parts.includes("d")) {
      const one = validClaim(bundles.length - 1);
      const [status, text] = await postClaim(port, one[0], one[1]);
      if (status !== 202) throw new Error(`the claim to replay was not stored: ${status} ${text}`);
      results.d = await scenario("d. replay of a stored claim (200)", port, [one], true, o);
    }
    if (parts.includes("c")) {
      const valid = Array.from({ length: bundles.length - 1 }, (_, i) => validClaim(i));
      results.c = await scenario(
        "c. valid submission: git admission, stored 'verifying' (202)",
        port,
        valid,
        false,
        o,
      );
      const stored = await admin.query<{ n: string }>(
        `SELECT count(*) AS n FROM ${schema}.hub_claims WHERE status = 'verifying'`,
      );
      console.log(`   claims stored 'verifying': ${stored.rows[0]?.n}`);
    }

    console.log(
      "\n| scenario | requests/s | p50 | p90 | p99 | answers | hub's event loop | load generators | PostgreSQL CPU |",
    );
    console.log("|---|---|---|---|---|---|---|---|---|");
    for (const [k, r] of Object.entries(results)) {
      console.log(
        `| ${r.name} | ${Math.round(r.rps)} | ${ms(r.p50)} | ${ms(r.p90)} | ${ms(r.p99)} | ${Object.entries(
          r.statuses,
        )
          .map(([s, n]) => `${n}× ${s}`)
          .join(
            ", ",
          )} | ${pct(r.serverElu)} | ${r.clientElu.map(pct).join(" ")} | ${r.pgCores.toFixed(2)} cores |`,
      );
      Object.assign(figures, {
        [`${k}_rps`]: Math.round(r.rps),
        [`${k}_p50_ms`]: round(r.p50),
        [`${k}_p90_ms`]: round(r.p90),
        [`${k}_p99_ms`]: round(r.p99),
        [`${k}_server_elu`]: round(r.serverElu),
        [`${k}_pg_cores`]: round(r.pgCores),
      });
    }
    figures.load_after = loadavg();
  } finally {
    await hub?.close();
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
    await admin.end();
    rmSync(tmp, { recursive: true, force: true });
  }
  return figures;
}

interface Scenario {
  name: string;
  rps: number;
  p50: number;
  p90: number;
  p99: number;
  statuses: Record<string, number>;
  serverElu: number;
  clientElu: number[];
  pgCores: number;
}

async function scenario(
  name: string,
  port: number,
  requests: Array<[string, string]>,
  cycle: boolean,
  o: Opts,
): Promise<Scenario> {
  console.log(`\n== ${name}: ${requests.length} distinct requests${cycle ? ", cycled" : ", each once"}`);
  const shares: Array<Array<[string, string]>> = Array.from({ length: o.threads }, () => []);
  for (const [i, r] of requests.entries()) shares[cycle ? 0 : i % o.threads]?.push(r);
  if (cycle) for (let t = 1; t < o.threads; t++) shares[t] = shares[0] as Array<[string, string]>;
  let pgPids: number[] = [];
  let elu0: ReturnType<typeof performance.eventLoopUtilization> | undefined;
  let pg0 = 0;
  let t0 = 0;
  const timer = setTimeout(() => {
    elu0 = performance.eventLoopUtilization();
    pgPids = postgresPids();
    pg0 = cpuTicks(pgPids);
    t0 = performance.now();
  }, o.warmup * 1000);
  let elu1: ReturnType<typeof performance.eventLoopUtilization> | undefined;
  let pg1 = 0;
  let t1 = 0;
  const stopTimer = setTimeout(
    () => {
      elu1 = performance.eventLoopUtilization();
      pg1 = cpuTicks(pgPids);
      t1 = performance.now();
    },
    (o.warmup + o.seconds) * 1000,
  );
  const out = await Promise.all(
    shares.map(
      (share) =>
        new Promise<LoadResult>((resolve, reject) => {
          const job: LoadJob = {
            port,
            requests: share,
            cycle,
            conns: o.conns,
            warmupMs: o.warmup * 1000,
            durationMs: o.seconds * 1000,
          };
          const file = new URL("./_hub-load.ts", import.meta.url);
          if (o.load === "thread") {
            const w = new Worker(file, { workerData: job });
            w.once("message", (m: LoadResult) => resolve(m));
            w.once("error", reject);
            return;
          }
          const child = fork(file, [], { serialization: "advanced", stdio: "inherit" });
          child.once("message", (m) => resolve(m as LoadResult));
          child.once("error", reject);
          child.once("exit", (code) => {
            if (code !== 0) reject(new Error(`the load process exited ${code}`));
          });
          child.send(job);
        }),
    ),
  );
  clearTimeout(timer);
  clearTimeout(stopTimer);
  const end = performance.now();
  if (!elu1) {
    elu1 = performance.eventLoopUtilization();
    pg1 = cpuTicks(pgPids);
    t1 = end;
  }
  const serverElu = elu0 ? performance.eventLoopUtilization(elu1, elu0).utilization : Number.NaN;
  const pgCores = t1 > t0 ? (pg1 - pg0) / 100 / ((t1 - t0) / 1000) : Number.NaN;
  const all = new Float64Array(out.reduce((s, r) => s + r.latencies.length, 0));
  let at = 0;
  for (const r of out) {
    all.set(r.latencies, at);
    at += r.latencies.length;
  }
  all.sort();
  const statuses: Record<string, number> = {};
  for (const r of out) for (const [s, n] of Object.entries(r.statuses)) statuses[s] = (statuses[s] ?? 0) + n;
  const windowMs = Math.max(...out.map((r) => r.windowMs));
  const errors = out.reduce((s, r) => s + r.errors, 0);
  const q = (p: number) => all[Math.min(all.length - 1, Math.floor(p * all.length))] ?? Number.NaN;
  const res: Scenario = {
    name,
    rps: all.length / (windowMs / 1000),
    p50: q(0.5),
    p90: q(0.9),
    p99: q(0.99),
    statuses,
    serverElu,
    clientElu: out.map((r) => r.elu),
    pgCores,
  };
  const samples = Object.assign({}, ...out.map((r) => r.samples)) as Record<string, string>;
  console.log(
    `   ${Math.round(res.rps)} requests/s over ${(windowMs / 1000).toFixed(1)} s; p50 ${ms(res.p50)}, p90 ${ms(res.p90)}, p99 ${ms(res.p99)}; answers ${JSON.stringify(statuses)}${errors ? `; ${errors} socket errors` : ""}`,
  );
  console.log(
    `   hub's event loop busy ${pct(serverElu)}; hub's process ${Math.round(process.memoryUsage().rss / 1e6)} MB; load generators ${res.clientElu.map(pct).join(", ")}; PostgreSQL ${pgCores.toFixed(2)} cores (all its processes); load average ${loadavg()}`,
  );
  for (const [s, text] of Object.entries(samples)) console.log(`   ${s}: ${text.slice(0, 160)}`);
  return res;
}

// ---------------------------------------------------------------------------------------------

function git(cwd: string, args: string[], input?: string): string {
  return execFileSync("git", args, { cwd, env: GIT_ENV, encoding: "utf8", input, maxBuffer: 1 << 26 });
}

function makeProject(dir: string): { dir: string; root: string } {
  mkdirSync(join(dir, "data"), { recursive: true });
  mkdirSync(join(dir, "src"), { recursive: true });
  writeFileSync(join(dir, "program.md"), PROGRAM);
  writeFileSync(join(dir, "train.py"), "LR = 0.1\n");
  writeFileSync(join(dir, "evaluate.py"), "print('val_loss: 1')\n");
  writeFileSync(join(dir, "data", "train.csv"), "1,2\n");
  writeFileSync(join(dir, "src", "model.py"), "W = 1\n");
  git(dir, ["init", "-q", "-b", "main"]);
  git(dir, ["add", "-A"]);
  git(dir, ["commit", "-q", "-m", "root"]);
  return { dir, root: git(dir, ["rev-parse", "HEAD"]).trim() };
}

interface Bundle {
  sha256: string;
  file: string;
  bytes: number;
}

/** `n` candidate commits on the root (train.py changed, one commit each; one fast-import), one bundle each. */
async function makeBundles(
  project: { dir: string; root: string },
  n: number,
  tmp: string,
): Promise<Bundle[]> {
  const t0 = performance.now();
  let stream = "";
  for (let i = 0; i < n; i++) {
    const content = `LR = ${i + 1}e-4\n`;
    const msg = `candidate ${i}\n`;
    stream +=
      `commit refs/heads/c${i}\ncommitter bench <bench@autolab> ${1764000000 + i} +0000\n` +
      `data ${Buffer.byteLength(msg)}\n${msg}from ${project.root}\n` +
      `M 100644 inline train.py\ndata ${Buffer.byteLength(content)}\n${content}\n`;
  }
  git(project.dir, ["fast-import", "--quiet"], stream);
  const dir = join(tmp, "bundles");
  mkdirSync(dir);
  let next = 0;
  const one = async (): Promise<void> => {
    while (next < n) {
      const i = next++;
      const file = join(dir, `c${i}.bundle`);
      await new Promise<void>((resolve, reject) => {
        const p = spawn("git", ["bundle", "create", "-q", file, `${project.root}..c${i}`], {
          cwd: project.dir,
          env: GIT_ENV,
          stdio: "ignore",
        });
        p.once("error", reject);
        p.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`git bundle create: ${code}`))));
      });
    }
  };
  await Promise.all(Array.from({ length: 4 }, one));
  const out = Array.from({ length: n }, (_, i) => {
    const data = readFileSync(join(dir, `c${i}.bundle`));
    return {
      sha256: createHash("sha256").update(data).digest("hex"),
      file: join(dir, `c${i}.bundle`),
      bytes: data.length,
    };
  });
  console.log(
    `\nmade ${n} candidate commits and bundles in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
  return out;
}

// ---------------------------------------------------------------------------------------------

const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });

function request(
  port: number,
  method: string,
  path: string,
  body: Buffer | string,
  headers: Record<string, string> = {},
): Promise<[number, string]> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: "127.0.0.1",
        port,
        method,
        path,
        agent,
        headers: { "content-length": String(Buffer.byteLength(body)), ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve([res.statusCode ?? 0, Buffer.concat(chunks).toString("utf8")]));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

function postClaim(port: number, token: string, body: string): Promise<[number, string]> {
  return request(port, "POST", "/api/claims", body, {
    "content-type": "application/json",
    authorization: `Bearer ${token}`,
  });
}

async function register(port: number): Promise<Who> {
  const id = generateIdentity();
  const [status, text] = await request(
    port,
    "POST",
    "/api/register",
    JSON.stringify({ publicKey: id.publicKey }),
    {
      "content-type": "application/json",
    },
  );
  if (status !== 201) throw new Error(`register: ${status} ${text}`);
  return { id, token: (JSON.parse(text) as { token: string }).token };
}

async function uploadAll(port: number, who: Who[], bundles: Bundle[]): Promise<void> {
  let next = 0;
  const one = async (): Promise<void> => {
    while (next < bundles.length) {
      const i = next++;
      const b = bundles[i] as Bundle;
      const w = who[i % who.length] as Who;
      const [status, text] = await request(port, "PUT", `/api/bundles/${b.sha256}`, readFileSync(b.file), {
        authorization: `Bearer ${w.token}`,
      });
      if (status !== 201 && status !== 200) throw new Error(`upload: ${status} ${text}`);
    }
  };
  await Promise.all(Array.from({ length: 8 }, one));
}

// ---------------------------------------------------------------------------------------------

/** Every postgres process on this machine (the server's own and every backend), by /proc. */
function postgresPids(): number[] {
  const pids: number[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/comm`, "utf8").trim() === "postgres") pids.push(Number(d));
    } catch {}
  }
  return pids;
}

/** utime + stime (clock ticks, 100/s) of these processes and their reaped children. */
function cpuTicks(pids: number[]): number {
  let t = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      t += Number(f[11]) + Number(f[12]);
    } catch {}
  }
  return t;
}

/** CPU (user + system, ms) of this process's reaped children: the git processes it ran. */
function childCpuMs(): number {
  const stat = readFileSync("/proc/self/stat", "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[13]) + Number(f[14])) * 10;
}

function loadavg(): string {
  return osLoadavg()
    .map((x) => x.toFixed(2))
    .join(" ");
}

function ms(x: number): string {
  return `${x < 10 ? x.toFixed(2) : x.toFixed(1)} ms`;
}

function pct(x: number): string {
  return `${Math.round(x * 100)}%`;
}

function round(x: number): number {
  return Number(x.toPrecision(4));
}
