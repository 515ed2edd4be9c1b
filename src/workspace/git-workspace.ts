import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { appendFile, lstat, mkdir, readFile, realpath, rm } from "node:fs/promises";
import { basename, join, posix, relative, resolve, sep } from "node:path";
import { AutolabError } from "../core/errors.ts";
import { fileMatcher, isGlob, literalBase } from "../core/file-patterns.ts";
import type { DiffStats } from "../core/ledger.ts";
import { readUntrusted } from "../core/untrusted-file.ts";
import type { Snapshot, Workspace } from "../core/workspace.ts";
import { git, gitRaw, SAFE_GIT_CONFIG } from "./git.ts";
import { parseTree, refuseOutputs, removeStrays, strays } from "./reset.ts";

export interface RepoInfo {
  /** Top level of the user's git checkout. */
  root: string;
  /** The program's directory relative to root ("" when program.md is at the top). */
  prefix: string;
}

/** Finds the git repository holding `dir`; a clear error when there is none. */
export async function findRepo(dir: string): Promise<RepoInfo> {
  const out = await gitRaw(dir, ["rev-parse", "--show-toplevel", "--show-prefix"]);
  if (out.code !== 0) {
    throw new AutolabError(
      "NOT_A_GIT_REPO",
      `${dir} is not inside a git repository; autolab keeps every candidate as a git commit.`,
      "Run `git init && git add -A && git commit -m init` there first (or `autolab init`, which does it).",
    );
  }
  const [top = "", shown = ""] = out.stdout.split("\n");
  const root = top.trim();
  const head = await gitRaw(root, ["rev-parse", "--verify", "-q", "HEAD"]);
  if (head.code !== 0) {
    throw new AutolabError(
      "NO_COMMITS",
      `the git repository ${root} has no commits yet.`,
      "Commit your project first: `git add -A && git commit -m init`.",
    );
  }
  // git's own prefix, not a path computed from `dir`: git resolves symlinks in the root, so
  // relative(root, dir) goes wrong when `dir` is reached through a symlink.
  const prefix = shown.trim().replace(/\/+$/, "");
  return { root, prefix };
}

/**
 * Git pathspecs that cover the patterns' files (their literal bases, under the program's
 * directory): git lists only there, and fileMatcher decides. No pathspec: the whole repository.
 */
function pathspecs(repo: RepoInfo, patterns: readonly string[]): string[] {
  const bases = patterns.map((p) => literalBase(p));
  if (bases.some((b) => b === "" || b === ".")) return repo.prefix ? [`:(top,literal)${repo.prefix}`] : [];
  return [...new Set(bases)].map((b) => `:(top,literal)${joinPrefix(repo.prefix, b)}`);
}

/** Repo-relative path → program-relative path, or undefined outside the program's directory. */
function inProgramDir(repo: RepoInfo, path: string): string | undefined {
  if (!repo.prefix) return path;
  return path.startsWith(`${repo.prefix}/`) ? path.slice(repo.prefix.length + 1) : undefined;
}

/**
 * Refuses to start a run when the files program.md lists (paths, directories or globs: src/core/
 * file-patterns.ts) have uncommitted changes, were never committed, or do not exist: the run
 * starts from HEAD, so such changes would silently not be part of it, and an entry that matches
 * no committed file is a typo (git keeps no empty directory, so a directory entry needs a file).
 */
