/**
 * A whole lab on a PostgreSQL notebook (docs/distributed.md): `autolab run --db postgres://…`,
 * then every viewer — status, report, log, the dashboard's API, watch, MCP — against it, and
 * `autolab db import` moving a SQLite lab with every kind of row into PostgreSQL.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server, type Socket, connect as tcpConnect } from "node:net";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, describe, expect, it } from "vitest";
import { importNotebook } from "../src/app/db-import.ts";
import { AutolabError } from "../src/core/errors.ts";
import { notebookDifferences } from "../src/ledger/copy-notebook.ts";
import { PgLedger } from "../src/ledger/pg/pg-ledger.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { newExperiment, newRun, newTrial, trialResult } from "./contracts/ledger-contract.ts";
import { tempDir } from "./helpers/git-project.ts";
import { dropSchemas, freshSchemaUrl, PG_SKIP, PG_SKIP_REASON } from "./helpers/pg.ts";
import {
  CLI_MAIN,
  commitAll,
  createToyProject,
  readLedger,
  runCli,
  spawnCli,
  stackLines,
} from "./helpers/toy-project.ts";

afterAll(dropSchemas);

describe.skipIf(PG_SKIP)(
  `a lab on a PostgreSQL notebook (${PG_SKIP ? PG_SKIP_REASON : "PostgreSQL"})`,
  () => {
    it("runs, and status, report, log, serve, watch and MCP read it; nothing is written to .autolab/lab.db", async () => {
      const t = createToyProject({ acceptance: "greedy" });
      const url = freshSchemaUrl("e2e"); // with the test role's password: never shown
      const password = new URL(url).password;
      const run = await runCli(["run", "-n", "2", "--db", url], { cwd: t.dir, timeoutMs: 120_000 });
      expect(run.code, run.stdout + run.stderr).toBe(0);
      expect(existsSync(join(t.dir, ".autolab", "lab.db"))).toBe(false);
      expect(run.stdout).toMatch(/Notebook: postgres:\/\/.*\?schema=e2e_/);
      if (password) expect(run.stdout + run.stderr).not.toContain(`:${password}@`);

      // The same notebook through AUTOLAB_DB.
      const env = { AUTOLAB_DB: url };
      const status = await runCli(["status", "--json"], { cwd: t.dir, env });
      expect(status.code, status.stderr).toBe(0);
      const s = JSON.parse(status.stdout) as { experiments: { n: number }[] | number };
      expect(JSON.stringify(s)).toContain('"tag"');
      const log = await runCli(["log"], { cwd: t.dir, env });
      expect(log.code, log.stderr).toBe(0);
      expect(log.stdout).toMatch(/^2 +(keep|discard)/m);
      const report = await runCli(["report"], { cwd: t.dir, env });
      expect(report.code, report.stderr).toBe(0);
      expect(stackLines(report.stderr)).toEqual([]);

      // The dashboard's API.
      const serve = spawnCli(["serve", "--port", "0"], { cwd: t.dir, env });
      try {
        await serve.waitFor(/http:\/\/127\.0\.0\.1:(\d+)\/\?token=(\S+)/);
        const [, port, token] = /http:\/\/127\.0\.0\.1:(\d+)\/\?token=(\S+)/.exec(serve.stdout()) ?? [];
        const auth = { headers: { authorization: `Bearer ${token}` } };
        const runs = (await (await fetch(`http://127.0.0.1:${port}/api/runs`, auth)).json()) as {
          tag: string;
        }[];
        expect(runs.map((r) => r.tag)).toHaveLength(1);
        const tag = runs[0]?.tag as string;
        const page = (await (
          await fetch(`http://127.0.0.1:${port}/api/experiments?run=${tag}`, auth)
        ).json()) as {
          total: number;
        };
        expect(page.total).toBe(3);
      } finally {
        serve.child.kill("SIGTERM");
        await serve.done;
      }

      // watch: the run's summary, then a line per new row written by another process. The interval
      // is ten minutes: only the notebook's NOTIFY can wake it in time.
      const watch = spawnCli(["watch", "--interval", "10m"], { cwd: t.dir, env });
      try {
        await watch.waitFor(/best/);
        const more = await runCli(["run", "-n", "3"], { cwd: t.dir, env, timeoutMs: 120_000 });
        expect(more.code, more.stderr).toBe(0);
        await watch.waitFor(/#3 (keep|discard)/);
      } finally {
        watch.child.kill("SIGINT");
        await watch.done;
      }

      // MCP: an interactive agent's view of the same notebook.
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [CLI_MAIN, "mcp", "-p", t.dir],
        stderr: "pipe",
        env: {
          ...getDefaultEnvironment(),
          AUTOLAB_KNOWLEDGE: process.env.AUTOLAB_KNOWLEDGE as string,
          AUTOLAB_DB: url,
        },
      });
      const client = new Client({ name: "test-agent", version: "1.0.0" });
      await client.connect(transport);
      try {
        const res = (await client.callTool({ name: "status", arguments: {} })) as {
          content: { text: string }[];
        };
        const mcpStatus = JSON.parse(res.content.map((c) => c.text).join("\n")) as {
          counts: { total: number };
        };
        expect(mcpStatus.counts.total).toBe(4);
      } finally {
        await client.close();
      }
      t.cleanup();
    });

    it("finds the notebook from program.md's db: (the password from PGPASSWORD)", async () => {
      const t = createToyProject({ acceptance: "greedy" });
      const u = new URL(freshSchemaUrl("progdb"));
      const password = decodeURIComponent(u.password);
      u.password = "";
      const file = join(t.dir, "program.md");
      writeFileSync(
        file,
        readFileSync(file, "utf8").replace(/^name: (.*)$/m, `name: $1\ndb: ${u.toString()}`),
      );
      commitAll(t.dir, "the notebook on PostgreSQL");
      const env = { PGPASSWORD: password, AUTOLAB_DB: "" };
      const run = await runCli(["run", "-n", "1"], { cwd: t.dir, env, timeoutMs: 120_000 });
      expect(run.code, run.stdout + run.stderr).toBe(0);
      expect(existsSync(join(t.dir, ".autolab", "lab.db"))).toBe(false);
      const status = await runCli(["status", "--json"], { cwd: t.dir, env });
      expect((JSON.parse(status.stdout) as { counts: { total: number } }).counts.total).toBe(2);
      t.cleanup();
    });

    it("waits out a database that goes away mid-run, says so, and resumes: nothing lost", async () => {
      const t = createToyProject({ acceptance: "greedy", sleepMs: 300 });
      const direct = new URL(freshSchemaUrl("outage"));
      const proxy = await tcpProxy(Number(direct.port || 5432));
      const url = new URL(direct);
      url.port = String(proxy.port);
      const cli = spawnCli(["run", "-n", "5"], {
        cwd: t.dir,
        env: { AUTOLAB_DB: url.toString() },
        timeoutMs: 120_000,
      });
      try {
        await cli.waitFor(/#2 /, 60_000);
        proxy.down(); // every connection cut, new ones refused
        await new Promise((r) => setTimeout(r, 3000));
        await proxy.up();
        const done = await cli.done;
        expect(done.code, done.stdout + done.stderr).toBe(0);
        expect(done.stderr).toMatch(/does not answer .*waiting up to \d+ s/);
        expect(done.stderr).toMatch(/answers again; going on/);
        expect(stackLines(done.stderr)).toEqual([]);
      } finally {
        cli.child.kill("SIGKILL");
        await proxy.close();
      }
      const db = readLedger(t.dir, direct.toString());
      expect(db.experiments.map((e) => e.n)).toEqual([0, 1, 2, 3, 4, 5]);
      expect(db.decisions).toHaveLength(6);
      expect(db.trialResults).toHaveLength(db.trialStarts.length);
      t.cleanup();
    });

    it("db import moves a SQLite lab with every kind of row, and reads back the same", () => {
      const file = join(tempDir(), ".autolab", "lab.db");
      const lite = new SqliteLedger(file);
      const run = lite.createRun(newRun());
      for (let n = 0; n < 3; n++) {
        const e = lite.addExperiment(
          newExperiment(run.id, n, { params: { lr: n } }),
          n === 0 ? undefined : `context of #${n}`,
        );
        const trial = lite.startTrial(newTrial(e.id, 1));
        lite.finishTrial(
          trial,
          trialResult({ metrics: { loss: 3 - n, odd: Number.POSITIVE_INFINITY } }),
          "/logs",
        );
        lite.decide(e.id, { action: n === 1 ? "discard" : "keep", reason: "r", metric: 3 - n });
        lite.addNote(run.id, e.id, `note ${n}`);
        lite.addHookRun({
          runId: run.id,
          n,
          phase: "after",
          command: "echo",
          status: "ok",
          exitCode: 0,
          wallS: 0.1,
          output: "hi",
          logDir: "/logs",
        });
      }
      lite.startSession(run.id, 2, "bubblewrap 0.8.0");
      lite.addAdvice({
        runId: run.id,
        trigger: "stalled",
        decided: 3,
        afterN: 2,
        agent: "builtin",
        verdict: "ideas",
        ideas: ["try x"],
        reason: "",
      });
      lite.addImportedResults([
        {
          source: "results.tsv",
          seq: 1,
          commit: "abc",
          metrics: { loss: 5 },
          status: "keep",
          description: "d",
        },
      ]);
      // A trial left open (the harness died): copied as open.
      const open = lite.addExperiment(newExperiment(run.id, 3));
      lite.startTrial(newTrial(open.id, 1));
      lite.close();

      const url = freshSchemaUrl("imp");
      const { counts } = importNotebook(file, url);
      expect(counts).toMatchObject({
        runs: 1,
        experiments: 4,
        trial_starts: 4,
        trial_results: 3,
        decisions: 3,
      });
      expect(counts).toMatchObject({ notes: 3, sessions: 1, imported_results: 1, hook_runs: 3, advice: 1 });
      expect(counts).toMatchObject({ proposal_contexts: 2 });
      const a = new SqliteLedger(file);
      const b = new PgLedger(url);
      try {
        expect(notebookDifferences(a, b)).toEqual([]);
        expect(b.proposalContext(run.id, 2)).toBe("context of #2");
        // Ids were kept, and the next row continues after them.
        const next = b.addExperiment(newExperiment(run.id, 4));
        expect(next.id).toBe(5);
        expect(b.listExperiments(run.id).map((e) => e.n)).toEqual([0, 1, 2, 3, 4]);
      } finally {
        a.close();
        b.close();
      }
      // A second import into the same notebook is refused.
      expect(() => importNotebook(file, url)).toThrow(AutolabError);
      try {
        importNotebook(file, url);
      } catch (err) {
        expect((err as AutolabError).code).toBe("DB_NOT_EMPTY");
      }
    });
  },
);

/** A TCP proxy to PostgreSQL on 127.0.0.1 that a test can take down (cut and refuse) and bring back. */
async function tcpProxy(
  target: number,
): Promise<{ port: number; down(): void; up(): Promise<void>; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let port = 0;
  let server: Server | undefined;
  const listen = () =>
    new Promise<void>((resolve) => {
      const srv = createServer((client) => {
        const upstream = tcpConnect(target, "127.0.0.1");
        for (const s of [client, upstream]) {
          sockets.add(s);
          s.on("close", () => sockets.delete(s));
          s.on("error", () => s.destroy());
        }
        client.pipe(upstream).pipe(client);
        client.on("close", () => upstream.destroy());
        upstream.on("close", () => client.destroy());
      });
      server = srv;
      srv.listen(port, "127.0.0.1", () => {
        port = (srv.address() as { port: number }).port;
        resolve();
      });
    });
  await listen();
  const down = () => {
    server?.close();
    server = undefined;
    for (const s of sockets) s.destroy();
  };
  return {
    get port() {
      return port;
    },
    down,
    up: listen,
    close: async () => down(),
  };
}
