import { existsSync } from "node:fs";
import { join } from "node:path";
import { openLedger, selectRun } from "../app/lab.ts";
import { writeReport } from "../app/report.ts";
import { directivesOf } from "../core/directives.ts";
import { AutolabError } from "../core/errors.ts";
import type { Program } from "../core/types.ts";
import { loadProgram } from "../program/index.ts";
import { safeText } from "./safe-text.ts";
import { shownPath } from "./shown-path.ts";

export interface ReportFlags {
  program?: string;
  tag?: string;
  out?: string;
  holdout?: boolean;
  force?: boolean;
}

/** Every file a report may write into its directory (src/app/report.ts). */
const REPORT_FILES = ["report.md", "progress.svg", "progress.png", "front.svg", "front.png"];

/** `autolab report`: report.md, progress.svg and progress.png for a run. */
export function reportCommand(flags: ReportFlags): void {
  const { ledger, stateDir } = openLedger(flags.program);
  try {
    const run = selectRun(ledger, flags.tag);
    const out = flags.out ?? join(stateDir, "reports", run.tag);
    // The default directory is autolab's own; one the user names may hold files of theirs.
    if (flags.out !== undefined && !flags.force) {
      const there = REPORT_FILES.filter((f) => existsSync(join(out, f)));
      if (there.length) {
        throw new AutolabError(
          "OUTPUT_EXISTS",
          `${join(out, there[0] as string)} exists: autolab does not overwrite a file it did not make.`,
          `Add --force to replace ${there.join(", ")} in ${out}, or give another directory (-o).`,
        );
      }
    }
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
