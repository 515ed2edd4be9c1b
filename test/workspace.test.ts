import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { AutolabError } from "../src/core/errors.ts";
import { git, gitRaw } from "../src/workspace/git.ts";
import {
  assertCommitted,
  findRepo,
  GitWorkspace,
  hashesAt,
  type RepoInfo,
} from "../src/workspace/git-workspace.ts";
import { cleanupTemp, createGitProject, type GitProject, gitSync, tempDir } from "./helpers/git-project.ts";

afterAll(cleanupTemp);

const TRAIN = "const LR = 0.1;\nconst HIDDEN = 64;\ntrain(LR, HIDDEN);\n";
// Bytes that a careless text round trip would change: CRLF, no final newline, non-ASCII.
const EVALUATE = "score = evaluate()\r\nprint(f'val_bpb: {score}')\r\n# ünïcode ✓";
const PREPARE = "download()\n";

const TOP_FILES = {
  "program.md": "---\nname: t\n---\n",
  "train.ts": TRAIN,
  "evaluate.py": EVALUATE,
  "prepare.py": PREPARE,
  "README.md": "# readme\nline 2\n",
};

/** The program lives in lab/; other.txt sits outside it, at the top of the repository. */
const SUB_FILES = {
  "lab/program.md": "---\nname: t\n---\n",
  "lab/train.ts": TRAIN,
  "lab/evaluate.py": EVALUATE,
  "other.txt": "outside the program\n",
};

const sha256 = (data: string | Buffer) => createHash("sha256").update(data).digest("hex");

async function errorOf(p: Promise<unknown>): Promise<AutolabError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(AutolabError);
    return err as AutolabError;
  }
  throw new Error("expected a rejection");
}

interface Opened {
  project: GitProject;
  repo: RepoInfo;
  ws: GitWorkspace;
  base: string;
  stateDir: string;
  open: () => Promise<GitWorkspace>;
  /** Runs git in the worktree. */
  wt: (...args: string[]) => string;
}

/** A repository with a workspace opened on it, as `autolab run` would open it. */
async function openProject(
  opts: { sub?: boolean; tag?: string; protected?: string[] } = {},
): Promise<Opened> {
  const project = createGitProject(opts.sub ? SUB_FILES : TOP_FILES);
  const programDir = opts.sub ? join(project.root, "lab") : project.root;
  const repo = await findRepo(programDir);
  const base = project.head as string;
  const protectedFiles = opts.protected ?? (opts.sub ? ["evaluate.py"] : ["evaluate.py", "prepare.py"]);
  const stateDir = join(programDir, ".autolab");
  const open = async () =>
    GitWorkspace.open({
      repo,
      tag: opts.tag ?? "t1",
      stateDir,
      baseCommit: base,
      protectedFiles,
      protectedHashes: await hashesAt(repo, base, protectedFiles),
    });
  const ws = await open();
  return { project, repo, ws, base, stateDir, open, wt: (...args) => gitSync(ws.worktree, ...args) };
}

describe("findRepo", () => {
  it("says NOT_A_GIT_REPO outside a repository", async () => {
    const dir = tempDir();
    const err = await errorOf(findRepo(dir));
    expect(err.code).toBe("NOT_A_GIT_REPO");
    expect(err.message).toContain(dir);
  });

  it("says NOT_A_GIT_REPO (not GIT_NOT_FOUND) for a directory that does not exist", async () => {
    const dir = join(tempDir(), "missing");
    expect((await errorOf(findRepo(dir))).code).toBe("NOT_A_GIT_REPO");
  });

  it("says NO_COMMITS for a repository without commits", async () => {
    const project = createGitProject({ "train.ts": TRAIN }, { commit: false });
    const err = await errorOf(findRepo(project.root));
    expect(err.code).toBe("NO_COMMITS");
    expect(err.hint).toContain("git commit");
  });

  it("gives the root and an empty prefix at the top, the path from the root in a subdirectory", async () => {
    const project = createGitProject({ ...SUB_FILES, "lab/deep/x.ts": "x\n" });
    expect(await findRepo(project.root)).toEqual({ root: project.root, prefix: "" });
    expect(await findRepo(join(project.root, "lab"))).toEqual({ root: project.root, prefix: "lab" });
    expect(await findRepo(join(project.root, "lab", "deep"))).toEqual({
      root: project.root,
      prefix: "lab/deep",
    });
  });

  it("gives the right prefix when the directory is reached through a symlink", async () => {
    const project = createGitProject(SUB_FILES);
    const link = join(tempDir(), "link");
    symlinkSync(project.root, link);
    expect(await findRepo(join(link, "lab"))).toEqual({ root: project.root, prefix: "lab" });
  });
});