export async function assertCommitted(repo: RepoInfo, files: string[], allowDirty: boolean): Promise<void> {
  const specs = pathspecs(repo, files);
  const status = await git(repo.root, [
    "status",
    "--porcelain=v1",
    "-z",
    "--no-renames",
    "--untracked-files=all",
    "--",
    ...specs,
  ]);
  const matches = fileMatcher(files);
  const listed = (repoPath: string) => {
    const p = inProgramDir(repo, repoPath);
    return p !== undefined && matches(p);
  };
  const dirty = status
    .split("\0")
    .filter(Boolean)
    .map((l) => ({ code: l.slice(0, 2), path: l.slice(3) }))
    .filter((d) => listed(d.path));
  const untracked = dirty.filter((d) => d.code === "??").map((d) => d.path);
  const modified = dirty.filter((d) => d.code !== "??").map((d) => d.path);
  const tracked = (await git(repo.root, ["ls-files", "-z", "--", ...specs]))
    .split("\0")
    .filter(Boolean)
    .flatMap((f) => inProgramDir(repo, f) ?? []);
  const existing = [...tracked, ...untracked.flatMap((f) => inProgramDir(repo, f) ?? [])];
  const missing = files.filter((f) => {
    const one = fileMatcher([f]);
    return !existing.some((e) => one(e));
  });
  if (missing.length > 0) {
    const globs = missing.filter(isGlob);
    const paths = missing.filter((m) => !isGlob(m)).map((m) => joinPrefix(repo.prefix, m));
    const what = [
      ...(paths.length
        ? [`${paths.join(", ")}, which ${paths.length === 1 ? "does" : "do"} not exist in the repository`]
        : []),
      ...(globs.length
        ? [
            `the glob${globs.length > 1 ? "s" : ""} ${globs.map((g) => JSON.stringify(g)).join(", ")}, which match${globs.length > 1 ? "" : "es"} no file in the repository (a typo?)`,
          ]
        : []),
    ];
    throw new AutolabError(
      "FILE_MISSING",
      `program.md names ${what.join(", and ")}.`,
      "Fix the entries under `files:` in program.md (relative to program.md's directory). A directory entry needs at least one committed file in it: git keeps no empty directory (add e.g. a .gitkeep).",
    );
  }
  if (untracked.length > 0) {
    throw new AutolabError(
      "UNTRACKED_FILES",
      `${untracked.join(", ")} ${untracked.length === 1 ? "is" : "are"} not committed; a run starts from the last commit.`,
      `Commit ${untracked.length === 1 ? "it" : "them"}: git add ${untracked.join(" ")} && git commit -m "autolab project"`,
    );
  }
  if (modified.length > 0 && !allowDirty) {
    throw new AutolabError(
      "DIRTY_WORKTREE",
      `the working tree has uncommitted changes in ${modified.join(", ")}; a run starts from the last commit, so they would not be part of it.`,
      `Commit or stash them (git commit -am "…" or git stash), or pass --allow-dirty to run from the last commit anyway.`,
    );
  }
}

/** program.md as the run starts from it: its blob at HEAD (and text), and whether the working copy differs. */
export interface CommittedProgram {
  /** Repo-relative path of the program file. */
  path: string;
  /** Git blob id of the program at HEAD; undefined when HEAD does not hold it. */
  blob?: string;
  /** The program's text at HEAD. */
  text?: string;
  /** The working copy differs from HEAD's (or HEAD has none). */
  dirty: boolean;
}

/** Where program.md stands against HEAD: a new run records the committed contract (docs/program.md). */
export async function committedProgram(repo: RepoInfo, file: string): Promise<CommittedProgram> {
  const path = joinPrefix(repo.prefix, basename(file));
  const head = await gitRaw(repo.root, ["rev-parse", "-q", "--verify", `HEAD:${path}`]);
  const work = (await git(repo.root, ["hash-object", "--", path])).trim();
  if (head.code !== 0) return { path, dirty: true };
  const blob = head.stdout.trim();
  const text = (await gitBuffer(repo.root, ["cat-file", "blob", blob])).toString("utf8");
  return { path, blob, text, dirty: blob !== work };
}

/** "./a/b/" → "a/b": setup's and caches' paths as the matcher's paths are written. */
function normalizeRel(p: string): string {
  return posix
    .normalize(p)
    .replace(/^(?:\.\/)+/, "")
    .replace(/\/+$/, "");
}

/** Program-relative path → repo-relative path; "../x" from "lab" is "x" (git pathspecs do not resolve ".."). */
function joinPrefix(prefix: string, path: string): string {
  return prefix ? posix.join(prefix, path) : path;
}

export function sha256(data: Buffer | string): string {
  return createHash("sha256").update(data).digest("hex");
}

/**
 * sha256 of each file as it is in `commit`, for entries that are files, directories or globs
 * (src/core/file-patterns.ts): one hash per file matched, keyed by its program-relative path,
 * so each file can be verified and restored; a directory itself has no bytes to compare.
 */
