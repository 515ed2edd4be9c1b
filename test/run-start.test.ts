/**
 * What `autolab run` leaves behind when it starts, and what it starts from (the real CLI, real
 * git): the notebook never ends up in git, even when the first run fails, and a new run follows
 * the committed program.md, recording which one.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createRun } from "../src/app/create-run.ts";
import { notebookPath } from "../src/cli/serve-command.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { sha256 } from "../src/workspace/git-workspace.ts";
import { runCli, stackLines, type ToyProject, toysOfFile } from "./helpers/toy-project.ts";

const { toy, removeLater } = toysOfFile();

const ID = ["-c", "user.name=t", "-c", "user.email=t@localhost"];

/** What `git add -A` would put into the next commit under .autolab/. */
function stagedState(t: ToyProject): string[] {
  t.git(["add", "-A"]);
  return t
    .git(["diff", "--cached", "--name-only"])
    .split("\n")
    .filter((f) => f.includes(".autolab"));
}

function expectUserError(r: { code: number | null; stderr: string }, code: RegExp): void {
  expect(r.code, r.stderr).toBe(1);
  expect(r.stderr).toMatch(/^autolab: /m);
  expect(r.stderr).toMatch(code);
  expect(stackLines(r.stderr)).toEqual([]);
}

const program = (t: ToyProject) => join(t.dir, "program.md");
const edit = (t: ToyProject, from: string, to: string) =>
  writeFileSync(program(t), readFileSync(program(t), "utf8").replace(from, to));

describe("the notebook stays out of git", () => {
  it("a first run that fails validation leaves nothing for `git add -A`", async () => {
    const t = toy();
    edit(t, "editable: [train.mjs]", "editable: [trian.mjs]");
    t.git([...ID, "commit", "-qam", "typo"]);
    const r = await runCli(["run", "-n", "1"], { cwd: t.dir });
    expectUserError(r, /trian\.mjs, which does not exist/);
    expect(stagedState(t)).toEqual([]);
  });

  it("a first run that fails after the notebook exists leaves nothing for `git add -A` either", async () => {
    const t = toy();
    edit(t, "search:", "ladder: [2s]\nsearch:");
    t.git([...ID, "commit", "-qam", "ladder"]);
    // --budget below the ladder is refused once the notebook is open.
    const r = await runCli(["run", "-n", "1", "-b", "1s"], { cwd: t.dir });
    expectUserError(r, /not above the proxy ladder/);
    expect(existsSync(join(t.dir, ".autolab", "lab.db"))).toBe(true);
    expect(stagedState(t)).toEqual([]);
    expect(readFileSync(join(t.dir, ".git", "info", "exclude"), "utf8").split("\n")).toContain(".autolab/");
  });

  it("`autolab serve` before `git init`: the empty notebook it makes is ignored once the project is a repository", () => {
    const dir = mkdtempSync(join(tmpdir(), "autolab-serve-first-"));
    removeLater(dir);
    writeFileSync(join(dir, "program.md"), "---\nname: x\n---\n");
    const { ledgerPath } = notebookPath(dir);
    expect(existsSync(ledgerPath)).toBe(true);
    execFileSync("git", ["init", "-q", "-b", "main"], { cwd: dir });
    execFileSync("git", ["add", "-A"], { cwd: dir });
    const staged = execFileSync("git", ["diff", "--cached", "--name-only"], { cwd: dir, encoding: "utf8" });
    expect(staged.trim()).toBe("program.md");
  });
});

describe("a new run follows the committed program.md", () => {
  it("refuses uncommitted changes to program.md, saying how to fix it, before making a notebook", async () => {
    const t = toy();
    edit(t, "budget: 5s", "budget: 7s");
    const r = await runCli(["run", "-n", "1"], { cwd: t.dir });
    expectUserError(r, /program\.md has uncommitted changes/);
    expect(r.stderr).toContain("git commit program.md");
    expect(r.stderr).toContain("--allow-dirty");
    expect(t.invocations()).toBe(0);
    expect(existsSync(join(t.dir, ".autolab", "lab.db"))).toBe(false);
  });

  it("refuses a program.md that was never committed", async () => {
    const t = toy();
    t.git(["rm", "-q", "--cached", "program.md"]);
    t.git([...ID, "commit", "-qm", "untrack program.md"]);
    const r = await runCli(["run", "-n", "1"], { cwd: t.dir });
    expectUserError(r, /program\.md is not committed/);
    expect(r.stderr).toContain("git add program.md");
  });

  it("with --allow-dirty runs the committed contract and records it: blob, and what was not applied", async () => {
    const t = toy();
    const committedBlob = t.git(["rev-parse", "HEAD:program.md"]).trim();
    edit(t, "budget: 5s", "budget: 7s");
    const r = await runCli(["run", "-n", "0", "--allow-dirty"], { cwd: t.dir });
    expect(r.code, r.stderr).toBe(0);
    const ledger = new SqliteLedger(join(t.dir, ".autolab", "lab.db"));
    try {
      const run = ledger.latestRun();
      expect(run?.programBlob).toBe(committedBlob);
      expect(run?.contract?.["run.budget"]).toBe(5000);
      const trial = ledger.listExperiments(run?.id ?? 0)[0]?.trials[0];
      expect(trial?.budgetMs).toBe(5000);
      const notes = ledger.listNotes(run?.id ?? 0).map((n) => n.text);
      expect(notes.join("\n")).toMatch(
        new RegExp(
          `uncommitted changes \\(--allow-dirty\\); the run uses the committed one, blob ${committedBlob}\\. Not applied: run\\.budget: 5000 → 7000`,
        ),
      );
    } finally {
      ledger.close();
    }
    // Resuming with the working copy's different contract is refused as a changed program.
    const again = await runCli(["run", "-n", "1"], { cwd: t.dir });
    expectUserError(again, /program\.md changed since run .* started/);
  });

  it("records the program.md blob of every new run", async () => {
    const t = toy();
    const outcome = await createRun({ program: t.dir, tag: "a", maxExperiments: 0 });
    outcome.lab.ledger.close();
    expect(outcome.run.programBlob).toBe(t.git(["rev-parse", "HEAD:program.md"]).trim());
  });

  it("treats a dirty protected file the same way: refused, or with --allow-dirty the committed bytes are pinned", async () => {
    const t = toy({ evaluate: true });
    const committed = t.git(["show", "HEAD:evaluate.mjs"]);
    writeFileSync(join(t.dir, "evaluate.mjs"), 'console.log("score: 0");\n');
    await expect(createRun({ program: t.dir, tag: "a", maxExperiments: 0 })).rejects.toMatchObject({
      code: "DIRTY_WORKTREE",
      message: expect.stringContaining("evaluate.mjs"),
    });
    const outcome = await createRun({ program: t.dir, tag: "a", maxExperiments: 0, allowDirty: true });
    outcome.lab.ledger.close();
    expect(outcome.run.protectedHashes["evaluate.mjs"]).toBe(sha256(committed));
  });
});
