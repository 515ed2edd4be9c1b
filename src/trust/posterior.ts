/**
 * The run's best by posterior: of every evaluated configuration, the one whose noise-free value
 * a model of all of them predicts best — the configuration a noisy run should name, which may
 * differ from the last kept one (that one had to beat its incumbent trial by trial; the model
 * also learns from the configurations around it, including discarded ones).
 *
 * The model is the built-in optimizer's Gaussian process (src/agents/builtin/gp.ts) over the
 * knobs of program.md's `search:` (categorical and conditional ones encoded as the sampler does),
 * fitted to every full-budget ok trial. Experiments without recorded knob values (a code change
 * by an agent) cannot be placed in the space and are left out; with fewer than three measured
 * configurations there is no prediction.
 */
import { type GpObservation, posteriorBest } from "../agents/builtin/gp.ts";
import { activeNames, makeDims, validValue } from "../agents/builtin/space.ts";
import type { ExperimentRecord } from "../core/ledger.ts";
import { valuesAt } from "../core/trial-values.ts";
import type { Program } from "../core/types.ts";

export interface PredictedBest {
  /** The experiment whose configuration is predicted best (the first one, if repeated). */
  id: number;
  /** Its commit: the code of that configuration. */
  commit: string;
  /** Its predicted noise-free value and the standard deviation of that prediction. */
  predicted: number;
  sd: number;
  /** Configurations the model was fitted to. */
  configurations: number;
}

/** Fewest measured configurations a prediction is made from. */
const MIN_CONFIGURATIONS = 3;

/**
 * The last prediction per baseline record. The notebook's records are frozen and replaced when
 * they change (src/ledger/sqlite-ledger.ts), so the same records mean the same answer: the
 * dashboard asks for status on every event, and the fit is cubic in the configurations.
 */
const lastFit = new WeakMap<
  ExperimentRecord,
  { records: readonly ExperimentRecord[]; key: string; result: PredictedBest | undefined }
>();

export function predictedBest(
  program: Program,
  exps: readonly ExperimentRecord[],
): PredictedBest | undefined {
  const key = JSON.stringify([program.search, program.objective, program.ladder?.rungs ?? null]);
  const first = exps[0];
  const hit = first ? lastFit.get(first) : undefined;
  const same = hit && hit.key === key && hit.records.length === exps.length;
  if (same && hit.records.every((e, i) => e === exps[i])) return hit.result;
  const result = predict(program, exps);
  if (first) lastFit.set(first, { records: [...exps], key, result });
  return result;
}

function predict(program: Program, exps: readonly ExperimentRecord[]): PredictedBest | undefined {
  const dims = makeDims(program.search);
  if (dims.length === 0) return undefined;
  const placed: { id: number; commit: string; obs: GpObservation }[] = [];
  for (const e of exps) {
    const params = e.params;
    if (!params || e.decision?.action === "reject") continue;
    // Placed when every knob active in it has a value the knob can take now (an inactive
    // conditional knob's value does not matter).
    const active = activeNames(dims, params);
    if (dims.some((d) => active.has(d.name) && !validValue(d, params[d.name]))) continue;
    const values = valuesAt(program, e, "full");
    // Undecided without a finished trial (a parallel slot is on it): not a failure, not data yet.
    if (!e.decision && values.length === 0) continue;
    placed.push({ id: e.n, commit: e.commit, obs: { params, values } });
  }
  const measured = placed.filter((p) => (p.obs.values?.length ?? 0) > 0);
  if (measured.length < MIN_CONFIGURATIONS) return undefined;
  const best = posteriorBest(
    program.search,
    placed.map((p) => p.obs),
    program.objective.direction,
  );
  if (!best) return undefined;
  const at = placed[best.index] as { id: number; commit: string };
  return {
    id: at.id,
    commit: at.commit,
    predicted: best.predicted,
    sd: best.sd,
    configurations: measured.length,
  };
}
