import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

/**
 * Real git repositories in temp dirs for tests. Every git call passes its own identity and
 * turns off signing, so tests pass on machines with no (or an unusual) global git config.
 */
const GIT_FLAGS = [
  "-c",
  "user.name=autolab-test",
  "-c",
  "user.email=test@autolab.invalid",
  "-c",
  "commit.gpgsign=false",
  "-c",
  "init.defaultBranch=main",
];

/** Runs git in `cwd` with the test identity; returns trimmed stdout, throws on a non-zero exit. */
export function gitSync(cwd: string, ...args: string[]): string {
  return execFileSync("git", [...GIT_FLAGS, ...args], {
    cwd,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, GIT_TERMINAL_PROMPT: "0", LC_ALL: "C" },
  }).trim();
}

/** A temp directory (its real path, so it compares equal to what git prints); removed by cleanupTemp. */
const temps: string[] = [];
export function tempDir(prefix = "autolab-test-"): string {
  const d = realpathSync(mkdtempSync(join(tmpdir(), prefix)));
  temps.push(d);
  return d;
}

export function cleanupTemp(): void {
  for (const d of temps.splice(0)) rmSync(d, { recursive: true, force: true });
}

/** Writes files (path → content) under `dir`, creating parent directories. */
export function writeFiles(dir: string, files: Record<string, string>): void {
  for (const [path, content] of Object.entries(files)) {
    const abs = join(dir, path);
    mkdirSync(dirname(abs), { recursive: true });
    writeFileSync(abs, content);
  }
}

export interface GitProject {
  /** Top level of the repository. */
  root: string;
  /** The commit made from `files` (undefined when created with commit: false). */
  head: string | undefined;
  git(...args: string[]): string;
  write(files: Record<string, string>): void;
  /** Stages everything and commits; returns the new HEAD. */
  commitAll(message?: string): string;
}

/** A fresh repository holding `files`, committed as one commit unless `commit` is false. */
export function createGitProject(files: Record<string, string>, opts: { commit?: boolean } = {}): GitProject {
  const root = tempDir("autolab-git-");
  gitSync(root, "init", "-q");
  writeFiles(root, files);
  const project: GitProject = {
    root,
    head: undefined,
    git: (...args) => gitSync(root, ...args),
    write: (more) => writeFiles(root, more),
    commitAll: (message = "commit") => {
      gitSync(root, "add", "-A");
      gitSync(root, "commit", "-q", "--no-verify", "-m", message);
      return gitSync(root, "rev-parse", "HEAD");
    },
  };
  if (opts.commit !== false) project.head = project.commitAll("init");
  return project;
}