export async function hashesAt(
  repo: RepoInfo,
  commit: string,
  files: string[],
  /** Entries that may match nothing (holdout files that setup makes); any other such entry is an error. */
  optional: readonly string[] = [],
): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  if (files.length === 0) return out;
  const matches = fileMatcher(files);
  const listed = (
    await git(repo.root, ["ls-tree", "-r", "-z", "--name-only", commit, "--", ...pathspecs(repo, files)])
  )
    .split("\0")
    .filter(Boolean);
  for (const name of listed) {
    const key = inProgramDir(repo, name);
    if (key === undefined || !matches(key)) continue;
    out[key] = sha256(await gitBuffer(repo.root, ["show", `${commit}:${name}`]));
  }
  const keys = Object.keys(out);
  const none = files.filter((f) => !optional.includes(f) && !keys.some(fileMatcher([f])));
  if (none.length) {
    throw new AutolabError(
      "FILE_MISSING",
      `${none.map((f) => JSON.stringify(f)).join(", ")} ${none.length === 1 ? "matches" : "match"} no file in commit ${commit.slice(0, 8)}.`,
      "Fix the entries under `files:` in program.md (relative to program.md's directory).",
    );
  }
  return out;
}

function gitBuffer(cwd: string, args: string[]): Promise<Buffer> {
  return new Promise((res, rej) => {
    execFile(
      "git",
      [...SAFE_GIT_CONFIG, ...args],
      { cwd, encoding: "buffer", maxBuffer: 256 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err)
          rej(new AutolabError("GIT_FAILED", `git ${args.join(" ")} failed: ${stderr.toString().trim()}`));
        else res(stdout);
      },
    );
  });
}

export interface GitWorkspaceOptions {
  repo: RepoInfo;
  tag: string;
  /** The .autolab directory of the program (worktrees live under it). */
  stateDir: string;
  baseCommit: string;
  protectedFiles: string[];
  protectedHashes: Record<string, string>;
  /**
   * program.md's `files.protected` entries: a directory or glob among them must not gain a file
   * (verifyProtected). Without them only the hashed files are checked.
   */
  protectedPatterns?: string[];
  /**
   * A worker's own worktree (parallel slots and proposers): `.autolab/worktrees/<tag>.<worker>`.
   * Workers share the run's branch and candidate refs; each has its own files and index.
   */
  worker?: string;
}

/** Git identity for harness commits when the user has none configured. */
const IDENTITY = ["-c", "user.name=autolab", "-c", "user.email=autolab@localhost"];
/** A protected file is hashed up to this size (Node's limit of one read); a larger one counts as changed. */
const MAX_PROTECTED_BYTES = 2 ** 31 - 1;

export class GitWorkspace implements Workspace {
  readonly branch: string;
  readonly worktree: string;
  readonly projectDir: string;
  private readonly opts: GitWorkspaceOptions;
  private identity: string[] = [];

  private constructor(opts: GitWorkspaceOptions) {
    this.opts = opts;
    this.branch = `autolab/${opts.tag}`;
    this.worktree = join(opts.stateDir, "worktrees", opts.worker ? `${opts.tag}.${opts.worker}` : opts.tag);
    this.projectDir = opts.repo.prefix ? join(this.worktree, opts.repo.prefix) : this.worktree;
  }

  /**
   * Creates the ratchet branch (at baseCommit) and the worktree if they do not exist yet, and
   * keeps `.autolab/` out of git's sight. Idempotent: resuming a run opens the same worktree.
   */
  static async open(opts: GitWorkspaceOptions): Promise<GitWorkspace> {
    const ws = new GitWorkspace(opts);
    const { root } = opts.repo;
    await ensureExcluded(root);
    const email = await gitRaw(root, ["config", "user.email"]);
    if (email.code !== 0 || !email.stdout.trim()) ws.identity = IDENTITY;
    const branchRef = `refs/heads/${ws.branch}`;
    const exists = await gitRaw(root, ["rev-parse", "--verify", "-q", branchRef]);
    if (exists.code !== 0) await git(root, ["update-ref", branchRef, opts.baseCommit, ""]);
    const listed = await git(root, ["worktree", "list", "--porcelain"]);
    // git records the worktree's real path: compare with that, or a symlink in stateDir would
    // make every resume throw the worktree away.
    const real = existsSync(ws.worktree) ? await realpath(ws.worktree) : ws.worktree;
    const registered = listed
      .split("\n")
      .some((l) => l === `worktree ${ws.worktree}` || l === `worktree ${real}`);
    if (!registered || !existsSync(join(ws.worktree, ".git"))) {
      // A worktree half-created by a killed harness: clear it and start again.
      await rm(ws.worktree, { recursive: true, force: true });
      await git(root, ["worktree", "prune"]);
      await mkdir(join(opts.stateDir, "worktrees"), { recursive: true });
      await git(root, ["worktree", "add", "--detach", ws.worktree, branchRef]);
    }
    ws.gitDir = (await ws.g(["rev-parse", "--absolute-git-dir"])).trim();
    await ws.clearStaleLocks();
    return ws;
  }

