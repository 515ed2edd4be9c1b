import { basename, dirname, join, resolve } from "node:path";
import { agentConfigFor, createAgent } from "../agents/index.ts";
import { AutolabError, isAutolabError } from "../core/errors.ts";
import type { LoopEventListener } from "../core/events.ts";
import { formatDuration } from "../core/format.ts";
import type { ExperimentRecord, RunRecord } from "../core/ledger.ts";
import { runLoop } from "../core/loop.ts";
import type { LoopDeps, LoopSummary } from "../core/loop-deps.ts";
import { runParallel } from "../core/scheduler.ts";
import { refreshSecrets, registerSecretName } from "../core/secrets.ts";
import { newSeedKey } from "../core/trial-seeds.ts";
import type { Agent, AgentConfig, Executor, Program } from "../core/types.ts";
import { parseFleetUrl } from "../fleet/db.ts";
import { FleetExecutor } from "../fleet/fleet-executor.ts";
import { contractChanges, contractOf } from "../program/contract.ts";
import { DEFAULT_HOOK_BUDGET_MS, defaultGraceMs, loadProgram, parseProgram } from "../program/index.ts";
import { rubricGrader } from "../rubric/trial-grader.ts";
import { LocalExecutor } from "../runner/local-executor.ts";
import { findOnPath } from "../runner/sandbox.ts";
import { SlurmExecutor } from "../runner/slurm-executor.ts";
import { judgeFor } from "../trust/acceptance.ts";
import { createPruner } from "../trust/pruner.ts";
import { git } from "../workspace/git.ts";
import {
  assertCommitted,
  committedProgram,
  ensureExcluded,
  findRepo,
  GitWorkspace,
  hashesAt,
  type RepoInfo,
} from "../workspace/git-workspace.ts";
import { alarmsOf } from "./alarms.ts";
import { createConfinement } from "./confinement.ts";
import { type Lab, locateNotebook, notebookExists, openLab, prepareStateDir, programPath } from "./lab.ts";
import { acquireLock } from "./lock.ts";
import { isParallel, parallelDeps } from "./parallel.ts";
import { priorWorkFor } from "./prior-work.ts";

export interface RunOptions {
  /** program.md or its directory; default: the current directory. */
  program?: string;
  tag?: string;
  maxExperiments?: number;
  /** Trials of every kind the run may start (src/core/run-budget.ts). */
  maxTrials?: number;
  /** Milliseconds after which this invocation starts no trial. */
  maxTimeMs?: number;
  /** USD the researchers may spend over the run (--max-cost). */
  maxCostUsd?: number;
  /** Overrides program.md's run.budget (ms). */
  budgetMs?: number;
  /**
   * Replaces program.md's `hooks:` (docs/program.md "Hooks"): commands run before each proposal
   * and after each decision, in a trial's sandbox, each killed at `budgetMs` (default 30 s) +
   * grace. `{}` turns program.md's hooks off.
   */
  hooks?: { before?: string; after?: string; budgetMs?: number };
  /** Overrides program.md's slots: count (its gpus and proposers stay; proposers default to the count). */
  slots?: number;
  /** A researcher by name (program.md's `agent:` by default), or an Agent object (tests, embedding). */
  agent?: string | Agent;
  /**
   * The advisor (program.md's `advisor.agent` by default), or an Agent object (tests,
   * embedding); false: none (`autolab mcp`, whose client is asked through its `advise` tool).
   */
  advisor?: Agent | false;
  /** Where trials run (embedding): the local, sandboxed executor by default. */
  executor?: Executor;
  /**
   * Trials run on a worker fleet (`autolab worker --db <url>`): the fleet's PostgreSQL URL
   * (`--fleet`; else program.md's `executor: { fleet: { db } }`). docs/distributed.md "Worker fleet".
   */
  fleet?: string;
  /** The run's seed: the built-in researcher's and the tree frontier's (not the trials'). */
  seed?: number;
  /**
   * The secret trial seeds derive from (src/core/trial-seeds.ts), for a new run: default 32
   * random bytes. Pass one to reproduce a run's seeds (it is in the notebook); never one a
   * researcher could know.
   */
  seedKey?: string;
  allowDirty?: boolean;
  /**
   * false: no prior work from other runs in the researcher's context (`--no-prior-work`), as
   * program.md's `prior_work: false`. The store is $AUTOLAB_KNOWLEDGE or ~/.local/share/autolab/knowledge.db.
   */
  priorWork?: boolean;
  signal?: AbortSignal;
  onEvent?: LoopEventListener;
}

