/**
 * The trial phase: one trial of an experiment in a clean tree (start row, process, result row),
 * and closing the trials a killed harness left open.
 */
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { crashPoint } from "./crash-points.ts";
import { AutolabError } from "./errors.ts";
import type { LoopEvent } from "./events.ts";
import { bestOf } from "./experiments.ts";
import type { Rung } from "./ladder.ts";
import type { ExperimentRecord } from "./ledger.ts";
import type { LoopDeps } from "./loop-deps.ts";
import { setupFilesOf } from "./setup.ts";
import { isFullBudget, notRunResult } from "./trial-values.ts";
import type { Program, TrialPruner, TrialResult, TrialSpec } from "./types.ts";
import { freshDir } from "./untrusted-file.ts";
import type { Workspace } from "./workspace.ts";

/**
 * Puts `ws` at `commit` for a trial: a clean tree (setup's files and the caches kept) and the
 * protected files pristine — restored if a previous trial scribbled over them, and a harness
 * error if they cannot be. Returns the untracked paths that may lie in a protected directory
 * without being a tamper (setup's, the caches', the declared outputs). Every trial the harness
 * runs starts here (runTrial, finalize --verify).
 */
export async function pristineForTrial(
  deps: Pick<LoopDeps, "program" | "confinement" | "setupStamp">,
  ws: Workspace,
  commit: string,
): Promise<string[]> {
  const setupFiles = setupFilesOf(deps);
  const caches = deps.confinement?.projectCaches ?? [];
  await ws.cleanTree(commit, [...setupFiles, ...caches]);
  const allowed = [...setupFiles, ...caches, ...deps.program.outputs];
  let stillBad = await ws.verifyProtected(allowed);
  if (stillBad) {
    await ws.restoreProtected(allowed);
    stillBad = await ws.verifyProtected(allowed);
  }
  if (stillBad) {
    throw new AutolabError(
      "PROTECTED_CHANGED",
      `${stillBad} in the run's base commit cannot be restored.`,
      "The repository may be corrupt; start a new run.",
    );
  }
  return allowed;
}

/**
 * The check between a trial's command and its evaluate step: protected files unchanged, then the
 * worktree made pristine (the commit, setup's files, caches and the declared outputs) with every
 * declared output present. Shared by the loop's trials and a fleet worker's (src/fleet/).
 */
export function beforeEvaluateFor(
  deps: Pick<LoopDeps, "program" | "confinement" | "setupStamp">,
  ws: Workspace,
  commit: string,
  allowed: string[],
): NonNullable<TrialSpec["beforeEvaluate"]> {
  const { program } = deps;
  const setupFiles = setupFilesOf(deps);
  const caches = deps.confinement?.projectCaches ?? [];
  return async () => {
    const tampered = await ws.verifyProtected(allowed);
    if (tampered) return { status: "tampered", reason: tampered };
    // Evaluate runs on a pristine tree: the commit, setup's files and the declared outputs.
    await ws.cleanTree(commit, [...setupFiles, ...caches, ...program.outputs], program.outputs);
    const missing = program.outputs.filter((o) => !existsSync(join(ws.projectDir, o)));
    if (missing.length === 0) return undefined;
    return {
      status: "crash",
      reason: `the command did not write its declared output${missing.length > 1 ? "s" : ""} ${missing.join(", ")} (outputs: in program.md; a symlink does not count)`,
    };
  };
}

/**
 * The rubric step of a trial (program.md `evaluate: { rubric: … }`): the composition root's
 * grader, or a trial failure that says this kind of run has none.
 */
