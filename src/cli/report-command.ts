import { join } from "node:path";
import { openLedger, selectRun } from "../app/lab.ts";
import { writeReport } from "../app/report.ts";
import { directivesOf } from "../core/directives.ts";
import type { Program } from "../core/types.ts";
import { loadProgram } from "../program/index.ts";
import { safeText } from "./safe-text.ts";
import { shownPath } from "./shown-path.ts";

export interface ReportFlags {
  program?: string;
  tag?: string;
  out?: string;
  holdout?: boolean;
}

/** `autolab report`: report.md, progress.svg and progress.png for a run. */
export function reportCommand(flags: ReportFlags): void {
  const { ledger, stateDir } = openLedger(flags.program);
  try {
    const run = selectRun(ledger, flags.tag);
    const out = flags.out ?? join(stateDir, "reports", run.tag);
    // The front needs the objectives; a program that cannot be read still gets the rest.
    let program: Program | undefined;
    try {
      program = loadProgram(run.programPath);
    } catch {
      program = undefined;
    }
    const files = writeReport(run, ledger.listExperiments(run.id), out, {
      holdout: flags.holdout ?? false,
      sessions: ledger.listSessions(run.id),
      imported: ledger.listImportedResults(),
      ...(program ? { program } : {}),
      advice: ledger.listAdvice(run.id),
      directives: directivesOf(ledger.listNotes(run.id)),
      notes: ledger.listNotes(run.id),
    });
    const show = shownPath;
    process.stdout.write(
      safeText(
        `Report of run ${run.tag}:\n  ${show(files.markdown)}\n  ${show(files.svg)}\n  ${show(files.png)}\n${files.frontSvg && files.frontPng ? `  ${show(files.frontSvg)}\n  ${show(files.frontPng)}\n` : ""}`,
      ),
    );
  } finally {
    ledger.close();
  }
}
