/**
 * The worker fleet (docs/distributed.md "Worker fleet") with real PostgreSQL, real `autolab
 * worker` processes, real git bundles and the real sandbox: trials round-trip through the queue,
 * a worker killed with -9 has its job leased again and finished elsewhere (counted once), a
 * bundle whose bytes do not match its hash is refused, and a prune from the coordinator stops the
 * remote trial.
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { TrialSpec } from "../src/core/types.ts";
import { openFleetDb, parseFleetUrl } from "../src/fleet/db.ts";
import { FleetExecutor } from "../src/fleet/fleet-executor.ts";
import type { TrialJob } from "../src/fleet/job.ts";
import { TrialQueue } from "../src/fleet/queue.ts";
import type { WorkersResponse } from "../src/server/api-types.ts";
import { createApp } from "../src/server/app.ts";
import { fleetSchemaOfFile, NO_PG, NO_PG_REASON, requirePgCase, testClient } from "./helpers/fleet-db.ts";
import { pgProxy } from "./helpers/pg-proxy.ts";
import {
  type CliProcess,
  commitAll,
  runCli,
  spawnCli,
  stackLines,
  type ToyProject,
  toysOfFile,
} from "./helpers/toy-project.ts";

const { toy, removeLater } = toysOfFile();
const { url, schema } = fleetSchemaOfFile();
/** A fleet no worker ever joined. */
const empty = fleetSchemaOfFile();
requirePgCase();

const workers: CliProcess[] = [];
/** A test that failed half-way must not leave its workers taking the next test's jobs. */
const killWorkers = async () => {
  const live = workers.splice(0).filter((w) => w.child.exitCode === null && w.child.signalCode === null);
  for (const w of live) w.child.kill("SIGKILL");
  await Promise.all(live.map((w) => w.done.catch(() => {})));
};
afterEach(killWorkers);
afterAll(killWorkers);

/** `autolab worker` as its own process, with its own cache; resolves once it has registered. */
async function startWorker(name: string, extra: string[] = [], cacheDir?: string): Promise<CliProcess> {
  const cache = cacheDir ?? removeLater(mkdtempSync(join(tmpdir(), `fleet-cache-${name}-`)));
  const w = spawnCli(["worker", "--db", url, "--name", name, "--cache", cache, ...extra], {
    cwd: tmpdir(),
    timeoutMs: 300_000,
  });
  workers.push(w);
  await w.waitFor(new RegExp(`worker ${name}: \\d+ slots? on`), 60_000);
  return w;
}

/**
 * A command that prints a progress line every 250 ms for SLOW_STEPS steps (default `steps`; its
 * first invocation `firstSteps` when given), then its score. With `firstSteps` it also outlives the
 * harness that reads its output: a write to the closed pipe (EPIPE) would otherwise end it, sooner
 * or later depending on the machine's load, and the orphan a restarted worker must find be gone.
 */
function slowProject(steps = 8, budget?: string, sandbox?: "off", firstSteps?: number): ToyProject {
  const t = toy({ command: "node slow.mjs", ...(budget ? { budget } : {}), ...(sandbox ? { sandbox } : {}) });
  writeFileSync(
    join(t.dir, "slow.mjs"),
    `import { appendFileSync, readFileSync } from "node:fs";
${firstSteps === undefined ? "" : 'process.stdout.on("error", () => {});'}
const scratch = ${JSON.stringify(t.scratch)};
appendFileSync(scratch + "/started", process.pid + "\\n");
const first = readFileSync(scratch + "/started", "utf8").trim().split("\\n").length === 1;
const n = Number(process.env.SLOW_STEPS ?? (first ? ${firstSteps ?? steps} : ${steps}));
for (let i = 0; i < n; i++) {
  console.log("METRIC train_loss=" + (n - i));
  await new Promise((r) => setTimeout(r, 250));
}
appendFileSync(scratch + "/finished", process.pid + "\\n");
console.log("score: 1");
`,
  );
  commitAll(t.dir, "slow command");
  return t;
}

