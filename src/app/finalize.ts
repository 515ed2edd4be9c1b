/**
 * `autolab finalize`: a run's kept changes as reviewable branches (docs/finalize.md).
 *
 * Each kept change is the diff from the best before it to its commit. Dependencies come from
 * overlapping hunks (finalize-hunks.ts); each change gets one branch from the run's base commit
 * holding its dependencies' commits first (oldest first), then its own. The commits are built
 * without a worktree — a temporary index, `git apply --cached --3way`, `commit-tree` — so the
 * user's checkout is never touched, and they carry the kept commit's author and date, so the
 * same run gives the same commits every time. A change git cannot apply even on top of its
 * dependencies is kept on one branch with the changes it conflicts with, and the plan says so.
 */

import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { AutolabError } from "../core/errors.ts";
import { type Evidence, evidenceLabel } from "../core/evidence.ts";
import { bestOf, objectiveOf } from "../core/experiments.ts";
import { formatMetric } from "../core/format.ts";
import { isTreeNode } from "../core/frontier.ts";
import type { ExperimentRecord, RunRecord } from "../core/ledger.ts";
import type { ReadableNotebook } from "../core/notebook-reader.ts";
import { mean } from "../core/stats.ts";
import { valuesAt } from "../core/trial-values.ts";
import type { Executor, Program } from "../core/types.ts";
import { loadProgram } from "../program/index.ts";
import { findOnPath } from "../runner/sandbox.ts";
import { fitNoise } from "../trust/noise-model.ts";
import { git, gitRaw } from "../workspace/git.ts";
import { findRepo, type RepoInfo } from "../workspace/git-workspace.ts";
import { evidenceByN } from "./evidence.ts";
import { type ChangeHunks, closure, hunkDependencies, parseDiff } from "./finalize-hunks.ts";
import { openLedger, programPath, selectRun } from "./lab.ts";

export interface FinalizeOptions {
  /** program.md or its directory (default: the current directory). */
  program?: string;
  /** The run (default: the newest). */
  tag?: string;
  /** Write the branches (default: a dry run that only builds and shows the plan). */
  apply?: boolean;
  /** Re-measure each branch alone against the base (docs/finalize.md "Verify"). */
  verify?: boolean;
  /** Trials per configuration for --verify (default 3). */
  trials?: number;
  /** Open one pull request per branch with `gh` (implies apply; pushes each branch to `remote`). */
  pr?: boolean;
  /** The remote --pr pushes to (default origin). */
  remote?: string;
  /** Where --verify's trials run (default: the local, sandboxed executor). */
  executor?: Executor;
  /** Progress lines for people (verify takes trials' time). */
  onProgress?: (line: string) => void;
}

/** One kept change of the run. */
export interface FinalizeChange {
  /** Experiment number. */
  n: number;
  hypothesis: string;
  mechanism?: string;
  /** The best before it (the previous kept commit) and its commit. */
  parent: string;
  commit: string;
  /** Repository paths it touches. */
  paths: string[];
  /** Earlier changes whose lines its hunks meet (direct), with the files where they meet. */
  dependsOn: { n: number; paths: string[] }[];
  /** Its gain over the best before it, as the run measured it (improvement: positive is better). */
  gain?: Gain;
  /** The experiments it came from: itself, and the one it was rebased from (a merge candidate). */
  experiments: number[];
  /** No file changed: nothing to branch. */
  empty: boolean;
  /** The grade its evidence reached (src/core/evidence.ts), after any --verify of this call. */
  evidence?: Evidence;
}

export interface Gain {
  /** Improvement in metric units (positive: better in the run's direction). */
  value: number;
  /** σ of the difference of the two means (run-wide noise model); NaN when unknown, 0 when exact. */
  sigma: number;
  /** Trials behind the change's value and the value it is compared with. */
  trials: number;
  baseTrials: number;
}

