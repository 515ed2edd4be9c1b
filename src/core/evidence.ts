/**
 * One evidence grade per experiment (issue #36), derived from what the notebook already holds:
 * how a result was measured, not only whether it was kept. From weakest to strongest:
 *
 *   unmeasured       no trial finished with a value
 *   exploratory      one trial: one measurement, on one seed
 *   repeated         two or more trials on different seeds
 *   holdout-checked  kept, repeated or not, with its holdout metric measured and no holdout alarm
 *   verified-alone   `finalize --verify` re-measured the change alone and it held
 *   invalidated      an alarm or a re-measurement contradicts it (tampering, a holdout alarm on a
 *                    keep since the experiment it names, `finalize --verify` found no gain alone)
 *
 * `selfReported` says separately that the value came from the experiment's own code (no
 * protected evaluate step): every grade of such a result rests on the researcher's honesty.
 */
import { formatCount } from "./format.ts";
import type { ExperimentRecord, NoteRecord } from "./ledger.ts";
import type { Alarm } from "./types.ts";

export type EvidenceGrade =
  | "unmeasured"
  | "exploratory"
  | "repeated"
  | "holdout-checked"
  | "verified-alone"
  | "invalidated";

export interface Evidence {
  grade: EvidenceGrade;
  /** Trials that finished with a value, and on how many distinct seeds. */
  trials: number;
  seeds: number;
  selfReported: boolean;
  /** Why the grade, in a few words ("3 trials on 3 seeds; holdout test_bpb measured"). */
  why: string;
}

/** The note `finalize --verify` writes on an experiment (src/app/finalize.ts VERIFY_NOTE). */
const VERIFIED = "finalize --verify: ";

export interface EvidenceInput {
  /** The run's holdout metric names (program.md metrics.holdout). */
  holdout: readonly string[];
  /** The run's notes (tamper alarms, finalize --verify verdicts), by experiment id. */
  notes: readonly NoteRecord[];
  /** The run's alarms (status.alarms): a holdout alarm names the kept experiments it doubts. */
  alarms: readonly Alarm[];
}

export function evidenceOf(e: ExperimentRecord, input: EvidenceInput): Evidence {
  const ok = e.trials.filter((t) => t.result?.status === "ok");
  const seeds = new Set(ok.map((t) => t.seed)).size;
  const selfReported = ok.some((t) => t.result?.selfReported === true);
  const mine = input.notes.filter((n) => n.experimentId === e.id);
  const grade = (g: EvidenceGrade, why: string): Evidence => ({
    grade: g,
    trials: ok.length,
    seeds,
    selfReported,
    why,
  });
  const measured = `${formatCount(ok.length, "trial")} on ${formatCount(seeds, "seed")}`;
  const tamper = mine.find((n) => n.text.startsWith("ALARM tamper"));
  if (tamper) return grade("invalidated", "a tampering alarm");
  const verify = mine.filter((n) => n.text.startsWith(VERIFIED)).at(-1);
  if (verify && /holds alone$/.test(verify.text))
    return grade("verified-alone", `${measured}; re-measured alone by finalize --verify`);
  if (verify && /NO GAIN ALONE/.test(verify.text))
    return grade("invalidated", "finalize --verify found no gain alone");
  if (ok.length === 0) return grade("unmeasured", "no trial finished with a value");
  const kept = e.decision?.action === "keep";
  // A holdout alarm doubts the keeps since the experiment it names ("… since #3 …").
  const doubted = input.alarms.some((a) => {
    if (!/^(overfitting|leakage):/.test(a.kind)) return false;
    const since = /since #(\d+)/.exec(a.reason);
    return since !== null && e.n >= Number(since[1]);
  });
  if (kept && doubted) return grade("invalidated", `${measured}; a holdout alarm names it`);
  const withHoldout = input.holdout.filter((h) => ok.some((t) => Number.isFinite(t.result?.metrics[h])));
  if (kept && e.n !== 0 && withHoldout.length > 0)
    // Names stay out: a holdout's name is for people (views redact holdouts by name and value).
    return grade("holdout-checked", `${measured}; holdout measured`);
  return grade(ok.length > 1 && seeds > 1 ? "repeated" : "exploratory", measured);
}

/** The grade as shown in a column, with the self-reported mark ("" for an ungraded row). */
export function evidenceLabel(ev: Evidence | undefined): string {
  if (!ev) return "";
  return `${ev.grade}${ev.selfReported ? " (self-reported)" : ""}`;
}
