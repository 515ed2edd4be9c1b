/**
 * The command line's numbers and durations, through the real CLI: each is checked by the rule
 * of program.md's matching field (a zero budget is refused on the command line as in
 * program.md), every bad value is a message naming the flag and a fix — exit 2, never a stack
 * trace — and `serve` says what to do when it cannot listen.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { startServer } from "../src/server/serve.ts";
import { buildNotebook } from "./helpers/notebook-fixture.ts";
import { CLI_MAIN, runCli, stackLines, toysOfFile } from "./helpers/toy-project.ts";

const { toy, removeLater } = toysOfFile();

/** A bad command line: exit 2, `autolab: <flag> …` and a fix naming the flag, no stack, no usage dump. */
function expectBadFlag(r: { code: number | null; stderr: string }, flag: string): void {
  expect(r.code, r.stderr).toBe(2);
  expect(r.stderr.startsWith(`autolab: ${flag}`), r.stderr).toBe(true);
  expect(r.stderr).toMatch(new RegExp(`\\n  fix: Pass ${flag.replace(/[-/]/g, "\\$&")} `));
  expect(stackLines(r.stderr)).toEqual([]);
  expect(r.stderr).not.toMatch(/internal error|Usage:/);
}

describe("durations on the command line get program.md's rule", () => {
  it("-b 0 is refused like budget: 0 in program.md, with the same problem and a fix naming -b", async () => {
    const t = toy();
    const r = await runCli(["run", "-n", "1", "-b", "0"], { cwd: t.dir });
    expectBadFlag(r, "-b/--budget");
    expect(r.stderr).toContain("must be longer than zero");
    expect(r.stderr).toContain("run.budget");
    expect(t.invocations()).toBe(0); // no trial ran with a 0 s budget

    // program.md's own refusal says the same.
    const inProgram = toy({ budget: "0" });
    const p = await runCli(["run", "-n", "1"], { cwd: inProgram.dir });
    expect(p.code).toBe(1);
    expect(p.stderr).toContain("run.budget: must be longer than zero");
  });

  it.each([
    [["run", "-b", "abc"], "-b/--budget", /"abc" is not a duration/],
    [["run", "--budget", "-5s"], "-b/--budget", /is not a duration/],
    [["run", "--max-time", "0s"], "--max-time", /must be longer than zero/],
    [["demo", "-b", "0ms"], "-b/--budget", /must be longer than zero/],
    [["watch", "--interval", "0"], "--interval", /must be longer than zero/],
  ])("%j", async (args, flag, problem) => {
    const t = toy();
    const r = await runCli(args, { cwd: t.dir });
    expectBadFlag(r, flag);
    expect(r.stderr).toMatch(problem);
  });
});

describe("every number on the command line is checked", () => {
  it.each([
    [["serve", "--port", "99999"], "--port", /must be at most 65535/],
    [["serve", "--port", "80.5"], "--port", /not a whole number/],
    [["run", "-n", "1e3"], "-n/--max-experiments", /not a whole number/],
    [["run", "-n", "-1"], "-n/--max-experiments", /not a whole number/],
    [["run", "--max-trials", "ten"], "--max-trials", /not a whole number/],
    [["run", "-s", "0"], "-s/--slots", /at least 1 slot/],
    [["run", "--slots", "300"], "-s/--slots", /at most 256 slots/],
    [["run", "--seed", "0x10"], "--seed", /not a whole number/],
    [["run", "--seed", "99999999999999999999"], "--seed", /must be at most/],
    [["watch", "-n", "0"], "-n/--last", /must be at least 1/],
    [["demo", "-s", "abc"], "-s/--slots", /not a whole number/],
  ])("%j", async (args, flag, problem) => {
    const t = toy();
    const r = await runCli(args, { cwd: t.dir });
    expectBadFlag(r, flag);
    expect(r.stderr).toMatch(problem);
    expect(t.invocations()).toBe(0);
  });
});

describe("serve cannot listen", () => {
  it("a port in use: the message and another --port", async () => {
    const t = toy();
    const other = await startServer({
      ledgerPath: buildNotebook(join(t.scratch, "other"), []),
      port: 0,
      host: "127.0.0.1",
    });
    try {
      const r = await runCli(["serve", "--port", String(other.port)], { cwd: t.dir });
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain(`port ${other.port} on 127.0.0.1 is in use`);
      expect(r.stderr).toContain("fix: Pass another --port");
      expect(stackLines(r.stderr)).toEqual([]);
    } finally {
      await other.close();
    }
  });

  // Only root can drop to an unprivileged user to meet EACCES for real (root may bind port 80).
  const asNobody = process.getuid?.() === 0 && spawnSync("setpriv", ["--version"]).status === 0;
  it.skipIf(!asNobody)("a privileged port without the right: EACCES named, with a fix (as nobody)", () => {
    const dir = mkdtempSync(join(tmpdir(), "autolab-eacces-"));
    removeLater(dir);
    chmodSync(dir, 0o777);
    writeFileSync(
      join(dir, "program.md"),
      "---\nname: x\nobjective: { metric: score, direction: minimize }\nrun: { command: node t.mjs, budget: 5s }\nfiles: { editable: [t.mjs] }\n---\n",
    );
    const r = spawnSync(
      "setpriv",
      [
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        process.execPath,
        CLI_MAIN,
        "serve",
        "--port",
        "80",
      ],
      { cwd: dir, encoding: "utf8", env: { PATH: process.env.PATH ?? "", HOME: dir }, timeout: 60_000 },
    );
    expect(r.status, r.stderr).toBe(1);
    expect(r.stderr).toContain("not allowed to listen on 127.0.0.1:80: ports below 1024 need root");
    expect(r.stderr).toContain("fix: Pass a --port of 1024 or more");
    expect(stackLines(r.stderr)).toEqual([]);
  });
});
