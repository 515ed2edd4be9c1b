/**
 * `autolab finalize`'s dry-run plan as viewers show it (the dashboard's GET /api/finalize):
 * the plan (src/app/finalize.ts) in JSON-safe numbers, with what earlier `finalize --apply`
 * and `--verify` runs recorded in the notebook's notes, per branch. Nothing here writes: the
 * plan is built with scratch objects (PlanOptions.scratchObjects), never a ref.
 */
import { dirname } from "node:path";
import { isAutolabError } from "../core/errors.ts";
import type { ExperimentRecord, NoteRecord, RunRecord } from "../core/ledger.ts";
import type { Program } from "../core/types.ts";
import { findRepo } from "../workspace/git-workspace.ts";
import {
  appliedNote,
  type FinalizePlan,
  gainLine,
  planFinalize,
  VERIFY_NOTE,
  verifyNote,
} from "./finalize.ts";

export interface FinalizeGainJson {
  /** Improvement in metric units (positive: better in the run's direction). */
  value: number;
  /** σ of the difference of the two means; null when unknown, 0 when the objective is exact. */
  sigma: number | null;
  trials: number;
  baseTrials: number;
}

export interface FinalizeChangeJson {
  n: number;
  /** Researcher text: escape it wherever it is shown. */
  hypothesis: string;
  mechanism: string | null;
  parent: string;
  commit: string;
  paths: string[];
  /** Earlier changes whose lines its hunks meet, with the files where they meet. */
  dependsOn: { n: number; paths: string[] }[];
  gain: FinalizeGainJson | null;
  /** "Gain: 2 loss (lower is better) ± 0.1 (σ) over the best before it; 3 trials vs 3" */
  gainText: string;
  experiments: number[];
  /** Changed no file: no branch. */
  empty: boolean;
}

export interface FinalizeBranchJson {
  name: string;
  n: number;
  /** The changes it holds, oldest first: dependencies, then `n`. */
  contains: number[];
  /** Changes added because git could not apply `n` without them, with the files. */
  conflictsWith: { n: number; paths: string[] }[];
  commits: string[];
  tip: string;
  /** `autolab finalize --apply` recorded this branch (a note): it was created at `tip`. */
  applied: boolean;
  /** The notes `finalize --verify` recorded for this branch, oldest first (its verdicts). */
  verify: { text: string; at: string }[];
}

export interface FinalizePlanJson {
  metric: string;
  direction: "minimize" | "maximize";
  baseCommit: string;
  changes: FinalizeChangeJson[];
  branches: FinalizeBranchJson[];
  noise: { sigma: number | null; explain: string };
  /** Tracked files with uncommitted changes: --apply refuses until they are committed or stashed. */
  dirty: string[];
}

/** GET /api/finalize's answer. */
export interface FinalizeJson {
  run: string;
  /** null when there is nothing to finalize (no kept change beyond the baseline): `message` says why. */
  plan: FinalizePlanJson | null;
  message: string | null;
  /** The plan could not be built (the repository moved, a commit is gone): what git or autolab said. */
  error?: string;
  /** What creates the branches (a person runs it; viewers never write). */
  command: string;
}

/** The dry-run plan of `run` for viewers; nothing in the repository or the notebook is written. */
export async function finalizeView(
  run: RunRecord,
  exps: ExperimentRecord[],
  notes: readonly NoteRecord[],
  program?: Program,
): Promise<FinalizeJson> {
  const command = `autolab finalize --apply --tag ${run.tag}`;
  let plan: FinalizePlan;
  try {
    const repo = await findRepo(dirname(run.programPath));
    plan = await planFinalize(repo, run, exps, program, { scratchObjects: true });
  } catch (err) {
    if (!isAutolabError(err)) throw err;
    if (err.code === "NOTHING_TO_FINALIZE")
      return { run: run.tag, plan: null, message: err.message, command };
    // A viewer shows what stands in the way; the rest of the page goes on.
    return { run: run.tag, plan: null, message: null, command, error: err.message };
  }
  return { run: run.tag, plan: planJson(plan, notes), message: null, command };
}

const finite = (x: number): number | null => (Number.isFinite(x) ? x : null);

export function planJson(plan: FinalizePlan, notes: readonly NoteRecord[]): FinalizePlanJson {
  return {
    metric: plan.run.metric,
    direction: plan.run.direction,
    baseCommit: plan.run.baseCommit,
    changes: plan.changes.map((c) => ({
      n: c.n,
      hypothesis: c.hypothesis,
      mechanism: c.mechanism ?? null,
      parent: c.parent,
      commit: c.commit,
      paths: c.paths,
      dependsOn: c.dependsOn,
      gain: c.gain ? { ...c.gain, sigma: finite(c.gain.sigma) } : null,
      gainText: gainLine(plan.run, c),
      experiments: c.experiments,
      empty: c.empty,
    })),
    branches: plan.branches.map((b) => {
      // The notes finalize writes (finalize.ts applyBranches, finalize-verify.ts).
      const applied = `${appliedNote(b)} (${b.tip.slice(0, 8)})`;
      const verified = verifyNote(b);
      return {
        name: b.name,
        n: b.n,
        contains: b.contains,
        conflictsWith: b.conflictsWith,
        commits: b.commits,
        tip: b.tip,
        applied: notes.some((x) => x.text.startsWith(applied)),
        verify: notes
          .filter((x) => x.text.startsWith(verified))
          .map((x) => ({ text: x.text.slice(VERIFY_NOTE.length), at: x.createdAt })),
      };
    }),
    noise: { sigma: finite(plan.noise.sigma), explain: plan.noise.explain },
    dirty: plan.dirty,
  };
}