export interface RunOutcome extends LoopSummary {
  run: RunRecord;
  lab: Lab;
}

const TAG = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/**
 * The one entry point that turns options into a running loop (CLI `run`, `demo`, and later
 * the server and MCP call this). Resumes the run named by --tag, or the newest run, or
 * starts a new one from the repository's HEAD.
 */
export async function createRun(opts: RunOptions): Promise<RunOutcome> {
  const session = await openRunSession(opts);
  try {
    const loopOpts = {
      ...(opts.maxExperiments !== undefined ? { maxExperiments: opts.maxExperiments } : {}),
      ...(opts.maxTrials !== undefined ? { maxTrials: opts.maxTrials } : {}),
      ...(opts.maxTimeMs !== undefined ? { maxTimeMs: opts.maxTimeMs } : {}),
      ...(opts.maxCostUsd !== undefined ? { maxCostUsd: opts.maxCostUsd } : {}),
      ...(opts.signal ? { signal: opts.signal } : {}),
      ...(opts.onEvent ? { onEvent: opts.onEvent } : {}),
    };
    const program = session.deps.program;
    if (program.frontier?.strategy === "pareto") {
      // The strategy draws like top_k on the primary objective: with one objective its front is
      // one node; with several, the frontier does not read the front yet (docs/loop.md).
      opts.onEvent?.({
        type: "warning",
        message: program.objectives
          ? `frontier: pareto does not draw from the Pareto front yet: it draws like top_k on the first objective (${program.objective.metric}, k = ${program.frontier.k})`
          : `frontier: pareto needs several objectives; with one (${program.objective.metric}) it draws like top_k (k = ${program.frontier.k})`,
      });
    }
    const summary = isParallel(session.deps.program)
      ? await runParallel(
          await parallelDeps(
            session.deps,
            session.workspace,
            opts.agent !== undefined ? { agent: opts.agent } : {},
          ),
          loopOpts,
        )
      : await runLoop(session.deps, loopOpts);
    closePriorWork(session);
    return { ...summary, run: session.run, lab: session.lab };
  } catch (err) {
    closePriorWork(session);
    session.lab.ledger.close();
    throw err;
  } finally {
    session.release();
    if (session.deps.executor instanceof FleetExecutor) await session.deps.executor.close();
  }
}

/** Records the run's last decisions in the knowledge store and closes it (never throws). */
function closePriorWork(session: RunSession): void {
  const pw = session.deps.priorWork;
  if (!pw) return;
  let exps: ExperimentRecord[] | undefined;
  try {
    exps = session.lab.ledger.listExperiments(session.run.id);
  } catch {}
  pw.close(exps);
}

export interface RunSession {
  lab: Lab;
  run: RunRecord;
  deps: LoopDeps;
  workspace: GitWorkspace;
  /** Gives up the run's lock (the ledger stays open: close lab.ledger when done). */
  release: () => void;
}

/**
 * Everything a loop needs, ready and locked: the run resolved (resumed or created), its
 * worktree open, the agent built. `createRun` runs the loop on it; `autolab mcp` runs single
 * steps on it for an interactive agent.
 */
