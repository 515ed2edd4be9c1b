/**
 * Faults around a fleet trial that are nobody's candidate's doing (issue #35): a worker killed
 * and restarted on the same machine as the worker that took its job over, and the database going
 * away while a worker fetches a trial's bundle or writes its result. Real PostgreSQL (behind a
 * proxy the test can cut), real `autolab worker` processes, real git bundles.
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { TrialSpec } from "../src/core/types.ts";
import { parseFleetUrl } from "../src/fleet/db.ts";
import { FleetExecutor } from "../src/fleet/fleet-executor.ts";
import { fleetSchemaOfFile, NO_PG, NO_PG_REASON, requirePgCase, testClient } from "./helpers/fleet-db.ts";
import { pgProxy } from "./helpers/pg-proxy.ts";
import { type CliProcess, commitAll, spawnCli, type ToyProject, toysOfFile } from "./helpers/toy-project.ts";

const { toy, removeLater } = toysOfFile();
const { url, schema } = fleetSchemaOfFile();
requirePgCase();

const workers: CliProcess[] = [];
const killWorkers = async () => {
  const live = workers.splice(0).filter((w) => w.child.exitCode === null && w.child.signalCode === null);
  for (const w of live) w.child.kill("SIGKILL");
  await Promise.all(live.map((w) => w.done.catch(() => {})));
};
afterEach(killWorkers);
afterAll(killWorkers);

async function startWorker(name: string, cache: string, db = url): Promise<CliProcess> {
  const w = spawnCli(["worker", "--db", db, "--name", name, "--cache", cache], {
    cwd: tmpdir(),
    timeoutMs: 300_000,
  });
  workers.push(w);
  await w.waitFor(new RegExp(`worker ${name}: \\d+ slots? on`), 60_000);
  return w;
}

/**
 * `node hold.mjs`, unsandboxed: each invocation appends its pid to scratch/started and prints a
 * progress line; the first never ends by itself (an orphan once its worker is killed), every later
 * one holds until scratch/release exists, then prints its score and appends to scratch/finished.
 */
function holdProject(): ToyProject {
  const t = toy({ command: "node hold.mjs", budget: "200s", sandbox: "off" });
  writeFileSync(
    join(t.dir, "hold.mjs"),
    `import { appendFileSync, existsSync, readFileSync } from "node:fs";
process.stdout.on("error", () => {});
const scratch = ${JSON.stringify(t.scratch)};
appendFileSync(scratch + "/started", process.pid + "\\n");
const first = readFileSync(scratch + "/started", "utf8").trim().split("\\n").length === 1;
for (let i = 0; i < 800; i++) {
  if (!first && existsSync(scratch + "/release")) break;
  if (i % 4 === 0) console.log("METRIC train_loss=" + (800 - i));
  await new Promise((r) => setTimeout(r, 250));
}
appendFileSync(scratch + "/finished", process.pid + "\\n");
console.log("score: 1");
`,
  );
  commitAll(t.dir, "hold command");
  return t;
}

