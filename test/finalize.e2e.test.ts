/**
 * `autolab finalize` end to end: a real run (scripted researcher, real git, real trials in the
 * sandbox) whose kept changes become branches — dependencies from overlapping hunks, commits
 * from the notebook, idempotent --apply, --verify re-measuring each branch alone, --pr with a
 * fake `gh` — and the refusals (dirty tree, nothing kept, a branch in the way).
 */
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ScriptedStep } from "../src/agents/scripted-agent.ts";
import { buildBranches, planFinalize } from "../src/app/finalize.ts";
import { finalizeRun, isAutolabError, renderPlan } from "../src/index.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { findRepo } from "../src/workspace/git-workspace.ts";
import { runScripted } from "./helpers/scripted-run.ts";
import { runCli } from "./helpers/toy-project.ts";
import { git } from "./helpers/value-project.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** params.mjs: knob A on line 1, B on line 2, C on line 12, D on line 22 (blank-ish spacers between). */
function paramsFile(v: { A: number; B: number; C: number; D: number }): string {
  const spacer = (from: number) => Array.from({ length: 9 }, (_, i) => `// spacer ${from + i}`);
  return [
    `export const A = ${v.A};`,
    `export const B = ${v.B};`,
    ...spacer(3),
    "// ---",
    `export const C = ${v.C};`,
    ...spacer(13),
    "// ---",
    `export const D = ${v.D};`,
    "",
  ].join("\n");
}

const set = (name: "A" | "B" | "C" | "D", value: number) => (old: string) =>
  old.replace(new RegExp(`^export const ${name} = .*;$`, "m"), `export const ${name} = ${value};`);

/**
 * Lower is better: A and B help, C helps alone, D helps only when A is set (so its gain
 * disappears on a branch without #1).
 */
function project(sub = ""): string {
  const root = mkdtempSync(join(tmpdir(), "autolab-finalize-"));
  dirs.push(root);
  const dir = join(root, sub);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "params.mjs"), paramsFile({ A: 0, B: 0, C: 0, D: 0 }));
  writeFileSync(
    join(dir, "run.mjs"),
    `import { A, B, C, D } from "./params.mjs";\nconsole.log("score: " + (100 - 10 * A - 5 * B - 4 * C - (A > 0 ? 3 * D : 0)));\n`,
  );
  writeFileSync(
    join(dir, "program.md"),
    `---
name: finalize-test
objective: { metric: score, direction: minimize }
run:
  command: node run.mjs
  budget: 10s
files:
  editable: [params.mjs]
  protected: [run.mjs]
acceptance: greedy
---
Lower the score.
`,
  );
  git(root, "init", "-q", "-b", "main");
  git(root, "add", "-A");
  git(root, "commit", "-qm", "init");
  return dir;
}

const STEPS: ScriptedStep[] = [
  {
    hypothesis: "Raise A to 1",
    mechanism: "A lowers the score by 10 per unit",
    edits: { "params.mjs": set("A", 1) },
  },
  { hypothesis: "Raise C to 1", mechanism: "C is independent of A", edits: { "params.mjs": set("C", 1) } },
  {
    hypothesis: "Raise A to 2 and B to 1",
    mechanism: "more of A, and B next to it",
    edits: { "params.mjs": (o) => set("B", 1)(set("A", 2)(o)) },
  },
  // A researcher's text is untrusted: an escape sequence in it must reach no terminal.
  {
    hypothesis: "Raise D to 1 \u001b]0;pwned\u0007",
    mechanism: "D pays off once A is set",
    edits: { "params.mjs": set("D", 1) },
  },
];

let dir = "";
beforeAll(async () => {
  dir = project();
  const out = await runScripted(dir, STEPS);
  expect(out.experiments.filter((e) => e.decision?.action === "keep").map((e) => e.n)).toEqual([
    0, 1, 2, 3, 4,
  ]);
}, 120_000);

const show = (ref: string, path = "params.mjs") => git(dir, "show", `${ref}:${path}`);
const branches = () =>
  git(dir, "for-each-ref", "--format=%(refname:short)", "refs/heads/autolab-finalize/")
    .split("\n")
    .filter(Boolean);

