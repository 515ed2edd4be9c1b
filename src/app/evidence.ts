/** Evidence grades of a run's experiments (src/core/evidence.ts), as every view reads them. */
import { type Evidence, evidenceOf } from "../core/evidence.ts";
import type { ExperimentRecord, NoteRecord, RunRecord } from "../core/ledger.ts";
import type { Program } from "../core/types.ts";
import { alarmsOf } from "./alarms.ts";
import { holdoutOf } from "./experiment-json.ts";

/** By experiment number. `program` (when it still parses) gives the holdout alarms. */
export function evidenceByN(
  run: RunRecord,
  exps: readonly ExperimentRecord[],
  notes: readonly NoteRecord[],
  program?: Program,
): Map<number, Evidence> {
  const input = {
    holdout: holdoutOf(run),
    notes,
    alarms: program ? alarmsOf(program, [...exps]) : [],
  };
  return new Map(exps.map((e) => [e.n, evidenceOf(e, input)]));
}