/** One branch of the plan. */
export interface FinalizeBranch {
  /** Branch name (refs/heads/…). */
  name: string;
  /** The change it is for. */
  n: number;
  /** The changes it holds, oldest first: dependencies, then `n` (one commit each). */
  contains: number[];
  /** Changes added because git could not apply `n` without them (not found from hunks). */
  conflictsWith: { n: number; paths: string[] }[];
  /** The branch's commits, oldest first (built by the dry run too: objects, no ref). */
  commits: string[];
  tip: string;
  /** What --apply found or did: new, already there, or refused (another branch by that name). */
  state?: "created" | "unchanged" | "exists";
  verify?: VerifyResult;
  pr?: { url: string } | { error: string };
}

export interface VerifyResult {
  /** Improvement of the branch's tip over what it is compared with (positive: better). */
  gain: number;
  sigma: number;
  trials: number;
  /** "base": the run's base commit; else the tip without the change (its dependencies alone). */
  against: "base" | "dependencies";
  verdict: "holds" | "not-significant" | "no-gain" | "failed";
  /** The note written into the notebook. */
  note: string;
}

export interface FinalizePlan {
  run: { tag: string; metric: string; direction: "minimize" | "maximize"; baseCommit: string };
  repoRoot: string;
  changes: FinalizeChange[];
  branches: FinalizeBranch[];
  /** The run-wide σ behind the gains (NaN unknown, 0 deterministic) and its explanation. */
  noise: { sigma: number; explain: string };
  /** The project's tree has uncommitted changes to tracked files (only a dry run goes on). */
  dirty: string[];
  applied: boolean;
}

/** `autolab finalize` as a library call: the plan, and what --apply, --verify, --pr did. */
export async function finalizeRun(opts: FinalizeOptions = {}): Promise<FinalizePlan> {
  const file = programPath(opts.program);
  const { ledger } = openLedger(opts.program);
  try {
    const run = selectRun(ledger, opts.tag);
    const program = programOrUndefined(file);
    const repo = await findRepo(dirname(file));
    const exps = ledger.listExperiments(run.id);
    const plan = await planFinalize(repo, run, exps, program);
    const writes = opts.apply || opts.pr || opts.verify;
    if (writes && plan.dirty.length) {
      throw new AutolabError(
        "FINALIZE_DIRTY",
        `the working tree of ${repo.root} has uncommitted changes (${plan.dirty.slice(0, 5).join(", ")}${plan.dirty.length > 5 ? ", …" : ""}); finalize writes branches from the run's commits only, and would leave them out.`,
        "Commit or stash them (git stash), then run `autolab finalize` again. A dry run (without --apply, --verify, --pr) still shows the plan.",
      );
    }
    if (opts.pr) assertGh();
    if (opts.apply || opts.pr) await applyBranches(repo, ledger, run, plan);
    if (opts.verify) {
      const { verifyBranches } = await import("./finalize-verify.ts");
      await verifyBranches(plan, ledger, run, {
        program: file,
        trials: opts.trials ?? 3,
        ...(opts.executor ? { executor: opts.executor } : {}),
        ...(opts.onProgress ? { onProgress: opts.onProgress } : {}),
      });
    }
    if (opts.pr) await openPullRequests(repo, plan, opts.remote ?? "origin");
    // Graded last: a --verify of this call is part of the evidence.
    const grades = evidenceByN(run, exps, ledger.listNotes(run.id), program);
    for (const c of plan.changes) {
      const ev = grades.get(c.n);
      if (ev) c.evidence = ev;
    }
    return plan;
  } finally {
    ledger.close();
  }
}

function programOrUndefined(file: string): Program | undefined {
  try {
    return loadProgram(file);
  } catch {
    return undefined;
  }
}

export interface PlanOptions {
  /**
   * Build the branches' commits in a temporary object directory (the repository's objects read
   * through it as an alternate), so the plan writes nothing into the repository, not even
   * unreferenced objects: what read-only viewers (the dashboard, MCP) use. The commits' hashes
   * are the same; --apply needs them in the repository and builds them there.
   */
  scratchObjects?: boolean;
}

