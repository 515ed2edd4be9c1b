/**
 * Iteration hooks (program.md `hooks:`, docs/program.md "Hooks"): `before` runs before each
 * proposal, `after` after each decision. A hook is the project's own command, so it runs like a
 * trial's: through the executor, in the trial's sandbox (src/app/confinement.ts: holdout data,
 * the notebook and the repository's .git hidden, protected files read-only), killed at its budget
 * + grace, its output capped. It runs in the worktree at the best, and whatever it writes there
 * is removed afterwards (the researcher and the trials see the committed tree). Its outcome is
 * data: a row in the notebook (Ledger.addHookRun), a note and a warning when it failed; it never
 * stops the run. The tail of its output reaches the researcher's next context (views.ts).
 */
import { join } from "node:path";
import { crashPoint } from "./crash-points.ts";
import type { LoopEvent } from "./events.ts";
import { bestOf, objectiveOf } from "./experiments.ts";
import type { HookPhase, HookRunRecord, HookStatus } from "./ledger.ts";
import type { LoopDeps } from "./loop-deps.ts";
import { setupFilesOf } from "./setup.ts";
import type { TrialStatus } from "./types.ts";
import { freshDir } from "./untrusted-file.ts";

/** The most of a hook's output (its last characters) the notebook and the researcher's context keep. */
export const HOOK_OUTPUT_CHARS = 2048;

/** A metric name no output line can carry: a hook has no objective, the executor looks for one. */
const NO_METRIC = "\u0000autolab-hook";

/** Runs the program's `phase` hook around experiment `n`, if it has one; the record, or undefined. */
export async function runHook(
  deps: LoopDeps,
  phase: HookPhase,
  n: number,
  opts: {
    /** The commit the worktree is put at for the hook (the best), and back at afterwards. */
    at: string;
    /** What the hook is told besides AUTOLAB_N and AUTOLAB_HOOK (the decision, for `after`). */
    env?: Record<string, string>;
    emit?: (e: LoopEvent) => void;
    signal?: AbortSignal | undefined;
    /** The experiment's row, when it exists: a failure's note is attached to it. */
    experimentId?: number;
  },
): Promise<HookRunRecord | undefined> {
  const { program, ledger, run, workspace: ws, executor } = deps;
  const hooks = program.hooks;
  const command = phase === "before" ? hooks?.before : hooks?.after;
  if (!hooks || command === undefined || opts.signal?.aborted) return undefined;
  const setupFiles = setupFilesOf(deps);
  const caches = deps.confinement?.projectCaches ?? [];
  const keep = [...setupFiles, ...caches];
  await ws.cleanTree(opts.at, keep);
  // hook-before, hook-before-2, …: a directory made now (src/core/untrusted-file.ts), never one
  // an earlier process of the run could have filled.
  const logDir = freshDir(join(deps.logDir, String(n)), `hook-${phase}`);
  const env = {
    ...(deps.slot?.env ?? {}),
    ...opts.env,
    AUTOLAB_HOOK: phase,
    AUTOLAB_N: String(n),
    AUTOLAB_TAG: run.tag,
  };
  const sandbox = deps.confinement?.trial(ws, setupFiles, env);
  const res = await executor.runTrial({
    cwd: ws.projectDir,
    command,
    budgetMs: hooks.budgetMs,
    graceMs: hooks.graceMs,
    evaluateTimeoutMs: hooks.budgetMs,
    seed: run.seed,
    logDir,
    env,
    objective: NO_METRIC,
    ...(sandbox ? { sandbox } : {}),
    ...(opts.signal ? { signal: opts.signal } : {}),
  });
  // What the hook wrote is gone, and a protected file it changed (possible only unsandboxed) is
  // restored: the researcher proposes on, and trials run on, the committed tree.
  await ws.cleanTree(opts.at, keep);
  const allowed = [...keep, ...program.outputs];
  const tampered = await ws.verifyProtected(allowed);
  if (tampered) await ws.restoreProtected(allowed);
  const status = hookStatus(res.status);
  const reason =
    status === "ok"
      ? tampered
        ? `it changed a protected file (restored): ${tampered}`
        : undefined
      : (res.reason ?? status);
  const record = ledger.addHookRun({
    runId: run.id,
    n,
    phase,
    command,
    status,
    ...(reason !== undefined ? { reason } : {}),
    exitCode: res.exitCode,
    wallS: res.wallS,
    output: capOutput(res.logTail),
    logDir,
  });
  crashPoint("after-hook");
  if (status !== "ok" && status !== "interrupted") {
    const text = `hook ${phase} #${n} ${status}: ${reason ?? status} (the run goes on; logs in ${logDir})`;
    ledger.addNote(run.id, opts.experimentId ?? null, text);
    opts.emit?.({ type: "warning", message: text });
  }
  return record;
}

/**
 * What an after hook is told about experiment n's decision: AUTOLAB_DECISION (keep, discard,
 * crash, reject), AUTOLAB_METRIC (the decided value of the objective, when there is one),
 * AUTOLAB_BEST_N and AUTOLAB_BEST_METRIC (the best after the decision).
 */
export function afterDecisionEnv(deps: LoopDeps, n: number): Record<string, string> {
  const exps = deps.ledger.listExperiments(deps.run.id);
  const decision = exps.find((e) => e.n === n)?.decision;
  const best = bestOf(exps);
  const bestMetric = best ? objectiveOf(best, deps.program.objective.metric) : undefined;
  return {
    ...(decision ? { AUTOLAB_DECISION: decision.action } : {}),
    ...(decision?.metric !== undefined && decision.metric !== null
      ? { AUTOLAB_METRIC: String(decision.metric) }
      : {}),
    ...(best ? { AUTOLAB_BEST_N: String(best.n) } : {}),
    ...(bestMetric !== undefined ? { AUTOLAB_BEST_METRIC: String(bestMetric) } : {}),
  };
}

/** The commit the after hook of a decided experiment runs on: the run's best (its base before any). */
export function bestCommitOf(deps: LoopDeps): string {
  return bestOf(deps.ledger.listExperiments(deps.run.id))?.commit ?? deps.run.baseCommit;
}

/** The end of `text`, at most HOOK_OUTPUT_CHARS characters, saying so when it was cut. */
export function capOutput(text: string): string {
  if (text.length <= HOOK_OUTPUT_CHARS) return text;
  return `[autolab: ${text.length - HOOK_OUTPUT_CHARS} earlier characters elided]\n${text.slice(-HOOK_OUTPUT_CHARS)}`;
}

function hookStatus(s: TrialStatus): HookStatus {
  switch (s) {
    case "ok":
    case "missing_metric":
    case "nonfinite_metric":
      return "ok"; // it ran and exited 0: a hook has no objective to report
    case "timeout":
      return "timeout";
    case "interrupted":
      return "interrupted";
    default:
      return "failed";
  }
}
