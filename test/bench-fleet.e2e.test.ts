/**
 * `autolab bench --fleet <url>` (docs/learning.md "autolab bench"): a one-cell suite run by the
 * real CLI with a real `autolab worker` on a fresh PostgreSQL schema. Every trial of the cell —
 * the run's and the re-measurement's — is a job a worker ran (its id on the fleet's result rows),
 * and the bench's report is written with the cell's result. A rubric-graded program is refused
 * before any cell: the fleet does not grade.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { fleetSchemaOfFile, NO_PG, NO_PG_REASON, requirePgCase, testClient } from "./helpers/fleet-db.ts";
import { knobProject } from "./helpers/knob-project.ts";
import { type CliProcess, runCli, spawnCli, stackLines, toysOfFile } from "./helpers/toy-project.ts";

const { removeLater } = toysOfFile();
const { url, schema } = fleetSchemaOfFile();
/** A second fleet, for the test whose worker has two slots. */
const wide = fleetSchemaOfFile();
requirePgCase();

const workers: CliProcess[] = [];
const killWorkers = async () => {
  const live = workers.splice(0).filter((w) => w.child.exitCode === null && w.child.signalCode === null);
  for (const w of live) w.child.kill("SIGKILL");
  await Promise.all(live.map((w) => w.done.catch(() => {})));
};
afterEach(killWorkers);
afterAll(killWorkers);

/** `autolab worker` as its own process (as test/fleet.e2e.test.ts starts them); resolves once registered. */
async function startWorker(name: string, db = url, extra: string[] = []): Promise<CliProcess> {
  const cache = removeLater(mkdtempSync(join(tmpdir(), `bench-fleet-cache-${name}-`)));
  const w = spawnCli(["worker", "--db", db, "--name", name, "--cache", cache, ...extra], {
    cwd: tmpdir(),
    timeoutMs: 300_000,
  });
  workers.push(w);
  await w.waitFor(new RegExp(`worker ${name}: \\d+ slots? on`), 60_000);
  return w;
}

interface Summary {
  complete: boolean;
  cells: {
    config: string;
    program: string;
    status: string;
    trials: number;
    remeasured?: { trials: number };
  }[];
}

describe.skipIf(NO_PG)(`autolab bench --fleet (${NO_PG ? NO_PG_REASON : "PostgreSQL"})`, () => {
  it("runs the cell's trials and its re-measurement on the worker and writes the report", async () => {
    const work = removeLater(mkdtempSync(join(tmpdir(), "autolab-bench-fleet-")));
    const p = knobProject({ score: "(X - 2) ** 2", knob: "{ low: 0, high: 10 }" });
    removeLater(p);
    writeFileSync(
      join(work, "suite.yaml"),
      `programs:
  - { path: ${p}, split: held-out, name: knob }
configurations:
  greedy: { acceptance: greedy, agent: builtin }
budget: { trials: 4 }
seeds: [1]
remeasure: 2
`,
    );
    await startWorker("benchw");
    const out = join(work, "out");
    const r = await runCli(["bench", "suite.yaml", "--fleet", url, "--out", out, "--json"], {
      cwd: work,
      timeoutMs: 240_000,
    });
    expect(stackLines(r.stderr)).toEqual([]);
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout) as Summary;
    expect(summary.complete).toBe(true);
    const [cell] = summary.cells;
    expect(cell).toMatchObject({
      config: "greedy",
      program: "knob",
      status: "ok",
      remeasured: { trials: 2 },
    });
    expect(cell?.trials).toBe(4);

    const client = await testClient();
    try {
      const rows = (await client.query(`SELECT worker_id FROM ${schema}.fleet_results`)).rows as {
        worker_id: string;
      }[];
      // The run's 4 trials and the re-measurement's 2 seeds × (the baseline, and the best when it
      // is another commit): every one of them a job the worker ran, none on this machine.
      expect(rows.length).toBeGreaterThanOrEqual(4 + 2);
      expect(rows.length).toBeLessThanOrEqual(4 + 2 * 2);
      for (const row of rows) expect(row.worker_id).toMatch(/^benchw:/);
    } finally {
      await client.end();
    }
    const md = readFileSync(join(out, "report", "report.md"), "utf8");
    expect(md).toMatch(/greedy/);
    expect(md).toMatch(/knob/);
    const json = JSON.parse(readFileSync(join(out, "report", "report.json"), "utf8")) as Summary;
    expect(json.cells).toHaveLength(1);
  }, 300_000);

  it("a cell runs with its configuration's slots, not with as many as the fleet has live", async () => {
    const work = removeLater(mkdtempSync(join(tmpdir(), "autolab-bench-fleet-")));
    const p = removeLater(knobProject({ score: "(X - 2) ** 2", knob: "{ low: 0, high: 10 }" }));
    writeFileSync(
      join(work, "suite.yaml"),
      `programs:
  - { path: ${p}, split: held-out, name: knob }
configurations:
  serial: { acceptance: greedy, agent: builtin }
  two: { acceptance: greedy, agent: builtin, slots: 2 }
budget: { trials: 4 }
seeds: [1]
remeasure: 0
`,
    );
    await startWorker("wide", wide.url, ["--slots", "3"]);
    const out = join(work, "out");
    const r = await runCli(["bench", "suite.yaml", "--fleet", wide.url, "--out", out, "--json"], {
      cwd: work,
      timeoutMs: 240_000,
    });
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout) as Summary;
    expect(summary.cells.map((c) => [c.config, c.status])).toEqual([
      ["serial", "ok"],
      ["two", "ok"],
    ]);
    // A slot's worktree (bench.s<j>) is made for every slot beyond the first the run uses. The
    // fleet's 3 live slots must not turn a serial configuration into a 3-slot one (its results
    // would depend on how many workers happened to be up), nor widen the 2-slot one.
    const slotTrees = (config: string) =>
      readdirSync(join(out, "cells", config, "knob", "seed-1", ".autolab", "worktrees"))
        .filter((d) => /^bench\.s\d+$/.test(d))
        .sort();
    expect(slotTrees("serial")).toEqual([]);
    expect(slotTrees("two")).toEqual(["bench.s1"]);
  }, 300_000);
});

