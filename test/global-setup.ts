/**
 * One temporary directory per `npm test`: every test, and every process a test starts (the
 * CLI, git, trials), makes its temporary files under it through TMPDIR, and it is removed when
 * the run ends — so a test that forgets its cleanup, or a process killed before it could clean
 * up, leaves nothing in the system's temp directory (issue #11: ~50 were left per run).
 * test/temp-dir.test.ts checks that the tests see it.
 */
import { chmodSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export default function setup(): () => void {
  // Each vitest project (unit, e2e, agents) runs this too: one directory for the whole run, not
  // one nested in another (nested paths grew past the 108 bytes of a unix socket's path:
  // chromium's profile socket).
  if (process.env.AUTOLAB_TEST_TMPDIR) return () => {};
  const previous = process.env.TMPDIR;
  const base = mkdtempSync(join(tmpdir(), "autolab-tests-"));
  // Readable like the system's temp dir: a test may run a command as another user (nobody).
  chmodSync(base, 0o755);
  process.env.TMPDIR = base;
  process.env.AUTOLAB_TEST_TMPDIR = base;
  // The machine-wide knowledge store (prior work) of every run a test starts: never the real home's.
  const previousKnowledge = process.env.AUTOLAB_KNOWLEDGE;
  process.env.AUTOLAB_KNOWLEDGE = join(base, "knowledge", "knowledge.db");
  return () => {
    if (previous === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = previous;
    if (previousKnowledge === undefined) delete process.env.AUTOLAB_KNOWLEDGE;
    else process.env.AUTOLAB_KNOWLEDGE = previousKnowledge;
    let left = 0;
    try {
      left = readdirSync(base).length;
    } catch {}
    rmSync(base, { recursive: true, force: true, maxRetries: 3 });
    if (left > 0) console.log(`[global-setup] removed ${left} temporary entries the tests left in ${base}`);
  };
}