describe("assertCommitted", () => {
  const files = ["train.ts", "evaluate.py"];

  it("passes on a clean checkout, whatever happens to files it was not asked about", async () => {
    const project = createGitProject(TOP_FILES);
    project.write({ "README.md": "edited\n", "scratch.txt": "new\n" });
    await expect(assertCommitted(await findRepo(project.root), files, false)).resolves.toBeUndefined();
  });

  it("says DIRTY_WORKTREE naming the file and mentioning --allow-dirty; allowDirty lets it pass", async () => {
    const project = createGitProject(TOP_FILES);
    project.write({ "train.ts": "changed\n" });
    const repo = await findRepo(project.root);
    const err = await errorOf(assertCommitted(repo, files, false));
    expect(err.code).toBe("DIRTY_WORKTREE");
    expect(err.message).toContain("train.ts");
    expect(err.message).not.toContain("evaluate.py");
    expect(`${err.message} ${err.hint}`).toContain("--allow-dirty");
    await expect(assertCommitted(repo, files, true)).resolves.toBeUndefined();
  });

  it("counts staged and deleted files as uncommitted changes", async () => {
    const project = createGitProject(TOP_FILES);
    project.write({ "train.ts": "staged\n" });
    project.git("add", "train.ts");
    unlinkSync(join(project.root, "evaluate.py"));
    const err = await errorOf(assertCommitted(await findRepo(project.root), files, false));
    expect(err.code).toBe("DIRTY_WORKTREE");
    expect(err.message).toContain("train.ts");
    expect(err.message).toContain("evaluate.py");
  });

  it("says UNTRACKED_FILES for a listed file that was never committed, even with allowDirty", async () => {
    const project = createGitProject(TOP_FILES);
    project.write({ "model.ts": "new\n" });
    const repo = await findRepo(project.root);
    for (const allowDirty of [false, true]) {
      const err = await errorOf(assertCommitted(repo, [...files, "model.ts"], allowDirty));
      expect(err.code).toBe("UNTRACKED_FILES");
      expect(err.message).toContain("model.ts");
      expect(err.hint).toContain("git add model.ts");
    }
  });

  it("says FILE_MISSING for a listed file that does not exist", async () => {
    const project = createGitProject(TOP_FILES);
    const err = await errorOf(assertCommitted(await findRepo(project.root), [...files, "nope.ts"], true));
    expect(err.code).toBe("FILE_MISSING");
    expect(err.message).toContain("nope.ts");
  });

  it("resolves paths against the program's directory in a subdirectory", async () => {
    const project = createGitProject(SUB_FILES);
    const repo = await findRepo(join(project.root, "lab"));
    await expect(assertCommitted(repo, files, false)).resolves.toBeUndefined();
    project.write({ "lab/train.ts": "changed\n", "train.ts": "a same-named file at the top\n" });
    const err = await errorOf(assertCommitted(repo, files, false));
    expect(err.code).toBe("DIRTY_WORKTREE");
    expect(err.message).toContain("lab/train.ts");
  });

  it("accepts a committed directory as a files entry (docs/program.md allows directories)", async () => {
    const project = createGitProject({ ...TOP_FILES, "data/a.csv": "1\n", "data/b/c.csv": "2\n" });
    const repo = await findRepo(project.root);
    await expect(assertCommitted(repo, [...files, "data"], false)).resolves.toBeUndefined();
    project.write({ "data/b/c.csv": "3\n" });
    expect((await errorOf(assertCommitted(repo, ["data"], false))).code).toBe("DIRTY_WORKTREE");
  });
});