export async function openRunSession(
  opts: Omit<RunOptions, "maxExperiments" | "maxTrials" | "maxTimeMs" | "maxCostUsd" | "signal">,
): Promise<RunSession> {
  // Validate the program and find the repository before anything is written to disk, and keep
  // `.autolab/` out of git before anything is written under it (a failed first run must leave
  // nothing for `git add -A`).
  const file = programPath(opts.program);
  const loaded = loadProgram(file);
  // The secrets this run must never record are those of the environment it starts in, and the
  // key its researcher is handed under whatever name (src/core/secrets.ts).
  if (loaded.agent.apiKeyEnv) registerSecretName(loaded.agent.apiKeyEnv);
  refreshSecrets();
  if (opts.fleet !== undefined) refuseRubricOnFleet(loaded, "--fleet");
  const repo = await findRepo(dirname(loaded.path));
  await ensureExcluded(repo.root);
  if (opts.tag !== undefined && !TAG.test(opts.tag)) {
    throw new AutolabError(
      "TAG_INVALID",
      `invalid tag "${opts.tag}": use letters, digits, dot, dash or underscore (it becomes the branch autolab/<tag>).`,
    );
  }
  // Without a notebook this is a new run: its checks come before the notebook is made.
  let start = notebookExists(locateNotebook(file).db)
    ? undefined
    : await checkNewRun(repo, file, loaded, opts.allowDirty ?? false);
  const lab = openLab(file);
  let fleet: FleetExecutor | undefined;
  try {
    const { ledger } = lab;
    let run = opts.tag ? ledger.getRun(opts.tag) : resumable(lab);
    if (!run) {
      start ??= await checkNewRun(repo, file, lab.program, opts.allowDirty ?? false);
      lab.program = start.program;
    }
    const { program } = lab;
    const contract = contractOf(program);
    if (opts.budgetMs !== undefined) {
      const top = program.ladder?.rungs.at(-1);
      if (top && top.budgetMs >= opts.budgetMs) {
        throw new AutolabError(
          "BUDGET_BELOW_LADDER",
          `--budget ${formatDuration(opts.budgetMs)} is not above the proxy ladder's last rung (${formatDuration(top.budgetMs)}): full-budget trials and rung trials would be confused.`,
          "Give a larger --budget, or remove the rungs at or above it from program.md's ladder.budgets.",
        );
      }
      program.run.budgetMs = opts.budgetMs;
      program.run.graceMs = defaultGraceMs(opts.budgetMs);
    }
    if (opts.hooks !== undefined) {
      const { before, after, budgetMs = DEFAULT_HOOK_BUDGET_MS } = opts.hooks;
      if (!Number.isFinite(budgetMs) || budgetMs <= 0) {
        throw new AutolabError(
          "HOOKS_INVALID",
          `hooks.budgetMs ${budgetMs} is not a time limit: give a positive number of milliseconds.`,
          "e.g. hooks: { after: 'node plot.mjs', budgetMs: 30_000 }",
        );
      }
      const commands = [before, after].filter((c) => c !== undefined);
      if (commands.some((c) => c.trim() === "")) {
        throw new AutolabError(
          "HOOKS_INVALID",
          "a hook command (hooks.before, hooks.after) is empty.",
          "Give the command to run, or leave the hook out.",
        );
      }
      if (commands.length === 0) delete program.hooks;
      else
        program.hooks = {
          ...(before !== undefined ? { before } : {}),
          ...(after !== undefined ? { after } : {}),
          budgetMs,
          graceMs: defaultGraceMs(budgetMs),
        };
    }
    fleet = await openFleet(opts, program);
    if (opts.slots !== undefined) {
      const given = program.slots;
      program.slots = {
        ...(given?.gpus ? { gpus: given.gpus } : {}),
        count: opts.slots,
        proposers: given && given.proposers !== given.count ? given.proposers : opts.slots,
      };
    }
    if (run?.contract) {
      const changes = contractChanges(run.contract, contract);
      if (changes.length) {
        throw new AutolabError(
          "PROGRAM_CHANGED",
          `program.md changed since run ${run.tag} started, so its experiments would no longer be comparable:\n  ${changes.join("\n  ")}`,
          `Start a new run for the new program (autolab run --tag <new-tag>), or undo the change to resume ${run.tag}. (Directions, agent, search knobs and constraints may change; use --budget for a one-off budget.)`,
        );
      }
    }
    // An unknown agent is bad input: refuse it before a new run (row, branch, worktree) exists.
    const agent =
      typeof opts.agent === "object"
        ? opts.agent
        : await createAgent(agentConfigFor(program, opts.agent), program, run?.seed ?? opts.seed ?? 0);
    // The advisor's backend is checked the same way, before anything is written.
    const advisor =
      opts.advisor === false
        ? undefined
        : (opts.advisor ??
          (program.advisor
            ? await createAdvisor(program.advisor.agent, program, run?.seed ?? opts.seed ?? 0)
            : undefined));
    if (!run) {
      const tag = opts.tag ?? (await newTag(lab, repo.root));
      const baseCommit = (await git(repo.root, ["rev-parse", "HEAD"])).trim();
      if (await branchExists(repo.root, tag)) {
        throw new AutolabError(
          "BRANCH_EXISTS",
          `the branch autolab/${tag} already exists but this notebook has no run "${tag}".`,
          `Pick another --tag, or delete the branch (git branch -D autolab/${tag}).`,
        );
      }
      run = ledger.createRun({
        tag,
        branch: `autolab/${tag}`,
        programPath: program.path,
        programName: program.name,
        metric: program.objective.metric,
        direction: program.objective.direction,
        baseCommit,
        protectedHashes: await hashesAt(repo, baseCommit, pinnedFiles(program), program.files.holdout),
        seed: opts.seed ?? 0,
        seedKey: opts.seedKey ?? newSeedKey(),
        contract,
        ...(start?.blob ? { programBlob: start.blob } : {}),
      });
      if (start?.note) ledger.addNote(run.id, null, start.note);
    }
    prepareStateDir(lab.stateDir);
    const release = acquireLock(join(lab.stateDir, `run-${run.tag}.lock`), `run ${run.tag}`);
    try {
      // The protected files' hashes come from git (the base commit), not from the notebook's
      // copy: a notebook row is data anyone with write access could change. A difference is
      // reported as tampering.
      const pinned = await hashesAt(repo, run.baseCommit, pinnedFiles(program), program.files.holdout);
      const changed = Object.keys({ ...pinned, ...run.protectedHashes }).filter(
        (f) => pinned[f] !== run.protectedHashes[f],
      );
      if (changed.length) {
        ledger.addNote(
          run.id,
          null,
          `ALARM tamper:hashes: the notebook's protected-file hashes differ from git's for ${changed.join(", ")}; git's (the base commit's) are used`,
        );
      }
      const confinement = createConfinement(program, {
        repoRoot: repo.root,
        programDir: dirname(program.path),
        stateDir: lab.stateDir,
        gitCommonDir: resolve(repo.root, (await git(repo.root, ["rev-parse", "--git-common-dir"])).trim()),
      });
      const workspace = await GitWorkspace.open({
        repo,
        tag: run.tag,
        stateDir: lab.stateDir,
        baseCommit: run.baseCommit,
        protectedFiles: Object.keys(pinned),
        protectedHashes: pinned,
        protectedPatterns: program.files.protected,
      });
      if (fleet) {
        fleet.bind({
          repoRoot: repo.root,
          prefix: repo.prefix,
          programFile: basename(program.path),
          programText: Buffer.from(
            (await workspace.fileAt(run.baseCommit, basename(program.path))) ?? "",
            "latin1",
          ).toString("utf8"),
          baseCommit: run.baseCommit,
          tag: run.tag,
        });
      }
      const deps: LoopDeps = {
        program,
        ledger,
        run,
        workspace,
        executor: fleet ?? opts.executor ?? executorFor(program),
        agent,
        ...(advisor ? { advisor } : {}),
        judge: judgeFor(program),
        makePruner: (best) => createPruner(best, { direction: program.objective.direction }),
        ...(program.run.rubric ? { grade: rubricGrader(program.run.rubric) } : {}),
        checkAlarms: (exps) => alarmsOf(program, exps),
        logDir: join(lab.stateDir, "logs", run.tag),
        confinement,
        // In the worktree's private git dir: a recreated worktree runs setup again.
        setupStamp: join(workspace.gitDir, "autolab-setup-done"),
      };
      const priorWork = priorWorkFor(program, run, opts);
      if (priorWork) deps.priorWork = priorWork;
      return { lab, run, deps, workspace, release };
    } catch (err) {
      release();
      throw err;
    }
  } catch (err) {
    lab.ledger.close();
    // The fleet's connections and pg-boss's timers would keep the process alive.
    await fleet?.close();
    throw err;
  }
}