/** The plan: changes, dependencies, gains, and each branch's commits (objects only, no ref). */
export async function planFinalize(
  repo: RepoInfo,
  run: RunRecord,
  exps: ExperimentRecord[],
  program?: Program,
  opts: PlanOptions = {},
): Promise<FinalizePlan> {
  const kept = exps.filter((e) => e.decision?.action === "keep").sort((a, b) => a.n - b.n);
  if (kept.filter((e) => e.n > 0).length === 0) {
    throw new AutolabError(
      "NOTHING_TO_FINALIZE",
      `run ${run.tag} kept no change beyond its baseline: there is nothing to turn into a branch.`,
      "Let the run go on (autolab run), or finalize another run (--tag).",
    );
  }
  const values = (e: ExperimentRecord) => valuesOf(program, e, run.metric);
  const best = bestOf(exps);
  const noise = fitNoise(
    exps.map((e) => ({ n: e.n, values: values(e) })),
    best ? (objectiveOf(best, run.metric) ?? 0) : 0,
  );
  const changes: FinalizeChange[] = [];
  const hunks: ChangeHunks[] = [];
  const changesKept = changesOfBest(exps, kept, run.baseCommit);
  let prev = kept.find((e) => e.n === 0) ?? kept[0];
  let parent = run.baseCommit;
  for (const e of changesKept) {
    // A change is measured against the node it grew from (with a tree frontier, not always the
    // keep before it); the walk below guarantees it is the previous one on the path.
    prev = exps.find((x) => x.commit === e.parentCommit) ?? prev;
    const diff = await git(repo.root, [...DIFF, "-U0", parent, e.commit]);
    const files = parseDiff(diff);
    hunks.push({ n: e.n, files });
    const change: FinalizeChange = {
      n: e.n,
      hypothesis: e.hypothesis,
      ...(e.mechanism ? { mechanism: e.mechanism } : {}),
      parent,
      commit: e.commit,
      paths: files.map((f) => f.path),
      dependsOn: [],
      experiments: e.rebaseOf !== undefined ? [e.n, e.rebaseOf] : [e.n],
      empty: files.length === 0,
    };
    const gain = prev ? gainOf(run, values(prev), values(e), noise.sigma) : undefined;
    if (gain) change.gain = gain;
    changes.push(change);
    prev = e;
    parent = e.commit;
  }
  const deps = hunkDependencies(hunks);
  for (const c of changes) c.dependsOn = (deps.get(c.n) ?? []).map((d) => ({ n: d.on, paths: d.paths }));
  const branches = await buildBranches(repo, run, changes, opts);
  return {
    run: { tag: run.tag, metric: run.metric, direction: run.direction, baseCommit: run.baseCommit },
    repoRoot: repo.root,
    changes,
    branches,
    noise: { sigma: noise.sigma, explain: noise.explain },
    dirty: await dirtyPaths(repo.root),
    applied: false,
  };
}

/**
 * The changes the best holds, base first: its ancestry through the notebook's kept nodes. Without
 * a tree frontier that is every keep in order (each built on the keep before it, a rebased
 * winner on the best it was rebased onto). With one, a keep may have grown on a tree node and
 * moved the ratchet sideways: the path then runs through tree nodes, and keeps on a branch the
 * ratchet left are not in the best, so not in the plan (diffing a sideways keep against the keep
 * before it would undo that branch's edits). A path that does not reach the base (a notebook
 * this rule does not cover) falls back to the keeps in order.
 */
function changesOfBest(exps: ExperimentRecord[], kept: ExperimentRecord[], base: string): ExperimentRecord[] {
  const keeps = kept.filter((e) => e.n > 0);
  const best = keeps.at(-1);
  const nodes = new Map(exps.filter((e) => e.n > 0 && isTreeNode(e)).map((e) => [e.commit, e]));
  const baseline = kept.find((e) => e.n === 0)?.commit ?? base;
  const path: ExperimentRecord[] = [];
  for (let e = best; e; e = nodes.get(e.parentCommit)) {
    path.unshift(e);
    if (e.parentCommit === baseline || e.parentCommit === base) return path;
    if (path.length > exps.length) break;
  }
  return keeps;
}

/** Every diff finalize reads: no external diff or textconv driver (they run programs), fixed prefixes. */
const DIFF = [
  "diff",
  "--no-ext-diff",
  "--no-textconv",
  "--no-color",
  "--no-renames",
  "--no-relative",
  "--src-prefix=a/",
  "--dst-prefix=b/",
];