describe("GitWorkspace.open", () => {
  it("creates autolab/<tag> at the base commit and a detached worktree under stateDir/worktrees/<tag>", async () => {
    const { project, ws, base, stateDir, wt } = await openProject({ tag: "nov22" });
    expect(ws.branch).toBe("autolab/nov22");
    expect(ws.worktree).toBe(join(stateDir, "worktrees", "nov22"));
    expect(ws.projectDir).toBe(ws.worktree);
    expect(project.git("rev-parse", "refs/heads/autolab/nov22")).toBe(base);
    expect(await ws.bestCommit()).toBe(base);
    expect(await ws.head()).toBe(base);
    // Detached: moving HEAD in the worktree never moves the ratchet by accident.
    expect(wt("rev-parse", "--abbrev-ref", "HEAD")).toBe("HEAD");
    expect(readFileSync(join(ws.worktree, "train.ts"), "utf8")).toBe(TRAIN);
    // The user's checkout stays where it was, and .autolab/ does not show up in it.
    expect(project.git("rev-parse", "--abbrev-ref", "HEAD")).toBe("main");
    expect(project.git("status", "--porcelain", "--untracked-files=all")).toBe("");
  });

  it("puts the project directory inside the worktree when the program is in a subdirectory", async () => {
    const { ws, stateDir } = await openProject({ sub: true });
    expect(stateDir).toContain(join("lab", ".autolab"));
    expect(ws.projectDir).toBe(join(ws.worktree, "lab"));
    expect(readFileSync(join(ws.projectDir, "train.ts"), "utf8")).toBe(TRAIN);
  });

  it("adds .autolab/ to .git/info/exclude once, after existing lines", async () => {
    const project = createGitProject(TOP_FILES);
    writeFileSync(join(project.root, ".git", "info", "exclude"), "*.log"); // no final newline
    const repo = await findRepo(project.root);
    const opts = {
      repo,
      stateDir: join(project.root, ".autolab"),
      baseCommit: project.head as string,
      protectedFiles: [],
      protectedHashes: {},
    };
    await GitWorkspace.open({ ...opts, tag: "a" });
    await GitWorkspace.open({ ...opts, tag: "a" });
    await GitWorkspace.open({ ...opts, tag: "b" });
    expect(readFileSync(join(project.root, ".git", "info", "exclude"), "utf8")).toBe("*.log\n.autolab/\n");
  });

  it("creates .git/info/exclude when it does not exist", async () => {
    const project = createGitProject(TOP_FILES);
    rmSync(join(project.root, ".git", "info"), { recursive: true, force: true });
    const repo = await findRepo(project.root);
    await GitWorkspace.open({
      repo,
      tag: "t",
      stateDir: join(project.root, ".autolab"),
      baseCommit: project.head as string,
      protectedFiles: [],
      protectedHashes: {},
    });
    expect(readFileSync(join(project.root, ".git", "info", "exclude"), "utf8")).toBe(".autolab/\n");
  });

  it("is idempotent: a second open keeps the worktree, its files and the branch", async () => {
    const { project, ws, base, open } = await openProject();
    writeFileSync(join(ws.worktree, "marker.txt"), "still here\n");
    // The ratchet moved during the first session; resuming must not put it back.
    const next = project.git("commit-tree", "-p", base, "-m", "next", `${base}^{tree}`);
    await ws.advance(next, base);
    const again = await open();
    expect(again.worktree).toBe(ws.worktree);
    expect(readFileSync(join(again.worktree, "marker.txt"), "utf8")).toBe("still here\n");
    expect(await again.bestCommit()).toBe(next);
    expect(
      project
        .git("worktree", "list", "--porcelain")
        .split("\n")
        .filter((l) => l.startsWith("worktree ")),
    ).toHaveLength(2);
  });

  it("recreates a worktree deleted by hand", async () => {
    const { project, ws, base, open } = await openProject();
    rmSync(ws.worktree, { recursive: true, force: true });
    const again = await open();
    expect(existsSync(join(again.worktree, "train.ts"))).toBe(true);
    expect(await again.head()).toBe(base);
    expect(project.git("worktree", "list", "--porcelain")).toContain(`worktree ${again.worktree}`);
  });

  it("clears a half-created leftover directory and creates the worktree there", async () => {
    const project = createGitProject(TOP_FILES);
    const stateDir = join(project.root, ".autolab");
    mkdirSync(join(stateDir, "worktrees", "t1"), { recursive: true });
    writeFileSync(join(stateDir, "worktrees", "t1", "train.ts"), "half-written");
    const repo = await findRepo(project.root);
    const ws = await GitWorkspace.open({
      repo,
      tag: "t1",
      stateDir,
      baseCommit: project.head as string,
      protectedFiles: [],
      protectedHashes: {},
    });
    expect(readFileSync(join(ws.worktree, "train.ts"), "utf8")).toBe(TRAIN);
    expect(await ws.head()).toBe(project.head);
  });

  it("keeps the worktree when the state directory is reached through a symlink", async () => {
    const project = createGitProject(TOP_FILES);
    const realState = join(tempDir(), "state");
    mkdirSync(realState);
    const linkState = join(tempDir(), "state-link");
    symlinkSync(realState, linkState);
    const repo = await findRepo(project.root);
    const opts = {
      repo,
      tag: "t1",
      stateDir: linkState,
      baseCommit: project.head as string,
      protectedFiles: [],
      protectedHashes: {},
    };
    const ws = await GitWorkspace.open(opts);
    writeFileSync(join(ws.worktree, "marker.txt"), "keep me\n");
    const again = await GitWorkspace.open(opts);
    expect(existsSync(join(again.worktree, "marker.txt"))).toBe(true);
  });
});