/**
 * A rubric-graded program (program.md `run.evaluate: { rubric: … }`) cannot run its trials on
 * the worker fleet: the judges are called by the harness of `autolab run` on the trial's files,
 * and a worker sends back the trial's result and its log tails, not its files. Refused at load,
 * before any trial (program.md's own `executor.fleet` is refused by its validation).
 */
export function refuseRubricOnFleet(program: Program, where: string, label = program.path): void {
  if (!program.run.rubric) return;
  throw new AutolabError(
    "FLEET_OPTIONS_INVALID",
    `${label}: run.evaluate grades each trial with a rubric (${program.run.rubric.rubricFile}), which the worker fleet (${where}) does not do: the judges are called by autolab on this machine, and the graded files (${program.run.rubric.grade.join(", ")}) stay on the worker.`,
    `Run it without ${where} (its trials run here, or as Slurm jobs with program.md's executor.slurm), or evaluate it with a command that prints the metric instead of a rubric to run it on the fleet.`,
  );
}

/**
 * Where trials run: program.md's `executor:` (docs/distributed.md "Slurm"), else this machine.
 * A Slurm executor needs sbatch here (the coordinator submits every job).
 */
export function executorFor(program: Program, path = process.env.PATH): Executor {
  const slurm = program.executor?.slurm;
  if (!slurm) return new LocalExecutor();
  const missing = (["sbatch", "squeue", "scancel"] as const).filter((t) => !findOnPath(t, path));
  if (missing.length > 0) {
    throw new AutolabError(
      "SLURM_UNAVAILABLE",
      `program.md's executor.slurm runs each trial as a Slurm job, but ${missing.join(", ")} ${missing.length > 1 ? "are" : "is"} not on this machine's PATH.`,
      "Run autolab on a machine that can submit jobs (a login node: `sbatch --version` works there), or remove `executor:` from program.md to run trials here.",
    );
  }
  return new SlurmExecutor(slurm);
}