function valuesOf(program: Program | undefined, e: ExperimentRecord, metric: string): number[] {
  if (program) return valuesAt(program, e, "full");
  return e.trials
    .map((t) => t.result)
    .filter((r) => r?.status === "ok" && Number.isFinite(r.metrics[metric]))
    .map((r) => r?.metrics[metric] as number);
}

function gainOf(run: RunRecord, before: number[], after: number[], sigma: number): Gain | undefined {
  if (!before.length || !after.length) return undefined;
  const diff = mean(after) - mean(before);
  return {
    value: run.direction === "minimize" ? -diff : diff,
    sigma: sigma * Math.sqrt(1 / before.length + 1 / after.length),
    trials: after.length,
    baseTrials: before.length,
  };
}

async function dirtyPaths(root: string): Promise<string[]> {
  const out = await git(root, ["status", "--porcelain=v1", "-z", "--untracked-files=no", "--no-renames"]);
  return out
    .split("\0")
    .filter(Boolean)
    .map((l) => l.slice(3));
}

/**
 * The notes finalize writes are read back (a second --apply skips a branch already noted; the
 * dashboard marks applied and verified branches): their openings are built here only.
 */
export const appliedNote = (b: { n: number; name: string }) => `finalize: #${b.n} is on branch ${b.name}`;
export const VERIFY_NOTE = "finalize --verify: ";
export const verifyNote = (b: { n: number; name: string }) => `${VERIFY_NOTE}#${b.n} alone on ${b.name}: `;

/** `autolab-finalize/<tag>/<n>-<slug>`: outside `autolab/<tag>`, which is the run's branch (git keeps no ref under a ref). */
export function branchName(tag: string, n: number, hypothesis: string): string {
  const slug =
    (hypothesis.split("\n")[0] ?? "")
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, "-")
      .replace(/^-+|-+$/g, "")
      .slice(0, 40)
      .replace(/-+$/, "") || "change";
  return `autolab-finalize/${tag}/${n}-${slug}`;
}