describe("GitWorkspace snapshot and changes", () => {
  it("reports tracked edits, deletions and new files, not untracked files that were there before", async () => {
    const { ws } = await openProject();
    writeFileSync(join(ws.worktree, "scratch.txt"), "was here before\n");
    mkdirSync(join(ws.worktree, "cache"));
    writeFileSync(join(ws.worktree, "cache", "old.bin"), "x");
    const snap = await ws.snapshot();
    expect(snap.untracked).toEqual(new Set(["scratch.txt", "cache/old.bin"]));
    writeFileSync(join(ws.worktree, "train.ts"), `${TRAIN}// edit\n`);
    writeFileSync(join(ws.worktree, "new.ts"), "new\n");
    mkdirSync(join(ws.worktree, "models"));
    writeFileSync(join(ws.worktree, "models", "big.ts"), "big\n");
    writeFileSync(join(ws.worktree, "scratch.txt"), "edited, but still not ours\n");
    unlinkSync(join(ws.worktree, "README.md"));
    expect(await ws.changes(snap)).toEqual(["README.md", "models/big.ts", "new.ts", "train.ts"]);
  });

  it("counts a file the researcher committed itself (HEAD moved): its commit is undone, the file checked", async () => {
    const { ws, wt, base } = await openProject();
    const snap = await ws.snapshot();
    writeFileSync(join(ws.worktree, "extra.py"), "import os\n");
    wt("add", "extra.py");
    wt("-c", "user.name=r", "-c", "user.email=r@r", "commit", "-qm", "sneak");
    writeFileSync(join(ws.worktree, "train.ts"), `${TRAIN}// edit\n`);
    expect(await ws.changes(snap)).toEqual(["extra.py", "train.ts"]);
    expect(wt("rev-parse", "HEAD")).toBe(base);
  });

  it("reports nothing when nothing changed", async () => {
    const { ws } = await openProject();
    expect(await ws.changes(await ws.snapshot())).toEqual([]);
  });

  it('names files outside the program\'s directory "../x" when the program is in a subdirectory', async () => {
    const { ws } = await openProject({ sub: true });
    const snap = await ws.snapshot();
    writeFileSync(join(ws.worktree, "other.txt"), "edited\n");
    writeFileSync(join(ws.worktree, "top-new.txt"), "new\n");
    writeFileSync(join(ws.projectDir, "train.ts"), "edited\n");
    expect(await ws.changes(snap)).toEqual(["../other.txt", "../top-new.txt", "train.ts"]);
  });

  it("handles file names with spaces and non-ASCII characters", async () => {
    const { ws } = await openProject();
    const snap = await ws.snapshot();
    writeFileSync(join(ws.worktree, "my notes ü.txt"), "x\n");
    expect(await ws.changes(snap)).toEqual(["my notes ü.txt"]);
  });

  it("finds symlinks among paths", async () => {
    const { ws } = await openProject();
    symlinkSync("evaluate.py", join(ws.worktree, "link.py"));
    symlinkSync("/etc/passwd", join(ws.worktree, "abs-link"));
    expect(await ws.symlinks(["link.py", "train.ts", "abs-link", "deleted.ts"])).toEqual([
      "link.py",
      "abs-link",
    ]);
  });
});

