/**
 * The trial phase: one trial of an experiment in a clean tree (start row, process, result row),
 * and closing the trials a killed harness left open.
 */
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { crashPoint } from "./crash-points.ts";
import { AutolabError, isAutolabError } from "./errors.ts";
import type { LoopEvent } from "./events.ts";
import { bestOf } from "./experiments.ts";
import type { Rung } from "./ladder.ts";
import type { ExperimentRecord } from "./ledger.ts";
import type { LoopDeps } from "./loop-deps.ts";
import { referenceCurve } from "./reference-curve.ts";
import { setupFilesOf } from "./setup.ts";
import { freshSeed, nextSlot, slotSeed, usedSeeds } from "./trial-seeds.ts";
import { isFullBudget, notRunResult } from "./trial-values.ts";
import type { TrialPruner, TrialResult, TrialSpec } from "./types.ts";
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
    // Evaluate runs on a pristine tree: the commit, setup's files and the declared outputs, each
    // a regular file or a directory of them (a FIFO would hold evaluate until its timeout).
    const refused = await ws.cleanTree(
      commit,
      [...setupFiles, ...caches, ...program.outputs],
      program.outputs,
    );
    if (refused.length) return { status: "crash", reason: refusedOutputs(refused) };
    const missing = program.outputs.filter((o) => !existsSync(join(ws.projectDir, o)));
    if (missing.length === 0) return undefined;
    return {
      status: "crash",
      reason: `the command did not write its declared output${missing.length > 1 ? "s" : ""} ${missing.join(", ")} (outputs: in program.md; a symlink does not count)`,
    };
  };
}

/** A trial's reason for declared outputs refused before evaluate (the workspace's reasons). */
export function refusedOutputs(refused: readonly string[]): string {
  return `declared output refused before evaluate: ${refused.join("; ")} (outputs: in program.md are regular files or directories of them)`;
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
 * Runs one trial of experiment n. Its seed (src/core/trial-seeds.ts) is a slot seed — trial slot
 * k of every experiment gets the run's k-th secret seed, so candidates and baseline share their
 * seeds — or a fresh one no trial of the run used. `rung`: a cheaper budget of the proxy ladder
 * (default run.budget); such trials are not pruned.
 */
export async function runTrial(
  deps: LoopDeps,
  n: number,
  /**
   * Which seed: a slot index (the number of trials already finished); "next": for an incumbent
   * re-measured `against` a challenger, the first of the challenger's seeds it lacks (a pair),
   * else the first slot no full-budget trial of the experiment holds or is running; "fresh": a
   * seed no trial of the run has used. Chosen right before the start is recorded, so slots that
   * re-measure the same incumbent at once take different seeds.
   */
  seedChoice: SeedChoice,
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
  // A tree that cannot be made pristine fails this trial closed, with the reason (the run goes
  // on: TRIALS_FAILING stops it if nothing changes).
  let allowed: string[];
  let notPristine: string | undefined;
  try {
    allowed = await pristineForTrial(deps, ws, exp0.commit);
  } catch (err) {
    if (!isAutolabError(err) || err.code !== "RESET_FAILED") throw err;
    notPristine = `the trial's tree could not be made pristine: ${err.message}`;
    allowed = [...setupFiles, ...(deps.confinement?.projectCaches ?? []), ...program.outputs];
  }
  const exp = ledger.getExperiment(run.id, n) ?? exp0;
  const attempt = exp.trials.length + 1;
  const seed = seedFor(deps, exp, seedChoice, against);
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
  const exps = ledger.listExperiments(run.id);
  const bestExp = bestOf(exps);
  const bestCurve = referenceCurve(
    program,
    bestExp,
    exps.find((e) => e.n === 0),
  );
  // Only a challenger's first full-budget trial is pruned (issue #38 item 5): a prune never
  // overturns trials that completed, and the baseline and the incumbent, whose re-measurements
  // are never pruned, would otherwise be measured by another rule than their challengers.
  const firstTrial = !exp.trials.some(
    (t) => isFullBudget(program, t) && t.result && t.result.status !== "interrupted",
  );
  const pruner: TrialPruner | undefined =
    progressName && deps.makePruner && bestCurve && bestExp && bestExp.n !== n && !rung && firstTrial
      ? deps.makePruner(bestCurve)
      : undefined;
  const prune = new AbortController();
  const sandbox = deps.confinement?.trial(ws, setupFiles, deps.slot?.env ?? {});
  const result = notPristine
    ? notRunResult({ seed, command: program.run.command }, "crash", notPristine)
    : await executor.runTrial({
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
              grade: graderFor(deps, ws.projectDir, logDir, attempt - 1, signal, (m) =>
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
  const overrunS = graceOverrun(result, budgetMs);
  emit({
    type: "trial_finished",
    n: exp.n,
    attempt,
    status: result.status,
    ...(value !== undefined ? { metric: value } : {}),
    wallS: result.wallS,
    ...(result.reason ? { reason: result.reason } : {}),
    ...(overrunS !== undefined ? { overrunS } : {}),
  });
  return result;
}

/**
 * Seconds a finished command ran past its budget, within the grace window: accepted as the
 * budget's promise allows (the kill comes at budget + grace), and shown as what it is — a trial
 * that had more time than its budget. Undefined when it kept to its budget or did not finish.
 */
export function graceOverrun(
  result: Pick<TrialResult, "status" | "wallS">,
  budgetMs: number,
): number | undefined {
  if (result.status === "timeout" || result.status === "interrupted") return undefined;
  const over = result.wallS - budgetMs / 1000;
  return over > 0.05 ? Math.round(over * 100) / 100 : undefined;
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

/** How runTrial picks a trial's seed (see its parameter). */
export type SeedChoice = number | "next" | "fresh";

/**
 * The seed of the trial about to start. No await between reading the notebook here and recording
 * the start: parallel trials must not take the same seed.
 */
function seedFor(
  deps: LoopDeps,
  exp: ExperimentRecord,
  choice: SeedChoice,
  against: number | undefined,
): number {
  const { program, run, ledger } = deps;
  if (typeof choice === "number") return slotSeed(run, choice);
  if (choice === "fresh") return freshSeed(run, usedSeeds(ledger.listExperiments(run.id)));
  const held = new Set(
    exp.trials
      .filter((t) => isFullBudget(program, t) && t.result?.status !== "interrupted")
      .map((t) => t.seed),
  );
  // The incumbent catches up on its challenger's seeds (the challenger ran them first: a fresh
  // seed stays unseen by the challenger's code until the challenger's own trial).
  const challenger = against !== undefined ? ledger.getExperiment(run.id, against) : undefined;
  for (const t of challenger?.trials ?? []) {
    if (isFullBudget(program, t) && t.result?.status === "ok" && !held.has(t.seed)) return t.seed;
  }
  return slotSeed(run, nextSlot(run, held));
}