/**
 * The fleet's executor when the run uses one (`--fleet`, else program.md's `executor.fleet.db`).
 * The run's slots are a ceiling (`--slots`, program.md's count, or the live workers' slots at the
 * start); the scheduler uses as many as are live, as workers come and go. With none live the
 * trials wait in the queue, saying so.
 */
async function openFleet(
  opts: Pick<RunOptions, "fleet" | "slots" | "onEvent">,
  program: Program,
): Promise<FleetExecutor | undefined> {
  const url = opts.fleet ?? program.executor?.fleet?.db;
  if (url === undefined) return undefined;
  // GPUs are the workers' (`autolab worker --gpus`): this machine passes none to its trials.
  if (program.slots?.gpus) {
    const { gpus: _gpus, ...rest } = program.slots;
    program.slots = rest;
  }
  const fleet = await FleetExecutor.open(
    parseFleetUrl(url, opts.fleet !== undefined ? "--fleet" : "program.md executor.fleet.db"),
    {
      ...(opts.onEvent ? { onWait: (message: string) => opts.onEvent?.({ type: "warning", message }) } : {}),
    },
  );
  // The run's slots are a ceiling: --slots, else program.md's slots.count, else the live
  // workers' slots now. Within it the scheduler uses as many as are live, following workers
  // as they join and leave (FleetExecutor.capacity).
  const live = await fleet.followLiveSlots();
  const ceiling = Math.min(opts.slots ?? Math.max(live.slots, program.slots?.count ?? 1), 256);
  if (opts.slots === undefined) program.slots = { count: ceiling, proposers: program.slots?.proposers ?? 1 };
  const upTo = ceiling > Math.max(live.slots, 1) ? ` (up to ${ceiling} as workers join)` : "";
  opts.onEvent?.({
    type: "warning",
    message:
      live.workers > 0
        ? `fleet ${fleet.url.shown}: ${live.workers} live worker${live.workers === 1 ? "" : "s"}, ${live.slots} slot${live.slots === 1 ? "" : "s"}: the run uses ${Math.min(live.slots, ceiling)}${upTo}`
        : `fleet ${fleet.url.shown}: no live worker yet; the run uses 1 slot${upTo} and its trials wait in the queue (start one: autolab worker --db ${fleet.url.shown})`,
  });
  return fleet;
}