describe("GitWorkspace commits", () => {
  it("commits a candidate on top of HEAD and makes it reachable as refs/autolab/<tag>/<n>", async () => {
    const { ws, base, project, wt } = await openProject({ tag: "nov22" });
    writeFileSync(join(ws.worktree, "scratch.txt"), "not part of the candidate\n");
    const snap = await ws.snapshot();
    writeFileSync(join(ws.worktree, "train.ts"), "const LR = 0.2;\nconst HIDDEN = 64;\ntrain(LR, HIDDEN);\n");
    writeFileSync(join(ws.worktree, "new.ts"), "a\nb\n");
    unlinkSync(join(ws.worktree, "README.md"));
    const paths = await ws.changes(snap);
    const { commit, ref } = await ws.commitCandidate(1, paths, "exp 1: LR 0.2\n\nbody");
    expect(ref).toBe("refs/autolab/nov22/1");
    expect(commit).toMatch(/^[0-9a-f]{40}$/);
    expect(commit).not.toBe(base);
    expect(await ws.parentOf(commit)).toBe(base);
    expect(await ws.head()).toBe(commit);
    expect(project.git("rev-parse", ref)).toBe(commit);
    expect(await ws.candidateRef(1)).toBe(commit);
    expect(await ws.candidateRef(2)).toBeUndefined();
    // Committing does not move the ratchet; only advance does.
    expect(await ws.bestCommit()).toBe(base);
    expect((await ws.commitMessage(commit)).trim()).toBe("exp 1: LR 0.2\n\nbody");
    expect(await ws.changedPaths(base, commit)).toEqual(["README.md", "new.ts", "train.ts"]);
    // Only the listed paths went in; the pre-existing scratch file is still untracked.
    expect(wt("status", "--porcelain")).toBe("?? scratch.txt");
  });

  it("with no paths makes no commit and points the ref at HEAD", async () => {
    const { ws, base } = await openProject();
    const { commit, ref } = await ws.commitCandidate(0, [], "baseline");
    expect(commit).toBe(base);
    expect(await ws.head()).toBe(base);
    expect(await ws.candidateRef(0)).toBe(base);
    expect(ref).toBe("refs/autolab/t1/0");
  });

  it("commits a change outside the program's directory given as ../x", async () => {
    const { ws, base } = await openProject({ sub: true });
    const snap = await ws.snapshot();
    writeFileSync(join(ws.worktree, "other.txt"), "edited\n");
    writeFileSync(join(ws.projectDir, "train.ts"), "edited\n");
    const paths = await ws.changes(snap);
    const { commit } = await ws.commitCandidate(3, paths, "exp 3");
    expect((await ws.changedPaths(base, commit)).sort()).toEqual(["../other.txt", "train.ts"]);
    expect(gitSync(ws.worktree, "status", "--porcelain")).toBe("");
  });

  it("commits only the listed tracked paths, deletions included, and returns the diff stats", async () => {
    const { ws, base, wt } = await openProject();
    const snap = await ws.snapshot();
    writeFileSync(join(ws.worktree, "train.ts"), `${TRAIN}more\n`);
    unlinkSync(join(ws.worktree, "README.md"));
    writeFileSync(join(ws.worktree, "prepare.py"), "not listed\n");
    const paths = (await ws.changes(snap)).filter((p) => p !== "prepare.py");
    expect(paths).toEqual(["README.md", "train.ts"]);
    const { commit, diff } = await ws.commitCandidate(1, paths, "exp 1");
    expect(await ws.parentOf(commit)).toBe(base);
    expect((await ws.changedPaths(base, commit)).sort()).toEqual(["README.md", "train.ts"]);
    expect(diff).toEqual({ files: 2, insertions: 1, deletions: 2 });
    expect(diff).toEqual(await ws.diffStats(base, commit));
    expect(wt("status", "--porcelain")).toBe("M prepare.py");
  });

  it("commits paths it has not seen in a status call (e.g. right after open)", async () => {
    const { ws, base, open } = await openProject();
    writeFileSync(join(ws.worktree, "train.ts"), "edited\n");
    writeFileSync(join(ws.worktree, "new.ts"), "new\n");
    const fresh = await open();
    const { commit, diff } = await fresh.commitCandidate(1, ["new.ts", "train.ts"], "exp 1");
    expect((await fresh.changedPaths(base, commit)).sort()).toEqual(["new.ts", "train.ts"]);
    expect(diff.files).toBe(2);
  });

  it("commits even when the user's config asks to sign commits (harness commits are not signed)", async () => {
    const { ws, base, project } = await openProject();
    project.git("config", "commit.gpgsign", "true");
    project.git("config", "gpg.program", "false"); // a signer that always fails
    writeFileSync(join(ws.worktree, "train.ts"), "edited\n");
    const { commit } = await ws.commitCandidate(1, ["train.ts"], "exp 1");
    expect(await ws.parentOf(commit)).toBe(base);
    writeFileSync(join(ws.worktree, "new.ts"), "new\n");
    const { commit: second } = await ws.commitCandidate(2, ["new.ts"], "exp 2");
    expect(await ws.parentOf(second)).toBe(commit);
  });

  it("counts files, insertions and deletions", async () => {
    const { ws, base } = await openProject();
    writeFileSync(
      join(ws.worktree, "train.ts"),
      "const LR = 0.2;\nconst HIDDEN = 64;\ntrain(LR, HIDDEN);\nlog();\n",
    );
    writeFileSync(join(ws.worktree, "new.ts"), "1\n2\n3\n");
    writeFileSync(join(ws.worktree, "blob.bin"), Buffer.from([0, 1, 2, 0, 255]));
    const { commit } = await ws.commitCandidate(1, ["train.ts", "new.ts", "blob.bin"], "exp");
    // train.ts: 1 line changed + 1 added; new.ts: 3 added; blob.bin: binary, no line counts.
    expect(await ws.diffStats(base, commit)).toEqual({ files: 3, insertions: 5, deletions: 1 });
    expect(await ws.diffStats(base, base)).toEqual({ files: 0, insertions: 0, deletions: 0 });
    const diff = await ws.diff(base, commit);
    expect(diff).toContain("-const LR = 0.1;");
    expect(diff).toContain("+const LR = 0.2;");
  });

  it("advances the ratchet, and refuses with RATCHET_MOVED when the branch is not where expected", async () => {
    const { ws, base } = await openProject();
    writeFileSync(join(ws.worktree, "train.ts"), "one\n");
    const { commit: c1 } = await ws.commitCandidate(1, ["train.ts"], "exp 1");
    writeFileSync(join(ws.worktree, "train.ts"), "two\n");
    const { commit: c2 } = await ws.commitCandidate(2, ["train.ts"], "exp 2");
    await ws.advance(c1, base);
    expect(await ws.bestCommit()).toBe(c1);
    const err = await errorOf(ws.advance(c2, base));
    expect(err.code).toBe("RATCHET_MOVED");
    expect(err.message).toContain(ws.branch);
    expect(await ws.bestCommit()).toBe(c1);
    await ws.advance(c2, c1);
    expect(await ws.bestCommit()).toBe(c2);
  });

  it("resetTo drops tracked edits and the listed untracked files, and nothing outside the worktree", async () => {
    const { ws, base } = await openProject();
    writeFileSync(join(ws.worktree, "train.ts"), "kept in a commit\n");
    const { commit } = await ws.commitCandidate(1, ["train.ts"], "exp 1");
    writeFileSync(join(ws.worktree, "scratch.txt"), "unlisted, stays\n");
    writeFileSync(join(ws.worktree, "train.ts"), "edited again\n");
    unlinkSync(join(ws.worktree, "README.md"));
    mkdirSync(join(ws.worktree, "out"));
    writeFileSync(join(ws.worktree, "out", "new.ts"), "new\n");
    writeFileSync(join(ws.worktree, "new2.ts"), "new\n");
    const outside = join(tempDir(), "outside.txt");
    writeFileSync(outside, "not the harness's to delete\n");
    await ws.resetTo(commit, ["out/new.ts", "new2.ts", "../../../../../../../../..", outside]);
    expect(await ws.head()).toBe(commit);
    expect(readFileSync(join(ws.worktree, "train.ts"), "utf8")).toBe("kept in a commit\n");
    expect(existsSync(join(ws.worktree, "README.md"))).toBe(true);
    expect(existsSync(join(ws.worktree, "out", "new.ts"))).toBe(false);
    expect(existsSync(join(ws.worktree, "new2.ts"))).toBe(false);
    expect(existsSync(join(ws.worktree, "scratch.txt"))).toBe(true);
    expect(existsSync(outside)).toBe(true);
    await ws.resetTo(base);
    expect(readFileSync(join(ws.worktree, "train.ts"), "utf8")).toBe(TRAIN);
  });

  it("resetTo resolves dropped paths against the program's directory", async () => {
    const { ws } = await openProject({ sub: true });
    writeFileSync(join(ws.projectDir, "new.ts"), "new\n");
    writeFileSync(join(ws.worktree, "top.txt"), "new\n");
    await ws.resetTo(await ws.head(), ["new.ts", "../top.txt"]);
    expect(existsSync(join(ws.projectDir, "new.ts"))).toBe(false);
    expect(existsSync(join(ws.worktree, "top.txt"))).toBe(false);
  });
});

