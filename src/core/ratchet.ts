/**
 * The ratchet (the run's branch) against the notebook: only autolab moves it, to the last kept
 * experiment. Reconciled at start-up, verified at every decision.
 */
import type { LoopEvent } from "./events.ts";
import { bestOf } from "./experiments.ts";
import type { ExperimentRecord } from "./ledger.ts";
import type { LoopDeps } from "./loop-deps.ts";

/**
 * Makes the branch match the ledger: the last kept experiment's commit, or the base. A branch
 * one keep behind is a harness killed between its decision and the branch (docs/loop.md); a
 * branch anywhere else was moved by something other than autolab: tampering, reported.
 */
export async function reconcileBranch(
  deps: LoopDeps,
  exps: ExperimentRecord[],
  emit: (e: LoopEvent) => void = () => {},
): Promise<void> {
  const { workspace: ws, run } = deps;
  const target = bestOf(exps)?.commit ?? run.baseCommit;
  const current = await ws.bestCommit();
  if (current !== target) {
    const known = new Set([
      run.baseCommit,
      ...exps.filter((e) => e.decision?.action === "keep").map((e) => e.commit),
    ]);
    if (!known.has(current)) await reportRatchetMove(deps, current, target, undefined, emit);
    await ws.advance(target, current);
  }
  await ws.resetTo(target);
}

/**
 * The ratchet is checked at every decision: only autolab moves it, so a branch that is not at
 * the best is tampering — reported (who and what, from git's reflog), repaired, and the run
 * goes on from the best the notebook holds.
 */
export async function verifyRatchet(
  deps: LoopDeps,
  bestCommit: string,
  exp: ExperimentRecord,
  emit: (e: LoopEvent) => void,
): Promise<void> {
  const current = await deps.workspace.bestCommit();
  if (current === bestCommit) return;
  await reportRatchetMove(deps, current, bestCommit, exp, emit);
  await deps.workspace.advance(bestCommit, current);
}

async function reportRatchetMove(
  deps: LoopDeps,
  current: string,
  expected: string,
  exp: ExperimentRecord | undefined,
  emit: (e: LoopEvent) => void,
): Promise<void> {
  const { workspace: ws, run } = deps;
  const how = await ws.ratchetLastMove();
  const reason = `${ws.branch} was moved to ${current.slice(0, 8)} outside autolab${how ? ` (git reflog: ${how})` : ""}; restored to the best ${expected.slice(0, 8)}`;
  deps.ledger.addNote(run.id, exp?.id ?? null, `ALARM tamper:ratchet: ${reason}`);
  emit({ type: "alarm", kind: "tamper:ratchet", reason, ...(exp ? { n: exp.n } : {}) });
}
