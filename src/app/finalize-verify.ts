/**
 * `autolab finalize --verify`: each branch measured alone against the base, the way the run
 * measures a candidate — the program's command under its budget, in the run's sandbox
 * (src/app/confinement.ts), evaluated on a pristine tree — in a worktree of its own
 * (`.autolab/worktrees/<tag>.finalize`). The measurements are not experiments: they go into
 * the notebook as notes, one per change, so nothing a verdict says is lost.
 */
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { AutolabError } from "../core/errors.ts";
import { formatMetric } from "../core/format.ts";
import type { RunRecord } from "../core/ledger.ts";
import type { LoopDeps } from "../core/loop-deps.ts";
import type { ReadableNotebook } from "../core/notebook-reader.ts";
import { runSetup, setupFilesOf } from "../core/setup.ts";
import { mean } from "../core/stats.ts";
import { outsideSeeds, usedSeeds } from "../core/trial-seeds.ts";
import { graderFor, pristineForTrial, refusedOutputs } from "../core/trial-step.ts";
import type { Agent, Executor, TrialResult } from "../core/types.ts";
import { FleetExecutor } from "../fleet/fleet-executor.ts";
import { decideConstraints } from "../trust/greedy-judge.ts";
import { fitNoise } from "../trust/noise-model.ts";
import { git } from "../workspace/git.ts";
import type { GitWorkspace } from "../workspace/git-workspace.ts";
import { openRunSession } from "./create-run.ts";
import { type FinalizeBranch, type FinalizePlan, type VerifyResult, verifyNote } from "./finalize.ts";

export interface VerifyOptions {
  program: string;
  trials: number;
  executor?: Executor;
  onProgress?: (line: string) => void;
}

/** Finalize proposes nothing: the session needs an agent only to exist. */
const NO_AGENT: Agent = {
  name: "finalize",
  propose: () => Promise.reject(new Error("finalize --verify does not propose")),
};

