/**
 * One trial job on a worker, with the local executor's guarantees: the code comes from verified
 * bundles into the worker's cache repository; the slot's worktree is made pristine at the
 * candidate's commit (protected files restored and checked against the base commit's hashes);
 * setup runs once per slot worktree; the command runs in the sandbox the run's confinement gives
 * (src/app/confinement.ts), killed at budget + grace; protected files are checked and evaluate runs
 * on the pristine tree (`beforeEvaluateFor`, the loop's own check).
 */
import { existsSync } from "node:fs";
import { mkdir, open, stat } from "node:fs/promises";
import { isAbsolute, join } from "node:path";
import { createConfinement } from "../app/confinement.ts";
import { isAutolabError } from "../core/errors.ts";
import type { LoopDeps } from "../core/loop-deps.ts";
import { runSetup, setupFilesOf } from "../core/setup.ts";
import { beforeEvaluateFor, pristineForTrial } from "../core/trial-step.ts";
import type { Program, TrialResult } from "../core/types.ts";
import { parseProgram } from "../program/index.ts";
import type { LocalExecutor } from "../runner/local-executor.ts";
import { TOKEN_ENV } from "../runner/process-tree.ts";
import { git } from "../workspace/git.ts";
import { ensureExcluded, GitWorkspace, hashesAt } from "../workspace/git-workspace.ts";
import { BundleRefused, fetchBundles } from "./bundles.ts";
import { type JobOutcome, LOG_BACK_BYTES, LOG_FILES, notRunResult, type TrialJob } from "./job.ts";

export interface WorkerSlot {
  index: number;
  /** The slot's GPU (`--gpus`): CUDA_VISIBLE_DEVICES of its trials. */
  gpu?: string;
}

export interface JobContext {
  pool: import("pg").Pool;
  schema: string;
  /** The worker's cache directory: one repository per project, a worktree per slot and run. */
  cacheDir: string;
  /** Every GPU the worker was given (the sandbox passes /dev/nvidia* through when there are any). */
  gpus: string[];
  workerName: string;
  /**
   * The trial's AUTOLAB_TRIAL_TOKEN on this worker: fresh for each lease (the job's key is shared
   * by every copy of the job), recorded in the worker's cache, so that a restarted worker reaps
   * only processes it started.
   */
  trialToken: string;
  executor: LocalExecutor;
  /** Every metric line, with how long the command had run (ms) when it printed it. */
  onMetric: (name: string, value: number, elapsedMs: number) => void;
  signal: AbortSignal;
  prune: AbortSignal;
}

/** The process limit of an untrusted job whose program.md sets none (tasks: a thread counts). */
export const UNTRUSTED_PROCESSES = 4096;

/** git in a project's cache repository is serialized: slots fetch and make worktrees one at a time. */
const repoLocks = new Map<string, Promise<unknown>>();
function underRepoLock<T>(root: string, f: () => Promise<T>): Promise<T> {
  const prev = repoLocks.get(root) ?? Promise.resolve();
  const next = prev.then(f, f);
  repoLocks.set(
    root,
    next.catch(() => {}),
  );
  return next;
}

/**
 * The trial could not be prepared for a reason that is neither the candidate's nor the job's (the
 * database or network went away during a bundle fetch, a checkout in this worker's cache failed):
 * the worker gives the job back for another lease instead of recording a result.
 */
export interface PutBack {
  putBack: string;
}

/**
 * Runs one job; every outcome the job itself decides (a refused bundle, a malformed job, a failed
 * setup, the trial's own) is a result; a fault of the worker's surroundings is a PutBack.
 */
