import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from "node:fs";
import { AutolabError } from "../core/errors.ts";

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * One harness per run. A lock left by a harness killed with -9 names a dead pid and is taken
 * over; a live one is a clear error instead of two loops fighting over the branch.
 */
export function acquireLock(path: string, what: string): () => void {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, "wx");
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => {
        try {
          unlinkSync(path);
        } catch {
          // already gone
        }
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const pid = Number(readFileSync(path, "utf8").trim());
      if (pid && pid !== process.pid && alive(pid)) {
        throw new AutolabError(
          "RUN_LOCKED",
          `${what} is already being run by process ${pid}.`,
          `Wait for it, stop it (kill ${pid}), or use another --tag.`,
        );
      }
      unlinkSync(path);
    }
  }
  throw new AutolabError("RUN_LOCKED", `could not lock ${path}.`);
}

/** The pid of the live process holding the lock at `path`, if any (viewers use it to tell running from interrupted). */
export function lockHolder(path: string): number | undefined {
  try {
    const pid = Number(readFileSync(path, "utf8").trim());
    return pid && alive(pid) ? pid : undefined;
  } catch {
    return undefined;
  }
}