export async function verifyBranches(
  plan: FinalizePlan,
  ledger: ReadableNotebook,
  run: RunRecord,
  opts: VerifyOptions,
): Promise<void> {
  if (!(Number.isInteger(opts.trials) && opts.trials >= 1)) {
    throw new AutolabError("BAD_FLAG", `--trials must be a whole number of at least 1 (got ${opts.trials}).`);
  }
  const progress = opts.onProgress ?? (() => {});
  // The run's own session: its lock (no `autolab run` measures at the same time), program
  // (unchanged since the run started, or PROGRAM_CHANGED), executor and sandbox.
  const session = await openRunSession({
    program: opts.program,
    tag: run.tag,
    agent: NO_AGENT,
    ...(opts.executor ? { executor: opts.executor } : {}),
  });
  try {
    const ws = await session.workspace.openWorker("finalize");
    // A run on GPUs measures on its first one, as its first slot does.
    const gpu = session.deps.program.slots?.gpus?.[0];
    const deps: LoopDeps = {
      ...session.deps,
      ...(gpu !== undefined ? { slot: { index: 0, env: { CUDA_VISIBLE_DEVICES: String(gpu) } } } : {}),
      workspace: ws,
      logDir: join(session.lab.stateDir, "logs", run.tag, "finalize"),
      setupStamp: join(ws.gitDir, "autolab-setup-done"),
    };
    progress(
      `verify: ${opts.trials} trial${opts.trials === 1 ? "" : "s"} each of the base and every branch, ${deps.confinement?.description ?? "unsandboxed (no confinement given)"}`,
    );
    await runSetup(deps, () => {});
    // Seeds no trial of the run used (src/core/trial-seeds.ts): code that remembers the seeds it
    // has seen cannot recognise them. The same seeds for every commit: the comparisons are paired.
    const seeds = outsideSeeds(run, usedSeeds(ledger.listExperiments(run.id)), opts.trials);
    const measured = new Map<string, number[]>(); // tree → objective values (failed trials left out)
    const failures = new Map<string, string>();
    const measure = async (commit: string, label: string): Promise<string> => {
      const tree = (await git(ws.worktree, ["rev-parse", `${commit}^{tree}`])).trim();
      if (measured.has(tree)) return tree;
      const values: number[] = [];
      for (let i = 0; i < opts.trials; i++) {
        progress(`verify: ${label} trial ${i + 1}/${opts.trials}`);
        const r = await trial(deps, ws, commit, seeds[i] as number, i, `${tree.slice(0, 12)}-${i + 1}`);
        const v = r.metrics[deps.program.objective.metric];
        if (r.status === "ok" && v !== undefined && Number.isFinite(v)) values.push(v);
        else failures.set(tree, `${r.status}${r.reason ? `: ${r.reason.split("\n")[0]}` : ""}`);
      }
      measured.set(tree, values);
      return tree;
    };
    const base = await measure(run.baseCommit, "base");
    const pairs: { b: FinalizeBranch; tip: string; against: string }[] = [];
    for (const b of plan.branches) {
      const tip = await measure(b.tip, b.name);
      const before = b.commits.length > 1 ? b.commits[b.commits.length - 2] : undefined;
      const against = before ? await measure(before, `${b.name} without #${b.n}`) : base;
      pairs.push({ b, tip, against });
    }
    // σ: the run's noise model with these repeats added (each configuration once).
    const groups = [...measured.values()].map((values, i) => ({ n: -1 - i, values }));
    const model = fitNoise(groups, mean(measured.get(base) ?? [0]));
    for (const { b, tip, against } of pairs) {
      const a = measured.get(against) ?? [];
      const t = measured.get(tip) ?? [];
      const failed = failures.get(tip) ?? failures.get(against);
      const change = plan.changes.find((c) => c.n === b.n);
      const sigma = model.sigma * Math.sqrt(1 / Math.max(1, a.length) + 1 / Math.max(1, t.length));
      const raw = a.length && t.length ? mean(t) - mean(a) : Number.NaN;
      const gain = plan.run.direction === "minimize" ? -raw : raw;
      const verdict = verdictOf(gain, sigma, failed !== undefined);
      const againstKind = b.commits.length > 1 ? "dependencies" : "base";
      const over =
        againstKind === "base"
          ? "over the base"
          : `over its dependencies ${b.contains
              .filter((n) => n !== b.n)
              .map((n) => `#${n}`)
              .join(", ")}`;
      const sig = Number.isNaN(sigma)
        ? "± σ unknown"
        : sigma === 0
          ? "(exact)"
          : `± ${formatMetric(Number(sigma.toPrecision(3)))}`;
      // What the run measured it on top of and this branch lacks: the kept changes before it.
      const missing = plan.changes
        .filter((c) => c.n < b.n && !c.empty && !b.contains.includes(c.n))
        .map((c) => `#${c.n}`);
      const why =
        verdict === "holds"
          ? "holds alone"
          : verdict === "failed"
            ? `could not be measured (${failed ?? "no value"})`
            : `${verdict === "no-gain" ? "NO GAIN ALONE" : "NOT SIGNIFICANT ALONE"}${missing.length ? `: in the run it was measured on top of ${missing.join(", ")}, which this branch lacks (it may depend on ${missing.length === 1 ? "it" : "them"})` : ""}`;
      const runGain = change?.gain ? ` (in the run: ${formatMetric(change.gain.value)})` : "";
      const note = `${verifyNote(b)}gain ${Number.isNaN(gain) ? "—" : formatMetric(gain)} ${sig} ${over}${runGain}, ${opts.trials} trial${opts.trials === 1 ? "" : "s"} each — ${why}`;
      b.verify = { gain, sigma, trials: opts.trials, against: againstKind, verdict, note };
      const exp = ledger.getExperiment(run.id, b.n);
      ledger.addNote(run.id, exp?.id ?? null, note);
      progress(note);
    }
  } finally {
    session.release();
    session.lab.ledger.close();
  }
}

/**
 * Each of `commits` measured on `seeds` fresh seeds in the run's own session (its lock, program,
 * sandbox, a worktree of its own), outside the notebook: `autolab bench` re-measures a cell's
 * baseline and best on seeds the run never used (drawn at random, the same for every commit). Returns, per commit, the objective's values
 * of the trials that succeeded and how many failed (crashed, timed out, broke a constraint or
 * gave no finite objective): the caller decides what a failure means, it is never dropped
 * silently.
 */
