/** `autolab summary [--since 8h]`: the morning summary (src/app/summary.ts). Read-only. */
import { evidenceByN } from "../app/evidence.ts";
import { openLedger, selectRun } from "../app/lab.ts";
import { summaryMarkdown, summaryOf } from "../app/summary.ts";
import { handleError } from "./errors.ts";
import { safeJson, safeText } from "./safe-text.ts";
import { programOf, statusWith } from "./views.ts";

/** Default window: a night. */
export const DEFAULT_SINCE_MS = 8 * 3600_000;

export function summaryCommand(flags: {
  program?: string;
  tag?: string;
  since?: number;
  json?: boolean;
}): void {
  try {
    const { ledger, stateDir } = openLedger(flags.program);
    try {
      const run = selectRun(ledger, flags.tag);
      const exps = ledger.listExperiments(run.id);
      const program = programOf(run);
      const notes = ledger.listNotes(run.id);
      const status = statusWith(run, exps, { ledger, stateDir }, program, notes);
      const now = new Date();
      const since = new Date(now.getTime() - (flags.since ?? DEFAULT_SINCE_MS));
      const s = summaryOf(run, exps, status, { since, now }, evidenceByN(run, exps, notes, program));
      if (flags.json) process.stdout.write(`${safeJson(JSON.stringify(s, null, 2))}\n`);
      else process.stdout.write(safeText(summaryMarkdown(s)));
    } finally {
      ledger.close();
    }
  } catch (err) {
    process.exitCode = handleError(err);
  }
}