export async function runJob(
  job: TrialJob,
  slot: WorkerSlot,
  ctx: JobContext,
): Promise<JobOutcome | PutBack> {
  const where = ` (on worker ${ctx.workerName})`;
  const failed = (status: TrialResult["status"], reason: string): JobOutcome => ({
    result: notRunResult(job, status, reason + where),
    logs: {},
  });
  const malformed = checkJob(job);
  if (malformed) return failed("crash", `the job is malformed: ${malformed}; the trial was not run`);
  const projectDir = join(ctx.cacheDir, safeName(job.project));
  const root = join(projectDir, "repo");
  const stateDir = join(projectDir, "state");
  let ws: GitWorkspace;
  let program: Program;
  try {
    program = parseProgram(job.programText, join(root, job.prefix, job.programFile));
    // The worker's own GPUs, not the coordinator's slots: no GPU, no device passed through.
    if (ctx.gpus.length) program.slots = { count: ctx.gpus.length, gpus: ctx.gpus.map(Number), proposers: 1 };
    else delete program.slots;
    if (job.untrusted) {
      if (!program.sandbox.enabled)
        return failed(
          "crash",
          "the job's code is untrusted and its program says `sandbox: off`; the trial was not run",
        );
      // Sandboxed or not run at all, and offline: setup (the operator's own code) keeps its network.
      // A process limit even where program.md sets none: a fork bomb must not starve the worker.
      program.sandbox = {
        ...program.sandbox,
        required: true,
        network: false,
        limits: { processes: UNTRUSTED_PROCESSES, ...program.sandbox.limits },
      };
    }
    ws = await underRepoLock(root, async () => {
      await ensureCacheRepo(root);
      await fetchBundles(ctx.pool, ctx.schema, root, job.bundles);
      const repo = { root, prefix: job.prefix };
      const pinned = await hashesAt(
        repo,
        job.baseCommit,
        [...program.files.protected, ...program.files.holdout],
        program.files.holdout,
      );
      return GitWorkspace.open({
        repo,
        tag: job.tag,
        stateDir,
        baseCommit: job.baseCommit,
        protectedFiles: Object.keys(pinned),
        protectedHashes: pinned,
        protectedPatterns: program.files.protected,
        worker: `s${slot.index}`,
      });
    });
  } catch (err) {
    if (err instanceof BundleRefused) return failed("crash", err.message);
    // The database, the network or this worker's cache failed: not the candidate's doing.
    return { putBack: `the worker could not prepare the trial's code: ${message(err)}` };
  }

  const slotEnv: Record<string, string> = slot.gpu !== undefined ? { CUDA_VISIBLE_DEVICES: slot.gpu } : {};
  const logRoot = join(stateDir, "logs", safeName(job.tag));
  let deps: LoopDeps;
  try {
    const confinement = createConfinement(program, {
      repoRoot: root,
      programDir: join(root, job.prefix),
      stateDir,
      gitCommonDir: join(root, ".git"),
    });
    deps = {
      program,
      run: { baseCommit: job.baseCommit },
      workspace: ws,
      executor: ctx.executor,
      confinement,
      logDir: logRoot,
      setupStamp: join(ws.gitDir, "autolab-setup-done"),
      slot: { index: slot.index, env: slotEnv },
    } as unknown as LoopDeps;
    await runSetup(deps, () => {}, ctx.signal);
  } catch (err) {
    if (isAutolabError(err)) return failed("crash", `${err.message}${err.hint ? ` — ${err.hint}` : ""}`);
    return failed("crash", `the worker could not set up the trial: ${message(err)}`);
  }
  if (ctx.signal.aborted)
    return failed("interrupted", `interrupted: ${String(ctx.signal.reason ?? "stopped")}`);

  let allowed: string[];
  try {
    allowed = await pristineForTrial(deps, ws, job.commit);
  } catch (err) {
    if (isAutolabError(err)) return failed("crash", `${err.message}${err.hint ? ` — ${err.hint}` : ""}`);
    return { putBack: `the worker could not make the trial's tree pristine: ${message(err)}` };
  }
  const setupFiles = setupFilesOf(deps);
  const logDir = join(logRoot, safeName(job.key));
  await mkdir(logDir, { recursive: true });
  const env: Record<string, string> = { ...job.env, ...slotEnv, [TOKEN_ENV]: ctx.trialToken };
  if (slot.gpu === undefined) delete env.CUDA_VISIBLE_DEVICES;
  const sandbox = deps.confinement?.trial(ws, setupFiles, slotEnv);
  // As the loop measures a local trial's curve: from just before the executor starts it.
  const startedAt = Date.now();
  const result = await ctx.executor.runTrial({
    cwd: ws.projectDir,
    command: job.command,
    ...(job.evaluate !== undefined ? { evaluate: job.evaluate } : {}),
    budgetMs: job.budgetMs,
    graceMs: job.graceMs,
    evaluateTimeoutMs: job.evaluateTimeoutMs,
    seed: job.seed,
    logDir,
    env,
    objective: job.objective,
    beforeEvaluate: beforeEvaluateFor(deps, ws, job.commit, allowed),
    ...(sandbox ? { sandbox } : {}),
    onMetric: (name, value) => ctx.onMetric(name, value, Date.now() - startedAt),
    signal: ctx.signal,
    prune: ctx.prune,
  });
  if (result.status === "tampered") await ws.restoreProtected(allowed).catch(() => {});
  if (result.status !== "ok" && result.status !== "pruned" && result.reason !== undefined)
    result.reason += where;
  const logs: Record<string, string> = {};
  for (const f of LOG_FILES) {
    const text = await tail(join(logDir, f));
    if (text !== undefined) logs[f] = text;
  }
  return { result, logs };
}

/**
 * Names from the database become paths and refs here: refuse what could leave the worker's
 * cache (a tag, a prefix with `..`, a program file that is not a plain name, a commit that is
 * not a hash).
 */
function checkJob(job: TrialJob): string | undefined {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(job.tag)) return `tag ${JSON.stringify(job.tag)}`;
  if (
    job.prefix !== "" &&
    (isAbsolute(job.prefix) || job.prefix.split("/").some((p) => p === ".." || p === ""))
  )
    return `program directory ${JSON.stringify(job.prefix)}`;
  if (!/^[^/\\]+$/.test(job.programFile) || job.programFile === "..")
    return `program file ${JSON.stringify(job.programFile)}`;
  const hex = /^[0-9a-f]{40}([0-9a-f]{24})?$/;
  if (!hex.test(job.commit) || !hex.test(job.baseCommit)) return "a commit that is not a hash";
  if (
    !Array.isArray(job.bundles) ||
    job.bundles.some((b) => !/^[0-9a-f]{64}$/.test(b.sha256) || !hex.test(b.commit))
  )
    return "a bundle reference that is not a sha256 and a commit";
  return undefined;
}

/** The project's cache repository: a plain repository holding only what bundles brought. */
async function ensureCacheRepo(root: string): Promise<void> {
  if (existsSync(join(root, ".git"))) return;
  await mkdir(root, { recursive: true });
  await git(root, ["init", "-q"]);
  await ensureExcluded(root);
}

async function tail(path: string): Promise<string | undefined> {
  try {
    const size = (await stat(path)).size;
    const f = await open(path, "r");
    try {
      const len = Math.min(size, LOG_BACK_BYTES);
      const buf = Buffer.alloc(len);
      await f.read(buf, 0, len, size - len);
      return buf.toString("utf8");
    } finally {
      await f.close();
    }
  } catch {
    return undefined;
  }
}

/** A name from the network as one path component. */
export function safeName(s: string): string {
  return s.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 80) || "_";
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
