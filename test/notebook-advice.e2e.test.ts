/**
 * Advice that fits the problem, through the real CLI: a baseline whose command works but
 * prints another metric is told which metrics it printed and which one was likely meant (only a
 * command that failed is told to work); a damaged notebook is called damaged, with where it is
 * and how to go on; a notebook emptied to 0 bytes where a lab has run is refused instead of
 * silently replaced by a new one.
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  commitAll,
  runCli,
  stackLines,
  type ToyOptions,
  type ToyProject,
  toysOfFile,
} from "./helpers/toy-project.ts";

const { toy } = toysOfFile();

function expectUserError(r: { code: number | null; stderr: string }): void {
  expect(r.code, r.stderr).toBe(1);
  expect(r.stderr).toMatch(/^autolab: /);
  expect(stackLines(r.stderr)).toEqual([]);
  expect(r.stderr).not.toMatch(/internal error/);
}

/** The toy with its objective renamed in program.md (committed). */
function toyWithObjective(metric: string, opts: ToyOptions = {}): ToyProject {
  const t = toy(opts);
  const file = join(t.dir, "program.md");
  const text = readFileSync(file, "utf8").replace("metric: score,", `metric: ${metric},`);
  writeFileSync(file, text);
  commitAll(t.dir, `objective ${metric}`);
  return t;
}

describe("a baseline without its objective", () => {
  it("the command worked and printed other metrics: they are listed, with the likely one", async () => {
    const t = toyWithObjective("scroe");
    const r = await runCli(["run", "-n", "1"], { cwd: t.dir });
    expectUserError(r);
    expect(r.stderr).toContain(
      "`node train.mjs` ran and printed train_loss, score, but no scroe — did you mean score?",
    );
    expect(r.stderr).toContain(
      "fix: Name the metric to optimize in program.md's objective (objective: { metric: score, … })",
    );
    // The command is not what is wrong.
    expect(r.stderr).not.toMatch(/works on the committed code/);
  });

  it("nothing close: the metrics are listed without a guess", async () => {
    const t = toyWithObjective("accuracy");
    const r = await runCli(["run", "-n", "1"], { cwd: t.dir });
    expectUserError(r);
    expect(r.stderr).toContain("ran and printed train_loss, score, but no accuracy.");
    expect(r.stderr).toContain("objective: { metric: <one of them>, … }");
    expect(r.stderr).not.toMatch(/works on the committed code/);
  });

  it("a command that failed is still told to work", async () => {
    const t = toy({ plan: ["crash"] });
    const r = await runCli(["run", "-n", "1"], { cwd: t.dir });
    expectUserError(r);
    expect(r.stderr).toContain("fix: Fix the program so that `node train.mjs` works on the committed code");
    expect(r.stderr).not.toMatch(/did you mean|ran and printed/);
  });
});

/** A toy project after one short run: a notebook, worktrees, logs and refs of kept experiments. */
async function ranToy(): Promise<ToyProject> {
  const t = toy({ score: "decreasing" });
  const r = await runCli(["run", "-n", "1"], { cwd: t.dir });
  expect(r.code, r.stderr).toBe(0);
  // The notebook is closed: SQLite has folded its write-ahead log back into lab.db.
  for (const f of ["lab.db-wal", "lab.db-shm"]) rmSync(join(t.dir, ".autolab", f), { force: true });
  return t;
}

describe("a damaged notebook", () => {
  it.each([
    ["not a database at all", (db: string) => writeFileSync(db, "this is not a database\n".repeat(100))],
    [
      "damaged pages behind an intact header",
      (db: string) => {
        const size = statSync(db).size;
        const bytes = readFileSync(db);
        bytes.fill(0xde, 4096, size);
        writeFileSync(db, bytes);
      },
    ],
  ])("%s: called damaged, where it is, how to go on — for views and run alike", async (_name, damage) => {
    const t = await ranToy();
    const db = join(t.dir, ".autolab", "lab.db");
    damage(db);
    for (const args of [["log"], ["status"], ["run", "-n", "2"]]) {
      const r = await runCli(args, { cwd: t.dir });
      expectUserError(r);
      expect(r.stderr).toContain(`the lab notebook ${db} is damaged`);
      expect(r.stderr).toContain("Move it aside");
      expect(r.stderr).toContain("refs/autolab/");
      expect(r.stderr).not.toMatch(/writable|disk is not full/);
    }
    // The advice works: moved aside, a new run starts; the old run's branch is still in git.
    mkdirSync(join(t.dir, ".autolab", "damaged"));
    for (const f of readdirSync(join(t.dir, ".autolab")).filter((f) => f.startsWith("lab.db")))
      renameSync(join(t.dir, ".autolab", f), join(t.dir, ".autolab", "damaged", f));
    const branches = t.git(["branch", "--list", "autolab/*"]).trim();
    const again = await runCli(["run", "-n", "1"], { cwd: t.dir });
    expect(again.code, again.stderr).toBe(0);
    expect(t.git(["branch", "--list", "autolab/*"])).toContain(branches.replace(/^[*+ ]+/, ""));
  });
});

describe("a notebook emptied to 0 bytes", () => {
  it("where a lab has run: refused with what is gone and how to go on, and left as it is", async () => {
    const t = await ranToy();
    const db = join(t.dir, ".autolab", "lab.db");
    writeFileSync(db, "");
    for (const args of [["run", "-n", "2"], ["log"], ["serve", "--port", "0"]]) {
      const r = await runCli(args, { cwd: t.dir });
      expectUserError(r);
      expect(r.stderr).toContain(`the lab notebook ${db} is empty (0 bytes), but this lab has run before`);
      expect(r.stderr).toContain("history is gone");
      expect(r.stderr).toContain("move it aside");
      expect(statSync(db).size).toBe(0);
    }
  });

  it("known from git's refs alone when .autolab holds nothing else", async () => {
    const t = await ranToy();
    const state = join(t.dir, ".autolab");
    for (const f of readdirSync(state)) rmSync(join(state, f), { recursive: true, force: true });
    t.git(["worktree", "prune"]);
    writeFileSync(join(state, "lab.db"), "");
    const r = await runCli(["run", "-n", "2"], { cwd: t.dir });
    expectUserError(r);
    expect(r.stderr).toMatch(/git has refs\/autolab\//);
  });

  it("in a project that never ran, an empty file is just a new notebook", async () => {
    const t = toy();
    mkdirSync(join(t.dir, ".autolab"));
    writeFileSync(join(t.dir, ".autolab", "lab.db"), "");
    const r = await runCli(["run", "-n", "1"], { cwd: t.dir });
    expect(r.code, r.stderr).toBe(0);
  });
});
