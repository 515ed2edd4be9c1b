/**
 * Fault injection for the resume tests: `AUTOLAB_CRASH_AT=<point>[:<k>]` kills the harness
 * with SIGKILL the k-th time (default 1st) it passes `point`, exactly between two writes —
 * windows too short to hit with a timed `kill -9`. Unset, this is one string comparison.
 */
const spec = process.env.AUTOLAB_CRASH_AT;
const [target, nth] = spec ? spec.split(":") : [];
let seen = 0;

export type CrashPoint =
  | "after-commit" // candidate committed and ref'd, no experiment row yet
  | "after-row" // experiment row written, no trial started
  | "after-trial-start" // trial start row written, process not yet spawned
  | "after-trial-result" // trial result written, no decision
  | "after-decision" // decision written, branch not yet advanced
  | "after-hook" // a hook run's row written (program.md hooks:), before what follows it
  | "after-merge-commit" // parallel: a winner rebased onto the new best (commit + ref), no merge row yet
  | "after-advice"; // the advisor's answer written, the next proposal not begun

export function crashPoint(point: CrashPoint): void {
  if (point !== target) return;
  seen++;
  if (seen >= Number(nth ?? 1)) process.kill(process.pid, "SIGKILL");
}