async function coordinator(t: ToyProject, db = url, onWait?: (m: string) => void): Promise<FleetExecutor> {
  const exec = await FleetExecutor.open(parseFleetUrl(db), { pollMs: 100, ...(onWait ? { onWait } : {}) });
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

function trialSpec(t: ToyProject, command: string, extra: Partial<TrialSpec> = {}): TrialSpec {
  const logs = removeLater(mkdtempSync(join(tmpdir(), "fleet-logs-")));
  return {
    cwd: t.dir,
    command,
    budgetMs: 200_000,
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

async function waitUntil(what: string, check: () => boolean | Promise<boolean>, ms = 120_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe.skipIf(NO_PG)(`fleet faults on PostgreSQL${NO_PG ? ` (${NO_PG_REASON})` : ""}`, () => {
  it("a worker killed mid-trial and restarted after its job went to another worker on the same machine kills only its own orphan, never the healthy copy", async () => {
    const t = holdProject();
    const exec = await coordinator(t);
    const client = await testClient();
    const cacheA = removeLater(mkdtempSync(join(tmpdir(), "fleet-cache-a-")));
    const cacheB = removeLater(mkdtempSync(join(tmpdir(), "fleet-cache-b-")));
    try {
      const a = await startWorker("first", cacheA);
      const spec = trialSpec(t, "node hold.mjs");
      const key = spec.env?.AUTOLAB_TRIAL_TOKEN as string;
      let seen = 0;
      const result = exec.runTrial({ ...spec, onMetric: () => seen++ });
      await waitUntil("the trial reports progress", () => seen > 0);
      const [orphan] = lines(join(t.scratch, "started")).map(Number) as [number];
      a.child.kill("SIGKILL");
      await a.done.catch(() => {});
      expect(alive(orphan)).toBe(true);
      // The job is leased again (same key, same machine) by another worker with its own cache.
      const b = await startWorker("second", cacheB);
      await waitUntil(
        "the second worker runs the trial",
        () => lines(join(t.scratch, "started")).length === 2,
      );
      const [, copy] = lines(join(t.scratch, "started")).map(Number) as [number, number];
      // Only now the killed worker comes back on its cache, and reaps what it left.
      const again = await startWorker("first", cacheA);
      expect(again.stdout()).toMatch(/worker first: killed \d+ process(es)? of a trial a killed worker left/);
      await waitUntil("the orphan is gone", () => !alive(orphan));
      expect(alive(copy)).toBe(true);
      writeFileSync(join(t.scratch, "release"), "");
      const r = await result;
      expect(r.status).toBe("ok");
      expect(r.metrics.score).toBe(1);
      expect(lines(join(t.scratch, "finished")).map(Number)).toEqual([copy]);
      const rows = await client.query(`SELECT worker_id FROM ${schema}.fleet_results WHERE key = $1`, [key]);
      expect(rows.rows.map((x) => x.worker_id.split(":")[0])).toEqual(["second"]);
      for (const w of [b, again]) w.child.kill("SIGTERM");
      await Promise.all([b.done, again.done]);
    } finally {
      await client.end();
      await exec.close();
    }
  }, 240_000);

  /** A trial through a proxy the test cuts the moment the worker sends `sql`; back after `outageMs`. */
  async function blip(name: string, sql: (schema: string) => string, outageMs: number) {
    const t = toy({});
    const proxy = await pgProxy();
    const db = proxy.via(url);
    const waits: string[] = [];
    const exec = await coordinator(t, db, (m) => waits.push(m));
    const client = await testClient();
    try {
      const w = await startWorker(name, removeLater(mkdtempSync(join(tmpdir(), `fleet-cache-${name}-`))), db);
      const cut = proxy.cutOn(sql(schema));
      const spec = trialSpec(t, "node train.mjs");
      const key = spec.env?.AUTOLAB_TRIAL_TOKEN as string;
      const result = exec.runTrial(spec);
      await cut;
      // Longer than the lease's heartbeat (HEARTBEAT_S): the whole database is away, as in a restart.
      await new Promise((r) => setTimeout(r, outageMs));
      await proxy.up();
      const r = await result;
      const rows = await client.query(`SELECT worker_id FROM ${schema}.fleet_results WHERE key = $1`, [key]);
      w.child.kill("SIGTERM");
      const exit = await w.done;
      return { r, t, rows: rows.rows, worker: exit.stdout };
    } finally {
      await client.end();
      await exec.close();
      await proxy.close();
    }
  }

  it("the database goes away while the worker fetches the trial's bundle: the job is put back and run once it is back, not recorded as a crash", async () => {
    const { r, t, rows, worker } = await blip(
      "fetcher",
      (s) => `SELECT data FROM ${s}.fleet_bundles`,
      12_000,
    );
    expect(r.reason).toBeUndefined();
    expect(r.status).toBe("ok");
    expect(worker).toMatch(/put back for another lease: the worker could not prepare the trial's code/);
    expect(t.invocations()).toBe(1);
    expect(rows).toHaveLength(1);
  }, 180_000);

  it("the database goes away while the worker writes the trial's result: the result is written once it is back, the trial run once", async () => {
    const { r, t, rows } = await blip("writer", (s) => `INSERT INTO ${s}.fleet_results`, 12_000);
    expect(r.status).toBe("ok");
    expect(t.invocations()).toBe(1);
    expect(rows).toHaveLength(1);
  }, 180_000);
});