describe("autolab finalize", () => {
  it("plans one branch per kept change, with dependencies from overlapping hunks, and writes nothing", async () => {
    const r = await runCli(["finalize"], { cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("dry run");
    expect(r.stdout).toContain("autolab-finalize/t/1-raise-a-to-1");
    expect(r.stdout).toContain("autolab-finalize/t/3-raise-a-to-2-and-b-to-1");
    expect(r.stdout).toMatch(/depends on: #1 \(overlapping lines in params\.mjs\)/);
    expect(r.stdout).toContain("#4 Raise D to 1 \\x1b]0;pwned\\x07");
    expect(r.stdout).not.toContain("\u001b");
    expect(branches()).toEqual([]);

    const json = JSON.parse((await runCli(["finalize", "--json"], { cwd: dir })).stdout);
    const deps = Object.fromEntries(
      json.changes.map((c: { n: number; dependsOn: { n: number }[] }) => [c.n, c.dependsOn.map((d) => d.n)]),
    );
    // #3 rewrites line 1 that #1 wrote (and line 2 next to it); #2 (line 12) and #4 (line 22) stand alone.
    expect(deps).toEqual({ 1: [], 2: [], 3: [1], 4: [] });
    const contains = Object.fromEntries(
      json.branches.map((b: { n: number; contains: number[] }) => [b.n, b.contains]),
    );
    expect(contains).toEqual({ 1: [1], 2: [2], 3: [1, 3], 4: [4] });
    const gain3 = json.changes.find((c: { n: number }) => c.n === 3).gain;
    expect(gain3.value).toBe(15); // 90 → 75 (A 1 → 2 and B 0 → 1), after #2's 86
    expect(branches()).toEqual([]);
  });

  it("--apply creates branches from the base that hold exactly their changes, with messages from the notebook", async () => {
    const head = git(dir, "rev-parse", "HEAD");
    const status = git(dir, "status", "--porcelain");
    const r = await runCli(["finalize", "--apply"], { cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    expect(branches()).toHaveLength(4);
    const base = git(dir, "rev-parse", "main");
    for (const b of branches()) expect(git(dir, "merge-base", base, b)).toBe(base);
    // Each branch: the base plus its change (and its dependencies), nothing else.
    expect(show("autolab-finalize/t/1-raise-a-to-1")).toBe(paramsFile({ A: 1, B: 0, C: 0, D: 0 }).trimEnd());
    expect(show("autolab-finalize/t/2-raise-c-to-1")).toBe(paramsFile({ A: 0, B: 0, C: 1, D: 0 }).trimEnd());
    expect(show("autolab-finalize/t/3-raise-a-to-2-and-b-to-1")).toBe(
      paramsFile({ A: 2, B: 1, C: 0, D: 0 }).trimEnd(),
    );
    expect(show("autolab-finalize/t/4-raise-d-to-1-0-pwned")).toBe(
      paramsFile({ A: 0, B: 0, C: 0, D: 1 }).trimEnd(),
    );
    expect(git(dir, "rev-list", "--count", `${base}..autolab-finalize/t/3-raise-a-to-2-and-b-to-1`)).toBe(
      "2",
    );
    const msg = git(dir, "log", "-1", "--format=%B", "autolab-finalize/t/3-raise-a-to-2-and-b-to-1");
    expect(msg.split("\n")[0]).toBe("Raise A to 2 and B to 1");
    expect(msg).toContain("Mechanism: more of A, and B next to it");
    expect(msg).toMatch(/Gain: 15 score \(lower is better\)/);
    expect(msg).toContain("Experiments: #3 (kept)");
    expect(msg).toContain("Depends on: #1 (params.mjs)");
    expect(msg).toContain("Autolab-Run: t");
    // The user's checkout is untouched, and the notebook says where each change went.
    expect(git(dir, "rev-parse", "HEAD")).toBe(head);
    expect(git(dir, "status", "--porcelain")).toBe(status);
    const ledger = new SqliteLedger(join(dir, ".autolab", "lab.db"));
    const notes = ledger.listNotes(ledger.latestRun()?.id ?? 0).map((n) => n.text);
    ledger.close();
    expect(notes.some((t) => t.startsWith("finalize: #3 is on branch autolab-finalize/t/3-"))).toBe(true);

    // Twice: the same commits, nothing duplicated (not even the notes).
    const count = () => {
      const l = new SqliteLedger(join(dir, ".autolab", "lab.db"));
      const n = l.listNotes(l.latestRun()?.id ?? 0).length;
      l.close();
      return n;
    };
    const notesBefore = count();
    const tips = branches().map((b) => git(dir, "rev-parse", b));
    const again = await runCli(["finalize", "--apply"], { cwd: dir });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain("[unchanged]");
    expect(branches().map((b) => git(dir, "rev-parse", b))).toEqual(tips);
    expect(count()).toBe(notesBefore);
    const trialsAlone = await runCli(["finalize", "--trials", "2"], { cwd: dir });
    expect(trialsAlone.code).toBe(2);
    expect(trialsAlone.stderr).toContain("without --verify nothing is measured");
  });

  it("refuses to overwrite a finalize branch that holds something else", async () => {
    const name = "autolab-finalize/t/2-raise-c-to-1";
    const old = git(dir, "rev-parse", name);
    git(dir, "branch", "-f", name, "main");
    try {
      const r = await runCli(["finalize", "--apply"], { cwd: dir });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`the branch ${name} already exists with other content`);
      expect(r.stderr).toContain(`git branch -D ${name}`);
      expect(git(dir, "rev-parse", name)).toBe(git(dir, "rev-parse", "main"));
    } finally {
      git(dir, "branch", "-f", name, old);
    }
  });

  it("refuses --apply on a dirty tree (a dry run still plans)", async () => {
    const file = join(dir, "params.mjs");
    const before = readFileSync(file, "utf8");
    writeFileSync(file, `${before}// local edit\n`);
    try {
      const r = await runCli(["finalize", "--apply"], { cwd: dir });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain("has uncommitted changes (params.mjs)");
      expect(r.stderr).toContain("fix: Commit or stash them");
      const dry = await runCli(["finalize"], { cwd: dir });
      expect(dry.code, dry.stderr).toBe(0);
      expect(dry.stdout).toContain("uncommitted changes in params.mjs");
    } finally {
      writeFileSync(file, before);
    }
  });

  it("keeps a change git cannot apply alone together with the change it conflicts with", async () => {
    const repo = await findRepo(dir);
    const ledger = new SqliteLedger(join(dir, ".autolab", "lab.db"));
    const run = ledger.latestRun();
    if (!run) throw new Error("no run");
    const plan = await planFinalize(repo, run, ledger.listExperiments(run.id));
    ledger.close();
    // As if the hunks had not shown #3's dependency on #1: git's three-way apply finds it.
    const changes = plan.changes.map((c) => (c.n === 3 ? { ...c, dependsOn: [] } : c));
    const built = await buildBranches(repo, run, changes);
    const b3 = built.find((b) => b.n === 3);
    expect(b3?.contains).toEqual([1, 3]);
    expect(b3?.conflictsWith).toEqual([{ n: 1, paths: ["params.mjs"] }]);
    // Said in the plan: which change, which other, where.
    expect(renderPlan({ ...plan, changes, branches: built })).toContain(
      "CONFLICT: #3 does not apply without #1 (params.mjs): kept together on this branch",
    );
    expect(git(dir, "show", `${b3?.tip}:params.mjs`)).toBe(paramsFile({ A: 2, B: 1, C: 0, D: 0 }).trimEnd());
  });

  it("--verify measures each branch alone and marks a change whose gain disappears alone", async () => {
    const r = await runCli(["finalize", "--verify", "--trials", "2", "--json"], {
      cwd: dir,
      timeoutMs: 120_000,
    });
    expect(r.code, r.stderr).toBe(0);
    // The trials ran under the run's confinement, and said which.
    expect(r.stderr).toMatch(/verify: 2 trials each of the base and every branch, (bubblewrap|unsandboxed)/);
    const plan = JSON.parse(r.stdout);
    const verdicts = Object.fromEntries(
      plan.branches.map((b: { n: number; verify: { verdict: string; gain: number } }) => [
        b.n,
        [b.verify.verdict, b.verify.gain],
      ]),
    );
    // #4 (D) only helps with A set: alone it gains nothing. #3 is measured over its dependency #1.
    expect(verdicts).toEqual({ 1: ["holds", 10], 2: ["holds", 4], 3: ["holds", 15], 4: ["no-gain", 0] });
    const ledger = new SqliteLedger(join(dir, ".autolab", "lab.db"));
    const notes = ledger.listNotes(ledger.latestRun()?.id ?? 0).map((n) => n.text);
    ledger.close();
    const n4 = notes.find((t) => t.startsWith("finalize --verify: #4"));
    expect(n4).toContain("NO GAIN ALONE");
    expect(n4).toContain("measured on top of #1, #2, #3");
  }, 180_000);

  it("--pr pushes each branch and opens one pull request per branch with gh", async () => {
    const remote = mkdtempSync(join(tmpdir(), "autolab-finalize-remote-"));
    dirs.push(remote);
    git(remote, "init", "-q", "--bare");
    git(dir, "remote", "add", "origin", remote);
    const bin = mkdtempSync(join(tmpdir(), "autolab-finalize-bin-"));
    dirs.push(bin);
    const log = join(bin, "calls.jsonl");
    writeFileSync(
      join(bin, "gh"),
      `#!/usr/bin/env node
const fs = require("node:fs");
const args = process.argv.slice(2);
const body = fs.readFileSync(args[args.indexOf("--body-file") + 1], "utf8");
fs.appendFileSync(${JSON.stringify(log)}, JSON.stringify({ args, body }) + "\\n");
console.log("https://example.invalid/pr/" + args[args.indexOf("--head") + 1]);
`,
    );
    chmodSync(join(bin, "gh"), 0o755);
    const r = await runCli(["finalize", "--pr"], {
      cwd: dir,
      env: { PATH: `${bin}:${process.env.PATH ?? ""}` },
    });
    expect(r.code, r.stderr).toBe(0);
    const calls = readFileSync(log, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { args: string[]; body: string });
    expect(calls).toHaveLength(4);
    const c3 = calls.find((c) => c.args.includes("autolab-finalize/t/3-raise-a-to-2-and-b-to-1"));
    expect(c3?.args.slice(0, 2)).toEqual(["pr", "create"]);
    expect(c3?.args[c3.args.indexOf("--title") + 1]).toBe("Raise A to 2 and B to 1");
    expect(c3?.args[c3.args.indexOf("--base") + 1]).toBe("main");
    expect(c3?.body).toContain("This branch holds #1, #3");
    expect(git(remote, "for-each-ref", "--format=%(refname:short)", "refs/heads/").split("\n")).toHaveLength(
      4,
    );
    expect(r.stdout).toContain("pull request: https://example.invalid/pr/autolab-finalize/t/1-raise-a-to-1");

    // A push that fails: said per branch, and the command fails.
    git(dir, "remote", "set-url", "origin", join(remote, "missing"));
    const refused = await runCli(["finalize", "--pr"], {
      cwd: dir,
      env: { PATH: `${bin}:${process.env.PATH ?? ""}` },
    });
    expect(refused.code).toBe(1);
    expect(refused.stdout).toContain(
      "pull request: not opened: git push origin autolab-finalize/t/1-raise-a-to-1 failed",
    );
    expect(readFileSync(log, "utf8").trim().split("\n")).toHaveLength(4);

    // Without gh on PATH: a clear message, nothing pushed.
    const noGh = await runCli(["finalize", "--pr"], { cwd: dir, env: { PATH: emptyPath() } });
    expect(noGh.code).toBe(1);
    expect(noGh.stderr).toContain("`gh`, which is not on PATH");
  });

  it("works for a program in a subdirectory of the repository", async () => {
    const sub = project("lab/sub");
    await runScripted(sub, [
      { hypothesis: "Raise A to 1", edits: { "params.mjs": set("A", 1) } },
      { hypothesis: "Raise C to 1", edits: { "params.mjs": set("C", 1) } },
    ]);
    const r = await runCli(["finalize", "--apply", "-p", sub], { cwd: tmpdir() });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("files: lab/sub/params.mjs");
    expect(git(sub, "show", "autolab-finalize/t/2-raise-c-to-1:lab/sub/params.mjs")).toBe(
      paramsFile({ A: 0, B: 0, C: 1, D: 0 }).trimEnd(),
    );
  });

  it("refuses a run that kept nothing beyond its baseline", async () => {
    const other = project();
    await runScripted(other, [{ hypothesis: "Lower A", edits: { "params.mjs": set("A", -1) } }]);
    const r = await runCli(["finalize"], { cwd: other });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("run t kept no change beyond its baseline");
    try {
      await finalizeRun({ program: other });
      expect.unreachable();
    } catch (err) {
      expect(isAutolabError(err) && err.code).toBe("NOTHING_TO_FINALIZE");
    }
  });
});

/** A PATH with node and git but no gh: a directory of links to the two. */
function emptyPath(): string {
  const bin = mkdtempSync(join(tmpdir(), "autolab-finalize-nogh-"));
  dirs.push(bin);
  symlinkSync(process.execPath, join(bin, "node"));
  symlinkSync(execFileSync("sh", ["-c", "command -v git"], { encoding: "utf8" }).trim(), join(bin, "git"));
  return bin;
}

describe("hunk dependencies agree with git", () => {
  /**
   * Two changes to a 20-line file, the second made after the first: the second depends on the
   * first (by hunks) exactly when git's three-way apply of it alone onto the base conflicts —
   * a grid of the three kinds of edit, 0 to 3 lines apart.
   */
  const edits: Record<string, (lines: string[], at: number) => string[]> = {
    change: (l, at) => l.map((x, i) => (i === at - 1 ? `${x} changed` : x)),
    insert: (l, at) => [...l.slice(0, at), "inserted", ...l.slice(at)],
    delete: (l, at) => l.filter((_, i) => i !== at - 1),
  };

  it("for changes, insertions and deletions 0 to 3 lines apart", async () => {
    const repo = mkdtempSync(join(tmpdir(), "autolab-finalize-grid-"));
    dirs.push(repo);
    git(repo, "init", "-q", "-b", "main");
    const base = Array.from({ length: 20 }, (_, i) => `line ${i + 1}`);
    const commit = (lines: string[], msg: string) => {
      writeFileSync(join(repo, "f.txt"), `${lines.join("\n")}\n`);
      git(repo, "add", "-A");
      git(repo, "commit", "-qm", msg, "--allow-empty");
      return git(repo, "rev-parse", "HEAD");
    };
    const b = commit(base, "base");
    const { hunkDependencies, parseDiff } = await import("../src/app/finalize-hunks.ts");
    let cases = 0;
    const mismatches: string[] = [];
    for (const [k1, e1] of Object.entries(edits)) {
      for (const [k2, e2] of Object.entries(edits)) {
        for (let d = 0; d <= 3; d++) {
          const first = e1(base, 8);
          const c1 = commit(first, `${k1}`);
          const c2 = commit(e2(first, 8 + d), `${k2} +${d}`);
          const hunks = (from: string, to: string) =>
            parseDiff(git(repo, "diff", "-U0", "--no-renames", from, to));
          const dep = hunkDependencies([
            { n: 1, files: hunks(b, c1) },
            { n: 2, files: hunks(c1, c2) },
          ]);
          const index = join(repo, ".git", `grid-index-${cases}`);
          execFileSync("git", ["read-tree", b], {
            cwd: repo,
            env: { ...process.env, GIT_INDEX_FILE: index },
          });
          let conflicts = false;
          try {
            execFileSync("git", ["apply", "--cached", "--3way", "-"], {
              cwd: repo,
              env: { ...process.env, GIT_INDEX_FILE: index },
              // Not the trimming helper: a patch needs its last newline.
              input: execFileSync("git", ["diff", "--full-index", "--binary", c1, c2], { cwd: repo }),
              stdio: ["pipe", "ignore", "ignore"],
            });
          } catch {
            conflicts = true;
          }
          const dependent = (dep.get(2) ?? []).length > 0;
          if (dependent !== conflicts) mismatches.push(`${k1} then ${k2} ${d} apart: dependent ${dependent}`);
          git(repo, "reset", "-q", "--hard", b);
          cases++;
        }
      }
    }
    expect(cases).toBe(36);
    // One case only, and on the safe side: the second change deletes the line the first one
    // inserted. Alone it would change nothing (git's merge sees the same deletion on both
    // sides), so it belongs on a branch with the first.
    expect(mismatches).toEqual(["insert then delete 1 apart: dependent true"]);
  });
});
