/**
 * Candidates whose trials fail one after another (every new configuration crashes, times out or
 * prints no metric) while the baseline ran: the change space itself is broken — a search range
 * the program cannot run, an agent whose edits never compile. Trying more of the same spends the
 * night on nothing, so the loop and the scheduler stop and say which candidates failed and why.
 * Derived from the notebook (decisions and trials), so a resumed run counts the same streak.
 */
import { AutolabError } from "./errors.ts";
import type { ExperimentRecord } from "./ledger.ts";
import type { Program, TrialStatus } from "./types.ts";

/** Consecutive candidates with failed trials before the run stops. */
const DEFAULT_MAX_TRIAL_FAILURES = 10;

const FAILED: ReadonlySet<TrialStatus> = new Set(["crash", "timeout", "missing_metric", "nonfinite_metric"]);

/**
 * The current streak of candidates decided on a failed trial, oldest first ("#12 exit code 1 …").
 * Researcher failures (no trial ran) and rejections for scope neither count nor break it: they
 * have their own limit. Any candidate whose trials ran (kept, discarded, pruned) ends it.
 */
export function failedTrialStreak(exps: readonly ExperimentRecord[]): string[] {
  const decided = exps
    .filter((e) => e.n > 0 && e.decision)
    .sort((a, b) => (a.decision?.decidedAt ?? "").localeCompare(b.decision?.decidedAt ?? "") || a.n - b.n);
  const streak: string[] = [];
  for (let i = decided.length - 1; i >= 0; i--) {
    const e = decided[i] as ExperimentRecord;
    const action = e.decision?.action;
    const failedTrial = e.trials.some((t) => t.result !== undefined && FAILED.has(t.result.status));
    if ((action === "crash" || action === "reject") && failedTrial) {
      streak.unshift(`#${e.n} ${(e.decision?.reason ?? "").split("\n")[0]}`);
      continue;
    }
    if ((action === "crash" || action === "reject") && e.trials.length === 0) continue;
    break;
  }
  return streak;
}

/**
 * The error a run stops with (the serial loop and the scheduler check after every decision), or
 * undefined while the streak is below `max` (default DEFAULT_MAX_TRIAL_FAILURES).
 */
export function trialsFailing(
  program: Program,
  exps: readonly ExperimentRecord[],
  max = DEFAULT_MAX_TRIAL_FAILURES,
): AutolabError | undefined {
  const streak = failedTrialStreak(exps);
  return streak.length >= max
    ? trialsFailingError(streak, Object.keys(program.search).length > 0)
    : undefined;
}

function trialsFailingError(streak: readonly string[], search: boolean): AutolabError {
  const last = streak.slice(-5);
  return new AutolabError(
    "TRIALS_FAILING",
    `the last ${streak.length} candidates all failed their trials while the baseline ran:\n  ${last.join("\n  ")}${streak.length > last.length ? `\n  (and ${streak.length - last.length} before)` : ""}`,
    `${search ? "The built-in optimizer's ranges may hold values the program cannot run: narrow the knobs in program.md's search:. " : ""}Look at a failed trial's log (\`autolab show ${last[last.length - 1]?.split(" ")[0]?.slice(1) ?? "<n>"}\`), fix the cause, then \`autolab run\` continues the run.`,
  );
}