export function graderFor(
  deps: Pick<LoopDeps, "grade">,
  cwd: string,
  logDir: string,
  seedIndex: number,
  signal: AbortSignal | undefined,
  /** Flagged judges, disagreements, a missed threshold: shown to the user as warnings. */
  warn: (message: string) => void = () => {},
): NonNullable<TrialSpec["grade"]> {
  const grade = deps.grade;
  if (!grade) {
    return async () => ({
      status: "crash",
      reason:
        "rubric: this run has no rubric grader (program.md `evaluate: { rubric: … }` is graded by `autolab run` on this machine; not on the worker fleet yet)",
      metrics: {},
      warnings: [],
    });
  }
  return async () => {
    const out = await grade({ cwd, logDir, seedIndex, ...(signal ? { signal } : {}) });
    for (const w of out.warnings) warn(`rubric: ${w}`);
    return out;
  };
}

/** Every process of a trial carries this variable; how a resumed harness finds a dead one's leftovers. */
const TRIAL_TOKEN = "AUTOLAB_TRIAL_TOKEN";

/**
 * Runs one trial of experiment n. `seedIndex` is the number of trials already finished: trial
 * k of every experiment gets seed run.seed + k, so candidates and baseline share their seeds.
 * `rung`: a cheaper budget of the proxy ladder (default run.budget); such trials are not pruned.
 */