/** Builds each branch's commits in a temporary index; a conflict pulls in what it conflicts with. */
export async function buildBranches(
  repo: RepoInfo,
  run: RunRecord,
  changes: FinalizeChange[],
  opts: PlanOptions = {},
): Promise<FinalizeBranch[]> {
  const byN = new Map(changes.map((c) => [c.n, c]));
  const direct = new Map(changes.map((c) => [c.n, c.dependsOn.map((d) => d.n)]));
  const tmp = mkdtempSync(join(tmpdir(), "autolab-finalize-"));
  let objects: Record<string, string> = {};
  if (opts.scratchObjects) {
    try {
      objects = await scratchObjectEnv(repo, join(tmp, "objects"));
    } catch (err) {
      rmSync(tmp, { recursive: true, force: true });
      throw err;
    }
  }
  const patches = new Map<number, string>();
  const patchOf = async (c: FinalizeChange) => {
    let p = patches.get(c.n);
    if (p === undefined) {
      p = await git(repo.root, [...DIFF, "--binary", "--full-index", c.parent, c.commit]);
      patches.set(c.n, p);
    }
    return p;
  };
  const commits = new Map<string, string>(); // "parent n" → commit: shared prefixes are built once
  try {
    const branches: FinalizeBranch[] = [];
    let k = 0;
    for (const c of changes) {
      if (c.empty) continue;
      k++;
      let contains = closure(c.n, direct).filter((n) => !byN.get(n)?.empty);
      const conflictsWith: { n: number; paths: string[] }[] = [];
      let built = await buildStack(
        repo,
        run,
        contains,
        byN,
        patchOf,
        commits,
        join(tmp, `index-${k}`),
        objects,
      );
      while ("conflict" in built) {
        // git could not apply change `at` on top of what the branch holds so far. Take the
        // earlier change touching the conflicting files that makes it apply (with its own
        // dependencies; the closest in the run's order first), else all of them, else every
        // earlier change (the run's own chain always applies).
        const failed = built.conflict;
        const earlier = changes.filter((x) => x.n < failed.at && !x.empty && !contains.includes(x.n));
        const touching = earlier.filter((x) => x.paths.some((p) => failed.paths.includes(p)));
        const index = join(tmp, `index-${k}`);
        const withExtra = (extra: number[]) => {
          const all = new Set(contains);
          for (const x of extra) for (const y of closure(x, direct)) all.add(y);
          return [...all].sort((a, b) => a - b);
        };
        let extra: number[] | undefined;
        for (const x of [...touching].reverse()) {
          const attempt = await buildStack(
            repo,
            run,
            withExtra([x.n]),
            byN,
            patchOf,
            commits,
            index,
            objects,
          );
          if (!("conflict" in attempt) || attempt.conflict.at !== failed.at) {
            extra = [x.n];
            break;
          }
        }
        extra ??= touching.length ? touching.map((x) => x.n) : earlier.map((x) => x.n);
        if (extra.length === 0) {
          throw new AutolabError(
            "GIT_FAILED",
            `change #${failed.at} does not apply on top of the run's own earlier changes: ${failed.paths.join(", ")}`,
          );
        }
        for (const x of extra) {
          const paths = (byN.get(x)?.paths ?? []).filter((p) => failed.paths.includes(p));
          conflictsWith.push({ n: x, paths: paths.length ? paths : failed.paths });
        }
        contains = withExtra(extra);
        built = await buildStack(repo, run, contains, byN, patchOf, commits, index, objects);
      }
      branches.push({
        name: branchName(run.tag, c.n, c.hypothesis),
        n: c.n,
        contains,
        conflictsWith: conflictsWith.sort((a, b) => a.n - b.n),
        commits: built.commits,
        tip: built.commits.at(-1) as string,
      });
    }
    return branches;
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/**
 * The environment that makes git write new objects into `dir` and read the repository's
 * through it (GIT_ALTERNATE_OBJECT_DIRECTORIES; a path with ':' or '"' is quoted as git reads it).
 */
async function scratchObjectEnv(repo: RepoInfo, dir: string): Promise<Record<string, string>> {
  const own = (await git(repo.root, ["rev-parse", "--path-format=absolute", "--git-path", "objects"])).trim();
  mkdirSync(dir, { recursive: true });
  return {
    GIT_OBJECT_DIRECTORY: dir,
    GIT_ALTERNATE_OBJECT_DIRECTORIES: /[:"\\]/.test(own) ? JSON.stringify(own) : own,
  };
}

async function buildStack(
  repo: RepoInfo,
  run: RunRecord,
  contains: number[],
  byN: Map<number, FinalizeChange>,
  patchOf: (c: FinalizeChange) => Promise<string>,
  cache: Map<string, string>,
  index: string,
  objects: Record<string, string> = {},
): Promise<{ commits: string[] } | { conflict: { at: number; paths: string[] } }> {
  const env = { ...objects, GIT_INDEX_FILE: index };
  let head = run.baseCommit;
  const commits: string[] = [];
  for (const n of contains) {
    const c = byN.get(n) as FinalizeChange;
    const key = `${head} ${n}`;
    const known = cache.get(key);
    if (known) {
      commits.push(known);
      head = known;
      continue;
    }
    rmSync(index, { force: true });
    // GIT_INDEX_FILE: a temporary index, never the user's.
    const read = await gitRaw(repo.root, ["read-tree", head], undefined, env);
    if (read.code !== 0) throw new AutolabError("GIT_FAILED", `git read-tree ${head}: ${read.stderr.trim()}`);
    const applied = await gitRaw(
      repo.root,
      ["apply", "--cached", "--3way", "--whitespace=nowarn", "-"],
      await patchOf(c),
      env,
    );
    if (applied.code !== 0) {
      const unmerged = (await gitRaw(repo.root, ["ls-files", "-u"], undefined, env)).stdout
        .split("\n")
        .filter(Boolean)
        .map((l) => l.split("\t")[1] ?? "")
        .filter(Boolean);
      const conflicted = [...new Set(unmerged.length ? unmerged : c.paths)].sort();
      return { conflict: { at: n, paths: conflicted } };
    }
    const tree = (await gitRaw(repo.root, ["write-tree"], undefined, env)).stdout.trim();
    const made = await commitTree(repo, tree, head, c, run, objects);
    cache.set(key, made);
    commits.push(made);
    head = made;
  }
  return { commits };
}

/** A commit with the kept commit's author and dates (the same run gives the same commits). */
async function commitTree(
  repo: RepoInfo,
  tree: string,
  parent: string,
  c: FinalizeChange,
  run: RunRecord,
  objects: Record<string, string> = {},
): Promise<string> {
  const who = (
    await git(repo.root, ["log", "-1", "--format=%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI", c.commit])
  )
    .trim()
    .split("\0");
  const [
    an = "autolab",
    ae = "autolab@localhost",
    ad = "",
    cn = "autolab",
    ce = "autolab@localhost",
    cd = "",
  ] = who;
  const env = {
    ...objects,
    GIT_AUTHOR_NAME: an,
    GIT_AUTHOR_EMAIL: ae,
    GIT_AUTHOR_DATE: ad,
    GIT_COMMITTER_NAME: cn,
    GIT_COMMITTER_EMAIL: ce,
    GIT_COMMITTER_DATE: cd,
  };
  const out = await gitRaw(
    repo.root,
    ["-c", "commit.gpgsign=false", "commit-tree", tree, "-p", parent, "-F", "-"],
    commitMessage(run, c),
    env,
  );
  if (out.code !== 0) throw new AutolabError("GIT_FAILED", `git commit-tree failed: ${out.stderr.trim()}`);
  return out.stdout.trim();
}

/** The commit message of a change, from the notebook. */
export function commitMessage(run: RunRecord, c: FinalizeChange): string {
  const first = (c.hypothesis.split("\n")[0] ?? "").trim() || `autolab change #${c.n}`;
  const title = first.length > 72 ? `${first.slice(0, 71)}…` : first;
  const lines = [title, ""];
  const rest = c.hypothesis.split("\n").slice(1).join("\n").trim();
  if (rest) lines.push(rest, "");
  if (c.mechanism?.trim()) lines.push(`Mechanism: ${c.mechanism.trim()}`, "");
  lines.push(gainLine(run, c));
  if (c.dependsOn.length)
    lines.push(`Depends on: ${c.dependsOn.map((d) => `#${d.n} (${d.paths.join(", ")})`).join(", ")}`);
  lines.push(
    `Experiments: ${c.experiments.map((n, i) => (i === 0 ? `#${n} (kept)` : `#${n} (its change, rebased)`)).join(", ")}`,
  );
  lines.push("", `Autolab-Run: ${run.tag}`, `Autolab-Experiment: ${c.n}`, "");
  return lines.join("\n");
}

/** "Gain: 0.5 (lower score is better) ± 0.1 over the best before it, 3 trials vs 3." */
export function gainLine(run: { metric: string; direction: string }, c: FinalizeChange): string {
  const g = c.gain;
  if (!g) return `Gain: not measured (no finished trials of ${run.metric})`;
  const better = run.direction === "minimize" ? "lower" : "higher";
  return `Gain: ${formatMetric(g.value)} ${run.metric} (${better} is better) ${sigmaText(g.sigma)} over the best before it; ${g.trials} trial${g.trials === 1 ? "" : "s"} vs ${g.baseTrials}`;
}

function sigmaText(sigma: number): string {
  if (Number.isNaN(sigma)) return "± σ unknown";
  if (sigma === 0) return "(exact: deterministic objective)";
  return `± ${formatMetric(Number(sigma.toPrecision(3)))} (σ)`;
}

/** --apply: creates the branches; one that exists with other content is refused before anything is written. */
async function applyBranches(
  repo: RepoInfo,
  ledger: ReadableNotebook,
  run: RunRecord,
  plan: FinalizePlan,
): Promise<void> {
  const refused: string[] = [];
  for (const b of plan.branches) {
    const now = await gitRaw(repo.root, ["rev-parse", "--verify", "-q", `refs/heads/${b.name}`]);
    if (now.code !== 0) continue;
    const sha = now.stdout.trim();
    if (sha === b.tip || (await sameContent(repo, run.baseCommit, sha, b.tip))) b.state = "unchanged";
    else {
      b.state = "exists";
      refused.push(b.name);
    }
  }
  if (refused.length) {
    throw new AutolabError(
      "FINALIZE_BRANCH_EXISTS",
      `${refused.length === 1 ? "the branch" : "the branches"} ${refused.join(", ")} already ${refused.length === 1 ? "exists" : "exist"} with other content; finalize does not overwrite branches (nothing was written).`,
      `Delete or rename ${refused.length === 1 ? "it" : "them"} (git branch -D ${refused.join(" ")}) and run \`autolab finalize --apply\` again.`,
    );
  }
  // A branch made by an --apply killed before its note: the note is written now.
  const noted = new Set(ledger.listNotes(run.id).map((n) => n.text.split(" (")[0]));
  for (const b of plan.branches) {
    if (b.state === "unchanged" && noted.has(appliedNote(b))) continue;
    if (b.state !== "unchanged") {
      // The empty old value: create only, never move a branch someone made meanwhile.
      await git(repo.root, ["update-ref", `refs/heads/${b.name}`, b.tip, ""]);
      b.state = "created";
    }
    const exp = ledger.getExperiment(run.id, b.n);
    const with_ = b.contains.filter((n) => n !== b.n);
    ledger.addNote(
      run.id,
      exp?.id ?? null,
      `${appliedNote(b)} (${b.tip.slice(0, 8)})${with_.length ? ` with ${with_.map((n) => `#${n}`).join(", ")} first` : ""}${b.conflictsWith.length ? `; kept together with ${b.conflictsWith.map((x) => `#${x.n}`).join(", ")}: git could not apply it without them (${[...new Set(b.conflictsWith.flatMap((x) => x.paths))].join(", ")})` : ""}`,
    );
  }
  plan.applied = true;
}

/** Same tree at the tip and the same number of commits since the base: the same branch. */
async function sameContent(repo: RepoInfo, base: string, a: string, b: string): Promise<boolean> {
  const tree = async (c: string) => (await git(repo.root, ["rev-parse", `${c}^{tree}`])).trim();
  const count = async (c: string) => {
    const r = await gitRaw(repo.root, ["rev-list", "--count", `${base}..${c}`]);
    return r.code === 0 ? r.stdout.trim() : "?";
  };
  const anc = await gitRaw(repo.root, ["merge-base", "--is-ancestor", base, a]);
  return anc.code === 0 && (await tree(a)) === (await tree(b)) && (await count(a)) === (await count(b));
}

/** The `gh` on PATH, or a clear error. */

function assertGh(): string {
  const gh = findOnPath("gh");
  if (!gh) {
    throw new AutolabError(
      "GH_NOT_FOUND",
      "--pr opens pull requests with the GitHub CLI, `gh`, which is not on PATH.",
      "Install it (https://cli.github.com) and log in (gh auth login), or push the branches yourself: `autolab finalize --apply` creates them.",
    );
  }
  return gh;
}

/** --pr: push each branch to `remote`, then `gh pr create` for it (a failure is recorded per branch). */
async function openPullRequests(repo: RepoInfo, plan: FinalizePlan, remote: string): Promise<void> {
  const gh = assertGh();
  const head = await gitRaw(repo.root, ["symbolic-ref", "-q", "--short", "HEAD"]);
  const base = head.code === 0 ? head.stdout.trim() : undefined;
  const tmp = mkdtempSync(join(tmpdir(), "autolab-finalize-pr-"));
  try {
    for (const b of plan.branches) {
      const pushed = await gitRaw(repo.root, [
        "push",
        "--quiet",
        remote,
        `refs/heads/${b.name}:refs/heads/${b.name}`,
      ]);
      if (pushed.code !== 0) {
        b.pr = {
          error: `git push ${remote} ${b.name} failed: ${pushed.stderr.trim() || pushed.stdout.trim()}`,
        };
        continue;
      }
      const c = plan.changes.find((x) => x.n === b.n) as FinalizeChange;
      const message = (await git(repo.root, ["log", "-1", "--format=%B", b.tip])).trim();
      const [title = "", ...body] = message.split("\n");
      const bodyFile = join(tmp, `body-${b.n}.md`);
      writeFileSync(bodyFile, prBody(plan, b, c, body.join("\n").trim()));
      const args = ["pr", "create", "--head", b.name, "--title", title, "--body-file", bodyFile];
      if (base) args.push("--base", base);
      const out = await run(gh, args, repo.root);
      b.pr =
        out.code === 0 ? { url: out.stdout.trim().split("\n").at(-1) ?? "" } : { error: out.stderr.trim() };
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

function prBody(plan: FinalizePlan, b: FinalizeBranch, c: FinalizeChange, body: string): string {
  const lines = [body, ""];
  if (b.contains.length > 1)
    lines.push(
      `This branch holds ${b.contains.map((n) => `#${n}`).join(", ")} (one commit each, oldest first): #${b.n} needs ${b.contains
        .filter((n) => n !== b.n)
        .map((n) => `#${n}`)
        .join(", ")}.`,
    );
  if (b.verify) lines.push("", `Verified alone: ${b.verify.note}`);
  lines.push("", `From autolab run \`${plan.run.tag}\`, experiment #${c.n}.`);
  return `${lines.join("\n")}\n`;
}

function run(
  cmd: string,
  args: string[],
  cwd: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd, maxBuffer: 8 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === "number" ? err.code : 1) : 0;
      resolve({ code, stdout, stderr: stderr || (err && !stderr ? err.message : "") });
    });
  });
}

/** The plan for people (the CLI passes it through safeText: hypotheses are researchers' text). */
export function renderPlan(plan: FinalizePlan): string {
  const lines: string[] = [];
  const verified = plan.branches.some((b) => b.verify);
  const verb = plan.applied
    ? "Branches"
    : verified
      ? "Plan (no branch written; --apply creates them)"
      : "Plan (dry run: nothing written; --apply creates the branches)";
  lines.push(
    `Run ${plan.run.tag}: ${plan.changes.length} kept change${plan.changes.length === 1 ? "" : "s"} from base ${plan.run.baseCommit.slice(0, 8)}. ${plan.noise.explain}.`,
  );
  if (plan.dirty.length && !plan.applied)
    lines.push(
      `Note: uncommitted changes in ${plan.dirty.join(", ")}: --apply will refuse until they are committed or stashed.`,
    );
  lines.push(
    "Each branch starts at the base and holds its change's dependencies first (one commit each, oldest first), then the change.",
    "",
    `${verb}:`,
  );
  for (const b of plan.branches) {
    const c = plan.changes.find((x) => x.n === b.n) as FinalizeChange;
    const state = b.state ? ` [${b.state}]` : "";
    lines.push(`  ${b.name}${state}`);
    lines.push(`    #${c.n} ${(c.hypothesis.split("\n")[0] ?? "").slice(0, 100)}`);
    lines.push(`    ${gainLine(plan.run, c)}`);
    if (c.evidence) lines.push(`    evidence: ${evidenceLabel(c.evidence)} — ${c.evidence.why}`);
    lines.push(`    files: ${c.paths.join(", ")}`);
    if (c.dependsOn.length)
      lines.push(
        `    depends on: ${c.dependsOn.map((d) => `#${d.n} (overlapping lines in ${d.paths.join(", ")})`).join(", ")}`,
      );
    for (const x of b.conflictsWith)
      lines.push(
        `    CONFLICT: #${c.n} does not apply without #${x.n} (${x.paths.join(", ")}): kept together on this branch`,
      );
    lines.push(
      `    commits: ${b.contains.map((n, i) => `#${n} ${b.commits[i]?.slice(0, 8) ?? ""}`).join(" → ")}`,
    );
    if (b.verify) lines.push(`    verify: ${b.verify.note.slice(VERIFY_NOTE.length)}`);
    if (b.pr) lines.push(`    pull request: ${"url" in b.pr ? b.pr.url : `not opened: ${b.pr.error}`}`);
  }
  const empty = plan.changes.filter((c) => c.empty);
  for (const c of empty) lines.push(`  (#${c.n} changed no file: no branch)`);
  return `${lines.join("\n")}\n`;
}