/** A coordinator-side executor bound to the project's HEAD as the run's base commit. */
async function coordinator(t: ToyProject): Promise<FleetExecutor> {
  const exec = await FleetExecutor.open(parseFleetUrl(url), { pollMs: 100 });
  exec.bind({
    repoRoot: t.dir,
    prefix: "",
    programFile: "program.md",
    programText: readFileSync(join(t.dir, "program.md"), "utf8"),
    baseCommit: t.git(["rev-parse", "HEAD"]).trim(),
    tag: `t${randomBytes(3).toString("hex")}`,
  });
  return exec;
}

function trialSpec(t: ToyProject, extra: Partial<TrialSpec> = {}): TrialSpec {
  const logs = removeLater(mkdtempSync(join(tmpdir(), "fleet-logs-")));
  return {
    cwd: t.dir,
    command: "node slow.mjs",
    budgetMs: 120_000,
    graceMs: 5_000,
    evaluateTimeoutMs: 30_000,
    seed: 0,
    logDir: join(logs, "1", "1"),
    env: { AUTOLAB_TRIAL_TOKEN: randomBytes(12).toString("hex") },
    objective: "score",
    ...extra,
  };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function lines(path: string): string[] {
  return existsSync(path) ? readFileSync(path, "utf8").split("\n").filter(Boolean) : [];
}

async function waitUntil(what: string, check: () => Promise<boolean>, ms = 90_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe("autolab worker: bad input", () => {
  it("an unreachable database is a message naming the URL with the password masked, and the fix", async () => {
    const r = await runCli(["worker", "--db", "postgres://someone:s3cret@127.0.0.1:1/nothing"], {
      cwd: tmpdir(),
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("postgres://someone:***@127.0.0.1:1/nothing");
    expect(r.stderr).not.toContain("s3cret");
    expect(r.stderr).toMatch(/fix: .*PGPASSWORD/);
    expect(stackLines(r.stderr)).toEqual([]);
  });

  it("--slots and --gpus together are refused", async () => {
    const r = await runCli(["worker", "--db", "postgres://x@127.0.0.1/y", "--slots", "2", "--gpus", "0"], {
      cwd: tmpdir(),
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--slots and --gpus");
  });
});

describe.skipIf(NO_PG)(`the worker fleet on PostgreSQL${NO_PG ? ` (${NO_PG_REASON})` : ""}`, () => {
  it("a worker killed with -9 mid-trial: the job is leased again after the heartbeat's expiry, finished on another worker, counted once", async () => {
    const t = slowProject();
    const exec = await coordinator(t);
    const client = await testClient();
    try {
      const a = await startWorker("victim");
      const spec = trialSpec(t, {
        env: { AUTOLAB_TRIAL_TOKEN: randomBytes(12).toString("hex"), SLOW_STEPS: "24" },
      });
      const key = spec.env?.AUTOLAB_TRIAL_TOKEN as string;
      const seen: number[] = [];
      const result = exec.runTrial({ ...spec, onMetric: (_n, v) => seen.push(v) });
      // Running on the victim: its first progress line came back.
      await waitUntil("the victim's trial reports progress", async () => seen.length > 0);
      a.child.kill("SIGKILL");
      await a.done.catch(() => {});
      const b = await startWorker("survivor");
      const r = await result;
      expect(r.status).toBe("ok");
      expect(r.metrics.score).toBe(1);
      const rows = await client.query(`SELECT worker_id, run FROM ${schema}.fleet_results WHERE key = $1`, [
        key,
      ]);
      expect(rows.rows).toHaveLength(1);
      expect(rows.rows[0].worker_id).toMatch(/^survivor:/);
      expect(rows.rows[0].run).toBe(2);
      const job = await client.query(`SELECT runs FROM ${schema}.fleet_jobs WHERE key = $1`, [key]);
      expect(job.rows[0].runs).toBe(2);
      // It started twice (once on each worker) and finished once: the victim's copy died with it.
      expect(lines(join(t.scratch, "started"))).toHaveLength(2);
      expect(lines(join(t.scratch, "finished"))).toHaveLength(1);
      expect(readFileSync(r.stdoutPath, "utf8")).toContain("score: 1");
      b.child.kill("SIGTERM");
      await b.done;
    } finally {
      await client.end();
      await exec.close();
    }
  }, 180_000);

  it("unsandboxed, a worker killed with -9 leaves its trial running: the worker restarted on its cache kills it; one worker per cache", async () => {
    // The orphan runs 100 s (it must still be there when the restarted worker starts, however
    // loaded the machine); the run again after it, 10 s.
    const t = slowProject(40, "60s", "off", 400);
    const exec = await coordinator(t);
    const cache = removeLater(mkdtempSync(join(tmpdir(), "fleet-cache-reaped-")));
    try {
      const a = await startWorker("reaped", [], cache);
      // A second worker on the same cache is refused, saying why.
      const twin = await runCli(["worker", "--db", url, "--cache", cache], { cwd: tmpdir() });
      expect(twin.code).toBe(2);
      expect(twin.stderr).toContain(
        `the cache ${cache} is in use by the worker with process id ${a.child.pid}`,
      );
      let seen = 0;
      const result = exec.runTrial({ ...trialSpec(t), onMetric: () => seen++ });
      await waitUntil("the trial reports progress", async () => seen > 0);
      const [orphan] = lines(join(t.scratch, "started")).map(Number);
      a.child.kill("SIGKILL");
      await a.done.catch(() => {});
      expect(alive(orphan as number)).toBe(true);
      const b = await startWorker("reaped", [], cache);
      await b.waitFor(/killed \d+ process(es)? of a trial a killed worker left/);
      await waitUntil("the orphan is gone", async () => !alive(orphan as number));
      const r = await result;
      expect(r.status).toBe("ok");
      // Run twice, finished once: the orphan never got to its end.
      expect(lines(join(t.scratch, "started"))).toHaveLength(2);
      expect(lines(join(t.scratch, "finished"))).toHaveLength(1);
      b.child.kill("SIGTERM");
      await b.done;
    } finally {
      await exec.close();
    }
  }, 120_000);

  it("SIGTERM: the worker stops its trial and gives the job back; another worker runs it at once, counted once", async () => {
    const t = slowProject();
    const exec = await coordinator(t);
    const client = await testClient();
    try {
      const a = await startWorker("leaving");
      const spec = trialSpec(t, {
        env: { AUTOLAB_TRIAL_TOKEN: randomBytes(12).toString("hex"), SLOW_STEPS: "24" },
      });
      const key = spec.env?.AUTOLAB_TRIAL_TOKEN as string;
      let seen = 0;
      const result = exec.runTrial({ ...spec, onMetric: () => seen++ });
      await waitUntil("the trial reports progress", async () => seen > 0);
      a.child.kill("SIGTERM");
      const exit = await a.done;
      expect(exit.code).toBe(0);
      expect(exit.stdout).toMatch(/given back/);
      const b = await startWorker("staying");
      const r = await result;
      expect(r.status).toBe("ok");
      const rows = await client.query(`SELECT worker_id FROM ${schema}.fleet_results WHERE key = $1`, [key]);
      expect(rows.rows.map((x) => x.worker_id.split(":")[0])).toEqual(["staying"]);
      const gone = await client.query(
        `SELECT stopped_at FROM ${schema}.fleet_workers WHERE name = 'leaving'`,
      );
      expect(gone.rows[0].stopped_at).not.toBeNull();
      b.child.kill("SIGTERM");
      await b.done;
    } finally {
      await client.end();
      await exec.close();
    }
  }, 120_000);

  it("a run refused after it reached the fleet (an unknown researcher) exits with its message, not held open by the queue", async () => {
    const t = toy({});
    const r = await runCli(["run", "--fleet", empty.url, "-a", "no-such-researcher"], {
      cwd: t.dir,
      timeoutMs: 30_000,
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/no-such-researcher/);
    expect(stackLines(r.stderr)).toEqual([]);
  }, 60_000);

  it("no live worker: the run says so and waits; Ctrl-C stops it, the queued trial recorded as interrupted", async () => {
    const t = toy({});
    const run = spawnCli(["run", "--fleet", empty.url, "-n", "1"], { cwd: t.dir, timeoutMs: 120_000 });
    await run.waitFor(
      /no live worker yet; the run uses 1 slot and its trials wait in the queue \(start one: autolab worker --db/,
    );
    await run.waitFor(/#0 trial 1 started/);
    run.child.kill("SIGINT");
    const r = await run.done;
    expect(r.code).toBe(130);
    expect(stackLines(r.stderr)).toEqual([]);
    const db = new DatabaseSync(join(t.dir, ".autolab", "lab.db"), { readOnly: true });
    const results = db.prepare("SELECT status, reason FROM trial_results").all() as {
      status: string;
      reason: string;
    }[];
    db.close();
    expect(results).toHaveLength(1);
    expect(results[0]?.status).toBe("interrupted");
    expect(results[0]?.reason).toContain("before a worker started it");
    expect(t.invocations()).toBe(0);
  }, 120_000);

  it("the database unreachable mid-trial (connections cut, new ones refused for 5 s): coordinator and worker wait and go on; the trial counts once", async () => {
    const t = slowProject();
    const proxy = await pgProxy();
    const viaProxy = new URL(url);
    viaProxy.port = String(proxy.port);
    viaProxy.hostname = "127.0.0.1";
    const waits: string[] = [];
    const exec = await FleetExecutor.open(parseFleetUrl(viaProxy.toString()), {
      pollMs: 100,
      onWait: (m) => waits.push(m),
    });
    exec.bind({
      repoRoot: t.dir,
      prefix: "",
      programFile: "program.md",
      programText: readFileSync(join(t.dir, "program.md"), "utf8"),
      baseCommit: t.git(["rev-parse", "HEAD"]).trim(),
      tag: "outage",
    });
    const client = await testClient();
    try {
      const cache = removeLater(mkdtempSync(join(tmpdir(), "fleet-cache-steady-")));
      const w = spawnCli(["worker", "--db", viaProxy.toString(), "--name", "steady", "--cache", cache], {
        cwd: tmpdir(),
        timeoutMs: 300_000,
      });
      workers.push(w);
      await w.waitFor(/worker steady: 1 slot on/, 60_000);
      const spec = trialSpec(t, {
        env: { AUTOLAB_TRIAL_TOKEN: randomBytes(12).toString("hex"), SLOW_STEPS: "16" },
      });
      const key = spec.env?.AUTOLAB_TRIAL_TOKEN as string;
      let seen = 0;
      const result = exec.runTrial({ ...spec, onMetric: () => seen++ });
      await waitUntil("the trial reports progress", async () => seen > 0);
      proxy.down();
      // Longer than the trial's rest: its result is ready while the database is away.
      await new Promise((r) => setTimeout(r, 5000));
      await proxy.up();
      const r = await result;
      expect(r.status).toBe("ok");
      expect(
        waits.some((m) => /the database postgres:\/\/.* is unreachable \(.*\); waiting for it/.test(m)),
      ).toBe(true);
      const password = new URL(url).password;
      if (password) expect(waits.join("\n")).not.toContain(`:${password}@`);
      const rows = await client.query(`SELECT worker_id FROM ${schema}.fleet_results WHERE key = $1`, [key]);
      expect(rows.rows).toHaveLength(1);
      expect(lines(join(t.scratch, "finished"))).toHaveLength(1);
      w.child.kill("SIGTERM");
      const exit = await w.done;
      expect(exit.code).toBe(0);
      expect(stackLines(exit.stderr)).toEqual([]);
    } finally {
      await client.end();
      await exec.close();
      await proxy.close();
    }
  }, 120_000);

  it("the coordinator killed with -9: on resume its open trial is reaped on the worker (stopped, recorded interrupted) and run again", async () => {
    const t = slowProject(400, "200s");
    const client = await testClient();
    try {
      const w = await startWorker("orphaned");
      const first = spawnCli(["run", "--fleet", url, "-n", "0"], { cwd: t.dir, timeoutMs: 120_000 });
      await waitUntil(
        "the worker starts the baseline",
        async () => lines(join(t.scratch, "started")).length === 1,
      );
      first.child.kill("SIGKILL");
      await first.done.catch(() => {});
      const db = new DatabaseSync(join(t.dir, ".autolab", "lab.db"), { readOnly: true });
      const [start] = db.prepare("SELECT env FROM trial_starts").all() as { env: string }[];
      db.close();
      const key = JSON.parse(start?.env ?? "{}").AUTOLAB_TRIAL_TOKEN as string;
      const resumed = spawnCli(["run", "--fleet", url, "-n", "0"], { cwd: t.dir, timeoutMs: 120_000 });
      let row: { result: string } | undefined;
      await waitUntil("the orphaned trial's result", async () => {
        row = (await client.query(`SELECT result FROM ${schema}.fleet_results WHERE key = $1`, [key]))
          .rows[0];
        return row !== undefined;
      });
      const result = JSON.parse(row?.result ?? "{}");
      expect(result.status).toBe("interrupted");
      expect(result.reason).toContain("the coordinator stopped while this trial ran");
      // The resumed run starts the baseline again, on the same worker.
      await waitUntil("the baseline runs again", async () => lines(join(t.scratch, "started")).length === 2);
      expect(lines(join(t.scratch, "finished"))).toHaveLength(0);
      resumed.child.kill("SIGINT");
      expect((await resumed.done).code).toBe(130);
      w.child.kill("SIGTERM");
      await w.done;
    } finally {
      await client.end();
    }
  }, 180_000);

  it("--gpus: each slot's trials get CUDA_VISIBLE_DEVICES=<its GPU>; a worker without the command's runtime records why", async () => {
    // sandbox: off, so that no /dev/nvidia* is needed on this machine: only the variable is under test.
    const t = toy({ command: "node gpu.mjs", sandbox: "off" });
    writeFileSync(
      join(t.dir, "gpu.mjs"),
      `console.log("METRIC gpu=" + process.env.CUDA_VISIBLE_DEVICES);
await new Promise((r) => setTimeout(r, 1500));
console.log("score: 1");
`,
    );
    commitAll(t.dir, "gpu command");
    const exec = await coordinator(t);
    try {
      const w = await startWorker("gpubox", ["--gpus", "3,5"]);
      const [a, b] = await Promise.all([
        exec.runTrial(trialSpec(t, { command: "node gpu.mjs" })),
        exec.runTrial(trialSpec(t, { command: "node gpu.mjs" })),
      ]);
      expect([a?.status, b?.status]).toEqual(["ok", "ok"]);
      expect([a?.metrics.gpu, b?.metrics.gpu].sort()).toEqual([3, 5]);

      const missing = await exec.runTrial(trialSpec(t, { command: "python9-not-installed train.py" }));
      expect(missing.status).toBe("crash");
      expect(missing.reason).toBe("command not found: python9-not-installed (on worker gpubox)");
      w.child.kill("SIGTERM");
      await w.done;
    } finally {
      await exec.close();
    }
  }, 120_000);

  it("a worker joining mid-run is used at once: the run's slots follow the live workers, up to --slots", async () => {
    const t = slowProject(8); // about 2 s a trial
    const client = await testClient();
    try {
      const [{ t0 }] = (await client.query<{ t0: Date }>("SELECT now() AS t0")).rows as [{ t0: Date }];
      const solo = await startWorker("solo");
      const run = spawnCli(["run", "--fleet", url, "-n", "6", "--slots", "3"], {
        cwd: t.dir,
        timeoutMs: 240_000,
      });
      await run.waitFor(/1 live worker, 1 slot: the run uses 1 \(up to 3 as workers join\)/, 60_000);
      // One trial at a time while one slot is live.
      for (let i = 0; i < 240; i++) {
        const r = await client.query(`SELECT 1 FROM ${schema}.fleet_jobs WHERE started_at > $1`, [t0]);
        if ((r.rowCount ?? 0) >= 2) break;
        await new Promise((res) => setTimeout(res, 250));
      }
      const joiner = await startWorker("joiner", ["--slots", "2"]);
      const done = await run.done;
      expect(done.code, done.stdout + done.stderr).toBe(0);
      const rows = (
        await client.query<{ enqueued: Date; started: Date; finished: Date; worker: string }>(
          `SELECT j.enqueued_at AS enqueued, j.started_at AS started, r.finished_at AS finished,
             split_part(r.worker_id, ':', 1) AS worker
           FROM ${schema}.fleet_jobs j JOIN ${schema}.fleet_results r ON r.key = j.key
           WHERE j.enqueued_at > $1 ORDER BY j.enqueued_at`,
          [t0],
        )
      ).rows;
      const joined = (
        await client.query<{ at: Date }>(
          `SELECT max(started_at) AS at FROM ${schema}.fleet_workers WHERE name = 'joiner'`,
        )
      ).rows[0]?.at as Date;
      // In flight (enqueued, not finished) at a moment, and running (started, not finished).
      const inFlight = (at: Date) => rows.filter((r) => r.enqueued <= at && at < r.finished).length;
      const running = (at: Date) => rows.filter((r) => r.started <= at && at < r.finished).length;
      // While one slot was live the run kept one trial in flight, not its three slots' worth.
      const before = rows.filter((r) => r.enqueued < joined);
      expect(before.length).toBeGreaterThanOrEqual(2);
      expect(Math.max(...before.map((r) => inFlight(r.enqueued)))).toBe(1);
      // Once the second worker joined: trials side by side, on both workers.
      expect(Math.max(...rows.map((r) => running(r.started)))).toBeGreaterThanOrEqual(2);
      expect(new Set(rows.map((r) => r.worker))).toEqual(new Set(["solo", "joiner"]));
      for (const w of [solo, joiner]) w.child.kill("SIGTERM");
      await Promise.all([solo.done, joiner.done]);
    } finally {
      await client.end();
    }
  }, 240_000);

  it("a prune from the coordinator stops the trial on its worker (pruned, never finished)", async () => {
    const t = slowProject();
    const exec = await coordinator(t);
    try {
      const w = await startWorker("pruner");
      const prune = new AbortController();
      const spec = trialSpec(t, {
        env: { AUTOLAB_TRIAL_TOKEN: randomBytes(12).toString("hex"), SLOW_STEPS: "400" },
      });
      const calledAt = Date.now();
      const seen: Array<{ elapsedMs: number | undefined; sinceCall: number }> = [];
      const r = await exec.runTrial({
        ...spec,
        prune: prune.signal,
        onMetric: (_name, _value, elapsedMs) => {
          seen.push({ elapsedMs, sinceCall: Date.now() - calledAt });
          prune.abort("its learning curve is worse than the best's");
        },
      });
      expect(r.status).toBe("pruned");
      // The curve's clock is the command's on the worker: the queue, the bundles and the
      // worktree before it do not count (they would shift a remote trial's curve).
      expect(seen.length).toBeGreaterThan(0);
      for (const m of seen) {
        expect(typeof m.elapsedMs).toBe("number");
        expect(m.elapsedMs).toBeLessThan(m.sinceCall);
      }
      expect(r.reason).toContain("worse than the best");
      expect(lines(join(t.scratch, "started"))).toHaveLength(1);
      expect(lines(join(t.scratch, "finished"))).toHaveLength(0);
      w.child.kill("SIGTERM");
      await w.done;
    } finally {
      await exec.close();
    }
  }, 120_000);

  it("a bundle whose bytes do not match its hash, or a job naming a path outside the cache, is refused with a reason; the trial never runs", async () => {
    const t = slowProject();
    const fleetUrl = parseFleetUrl(url);
    const pool = await openFleetDb(fleetUrl);
    const queue = await TrialQueue.open(fleetUrl);
    const client = await testClient();
    try {
      const w = await startWorker("careful");
      const claimed = "a".repeat(64);
      await pool.query(`INSERT INTO ${schema}.fleet_bundles (sha256, data) VALUES ($1, $2)`, [
        claimed,
        Buffer.from("not the bundle you are looking for"),
      ]);
      const head = t.git(["rev-parse", "HEAD"]).trim();
      const key = randomBytes(12).toString("hex");
      const job: TrialJob = {
        key,
        label: "forged #1.1",
        project: "forged",
        tag: "forged",
        prefix: "",
        programFile: "program.md",
        programText: readFileSync(join(t.dir, "program.md"), "utf8"),
        baseCommit: head,
        commit: head,
        bundles: [{ sha256: claimed, commit: head }],
        command: "node slow.mjs",
        budgetMs: 60_000,
        graceMs: 5_000,
        evaluateTimeoutMs: 30_000,
        seed: 0,
        env: {},
        objective: "score",
      };
      await pool.query(`INSERT INTO ${schema}.fleet_jobs (key, label, payload) VALUES ($1, $2, $3)`, [
        key,
        job.label,
        JSON.stringify(job),
      ]);
      await queue.enqueue(key);
      let row: { result: string } | undefined;
      await waitUntil("the worker records the refusal", async () => {
        row = (await client.query(`SELECT result FROM ${schema}.fleet_results WHERE key = $1`, [key]))
          .rows[0];
        return row !== undefined;
      });
      const result = JSON.parse(row?.result ?? "{}");
      expect(result.status).toBe("crash");
      expect(result.reason).toContain(`bundle ${claimed} in the fleet's database is corrupted`);
      expect(result.reason).toContain("the trial was not run");
      expect(result.reason).toContain("(on worker careful)");
      expect(lines(join(t.scratch, "started"))).toHaveLength(0);

      // Names from the database become paths on the worker: one that leaves its cache is refused.
      const evil = randomBytes(12).toString("hex");
      await pool.query(`INSERT INTO ${schema}.fleet_jobs (key, label, payload) VALUES ($1, $2, $3)`, [
        evil,
        "evil #1.1",
        JSON.stringify({ ...job, key: evil, tag: "../../../tmp/escape", bundles: [] }),
      ]);
      await queue.enqueue(evil);
      let evilRow: { result: string } | undefined;
      await waitUntil("the worker refuses the malformed job", async () => {
        evilRow = (await client.query(`SELECT result FROM ${schema}.fleet_results WHERE key = $1`, [evil]))
          .rows[0];
        return evilRow !== undefined;
      });
      const refused = JSON.parse(evilRow?.result ?? "{}");
      expect(refused.status).toBe("crash");
      expect(refused.reason).toContain(
        'the job is malformed: tag "../../../tmp/escape"; the trial was not run',
      );
      expect(lines(join(t.scratch, "started"))).toHaveLength(0);
      w.child.kill("SIGTERM");
      await w.done;
    } finally {
      await client.end();
      await queue.close();
      await pool.end();
    }
  }, 120_000);

  it("program.md's executor.fleet.db (no password in it; PGPASSWORD) sends the run's trials to the fleet", async () => {
    const t = toy({ score: "decreasing" });
    const withPassword = new URL(url);
    const password = decodeURIComponent(withPassword.password);
    const bare = new URL(url);
    bare.password = "";
    const program = readFileSync(join(t.dir, "program.md"), "utf8").replace(
      "\n---\n# Research",
      `\nexecutor: { fleet: { db: ${JSON.stringify(bare.toString())} } }\n---\n# Research`,
    );
    writeFileSync(join(t.dir, "program.md"), program);
    commitAll(t.dir, "run on the fleet");
    const w = await startWorker("fromprogram");
    const run = await runCli(["run", "-n", "1"], {
      cwd: t.dir,
      timeoutMs: 120_000,
      ...(password ? { env: { PGPASSWORD: password } } : {}),
    });
    expect(run.stderr).not.toMatch(/internal error/);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/fleet postgres:\/\/[^ ]*: \d+ live workers?, \d+ slots?: the run uses/);
    expect(w.stdout()).toMatch(/fromprogram slot 0: \S+ #0\.1 ok/);
    w.child.kill("SIGTERM");
    await w.done;
  }, 120_000);

  it("autolab run --fleet -n 4 with two workers: every trial runs once on a worker and the run keeps a result", async () => {
    const t = toy({ score: "decreasing", evaluate: true });
    const client = await testClient();
    try {
      await startWorker("one");
      await startWorker("two", ["--slots", "2"]);
      const run = await runCli(["run", "--fleet", url, "-n", "4"], { cwd: t.dir, timeoutMs: 240_000 });
      expect(run.stderr).not.toMatch(/internal error/);
      expect(run.code).toBe(0);
      expect(run.stdout).toContain("reached --max-experiments 4");
      expect(run.stdout).toMatch(/fleet postgres:\/\/.*: 2 live workers, 3 slots: the run uses 3/);
      const db = new DatabaseSync(join(t.dir, ".autolab", "lab.db"), { readOnly: true });
      const starts = db.prepare("SELECT env FROM trial_starts").all() as { env: string }[];
      const results = db.prepare("SELECT status FROM trial_results").all() as { status: string }[];
      const kept = db
        .prepare(
          "SELECT count(*) AS n FROM decisions d JOIN experiments e ON e.id = d.experiment_id WHERE d.action = 'keep' AND e.n > 0",
        )
        .get() as { n: number };
      db.close();
      expect(results.every((r) => r.status === "ok")).toBe(true);
      expect(results).toHaveLength(starts.length);
      expect(kept.n).toBeGreaterThan(0);
      const keys = starts.map((s) => JSON.parse(s.env).AUTOLAB_TRIAL_TOKEN as string);
      const fleet = await client.query(
        `SELECT key, worker_id FROM ${schema}.fleet_results WHERE key = ANY($1)`,
        [keys],
      );
      // One result per trial of the notebook, each from one of the two workers.
      expect(fleet.rows.map((r) => r.key).sort()).toEqual([...keys].sort());
      expect(fleet.rows.every((r) => /^(one|two):/.test(r.worker_id))).toBe(true);
      // Every trial's command ran exactly once (the toy counts its invocations).
      expect(t.invocations()).toBe(starts.length);

      // status and watch show the workers: host, slots, state, heartbeat, what each runs.
      const status = await runCli(["status", "--fleet", url], { cwd: t.dir });
      expect(status.code).toBe(0);
      // The test role's name is CI's or a developer's: only its password must be masked.
      expect(status.stdout).toMatch(/Workers \(postgres:\/\/[^:/@]+:\*\*\*@[^)]*\): 2 live, 3 slots/);
      expect(status.stdout).toMatch(/ {2}one@\S+ {2}1 slot {2}live, heartbeat \d+s ago {2}idle/);
      expect(status.stdout).toMatch(/ {2}two@\S+ {2}2 slots {2}live, heartbeat \d+s ago {2}idle/);
      const json = await runCli(["status", "--json", "--fleet", url], { cwd: t.dir });
      const workersJson = JSON.parse(json.stdout).workers as Array<{
        name: string;
        slots: number;
        state: string;
      }>;
      // Workers of the file's earlier tests are listed too, stopped or stale.
      const liveJson = workersJson.filter((w) => w.state === "live");
      expect(liveJson.map((w) => [w.name, w.slots, w.state]).sort()).toEqual([
        ["one", 1, "live"],
        ["two", 2, "live"],
      ]);
      // The dashboard's API: the same workers; without a fleet, none.
      const ledgerPath = join(t.dir, ".autolab", "lab.db");
      const app = createApp({ ledgerPath, fleet: parseFleetUrl(url) });
      const api = (await (await app.request("/api/workers")).json()) as WorkersResponse;
      app.close();
      expect(api.fleet).toMatch(/^postgres:\/\/[^:/@]+:\*\*\*@/);
      expect(api.problem).toBeNull();
      expect(
        api.workers
          .filter((w) => w.state === "live")
          .map((w) => w.name)
          .sort(),
      ).toEqual(["one", "two"]);
      const bare = createApp({ ledgerPath });
      expect(await (await bare.request("/api/workers")).json()).toEqual({
        fleet: null,
        workers: [],
        problem: null,
      });
      bare.close();
      const watch = spawnCli(["watch", "--fleet", url], { cwd: t.dir });
      await watch.waitFor(/Workers \(postgres:.*\): 2 live, 3 slots/);
      watch.child.kill("SIGINT");
      await watch.done;
    } finally {
      await client.end();
    }
  }, 300_000);
});