  /** Another worktree on the same run (a slot or a proposer of a parallel run). */
  openWorker(name: string): Promise<GitWorkspace> {
    return GitWorkspace.open({ ...this.opts, worker: name });
  }

  /** The worktree's private git directory: removed with the worktree, so state kept here dies with it. */
  gitDir = "";

  /**
   * A git process of a harness killed with -9 may still be running (it is not in the trial's
   * process group), or may have died holding a lock. Wait briefly for its locks to go, then
   * remove those that stayed: this harness holds the run lock, so no live autolab owns them.
   */
  private async clearStaleLocks(): Promise<void> {
    const common = (await this.g(["rev-parse", "--git-common-dir"])).trim();
    const locks = [
      join(this.gitDir, "index.lock"),
      join(this.gitDir, "HEAD.lock"),
      resolve(this.worktree, common, "refs", "heads", "autolab", `${this.opts.tag}.lock`),
    ];
    for (let i = 0; i < 20 && locks.some((l) => existsSync(l)); i++)
      await new Promise((r) => setTimeout(r, 100));
    for (const l of locks) await rm(l, { force: true });
  }

  private g(args: string[]): Promise<string> {
    return git(this.worktree, args);
  }

  private toRepoPath(p: string): string {
    return joinPrefix(this.opts.repo.prefix, p);
  }

  /** Repo-relative path → path relative to the program's directory. */
  private fromRepoPath(p: string): string {
    const prefix = this.opts.repo.prefix;
    if (!prefix) return p;
    if (p.startsWith(`${prefix}/`)) return p.slice(prefix.length + 1);
    return relative(prefix, p).split(sep).join("/");
  }

  async bestCommit(): Promise<string> {
    return (await this.g(["rev-parse", `refs/heads/${this.branch}`])).trim();
  }

  async head(): Promise<string> {
    return (await this.g(["rev-parse", "HEAD"])).trim();
  }

  async resetTo(commit: string, dropUntracked: string[] = []): Promise<void> {
    await this.g(["reset", "-q", "--hard", commit]);
    for (const p of dropUntracked) {
      const abs = resolve(this.projectDir, p);
      if (abs.startsWith(this.worktree + sep)) await rm(abs, { recursive: true, force: true });
    }
  }

  async snapshot(): Promise<Snapshot> {
    const { untracked, head } = await this.status();
    return { untracked: new Set(untracked), head };
  }

  /** Tracked paths with changes, as seen by the last status call. */
  private lastTracked = new Set<string>();

  /** One `git status` (porcelain v2): changed tracked paths, untracked paths and HEAD. */
  private async status(): Promise<{ tracked: string[]; untracked: string[]; head: string }> {
    const out = await this.g([
      "status",
      "--porcelain=v2",
      "--branch",
      "-z",
      "--untracked-files=all",
      "--no-renames",
    ]);
    const tracked: string[] = [];
    const untracked: string[] = [];
    let head = "";
    for (const entry of out.split("\0")) {
      if (!entry) continue;
      if (entry.startsWith("# branch.oid ")) head = entry.slice("# branch.oid ".length);
      else if (entry.startsWith("? ")) untracked.push(this.fromRepoPath(entry.slice(2)));
      else if (entry.startsWith("1 ")) tracked.push(this.fromRepoPath(nthField(entry, 8)));
      else if (entry.startsWith("u ")) tracked.push(this.fromRepoPath(nthField(entry, 10)));
    }
    this.lastTracked = new Set(tracked);
    return { tracked, untracked, head };
  }

