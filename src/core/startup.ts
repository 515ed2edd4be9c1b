/**
 * The start and end of an invocation, the same for the serial loop and the scheduler: the
 * run's budget, the run announced and its session recorded, then `startUp` — reconcile the
 * branch → setup → adopt candidates committed before a crash → baseline row → close open
 * trials → a failed baseline stops the run — and the summary at the end.
 */
import { adoptCandidate } from "./candidate.ts";
import { AutolabError } from "./errors.ts";
import type { LoopEvent } from "./events.ts";
import { bestOf, lastResult, objectiveOf } from "./experiments.ts";
import type { ExperimentRecord } from "./ledger.ts";
import type { LoopDeps, LoopOptions, LoopSummary } from "./loop-deps.ts";
import { reconcileBranch } from "./ratchet.ts";
import { costPreflight, isBounded, type RunBudget } from "./run-budget.ts";
import { runSetup } from "./setup.ts";
import { closest } from "./suggest.ts";
import { closeOpenTrials } from "./trial-step.ts";
import type { Program, TrialResult } from "./types.ts";

/**
 * The deps with the run's budget from the options (the time window starts now). A trial budget
 * must leave room for a candidate after the baseline's trials.
 */
export function withBudget(
  deps: LoopDeps,
  opts: Pick<LoopOptions, "maxExperiments" | "maxTrials" | "maxTimeMs" | "maxCostUsd">,
): LoopDeps {
  // Infinity is no limit; 0 experiments catches up (setup, baseline, experiments cut short) and
  // stops (autolab mcp); 0 trials is refused below; 0 ms starts no trial after the baseline.
  const given = (x: number | undefined): x is number => x !== undefined && Number.isFinite(x);
  const budget: RunBudget = {
    ...(given(opts.maxExperiments) ? { experiments: Math.max(0, opts.maxExperiments) } : {}),
    ...(given(opts.maxTrials) ? { trials: opts.maxTrials } : {}),
    ...(given(opts.maxTimeMs)
      ? { time: { start: Date.now(), end: Date.now() + Math.max(0, opts.maxTimeMs) } }
      : {}),
    ...(given(opts.maxCostUsd) ? { cost: Math.max(0, opts.maxCostUsd) } : {}),
  };
  const baseline = deps.judge.baselineTrials;
  if (budget.trials !== undefined && budget.trials <= baseline) {
    throw new AutolabError(
      "INVALID_BUDGET",
      `--max-trials ${budget.trials} leaves no trial for a candidate: the baseline alone runs ${baseline} (its repeats measure the noise)`,
      `give at least ${baseline + 1}; a candidate usually needs 1 trial, one being confirmed about 8 (docs/noise.md)`,
    );
  }
  return isBounded(budget) ? { ...deps, budget } : deps;
}

/** Announces the run and records this harness session (how many slots); returns the notebook. */
function startRun(deps: LoopDeps, slots: number, emit: (e: LoopEvent) => void): ExperimentRecord[] {
  const { ledger, run, program } = deps;
  const exps = ledger.listExperiments(run.id);
  emit({
    type: "run_started",
    tag: run.tag,
    branch: run.branch,
    metric: program.objective.metric,
    resumed: exps.length > 0,
    experiments: exps.length,
    ...(deps.confinement ? { sandbox: deps.confinement.description } : {}),
    ...(deps.confinement?.hint ? { sandboxHint: deps.confinement.hint } : {}),
  });
  ledger.startSession(run.id, slots, deps.confinement?.description);
  const cost = costPreflight(deps.budget, exps, deps.agent.name);
  if (cost) emit({ type: "warning", message: cost });
  return exps;
}

/** The run's summary, announced. */
export function finishRun(deps: LoopDeps, reason: string, emit: (e: LoopEvent) => void): LoopSummary {
  const all = deps.ledger.listExperiments(deps.run.id);
  const best = bestOf(all);
  const bm = best ? objectiveOf(best, deps.program.objective.metric) : undefined;
  emit({
    type: "run_finished",
    reason,
    best: best && bm !== undefined ? { n: best.n, metric: bm } : undefined,
  });
  return { stoppedBecause: reason, experiments: all, best };
}

/** Experiment 0, the unmodified base commit, recorded if it is not yet. */
async function ensureBaseline(deps: LoopDeps, exps: ExperimentRecord[]): Promise<void> {
  const { program, ledger, run, workspace: ws, agent } = deps;
  if (exps.some((e) => e.n === 0)) return;
  const ref = await ws.commitCandidate(0, [], "baseline");
  const params = agent.paramsOf ? await agent.paramsOf(ws.projectDir, program) : undefined;
  ledger.addExperiment({
    runId: run.id,
    n: 0,
    agent: "baseline",
    parentCommit: run.baseCommit,
    commit: ref.commit,
    ref: ref.ref,
    hypothesis: "baseline",
    mechanism: "the unmodified starting point every candidate is compared with",
    ...(params && Object.keys(params).length ? { params } : {}),
    diff: { files: 0, insertions: 0, deletions: 0 },
  });
}

/** A failed baseline stops the run: nothing could ever be compared with it. */
export function assertBaselineOk(program: Program, exps: ExperimentRecord[]): void {
  const baseline = exps.find((e) => e.n === 0);
  if (!baseline?.decision || baseline.decision.action === "keep") return;
  const result = lastResult(baseline);
  const tail = result?.logTail.trim().split("\n").slice(-8).join("\n") ?? "";
  const advice = baselineAdvice(program, result);
  throw new AutolabError(
    "BASELINE_FAILED",
    `the baseline (the unmodified project) failed: ${baseline.decision.reason}${advice.found ? `\n${advice.found}` : ""}${tail ? `\n--- last lines of its log ---\n${tail}` : ""}`,
    advice.hint ?? `${advice.fix}, commit, and start a new run (autolab run --tag <new-tag>).`,
  );
}

