import { spawnSync } from "node:child_process";
import { tmpdir } from "node:os";
import { describe, expect, it } from "vitest";

// Issue #11: tests left ~50 directories in the system temp directory per run. Every test's
// temporary files go under one directory per run (test/global-setup.ts), removed at the end.
describe("temporary files of the test run", () => {
  const base = process.env.AUTOLAB_TEST_TMPDIR;

  it("go under the run's own directory, in the tests and in the processes they start", () => {
    expect(base, "vitest.config.ts must name test/global-setup.ts").toBeTruthy();
    expect(tmpdir()).toBe(base);
    const child = spawnSync(process.execPath, ["-e", "process.stdout.write(require('node:os').tmpdir())"], {
      encoding: "utf8",
    });
    expect(child.stdout).toBe(base);
    const sh = spawnSync("sh", ["-c", 'd=$(mktemp -d) && printf %s "$d" && rmdir "$d"'], {
      encoding: "utf8",
    });
    expect(sh.stdout.startsWith(`${base}/`)).toBe(true);
  });

  it("hold the knowledge store (prior work) of every run a test starts, never the real home's", () => {
    expect(process.env.AUTOLAB_KNOWLEDGE?.startsWith(`${base}/`)).toBe(true);
  });
});
