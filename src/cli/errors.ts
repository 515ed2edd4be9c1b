import { ERROR_CODES, exitCodeOf } from "../core/error-codes.ts";
import { isAutolabError } from "../core/errors.ts";
import { damagedNotebook, isDamaged } from "../ledger/open-notebook.ts";
import { safeText } from "./safe-text.ts";

/**
 * Prints an error for a person and returns the exit code. AutolabErrors are expected (bad
 * input, a broken environment): message and fix, no stack. A full disk and a damaged notebook
 * name themselves. Anything else is a bug in autolab and keeps its stack.
 */
export function handleError(error: unknown): number {
  // A damaged page can surface in any query, long after the notebook opened fine.
  const err = isDamaged(error) ? damagedNotebook(undefined, error) : error;
  // An invariant of autolab broken (error-codes.ts kind "bug") is reported as the bug it is.
  if (isAutolabError(err) && ERROR_CODES[err.code].kind !== "bug") {
    // Messages may quote researcher text or a trial's log tail (a failed baseline).
    process.stderr.write(`autolab: ${safeText(err.message)}\n`);
    if (err.hint) process.stderr.write(`  fix: ${safeText(err.hint)}\n`);
    // A bad flag value is a bad command line (exit 2), like an unknown flag: error-codes.ts.
    return exitCodeOf(err.code);
  }
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code === "ENOSPC" || code === "SQLITE_FULL" || /disk is full|no space left/i.test(String(err))) {
    process.stderr.write(
      "autolab: the disk is full; nothing after the last recorded step was lost.\n" +
        "  fix: free some space (old logs live in .autolab/logs) and run `autolab run` again to resume.\n",
    );
    return 1;
  }
  process.stderr.write(
    `autolab: internal error — please report it with the text below.\n${safeText((err as Error)?.stack ?? String(err))}\n`,
  );
  return 70;
}
