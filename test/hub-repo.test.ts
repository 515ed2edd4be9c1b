/**
 * The hub's repository (src/hub/repo.ts) admits a contributor's bundle only as one clean step
 * from its parent. Each attack below is a bundle a cheating or careless contributor could send;
 * each is refused with the code the gate answers, and leaves no ref behind.
 */
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HubRepo, MAX_COMMITS } from "../src/hub/repo.ts";
import { cleanupTemp, gitSync, tempDir } from "./helpers/git-project.ts";
import { candidate, hubProject } from "./helpers/hub-project.ts";

afterAll(cleanupTemp);

function hubRefs(repo: HubRepo): string[] {
  return gitSync(repo.gitDir, "for-each-ref", "--format=%(refname)", "refs/hub")
    .split("\n")
    .filter(Boolean)
    .sort();
}

describe("HubRepo", () => {
  const p = hubProject();
  const root = p.head as string;
  let repo: HubRepo;
  let dataDir: string;

  beforeAll(async () => {
    dataDir = tempDir("autolab-hub-data-");
    repo = await HubRepo.open({ dataDir, projectDir: p.root });
  });

  it("imports the project's HEAD as the root and reads program.md there", async () => {
    expect(repo.rootCommit).toBe(root);
    expect(repo.prefix).toBe("");
    expect(repo.program.files.editable).toEqual(["train.py", "src"]);
    expect(repo.programText).toContain("hub-toy");
    expect(await repo.has(root)).toBe(true);
    // A later open finds the same repository from the root commit alone.
    const again = await HubRepo.open({ dataDir, rootCommit: root });
    expect(again.program.objective.metric).toBe("val_loss");
  });

  it("admits an honest edit of editable files and keeps it under refs/hub/c/<commit>", async () => {
    const c = candidate(
      p,
      root,
      { "train.py": "LR = 0.05\n", "src/new.py": "X = 2\n" },
      { message: "lower lr" },
    );
    const a = await repo.admit(c.bundle, root);
    expect(a).toEqual({
      ok: true,
      value: {
        commit: c.commit,
        tree: gitSync(p.root, "rev-parse", `${c.commit}^{tree}`),
        subject: "lower lr",
        changed: ["src/new.py", "train.py"],
      },
    });
    expect(hubRefs(repo)).toContain(`refs/hub/c/${c.commit}`);
  });

  const refused: Array<[string, () => { bundle: string; parent?: string }, string, RegExp]> = [
    [
      "a file that is not a bundle",
      () => {
        const f = join(tempDir(), "x.bundle");
        writeFileSync(f, "# v2 git bundle\nnot really\n");
        return { bundle: f };
      },
      "bundle",
      /not a git bundle/,
    ],
    [
      "a bundle needing commits the hub lacks",
      () => {
        const mid = candidate(p, root, { "train.py": "LR = 1\n" });
        gitSync(p.root, "checkout", "-q", "-b", `mid-${Date.now()}`, mid.commit);
        p.write({ "train.py": "LR = 2\n" });
        const top = p.commitAll("on top of a commit the hub never saw");
        const f = join(tempDir(), "m.bundle");
        gitSync(p.root, "bundle", "create", "-q", f, `${mid.commit}..HEAD`);
        gitSync(p.root, "checkout", "-q", "--detach", root);
        void top;
        return { bundle: f };
      },
      "bundle",
      /needs commits the hub does not have/,
    ],
    [
      "a bundle with two heads",
      () => {
        const t = Date.now();
        candidate(p, root, { "train.py": "LR = 3\n" }, { branch: `two-a-${t}` });
        candidate(p, root, { "train.py": "LR = 4\n" }, { branch: `two-b-${t}` });
        const f = join(tempDir(), "two.bundle");
        gitSync(p.root, "bundle", "create", "-q", f, `^${root}`, `two-a-${t}`, `two-b-${t}`);
        return { bundle: f };
      },
      "bundle",
      /exactly one head/,
    ],
    [
      "an unrelated history (not a descendant of the parent)",
      () => {
        const other = tempDir();
        gitSync(other, "init", "-q");
        writeFileSync(join(other, "train.py"), "evil\n");
        gitSync(other, "add", "-A");
        gitSync(other, "commit", "-q", "-m", "unrelated");
        const f = join(tempDir(), "u.bundle");
        gitSync(other, "bundle", "create", "-q", f, "HEAD");
        return { bundle: f };
      },
      "bundle",
      /does not descend from the parent/,
    ],
    [
      "an edit of a protected file",
      () => candidate(p, root, { "train.py": "LR = 5\n", "evaluate.py": "print('val_loss: 0')\n" }),
      "protected",
      /"evaluate\.py"/,
    ],
    [
      "a new file in a protected directory",
      () => candidate(p, root, { "data/extra.csv": "9\n" }),
      "protected",
      /"data\/extra\.csv"/,
    ],
    [
      "an edit of program.md",
      () => candidate(p, root, { "program.md": "---\n" }),
      "protected",
      /program\.md/,
    ],
    [
      "an edit outside editable",
      () => candidate(p, root, { "README.md": "changed\n" }),
      "scope",
      /"README\.md"/,
    ],
    ["a new file outside editable", () => candidate(p, root, { "new.py": "x\n" }), "scope", /"new\.py"/],
    [
      "a deleted file outside editable",
      () => candidate(p, root, { "README.md": null }),
      "scope",
      /"README\.md"/,
    ],
  ];
  for (const [what, make, code, reason] of refused) {
    it(`refuses ${what} (${code}) and leaves no ref`, async () => {
      const before = hubRefs(repo);
      const { bundle, parent } = make();
      const a = await repo.admit(bundle, parent ?? root);
      expect(a.ok).toBe(false);
      if (a.ok) return;
      expect(a.code).toBe(code);
      expect(a.reason).toMatch(reason);
      expect(hubRefs(repo)).toEqual(before);
    });
  }

  it("refuses a symbolic link pointing outside the project, admits one inside", async () => {
    const branch = `link-${Date.now()}`;
    gitSync(p.root, "checkout", "-q", "-b", branch, root);
    gitSync(p.root, "config", "core.symlinks", "true");
    const { symlinkSync } = await import("node:fs");
    symlinkSync("../../../etc/passwd", join(p.root, "src", "leak.py"));
    const commit = p.commitAll("link out");
    const f = join(tempDir(), "l.bundle");
    gitSync(p.root, "bundle", "create", "-q", f, `${root}..${branch}`);
    gitSync(p.root, "checkout", "-q", "--detach", root);
    const a = await repo.admit(f, root);
    expect(a).toMatchObject({ ok: false, code: "bundle" });
    expect(a.ok ? "" : a.reason).toMatch(/symbolic links pointing outside.*src\/leak\.py/);
    expect(hubRefs(repo)).not.toContain(`refs/hub/c/${commit}`);

    const b2 = `link-in-${Date.now()}`;
    gitSync(p.root, "checkout", "-q", "-b", b2, root);
    symlinkSync("model.py", join(p.root, "src", "alias.py"));
    p.commitAll("link in");
    const f2 = join(tempDir(), "l2.bundle");
    gitSync(p.root, "bundle", "create", "-q", f2, `${root}..${b2}`);
    gitSync(p.root, "checkout", "-q", "--detach", root);
    expect((await repo.admit(f2, root)).ok).toBe(true);
  });

  it("refuses a submodule (gitlink)", async () => {
    const branch = `sub-${Date.now()}`;
    gitSync(p.root, "checkout", "-q", "-b", branch, root);
    gitSync(p.root, "update-index", "--add", "--cacheinfo", `160000,${root},src/vendor`);
    gitSync(p.root, "commit", "-q", "--no-verify", "-m", "gitlink", "--author", "a <a@b>");
    const f = join(tempDir(), "s.bundle");
    gitSync(p.root, "bundle", "create", "-q", f, `${root}..${branch}`);
    gitSync(p.root, "checkout", "-q", "-f", "--detach", root);
    const a = await repo.admit(f, root);
    expect(a).toMatchObject({ ok: false, code: "bundle" });
    expect(a.ok ? "" : a.reason).toMatch(/submodules.*src\/vendor/);
  });

  it(`refuses more than ${MAX_COMMITS} commits after the parent`, async () => {
    const branch = `long-${Date.now()}`;
    gitSync(p.root, "checkout", "-q", "-b", branch, root);
    for (let i = 0; i <= MAX_COMMITS; i++)
      gitSync(p.root, "commit", "-q", "--no-verify", "--allow-empty", "-m", `c${i}`);
    const f = join(tempDir(), "long.bundle");
    gitSync(p.root, "bundle", "create", "-q", f, `${root}..${branch}`);
    gitSync(p.root, "checkout", "-q", "--detach", root);
    const a = await repo.admit(f, root);
    expect(a).toMatchObject({ ok: false, code: "bundle" });
    expect(a.ok ? "" : a.reason).toMatch(/101 commits/);
  });

  it("keeps a commit's subject as safe text: control characters replaced, at most 200 characters", async () => {
    const c = candidate(
      p,
      root,
      { "train.py": "LR = 0.6\n" },
      { message: `evil\u0001\u001b[31mred ${"x".repeat(500)}` },
    );
    const a = await repo.admit(c.bundle, root);
    expect(a.ok).toBe(true);
    if (!a.ok) return;
    expect(a.value.subject).toMatch(/^evil\ufffd\ufffd\[31mred x+…$/);
    expect([...a.value.subject].length).toBe(200);
  });

  it("refuses a hand-made tree with a .git or .. entry (scope: no pattern matches them)", async () => {
    for (const name of [".git", "..", ".autolab"]) {
      const blob = gitSync(p.root, "hash-object", "-w", "--stdin").toString();
      const base = gitSync(p.root, "ls-tree", root)
        .split("\n")
        .filter((l) => !l.endsWith(`\t${name}`));
      const tree = execFileSync("git", ["mktree"], {
        cwd: p.root,
        input: `${[...base, `100644 blob ${blob}\t${name}`].join("\n")}\n`,
        encoding: "utf8",
      }).trim();
      const commit = gitSync(p.root, "commit-tree", "-p", root, "-m", `evil ${name}`, tree);
      const branch = `evil-${Date.now()}-${name.length}`;
      gitSync(p.root, "branch", "-f", branch, commit);
      const f = join(tempDir(), "evil.bundle");
      gitSync(p.root, "bundle", "create", "-q", f, `${root}..${branch}`);
      const a = await repo.admit(f, root);
      expect(a, name).toMatchObject({ ok: false, code: "scope" });
    }
  });

  it("refuses a head that is an annotated tag, not a commit", async () => {
    const c = candidate(p, root, { "train.py": "LR = 0.7\n" });
    const tag = `t-${Date.now()}`;
    gitSync(p.root, "tag", "-a", "-m", "a tag", tag, c.commit);
    const f = join(tempDir(), "tag.bundle");
    gitSync(p.root, "bundle", "create", "-q", f, `^${root}`, `refs/tags/${tag}`);
    const a = await repo.admit(f, root);
    expect(a).toMatchObject({ ok: false, code: "bundle" });
    expect(a.ok ? "" : a.reason).toMatch(/not a commit/);
  });

  it("refuses a parent the hub does not have", async () => {
    const c = candidate(p, root, { "train.py": "LR = 9\n" });
    const a = await repo.admit(c.bundle, "f".repeat(40));
    expect(a).toMatchObject({ ok: false, code: "bundle" });
  });

  it("a candidate on an admitted candidate; bundleOf gives the whole history", async () => {
    const c1 = candidate(p, root, { "train.py": "LR = 0.2\n" });
    expect((await repo.admit(c1.bundle, root)).ok).toBe(true);
    const c2 = candidate(p, c1.commit, { "src/model.py": "W = 2\n" });
    const a = await repo.admit(c2.bundle, c1.commit);
    expect(a.ok && a.value.changed).toEqual(["src/model.py"]);
    const data = await repo.bundleOf(c2.commit);
    const f = join(tempDir(), "whole.bundle");
    writeFileSync(f, data);
    const clone = tempDir();
    gitSync(clone, "init", "-q");
    gitSync(clone, "fetch", "-q", f, `refs/hub/c/${c2.commit}:refs/heads/x`);
    expect(gitSync(clone, "rev-list", "--count", "x")).toBe("3");
    await expect(repo.bundleOf("0".repeat(40))).rejects.toThrow(/not one the hub admitted/);
  });
});

describe("HubRepo.open on a project that cannot be a hub", () => {
  it("names the problem and the fix: not git, no commits, no committed program.md", async () => {
    const plain = tempDir();
    await expect(HubRepo.open({ dataDir: tempDir(), projectDir: plain })).rejects.toMatchObject({
      code: "NOT_A_GIT_REPO",
    });
    gitSync(plain, "init", "-q");
    await expect(HubRepo.open({ dataDir: tempDir(), projectDir: plain })).rejects.toMatchObject({
      code: "NO_COMMITS",
    });
    writeFileSync(join(plain, "x.txt"), "x\n");
    gitSync(plain, "add", "-A");
    gitSync(plain, "commit", "-q", "-m", "no program");
    await expect(HubRepo.open({ dataDir: tempDir(), projectDir: plain })).rejects.toMatchObject({
      code: "PROGRAM_UNCOMMITTED",
    });
  });
});

describe("HubRepo with the project in a subdirectory", () => {
  it("scopes paths to the project's directory", async () => {
    const p = hubProject("proj/");
    const root = p.head as string;
    const repo = await HubRepo.open({ dataDir: tempDir(), projectDir: p.projectDir });
    expect(repo.prefix).toBe("proj/");
    const ok = candidate(p, root, { "proj/train.py": "LR = 0.3\n" });
    expect((await repo.admit(ok.bundle, root)).ok).toBe(true);
    const out = candidate(p, root, { "proj/train.py": "LR = 0.4\n", "README.md": "x\n" });
    const a = await repo.admit(out.bundle, root);
    expect(a).toMatchObject({ ok: false, code: "scope" });
    expect(a.ok ? "" : a.reason).toMatch(/"README\.md"/);
    const prot = candidate(p, root, { "proj/evaluate.py": "x\n" });
    expect(await repo.admit(prot.bundle, root)).toMatchObject({ ok: false, code: "protected" });
  });
});