  async changes(since: Snapshot): Promise<string[]> {
    let now = await this.status();
    if (since.head && now.head !== since.head) {
      // The researcher committed (or checked out) on its own: its commits are not the harness's.
      // Back to the snapshot's HEAD, keeping the files, so every change it made is checked.
      await this.g(["reset", "-q", "--mixed", since.head]);
      now = await this.status();
    }
    return [...now.tracked, ...now.untracked.filter((p) => !since.untracked.has(p))].sort();
  }

  async untrackedPaths(): Promise<string[]> {
    // The reset's own view (src/workspace/reset.ts), not git status's: an empty directory or a
    // FIFO setup made is setup's, kept in every trial like its files.
    const tree = parseTree(await gitBuffer(this.worktree, ["ls-tree", "-r", "-z", "--full-tree", "HEAD"]));
    return (await strays(this.worktree, tree)).map((p) =>
      this.fromRepoPath(Buffer.from(p, "latin1").toString("utf8")),
    );
  }

  async cleanTree(commit: string, keep: string[], outputs: string[] = []): Promise<string[]> {
    // One ls-tree and one walk (src/workspace/reset.ts), then git writes what the walk removed or
    // what a trial changed: no per-file git call on this path (it runs twice per trial).
    const tree = parseTree(await gitBuffer(this.worktree, ["ls-tree", "-r", "-z", "--full-tree", commit]));
    const repoPaths = (ps: string[]) =>
      ps.map((p) => normalizeRel(this.toRepoPath(p))).filter((p) => p !== ".." && !p.startsWith("../"));
    await removeStrays({ root: this.worktree, tree, keep: repoPaths(keep) });
    await this.g(["reset", "-q", "--hard", commit]);
    return outputs.length ? refuseOutputs(this.worktree, repoPaths(outputs), tree) : [];
  }

  async ratchetLastMove(): Promise<string> {
    const out = await gitRaw(this.worktree, [
      "reflog",
      "show",
      "-n",
      "1",
      "--date=iso",
      "--format=%gs (by %gn <%ge>, %gd)",
      `refs/heads/${this.branch}`,
    ]);
    return out.code === 0 ? out.stdout.trim() : "";
  }

  async symlinks(paths: string[]): Promise<string[]> {
    const out: string[] = [];
    for (const p of paths) {
      try {
        if ((await lstat(resolve(this.projectDir, p))).isSymbolicLink()) out.push(p);
      } catch {
        // deleted: not a symlink
      }
    }
    return out;
  }

  async commitCandidate(
    n: number,
    paths: string[],
    message: string,
  ): Promise<{ commit: string; ref: string; diff: DiffStats }> {
    // Few git processes on this path: it runs once per experiment (see bench/overhead.ts).
    const ref = this.candidateRefName(n);
    if (paths.length === 0) {
      await this.g(["update-ref", ref, "HEAD"]);
      return { commit: await this.head(), ref, diff: { files: 0, insertions: 0, deletions: 0 } };
    }
    const specs = paths.map((p) => `:(top,literal)${this.toRepoPath(p)}`);
    const tracked = await this.allTracked(paths);
    if (!tracked) await this.g(["add", "-A", "--", ...specs]);
    // `commit -- paths` commits exactly these paths' working-tree state (tracked files only).
    await this.g([
      ...this.identity,
      // Candidates are the harness's commits: a user's signing setup (often interactive) must
      // not make every experiment fail.
      "-c",
      "commit.gpgsign=false",
      "commit",
      "-q",
      "--no-verify",
      "-m",
      message,
      ...(tracked ? ["--", ...specs] : []),
    ]);
    await this.g(["update-ref", ref, "HEAD"]);
    const out = await this.g(["log", "-1", "--format=%H", "--numstat", "--no-renames", "HEAD"]);
    const [sha = "", ...rest] = out.trim().split("\n");
    return { commit: sha.trim(), ref, diff: parseNumstat(rest.join("\n")) };
  }

  /** Whether every path was tracked at HEAD (known from the last status; no extra git call). */
  private async allTracked(paths: string[]): Promise<boolean> {
    return paths.every((p) => this.lastTracked.has(p));
  }