describe.skipIf(NO_PG)(
  `a rubric-graded program on the fleet (${NO_PG ? NO_PG_REASON : "PostgreSQL"})`,
  () => {
    // The fleet runs a trial's command and evaluate on a worker and sends back its result and log
    // tails; the judges are called by the harness of `autolab run`, on files that stay on the worker.
    async function rubricProject(): Promise<string> {
      const work = removeLater(mkdtempSync(join(tmpdir(), "autolab-rubric-fleet-")));
      const init = await runCli(["init", join(work, "p"), "--example", "rubric-writeup"], { cwd: work });
      expect(init.code, init.stderr).toBe(0);
      return join(work, "p");
    }

    it("autolab run --fleet refuses it at load, before any trial, naming the problem and the fix", async () => {
      const dir = await rubricProject();
      // A worker is up: without the refusal the baseline's trial would run there, ungraded.
      await startWorker("rubricw");
      const r = await runCli(["run", "--fleet", url, "-n", "1"], { cwd: dir, timeoutMs: 120_000 });
      expect(stackLines(r.stderr)).toEqual([]);
      expect(r.code, r.stdout + r.stderr).toBe(2); // FLEET_OPTIONS_INVALID: a usage error
      expect(r.stderr).toMatch(/rubric/);
      expect(r.stderr).toMatch(/worker fleet/);
      expect(r.stderr).toMatch(/fix: .*without --fleet/);
      expect(existsSync(join(dir, ".autolab", "lab.db"))).toBe(false);
      const client = await testClient();
      try {
        const jobs = await client.query(
          `SELECT count(*)::int AS n FROM ${schema}.fleet_jobs WHERE label LIKE '%rubric%' OR payload::text LIKE '%writeup%'`,
        );
        expect(jobs.rows[0]?.n).toBe(0);
      } finally {
        await client.end();
      }
    }, 180_000);

    it("autolab bench --fleet refuses a suite with one, before any cell", async () => {
      const dir = await rubricProject();
      const work = removeLater(mkdtempSync(join(tmpdir(), "autolab-bench-fleet-")));
      writeFileSync(
        join(work, "suite.yaml"),
        `programs:\n  - { path: ${dir}, split: held-out, name: note }\nconfigurations:\n  a: {}\nbudget: { experiments: 1 }\nseeds: 1\n`,
      );
      const r = await runCli(["bench", "suite.yaml", "--fleet", url, "--out", join(work, "out")], {
        cwd: work,
        timeoutMs: 120_000,
      });
      expect(stackLines(r.stderr)).toEqual([]);
      expect(r.code, r.stdout + r.stderr).toBe(2); // FLEET_OPTIONS_INVALID: a usage error
      expect(r.stderr).toMatch(/note.*rubric|rubric.*note/);
      expect(r.stderr).toMatch(/fix: /);
      expect(existsSync(join(work, "out", "cells"))).toBe(false);
    }, 180_000);
  },
);