export async function remeasure(o: {
  program: string;
  tag: string;
  commits: string[];
  /** How many seeds (each commit runs once on each). */
  seeds: number;
  executor?: Executor;
  /** The run's trials ran on this worker fleet: so do these (the same machines, not this one). */
  fleet?: string;
}): Promise<Map<string, { values: number[]; failed: number }>> {
  const session = await openRunSession({
    program: o.program,
    tag: o.tag,
    agent: NO_AGENT,
    ...(o.executor ? { executor: o.executor } : {}),
    ...(o.fleet ? { fleet: o.fleet } : {}),
  });
  try {
    const ws = await session.workspace.openWorker("remeasure");
    const gpu = session.deps.program.slots?.gpus?.[0];
    const deps: LoopDeps = {
      ...session.deps,
      ...(gpu !== undefined ? { slot: { index: 0, env: { CUDA_VISIBLE_DEVICES: String(gpu) } } } : {}),
      workspace: ws,
      logDir: join(session.lab.stateDir, "logs", o.tag, "remeasure"),
      setupStamp: join(ws.gitDir, "autolab-setup-done"),
    };
    await runSetup(deps, () => {});
    const run = session.deps.run;
    const seeds = outsideSeeds(run, usedSeeds(session.lab.ledger.listExperiments(run.id)), o.seeds);
    const out = new Map<string, { values: number[]; failed: number }>();
    for (const commit of o.commits) {
      if (out.has(commit)) continue;
      const values: number[] = [];
      let failed = 0;
      for (const [i, seed] of seeds.entries()) {
        const r = await trial(deps, ws, commit, seed, i, `${commit.slice(0, 12)}-${i + 1}`);
        const v = r.metrics[deps.program.objective.metric];
        const broken = decideConstraints(deps.program, r) !== undefined;
        if (r.status === "ok" && !broken && v !== undefined && Number.isFinite(v)) values.push(v);
        else failed++;
      }
      out.set(commit, { values, failed });
    }
    return out;
  } finally {
    session.release();
    session.lab.ledger.close();
    // Its connections and pg-boss's timers would keep the process alive.
    if (session.deps.executor instanceof FleetExecutor) await session.deps.executor.close();
  }
}

/** One trial of `commit` in the finalize worktree: runTrial's executor call, without a notebook row. */
async function trial(
  deps: LoopDeps,
  ws: GitWorkspace,
  commit: string,
  seed: number,
  /** Which of the commit's re-measurements (rotates a rubric's judges). */
  index: number,
  name: string,
): Promise<TrialResult> {
  const { program, executor } = deps;
  const setupFiles = setupFilesOf(deps);
  const caches = deps.confinement?.projectCaches ?? [];
  const allowed = await pristineForTrial(deps, ws, commit);
  const logDir = join(deps.logDir, name);
  await mkdir(logDir, { recursive: true });
  const slotEnv = deps.slot?.env ?? {};
  const sandbox = deps.confinement?.trial(ws, setupFiles, slotEnv);
  return executor.runTrial({
    cwd: ws.projectDir,
    command: program.run.command,
    ...(program.run.evaluate ? { evaluate: program.run.evaluate } : {}),
    budgetMs: program.run.budgetMs,
    graceMs: program.run.graceMs,
    evaluateTimeoutMs: program.run.evaluateTimeoutMs,
    seed,
    logDir,
    env: { ...slotEnv, AUTOLAB_SEED: String(seed), AUTOLAB_BUDGET_S: String(program.run.budgetMs / 1000) },
    objective: program.objective.metric,
    beforeEvaluate: async () => {
      const tampered = await ws.verifyProtected(allowed);
      if (tampered) return { status: "tampered", reason: tampered };
      const refused = await ws.cleanTree(
        commit,
        [...setupFiles, ...caches, ...program.outputs],
        program.outputs,
      );
      if (refused.length) return { status: "crash", reason: refusedOutputs(refused) };
      const missing = program.outputs.filter((o) => !existsSync(join(ws.projectDir, o)));
      return missing.length
        ? { status: "crash", reason: `the command did not write ${missing.join(", ")}` }
        : undefined;
    },
    ...(program.run.rubric ? { grade: graderFor(deps, ws.projectDir, logDir, index, undefined) } : {}),
    ...(sandbox ? { sandbox } : {}),
  });
}

/**
 * A change's worth alone: it holds when more than 2σ better (better at all when σ is 0, the
 * objective exact, or unknown), is not significant when better by at most 2σ, has no gain when
 * not better, and failed when a trial did.
 */
export function verdictOf(gain: number, sigma: number, failed: boolean): VerifyResult["verdict"] {
  if (failed || Number.isNaN(gain)) return "failed";
  if (gain <= 0) return "no-gain";
  if (Number.isFinite(sigma) && gain <= 2 * sigma) return "not-significant";
  return "holds";
}
