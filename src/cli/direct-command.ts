/**
 * `autolab direct "<text>"`: steer a running lab (issue #36). The directive is a note in the
 * notebook; the running harness reads it with the next researcher's context (views.ts), so
 * nothing restarts and program.md stays as committed. `--list` shows them, `--withdraw <id>`
 * ends one.
 */
import { openLedger, selectRun } from "../app/lab.ts";
import { directiveLine, directiveNote, directivesOf, withdrawalNote } from "../core/directives.ts";
import { AutolabError } from "../core/errors.ts";
import { handleError } from "./errors.ts";
import { safeText } from "./safe-text.ts";

/** Longer than this is a document, not a directive: put it in program.md. */
const MAX_CHARS = 2000;

export function directCommand(
  text: string | undefined,
  flags: { program?: string; tag?: string; list?: boolean; withdraw?: number },
): void {
  try {
    const { ledger } = openLedger(flags.program);
    try {
      const run = selectRun(ledger, flags.tag);
      const all = directivesOf(ledger.listNotes(run.id));
      const out: string[] = [];
      if (flags.withdraw !== undefined) {
        const d = all[flags.withdraw - 1];
        if (!d || d.withdrawnAt !== undefined) {
          const active = all.filter((x) => x.withdrawnAt === undefined).map((x) => x.id);
          throw new AutolabError(
            "BAD_FLAG",
            `--withdraw ${flags.withdraw}: run ${run.tag} has no directive ${flags.withdraw} in force.`,
            active.length
              ? `Directives in force: ${active.join(", ")} (autolab direct --list).`
              : "No directive is in force.",
          );
        }
        ledger.addNote(run.id, null, withdrawalNote(d.id));
        out.push(`Directive ${d.id} withdrawn: the next researchers of run ${run.tag} no longer read it.`);
      } else if (text !== undefined) {
        const t = text.trim();
        if (!t || t.length > MAX_CHARS) {
          throw new AutolabError(
            "BAD_FLAG",
            t ? `the directive is ${t.length} characters; at most ${MAX_CHARS}.` : "the directive is empty.",
            t
              ? "Say it in a few sentences, or put longer guidance in program.md's research directions."
              : 'Give the text: autolab direct "try smaller learning rates first".',
          );
        }
        ledger.addNote(run.id, null, directiveNote(t));
        out.push(
          `Directive ${all.length + 1} recorded for run ${run.tag}: the next researchers read it with their context (autolab context shows it). Withdraw it: autolab direct --withdraw ${all.length + 1}`,
        );
      } else if (!flags.list) {
        throw new AutolabError(
          "BAD_FLAG",
          "autolab direct needs the directive's text, --list or --withdraw <id>.",
          'E.g. autolab direct "focus on the optimizer; leave the data pipeline alone".',
        );
      }
      if (flags.list || out.length === 0) {
        if (all.length === 0) out.push(`Run ${run.tag} has no directives.`);
        for (const d of all) out.push(directiveLine(d));
      }
      process.stdout.write(safeText(`${out.join("\n")}\n`));
    } finally {
      ledger.close();
    }
  } catch (err) {
    process.exitCode = handleError(err);
  }
}
