import { isAutolabError } from "../core/errors.ts";

/**
 * Prints an error for a person and returns the exit code. AutolabErrors are expected (bad
 * input, a broken environment): message and fix, no stack. A full disk names itself. Anything
 * else is a bug in autolab and keeps its stack.
 */
export function handleError(err: unknown): number {
  if (isAutolabError(err)) {
    process.stderr.write(`autolab: ${err.message}\n`);
    if (err.hint) process.stderr.write(`  fix: ${err.hint}\n`);
    return 1;
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
    `autolab: internal error — please report it with the text below.\n${(err as Error)?.stack ?? String(err)}\n`,
  );
  return 70;
}