/** The advisor's agent (program.md `advisor.agent`); a problem with it says that it is the advisor's. */
async function createAdvisor(config: AgentConfig, program: Program, seed: number): Promise<Agent> {
  try {
    return await createAgent(config, program, seed);
  } catch (err) {
    if (!isAutolabError(err)) throw err;
    throw new AutolabError(
      err.code,
      `program.md \`advisor.agent\`: ${err.message}`,
      err.hint?.replaceAll("`agent:`", "`advisor: { agent: … }`"),
    );
  }
}

/** What a new run starts from: the committed program, its blob, and a note when the working copy differs. */
interface NewRunStart {
  program: Program;
  blob: string;
  note?: string;
}

/**
 * The checks of a new run, which starts from HEAD: program.md must be committed (the contract the
 * run records is the committed one; with --allow-dirty the committed one is used and the
 * difference is noted), and so must the editable and protected files (assertCommitted).
 */
async function checkNewRun(
  repo: RepoInfo,
  file: string,
  working: Program,
  allowDirty: boolean,
): Promise<NewRunStart> {
  const committed = await committedProgram(repo, file);
  if (committed.blob === undefined || committed.text === undefined) {
    throw new AutolabError(
      "PROGRAM_UNCOMMITTED",
      `${committed.path} is not committed; a run starts from the last commit and records the program.md it started from.`,
      `Commit it: git add ${committed.path} && git commit -m "autolab program"`,
    );
  }
  let program = working;
  let note: string | undefined;
  if (committed.dirty) {
    if (!allowDirty) {
      throw new AutolabError(
        "PROGRAM_DIRTY",
        `${committed.path} has uncommitted changes; a new run starts from the last commit and records the program.md it started from, so the run would follow a contract that is in no commit.`,
        `Commit them (git commit ${committed.path}), or pass --allow-dirty to start from the last commit anyway (the committed program.md included).`,
      );
    }
    try {
      program = parseProgram(committed.text, file);
    } catch (err) {
      if (!(err instanceof AutolabError)) throw err;
      throw new AutolabError(
        err.code,
        `with --allow-dirty the run starts from the committed ${committed.path}, which is not valid:\n${err.message}`,
        `Commit the working copy (git commit ${committed.path}) to run with it.`,
      );
    }
    const changes = contractChanges(contractOf(program), contractOf(working));
    note = `program.md: the working copy has uncommitted changes (--allow-dirty); the run uses the committed one, blob ${committed.blob}${changes.length ? `. Not applied: ${changes.join("; ")}` : " (same contract)"}`;
  }
  await assertCommitted(repo, [...program.files.editable, ...program.files.protected], allowDirty);
  return { program, blob: committed.blob, ...(note ? { note } : {}) };
}

/**
 * The files whose bytes are pinned for the run: those the protected entries match, and the
 * holdout files the base commit holds (holdout files that setup makes are guarded by the
 * sandbox instead). hashesAt hashes only what the commit holds.
 */
function pinnedFiles(program: ReturnType<typeof loadProgram>): string[] {
  return [...program.files.protected, ...program.files.holdout];
}

/** The newest run, unless its baseline failed (then a fresh run is wanted). */
function resumable(lab: Lab): RunRecord | undefined {
  const run = lab.ledger.latestRun();
  if (!run) return undefined;
  const baseline = lab.ledger.getExperiment(run.id, 0);
  if (baseline?.decision && baseline.decision.action !== "keep") return undefined;
  return run;
}

/** Tags like autoresearch's: the date, e.g. "nov22", then "nov22-2", … */
async function newTag(lab: Lab, root: string): Promise<string> {
  const d = new Date();
  const base = `${d.toLocaleString("en-US", { month: "short", timeZone: "UTC" }).toLowerCase()}${d.getUTCDate()}`;
  let tag = base;
  for (let i = 2; lab.ledger.getRun(tag) || (await branchExists(root, tag)); i++) tag = `${base}-${i}`;
  return tag;
}

async function branchExists(root: string, tag: string): Promise<boolean> {
  return (await git(root, ["branch", "--list", `autolab/${tag}`])).trim() !== "";
}