/**
 * What to do about a failed baseline. A command that ran but printed no objective is not
 * broken: name the metrics it did print (holdouts left out: an agent may read this through
 * MCP) and the likely one; only a command that failed is told to work.
 */
function baselineAdvice(
  program: Program,
  result: TrialResult | undefined,
): { found?: string; fix: string; hint?: string } {
  const metric = program.objective.metric;
  // No process ever ran (notRunResult: a bundle a fleet worker found corrupted, no sandbox here):
  // the reason says what stopped it, and nothing in the program is to blame.
  if (
    result?.status === "crash" &&
    result.exitCode === null &&
    result.signal === null &&
    result.wallS === 0
  ) {
    return {
      found: "Its command never started.",
      fix: "",
      hint: "Nothing in the program needs fixing: remedy what kept the trial from starting (the reason above), then start the run again.",
    };
  }
  const step = `\`${program.run.evaluate ?? program.run.command}\``;
  if (result?.status === "nonfinite_metric") {
    return { fix: `Make ${step} print a finite number for ${metric} (it printed ${result.metrics[metric]})` };
  }
  const unprinted =
    result?.status === "ok"
      ? program.objectives?.metrics.find((m) => !Number.isFinite(result.metrics[m.metric]))
      : undefined;
  if (unprinted) {
    // Several objectives: the primary was printed, another listed metric was not.
    return { fix: `Make ${step} print every objective metric (${unprinted.metric} is missing)` };
  }
  if (result?.reason?.startsWith("rubric: no judge could be reached")) {
    // The command ran; the grading step's endpoints did not answer (docs/learning.md).
    return {
      fix: "",
      hint: "Start the judges program.md names under run.evaluate.judges (an example's offline judges: its README's \"Run it\"), or point base_url at endpoints that run; then `autolab run` again (a run whose baseline failed is not resumed: a new one starts).",
    };
  }
  if (result?.status !== "missing_metric") {
    return { fix: `Fix the program so that \`${program.run.command}\` works on the committed code` };
  }
  const hidden = new Set(program.metrics.holdout);
  const printed = Object.keys(result.metrics).filter((m) => m !== metric && !hidden.has(m));
  if (printed.length === 0) {
    return {
      found: `${step} ran and printed no metric line at all.`,
      fix: `Make ${step} print a line like "${metric}: 0.123" (or "METRIC ${metric}=0.123")`,
    };
  }
  const guess = likelyMetric(metric, printed);
  return {
    found: `${step} ran and printed ${printed.join(", ")}, but no ${metric}${guess ? ` — did you mean ${guess}?` : "."}`,
    fix: `Name the metric to optimize in program.md's objective (objective: { metric: ${guess ?? "<one of them>"}, … }), or make ${step} print "${metric}: <value>"`,
  };
}

/**
 * The printed metric the objective most likely meant: a near spelling (two neighbours swapped
 * too: "scroe"), one containing the other, or the only one.
 */
function likelyMetric(metric: string, printed: readonly string[]): string | undefined {
  const m = metric.toLowerCase();
  const swapped = (p: string) =>
    p.length === m.length &&
    [...m].some((_, i) => `${m.slice(0, i)}${m[i + 1]}${m[i]}${m.slice(i + 2)}` === p);
  return (
    closest(metric, printed) ??
    printed.find((p) => swapped(p.toLowerCase())) ??
    printed.find((p) => p.toLowerCase().includes(m) || m.includes(p.toLowerCase())) ??
    (printed.length === 1 ? printed[0] : undefined)
  );
}

/**
 * Everything an invocation does before its first proposal, the same with one worktree or with
 * slots: the run announced and its session recorded (one per worker), the branch reconciled
 * with the notebook, setup in every worktree that runs trials, candidates whose ref exists
 * without a row adopted (the harness died between the two writes; with proposals in parallel
 * they need not be the last number, so every such ref is), the baseline's row, and trials a
 * previous session left open closed (a pending experiment's, cut short by a crash or Ctrl-C, or
 * a decided incumbent's re-measurement: closed, not re-run). A decided baseline that failed
 * stops the run here. "stopped": the signal came during setup.
 *
 * Returns the notebook and the candidate numbers git holds (the scheduler allocates above both).
 */
export async function startUp(
  deps: LoopDeps,
  /** The deps of every worktree that runs trials (setup runs in each); the serial loop: [deps]. */
  workers: LoopDeps[],
  emit: (e: LoopEvent) => void,
  signal: AbortSignal | undefined,
): Promise<{ exps: ExperimentRecord[]; refs: number[] } | "stopped"> {
  const { program, ledger, run, workspace: ws } = deps;
  const list = () => ledger.listExperiments(run.id);
  const exps = startRun(deps, workers.length, emit);
  await reconcileBranch(deps, exps, emit);
  await Promise.all(workers.map((d) => runSetup(d, emit, signal)));
  if (signal?.aborted) return "stopped";

  const refs = await ws.candidateNumbers();
  const known = new Set(exps.map((e) => e.n));
  for (const n of refs) if (!known.has(n) && n > 0) await adoptCandidate(deps, n);
  await ensureBaseline(deps, list());
  for (const e of list()) await closeOpenTrials(deps, e);
  const now = list();
  assertBaselineOk(program, now);
  return { exps: now, refs };
}