export async function runTrial(
  deps: LoopDeps,
  n: number,
  /**
   * Which seed (run.seed + index). "next": the first index no full-budget trial of the
   * experiment holds or is running — counted right before the start is recorded, so slots that
   * re-measure the same incumbent at once take different seeds.
   */
  seedIndex: number | "next",
  emit: (e: LoopEvent) => void,
  signal: AbortSignal | undefined,
  rung?: Rung,
  /** The incumbent is re-measured for this challenger (said in the trial_started event). */
  against?: number,
): Promise<TrialResult> {
  const { program, ledger, run, workspace: ws, executor } = deps;
  const budgetMs = rung?.budgetMs ?? program.run.budgetMs;
  const exp0 = ledger.getExperiment(run.id, n);
  // The loop wrote experiment n before asking for its trial: a missing row is autolab's bug.
  if (!exp0) throw new AutolabError("INTERNAL", `experiment #${n} is not in the notebook.`);
  // Whatever an earlier trial or researcher left behind is gone: the committed tree, setup's
  // files and declared caches, nothing else (docs/security.md).
  const setupFiles = setupFilesOf(deps);
  const allowed = await pristineForTrial(deps, ws, exp0.commit);
  const exp = ledger.getExperiment(run.id, n) ?? exp0;
  const attempt = exp.trials.length + 1;
  const seed = run.seed + (seedIndex === "next" ? nextSeedIndex(program, run.seed, exp) : seedIndex);
  // No await between counting the attempts and recording the start: parallel trials of one
  // experiment (the baseline's) must not take the same attempt number.
  const env = {
    ...(deps.slot?.env ?? {}),
    AUTOLAB_SEED: String(seed),
    AUTOLAB_BUDGET_S: String(budgetMs / 1000),
    [TRIAL_TOKEN]: randomBytes(12).toString("hex"),
  };
  const trialId = ledger.startTrial({
    experimentId: exp.id,
    attempt,
    seed,
    command: program.run.command,
    commit: exp.commit,
    budgetMs,
    env,
    ...(deps.slot ? { slot: deps.slot.index } : {}),
  });
  // Made now, never reused (an attempt's number is new, and so is its directory).
  const logDir = freshDir(join(deps.logDir, String(exp.n)), String(attempt));
  crashPoint("after-trial-start");
  emit({
    type: "trial_started",
    n: exp.n,
    attempt,
    seed,
    budgetMs,
    startedAt: Date.now(),
    hypothesis: exp.hypothesis,
    ...(deps.slot ? { slot: deps.slot.index } : {}),
    ...(against !== undefined ? { against } : {}),
  });
  // Learning-curve pruning: compare this trial's progress with the best's at the same point.
  const progressName = program.metrics.progress;
  const curve: Array<[number, number]> = [];
  const startedAt = Date.now();
  const bestExp = bestOf(ledger.listExperiments(run.id));
  const bestCurve = bestExp?.trials.find(
    (t) => isFullBudget(program, t) && t.result?.status === "ok" && t.result.progress?.length,
  )?.result?.progress;
  const pruner: TrialPruner | undefined =
    progressName && deps.makePruner && bestCurve && bestExp && bestExp.n !== n && !rung
      ? deps.makePruner(bestCurve)
      : undefined;
  const prune = new AbortController();
  const sandbox = deps.confinement?.trial(ws, setupFiles, deps.slot?.env ?? {});
  const result = await executor.runTrial({
    cwd: ws.projectDir,
    command: program.run.command,
    ...(program.run.evaluate ? { evaluate: program.run.evaluate } : {}),
    budgetMs,
    graceMs: rung?.graceMs ?? program.run.graceMs,
    evaluateTimeoutMs: program.run.evaluateTimeoutMs,
    seed,
    logDir,
    env,
    objective: program.objective.metric,
    beforeEvaluate: beforeEvaluateFor(deps, ws, exp.commit, allowed),
    ...(program.run.rubric
      ? {
          grade: graderFor(deps, ws.projectDir, logDir, seed - run.seed, signal, (m) =>
            emit({ type: "warning", message: `#${exp.n} trial ${attempt}: ${m}` }),
          ),
        }
      : {}),
    ...(sandbox ? { sandbox } : {}),
    onMetric: (name, value, elapsedMs) => {
      if (name !== progressName) return;
      const x = (elapsedMs ?? Date.now() - startedAt) / budgetMs;
      curve.push([x, value]);
      emit({ type: "progress", n: exp.n, name, value });
      if (pruner && !prune.signal.aborted) {
        const verdict = pruner.observe(x, value);
        if (verdict.prune) prune.abort(verdict.reason);
      }
    },
    ...(pruner ? { prune: prune.signal } : {}),
    ...(signal ? { signal } : {}),
  });
  if (curve.length) result.progress = curve;
  if (
    result.status === "crash" &&
    result.reason?.startsWith("evaluate step failed") &&
    !program.outputs.length
  ) {
    result.reason += `; evaluate runs on a pristine tree (the committed files and setup's): if it reads a file the command wrote, declare it under \`outputs:\` in program.md`;
  }
  ledger.finishTrial(trialId, result, logDir);
  crashPoint("after-trial-result");
  if (result.status === "tampered") await ws.restoreProtected(allowed);
  const value = result.metrics[program.objective.metric];
  emit({
    type: "trial_finished",
    n: exp.n,
    attempt,
    status: result.status,
    ...(value !== undefined ? { metric: value } : {}),
    wallS: result.wallS,
    ...(result.reason ? { reason: result.reason } : {}),
  });
  return result;
}

/**
 * Trials started but never finished (the harness was killed): kill whatever is left of their
 * processes — nobody owns their clock any more — and record them as interrupted.
 */
export async function closeOpenTrials(deps: LoopDeps, exp: ExperimentRecord): Promise<void> {
  const { ledger, executor } = deps;
  for (const t of exp.trials) {
    if (t.result) continue;
    const token = t.env[TRIAL_TOKEN];
    if (token && executor.reap) await executor.reap(token);
    ledger.finishTrial(
      t.id,
      notRunResult(t, "interrupted", "the harness stopped while this trial ran; it is run again"),
      "",
    );
  }
}

/**
 * The first seed index that no full-budget trial of `exp` holds, finished (ok or failed: a failed
 * one is not re-run) or running; an interrupted trial's seed is free again.
 */
function nextSeedIndex(program: Program, runSeed: number, exp: ExperimentRecord): number {
  const taken = new Set(
    exp.trials
      .filter((t) => isFullBudget(program, t) && t.result?.status !== "interrupted")
      .map((t) => t.seed - runSeed),
  );
  let k = 0;
  while (taken.has(k)) k++;
  return k;
}