describe("GitWorkspace protected files", () => {
  it("verifyProtected is undefined while protected files are intact", async () => {
    const { ws } = await openProject();
    writeFileSync(join(ws.worktree, "train.ts"), "editable, may change\n");
    expect(await ws.verifyProtected()).toBeUndefined();
  });

  it("verifyProtected names an edited or deleted file; restoreProtected restores the bytes", async () => {
    const { ws } = await openProject();
    writeFileSync(join(ws.worktree, "evaluate.py"), "print('val_bpb: 0.0')\n");
    const edited = await ws.verifyProtected();
    expect(edited).toContain("evaluate.py");
    expect(edited).not.toContain("prepare.py");
    unlinkSync(join(ws.worktree, "prepare.py"));
    const both = await ws.verifyProtected();
    expect(both).toContain("evaluate.py");
    expect(both).toMatch(/prepare\.py \(missing\)/);
    await ws.restoreProtected();
    expect(readFileSync(join(ws.worktree, "evaluate.py"), "utf8")).toBe(EVALUATE);
    expect(readFileSync(join(ws.worktree, "prepare.py"), "utf8")).toBe(PREPARE);
    expect(await ws.verifyProtected()).toBeUndefined();
    // Restoring leaves nothing staged or modified behind.
    expect(gitSync(ws.worktree, "status", "--porcelain")).toBe("");
  });

  it("checks and restores protected files relative to the program's directory", async () => {
    const { ws } = await openProject({ sub: true });
    expect(await ws.verifyProtected()).toBeUndefined();
    writeFileSync(join(ws.projectDir, "evaluate.py"), "tampered\n");
    expect(await ws.verifyProtected()).toContain("evaluate.py");
    await ws.restoreProtected();
    expect(readFileSync(join(ws.projectDir, "evaluate.py"), "utf8")).toBe(EVALUATE);
  });

  it("hashes, checks and restores each file of a protected directory", async () => {
    const project = createGitProject({
      ...SUB_FILES,
      "lab/data/a.csv": "1,2\n",
      "lab/data/b/c.csv": "3,4\n",
    });
    const repo = await findRepo(join(project.root, "lab"));
    const base = project.head as string;
    const protectedHashes = await hashesAt(repo, base, ["data", "evaluate.py"]);
    expect(protectedHashes).toEqual({
      "data/a.csv": sha256("1,2\n"),
      "data/b/c.csv": sha256("3,4\n"),
      "evaluate.py": sha256(EVALUATE),
    });
    const ws = await GitWorkspace.open({
      repo,
      tag: "t",
      stateDir: join(project.root, "lab", ".autolab"),
      baseCommit: base,
      protectedFiles: Object.keys(protectedHashes),
      protectedHashes,
    });
    expect(await ws.verifyProtected()).toBeUndefined();
    writeFileSync(join(ws.projectDir, "data", "b", "c.csv"), "0,0\n");
    expect(await ws.verifyProtected()).toBe("protected file changed: data/b/c.csv");
    await ws.restoreProtected();
    expect(readFileSync(join(ws.projectDir, "data", "b", "c.csv"), "utf8")).toBe("3,4\n");
    expect(await ws.verifyProtected()).toBeUndefined();
  });

  it("hashesAt gives the sha256 of each file's bytes at a commit", async () => {
    const project = createGitProject(SUB_FILES);
    const first = project.head as string;
    project.write({ "lab/evaluate.py": "v2\n" });
    const second = project.commitAll("v2");
    const repo = await findRepo(join(project.root, "lab"));
    expect(await hashesAt(repo, first, ["evaluate.py", "train.ts"])).toEqual({
      "evaluate.py": sha256(EVALUATE),
      "train.ts": sha256(TRAIN),
    });
    expect(await hashesAt(repo, second, ["evaluate.py"])).toEqual({ "evaluate.py": sha256("v2\n") });
    expect(await hashesAt(repo, first, [])).toEqual({});
    const err = await errorOf(hashesAt(repo, first, ["nope.py"]));
    expect(err.code).toBe("FILE_MISSING");
    expect(err.message).toContain('"nope.py" matches no file');
  });
});

