/**
 * A parallel run's merge: only the scheduler's runs reach it (parallel-coordination.ts), never the serial
 * loop, where every candidate is built on the current best — and never with a branching frontier,
 * whose winners are decided on the tree (decide.ts onTree).
 */
import { commitMessage } from "./candidate.ts";
import { crashPoint } from "./crash-points.ts";
import type { LoopEvent } from "./events.ts";
import { objectiveOf } from "./experiments.ts";
import { shortLine } from "./format.ts";
import type { ExperimentRecord } from "./ledger.ts";
import type { LoopDeps } from "./loop-deps.ts";
import type { ParallelHooks } from "./parallel-coordination.ts";
import type { Decision, Params, Proposal } from "./types.ts";

/**
 * A candidate that beat the best it was built on, while the best moved on (parallel runs): its
 * change is rebased onto the current best as a new experiment, evaluated again before it can
 * be kept; a conflict rejects it as stale. Write order: merge commit + ref, merge row, then this
 * experiment's decision — a crash in between is resumed by adopting the ref (adoptOrphans) or
 * by finding the merge row (below), never by merging twice.
 */
export async function mergeOnto(
  deps: LoopDeps,
  parallel: ParallelHooks,
  exp: ExperimentRecord,
  decision: Decision,
  best: ExperimentRecord,
  exps: ExperimentRecord[],
  emit: (e: LoopEvent) => void,
): Promise<void> {
  const { ledger, run, workspace: ws } = deps;
  const bestNow = { n: best.n, metric: objectiveOf(best, deps.program.objective.metric) ?? Number.NaN };
  const beat = decision.reason.replace(/\.$/, "");
  let merged = exps.find((e) => e.rebaseOf === exp.n);
  if (!merged) {
    const m = parallel.allocate();
    const proposal: Proposal = {
      hypothesis: `${shortLine(exp.hypothesis)} (#${exp.n} rebased onto #${best.n})`,
      ...(exp.mechanism ? { mechanism: exp.mechanism } : {}),
      ...(exp.params ? { params: { ...(best.params ?? {}), ...changedParams(exp, exps) } } : {}),
    };
    const message = commitMessage(run.tag, m, exp.agent, proposal, {
      ...(exp.role ? { role: exp.role } : {}),
      rebaseOf: exp.n,
    });
    let res = await ws.rebase(m, exp.commit, best.commit, message);
    // A tuner's change is a set of knob values: on conflicting knob lines, it is the values
    // that are rebased (written into the new best's files), not the lines.
    if ("conflicts" in res && parallel.rebaseKnobs) {
      const byKnobs = await parallel.rebaseKnobs({ workspace: ws, exp, onto: best.commit, n: m, message });
      if (byKnobs) res = byKnobs;
    }
    if ("alreadyIn" in res) {
      const reason = `${beat}; the same change is already in the new best #${best.n}`;
      ledger.decide(exp.id, { action: "discard", reason, mechanismConfirmed: null });
      emit({ type: "decision", n: exp.n, action: "discard", reason, best: bestNow });
      return;
    }
    if ("conflicts" in res) {
      const reason = `stale: ${beat}, but its change conflicts with the new best #${best.n} in ${res.conflicts.join(", ") || "the same lines"}`;
      ledger.decide(exp.id, { action: "reject", reason, mechanismConfirmed: null });
      emit({ type: "decision", n: exp.n, action: "reject", reason, best: bestNow });
      return;
    }
    crashPoint("after-merge-commit");
    merged = ledger.addExperiment({
      runId: run.id,
      n: m,
      agent: exp.agent,
      ...(exp.role ? { role: exp.role } : {}),
      parentCommit: best.commit,
      commit: res.commit,
      ref: res.ref,
      hypothesis: proposal.hypothesis,
      ...(proposal.mechanism ? { mechanism: proposal.mechanism } : {}),
      ...(proposal.params ? { params: proposal.params } : {}),
      diff: res.diff,
      rebaseOf: exp.n,
    });
    emit({ type: "experiment_created", n: m, hypothesis: merged.hypothesis, commit: res.commit });
    parallel.onMerged(merged);
  }
  const reason = `${beat}; the best moved to #${best.n} meanwhile, so it was rebased onto it as #${merged.n}, which is evaluated again`;
  ledger.decide(exp.id, { action: "discard", reason, mechanismConfirmed: null });
  emit({ type: "decision", n: exp.n, action: "discard", reason, best: bestNow });
}

/** The knob values an experiment changed relative to its parent. */
function changedParams(exp: ExperimentRecord, exps: ExperimentRecord[]): Params {
  const parent = exps.find((e) => e.commit === exp.parentCommit)?.params ?? {};
  const out: Params = {};
  for (const [k, v] of Object.entries(exp.params ?? {})) if (parent[k] !== v) out[k] = v;
  return out;
}