  private candidateRefName(n: number): string {
    return `refs/autolab/${this.opts.tag}/${n}`;
  }

  async candidateRef(n: number): Promise<string | undefined> {
    const out = await gitRaw(this.worktree, ["rev-parse", "--verify", "-q", this.candidateRefName(n)]);
    return out.code === 0 ? out.stdout.trim() : undefined;
  }

  async candidateNumbers(): Promise<number[]> {
    const prefix = `refs/autolab/${this.opts.tag}/`;
    const out = await this.g(["for-each-ref", "--format=%(refname)", prefix]);
    return out
      .split("\n")
      .filter((r) => r.startsWith(prefix))
      .map((r) => Number(r.slice(prefix.length)))
      .filter((n) => Number.isInteger(n) && n >= 0)
      .sort((a, b) => a - b);
  }

  async diffStats(parent: string, commit: string): Promise<DiffStats> {
    return parseNumstat(await this.g(["diff", "--numstat", "--no-renames", parent, commit]));
  }

  async changedPaths(parent: string, commit: string): Promise<string[]> {
    const out = await this.g(["diff", "--name-only", "-z", "--no-renames", parent, commit]);
    return out
      .split("\0")
      .filter(Boolean)
      .map((p) => this.fromRepoPath(p));
  }

  async parentOf(commit: string): Promise<string> {
    return (await this.g(["rev-parse", `${commit}^`])).trim();
  }

  async diff(parent: string, commit: string): Promise<string> {
    return this.g(["diff", "--no-renames", parent, commit]);
  }

  async advance(commit: string, expectedOld: string): Promise<void> {
    const out = await gitRaw(this.worktree, ["update-ref", `refs/heads/${this.branch}`, commit, expectedOld]);
    if (out.code !== 0) {
      throw new AutolabError(
        "RATCHET_MOVED",
        `the branch ${this.branch} moved while experiment ${commit.slice(0, 8)} was running (expected ${expectedOld.slice(0, 8)}).`,
        "Another process is writing to this run; run one `autolab run` per tag.",
      );
    }
  }

  async verifyProtected(allowed: readonly string[] = []): Promise<string | undefined> {
    const changed: string[] = [];
    for (const [file, expected] of Object.entries(this.opts.protectedHashes)) {
      // A trial may have replaced the file: read through the one door (a FIFO is never waited
      // on, a symlink never followed: either is a change).
      const read = readUntrusted(join(this.projectDir, file), { maxBytes: MAX_PROTECTED_BYTES });
      if (!read.ok) {
        changed.push(`${file} (${read.missing ? "missing" : read.reason})`);
        continue;
      }
      if (read.truncated || sha256(read.bytes) !== expected) changed.push(file);
    }
    const added = await this.strayProtected(allowed);
    const reasons = [
      ...(changed.length
        ? [`protected file${changed.length > 1 ? "s" : ""} changed: ${changed.join(", ")}`]
        : []),
      ...(added.length
        ? [`new file${added.length > 1 ? "s" : ""} in protected paths: ${added.join(", ")}`]
        : []),
    ];
    return reasons.length ? reasons.join("; ") : undefined;
  }

  /**
   * Files a protected directory or glob holds that the base commit does not (untracked, not
   * ignored by git: caches such as __pycache__ are cleaned before evaluate anyway), besides
   * `allowed` paths (setup's files, caches). A protected directory is read-only in the sandbox;
   * this catches the unsandboxed case and files next to protected glob matches.
   */
  private async strayProtected(allowed: readonly string[]): Promise<string[]> {
    const open = (this.opts.protectedPatterns ?? []).filter((p) => !(p in this.opts.protectedHashes));
    if (open.length === 0) return [];
    const matches = fileMatcher(open);
    const out = await this.g([
      "status",
      "--porcelain=v1",
      "-z",
      "--untracked-files=all",
      "--no-renames",
      "--",
      ...pathspecs(this.opts.repo, open),
    ]);
    const within = (p: string, dir: string) => p === dir || p.startsWith(`${dir}/`);
    return out
      .split("\0")
      .filter((e) => e.startsWith("?? "))
      .map((e) => this.fromRepoPath(e.slice(3)))
      .filter((p) => matches(p) && !allowed.some((a) => within(p, normalizeRel(a))))
      .sort();
  }