describe("git helpers", () => {
  it("gitRaw returns a failure as data and git throws GIT_FAILED naming the command", async () => {
    const dir = tempDir();
    const out = await gitRaw(dir, ["rev-parse", "HEAD"]);
    expect(out.code).not.toBe(0);
    expect(out.stderr).toMatch(/not a git repository/);
    const err = await errorOf(git(dir, ["rev-parse", "HEAD"]));
    expect(err.code).toBe("GIT_FAILED");
    expect(err.message).toContain("git rev-parse HEAD");
  });
});

describe("with no git identity configured", () => {
  const saved: Record<string, string | undefined> = {};
  const IDENTITY_VARS = [
    "HOME",
    "XDG_CONFIG_HOME",
    "GIT_CONFIG_NOSYSTEM",
    "GIT_CONFIG_GLOBAL",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "EMAIL",
  ];
  beforeEach(() => {
    for (const k of IDENTITY_VARS) {
      saved[k] = process.env[k];
      delete process.env[k];
    }
    const home = tempDir("autolab-home-");
    process.env.HOME = home;
    process.env.XDG_CONFIG_HOME = join(home, ".config");
    process.env.GIT_CONFIG_NOSYSTEM = "1";
  });
  afterEach(() => {
    for (const k of IDENTITY_VARS) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
  });

  it("still commits candidates, as autolab", async () => {
    const { ws, base, wt } = await openProject();
    expect((await gitRaw(ws.worktree, ["config", "user.email"])).code).not.toBe(0);
    writeFileSync(join(ws.worktree, "train.ts"), "changed\n");
    const { commit } = await ws.commitCandidate(1, ["train.ts"], "exp 1");
    expect(await ws.parentOf(commit)).toBe(base);
    expect(wt("log", "-1", "--format=%an <%ae>", commit)).toBe("autolab <autolab@localhost>");
  });

  it("uses the repository's own identity when it has one", async () => {
    const project = createGitProject(TOP_FILES);
    project.git("config", "user.name", "Ada");
    project.git("config", "user.email", "ada@example.com");
    const repo = await findRepo(project.root);
    const ws = await GitWorkspace.open({
      repo,
      tag: "t",
      stateDir: join(project.root, ".autolab"),
      baseCommit: project.head as string,
      protectedFiles: [],
      protectedHashes: {},
    });
    writeFileSync(join(ws.worktree, "train.ts"), "changed\n");
    const { commit } = await ws.commitCandidate(1, ["train.ts"], "exp 1");
    expect(gitSync(ws.worktree, "log", "-1", "--format=%an <%ae>", commit)).toBe("Ada <ada@example.com>");
  });
});

