import type { DiffStats } from "./ledger.ts";

/** What untracked files existed before a proposal, so new ones can be told apart. */
export interface Snapshot {
  untracked: Set<string>;
  /** HEAD when the snapshot was taken: a researcher's own commits after it still count as its changes. */
  head: string;
}

/**
 * A git worktree in which candidates are made, committed and tried. Paths are relative to
 * the program's directory (where program.md lives) unless they say otherwise.
 */
export interface Workspace {
  /** The git worktree's top directory (absolute). */
  readonly worktree: string;
  /** Directory inside the worktree where the program's commands run. */
  readonly projectDir: string;
  /** The ratchet: `autolab/<tag>`. */
  readonly branch: string;
  bestCommit(): Promise<string>;
  head(): Promise<string>;
  /** Puts the worktree at `commit`, dropping tracked changes and the given new untracked files. */
  resetTo(commit: string, dropUntracked?: string[]): Promise<void>;
  snapshot(): Promise<Snapshot>;
  /**
   * Paths changed since the snapshot: tracked edits and new untracked files ("../x" if outside
   * the project), compared with the snapshot's HEAD whatever commits were made since (a
   * researcher's own commits are undone, their changes left in the files, so they are checked).
   */
  changes(since: Snapshot): Promise<string[]>;
  /**
   * The byte-exact reset (docs/security.md): afterwards the worktree holds `commit`'s files with
   * their committed modes, the paths under `keep` (setup's files, declared caches, declared
   * outputs) and nothing else, whatever was there (any name, empty or unreadable directories,
   * FIFOs, sockets, links). Returns why declared `outputs` that are not regular files or
   * directories of them were refused (and removed), so evaluate never opens one. Fails closed:
   * throws RESET_FAILED when something cannot be removed.
   */
  cleanTree(commit: string, keep: string[], outputs?: string[]): Promise<string[]>;
  /** Untracked and ignored paths now (directories as "dir/"), relative to the program's directory. */
  untrackedPaths(): Promise<string[]>;
  /** Who or what last moved the ratchet branch, from git's reflog ("" when unknown). */
  ratchetLastMove(): Promise<string>;
  /** Paths among `paths` that are symlinks in the worktree. */
  symlinks(paths: string[]): Promise<string[]>;
  /** Paths (relative to the program's directory) that differ between two commits. */
  changedPaths(parent: string, commit: string): Promise<string[]>;
  parentOf(commit: string): Promise<string>;
  /** Commits `paths` on top of HEAD (no paths: no commit, the ref points at HEAD) and makes the commit reachable as refs/autolab/<tag>/<n>. */
  commitCandidate(
    n: number,
    paths: string[],
    message: string,
  ): Promise<{ commit: string; ref: string; diff: DiffStats }>;
  /** Reachable ref of experiment n, if it exists (used to adopt a candidate committed just before a crash). */
  candidateRef(n: number): Promise<string | undefined>;
  /** The numbers n of every candidate ref of this run (refs/autolab/<tag>/<n>). */
  candidateNumbers(): Promise<number[]>;
  diffStats(parent: string, commit: string): Promise<DiffStats>;
  diff(parent: string, commit: string): Promise<string>;
  /** Moves the ratchet from `expectedOld` to `commit`; fails if the branch moved meanwhile. */
  advance(commit: string, expectedOld: string): Promise<void>;
  /**
   * A reason if a protected file differs from its recorded hash, or a protected directory or
   * glob gained a file the base commit does not hold (`allowed`: setup's files and caches, which
   * may lie there), else undefined.
   */
  verifyProtected(allowed?: readonly string[]): Promise<string | undefined>;
  /** Restores protected files byte-for-byte from the base commit (the pristine copy); removes files a protected directory or glob gained. */
  restoreProtected(allowed?: readonly string[]): Promise<void>;
  commitMessage(commit: string): Promise<string>;
  /** A file's content at a commit (path relative to the program's directory), read as latin1 (byte-exact); undefined if absent. */
  fileAt(commit: string, path: string): Promise<string | undefined>;
  /**
   * Re-applies `commit` (a candidate built on an older best) onto `onto` as a new commit,
   * reachable as refs/autolab/<tag>/<n>; or the paths that conflict; or alreadyIn when `onto`
   * already holds the change (nothing is committed).
   */
  rebase(
    n: number,
    commit: string,
    onto: string,
    message: string,
  ): Promise<
    { commit: string; ref: string; diff: DiffStats } | { conflicts: string[] } | { alreadyIn: true }
  >;
}