  async restoreProtected(allowed: readonly string[] = []): Promise<void> {
    for (const p of await this.strayProtected(allowed)) {
      const abs = resolve(this.projectDir, p);
      if (abs.startsWith(this.worktree + sep)) await rm(abs, { force: true });
    }
    if (this.opts.protectedFiles.length === 0) return;
    await this.g([
      "checkout",
      this.opts.baseCommit,
      "--",
      ...this.opts.protectedFiles.map((f) => `:(top,literal)${this.toRepoPath(f)}`),
    ]);
  }

  async rebase(
    n: number,
    commit: string,
    onto: string,
    message: string,
  ): Promise<
    { commit: string; ref: string; diff: DiffStats } | { conflicts: string[] } | { alreadyIn: true }
  > {
    // The ratchet is linear, so the merge base of the new best and a candidate is the old best
    // the candidate was built on: a three-way merge without a worktree is a cherry-pick.
    const out = await gitRaw(this.worktree, [
      "merge-tree",
      "--write-tree",
      "--name-only",
      "--no-messages",
      onto,
      commit,
    ]);
    const lines = out.stdout.split("\n").filter(Boolean);
    if (out.code === 1) return { conflicts: lines.slice(1).map((p) => this.fromRepoPath(p)) };
    if (out.code !== 0 || !lines[0]) {
      throw new AutolabError("GIT_FAILED", `git merge-tree ${onto} ${commit} failed: ${out.stderr.trim()}`);
    }
    // The same change was found twice: the new best already has it.
    if (lines[0] === (await this.g(["rev-parse", `${onto}^{tree}`])).trim()) return { alreadyIn: true };
    const made = await gitRaw(
      this.worktree,
      [...this.identity, "commit-tree", lines[0], "-p", onto, "-F", "-"],
      message,
    );
    if (made.code !== 0)
      throw new AutolabError("GIT_FAILED", `git commit-tree failed: ${made.stderr.trim()}`);
    const sha = made.stdout.trim();
    const ref = this.candidateRefName(n);
    await this.g(["update-ref", ref, sha]);
    return { commit: sha, ref, diff: await this.diffStats(onto, sha) };
  }

  async fileAt(commit: string, path: string): Promise<string | undefined> {
    try {
      return (await gitBuffer(this.worktree, ["show", `${commit}:${this.toRepoPath(path)}`])).toString(
        "latin1",
      );
    } catch {
      return undefined;
    }
  }

  async commitMessage(commit: string): Promise<string> {
    return this.g(["log", "-1", "--format=%B", commit]);
  }
}

/** The path of a porcelain v2 entry: everything after the first `n` space-separated fields. */
function nthField(entry: string, n: number): string {
  let i = 0;
  for (let k = 0; k < n; k++) i = entry.indexOf(" ", i) + 1;
  return entry.slice(i);
}

function parseNumstat(out: string): DiffStats {
  const stats = { files: 0, insertions: 0, deletions: 0 };
  for (const line of out.split("\n")) {
    const [ins, del] = line.split("\t");
    if (ins === undefined || del === undefined) continue;
    stats.files++;
    // Binary files show "-": they count as a changed file with no line counts.
    stats.insertions += Number(ins) || 0;
    stats.deletions += Number(del) || 0;
  }
  return stats;
}

/**
 * Keeps `.autolab/` (notebook, worktrees, logs) out of `git status` without touching .gitignore.
 * Called before anything is written under `.autolab/` (and again when a worktree opens).
 */
export async function ensureExcluded(root: string): Promise<void> {
  const commonDir = (await git(root, ["rev-parse", "--git-common-dir"])).trim();
  const excludePath = resolve(root, commonDir, "info", "exclude");
  let text = "";
  try {
    text = await readFile(excludePath, "utf8");
  } catch {
    await mkdir(resolve(root, commonDir, "info"), { recursive: true });
  }
  if (!text.split("\n").includes(".autolab/")) {
    await appendFile(excludePath, `${text && !text.endsWith("\n") ? "\n" : ""}.autolab/\n`);
  }
}