describe("GitWorkspace.cleanTree", () => {
  it("removes what a trial wrote, keeps setup's files, caches and outputs, restores tracked files", async () => {
    const { ws, base } = await openProject();
    const at = (p: string) => join(ws.projectDir, p);
    mkdirSync(at("data"));
    writeFileSync(at("data/train.csv"), "setup made me\n");
    mkdirSync(at("out/sub"), { recursive: true });
    writeFileSync(at("out/model.json"), "{}");
    writeFileSync(at("out/sub/extra.bin"), "x");
    symlinkSync("/etc/passwd", at("out/leak"));
    writeFileSync(at("statistics.py"), "planted\n");
    mkdirSync(at(".cache"));
    writeFileSync(at(".cache/k"), "cached");
    writeFileSync(at("train.ts"), "rewritten at run time\n");
    await ws.cleanTree(base, ["data", ".cache", "out/model.json"], ["out/model.json"]);
    expect(readFileSync(at("data/train.csv"), "utf8")).toBe("setup made me\n");
    expect(readFileSync(at(".cache/k"), "utf8")).toBe("cached");
    expect(readFileSync(at("out/model.json"), "utf8")).toBe("{}");
    expect(existsSync(at("out/sub"))).toBe(false);
    expect(existsSync(at("out/leak"))).toBe(false);
    expect(existsSync(at("statistics.py"))).toBe(false);
    expect(readFileSync(at("train.ts"), "utf8")).toBe(TRAIN);
    await ws.cleanTree(base, ["data"]);
    expect(existsSync(at("out"))).toBe(false);
    expect(existsSync(at(".cache"))).toBe(false);
    expect(existsSync(at("data/train.csv"))).toBe(true);
    expect(existsSync(join(ws.worktree, ".git"))).toBe(true);
  });

  it("drops a symlink declared as an output, and a rewritten file whose mtime was forged is still restored", async () => {
    const { ws, base } = await openProject();
    const at = (p: string) => join(ws.projectDir, p);
    symlinkSync(at("evaluate.py"), at("model.json"));
    const { mtime } = statSync(at("train.ts"));
    writeFileSync(at("train.ts"), TRAIN.replace("0.1", "0.9"));
    utimesSync(at("train.ts"), mtime, mtime);
    await ws.cleanTree(base, ["model.json"], ["model.json"]);
    expect(existsSync(at("model.json"))).toBe(false);
    expect(readFileSync(at("train.ts"), "utf8")).toBe(TRAIN);
  });
});
