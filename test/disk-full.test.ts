import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

const CLI = resolve(dirname(fileURLToPath(import.meta.url)), "..", "src", "cli", "main.ts");
const mnt = mkdtempSync(join(tmpdir(), "autolab-full-"));
// A 3 MB tmpfs makes a real full disk; that needs root (CI and these machines run as root).
const mounted = spawnSync("mount", ["-t", "tmpfs", "-o", "size=3m", "tmpfs", mnt]).status === 0;

afterAll(() => {
  if (mounted) spawnSync("umount", [mnt]);
  rmSync(mnt, { recursive: true, force: true });
});

const cli = (cwd: string, ...args: string[]) =>
  spawnSync(process.execPath, [CLI, ...args], { cwd, encoding: "utf8", timeout: 60_000 });

describe.skipIf(!mounted)("a full disk", () => {
  it("stops with a message, loses nothing, and resumes once space is freed", () => {
    const dir = join(mnt, "p");
    mkdirSync(dir);
    // While the flag file exists (in a declared cache: kept between trials, and visible in the
    // sandbox, unlike the host's /tmp), a trial fills the disk through that cache.
    const flag = join(dir, ".autolab", "worktrees", "full", "cache", "fill-now");
    const hog = join(dir, ".autolab", "worktrees", "full", "cache", "hog.bin");
    writeFileSync(
      join(dir, "train.mjs"),
      `import { existsSync, writeFileSync } from "node:fs";
const LR = 0.5;
if (existsSync("cache/fill-now")) { try { writeFileSync("cache/hog.bin", Buffer.alloc(4 << 20)); } catch {} }
console.log("score: " + (Math.log10(LR) + 2) ** 2);
`,
    );
    writeFileSync(
      join(dir, "program.md"),
      "---\nname: full\nobjective: { metric: score, direction: minimize }\nrun: { command: node train.mjs, budget: 5s }\nfiles: { editable: [train.mjs] }\nsandbox: { caches: [cache] }\nsearch: { LR: { low: 0.0001, high: 1, log: true } }\n---\n",
    );
    const git = (...a: string[]) =>
      execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@l", ...a], { cwd: dir });
    git("init", "-q", "-b", "main");
    git("add", "-A");
    git("commit", "-qm", "init");

    expect(cli(dir, "run", "-t", "full", "-n", "2").status).toBe(0);
    writeFileSync(flag, "");
    const full = cli(dir, "run", "-t", "full", "-n", "5");
    expect(full.status).toBe(1);
    expect(full.stderr).toMatch(/disk is full/);
    expect(full.stderr).toMatch(/run `autolab run` again to resume/);
    expect(full.stderr).not.toMatch(/\n\s+at /);

    rmSync(hog, { force: true });
    rmSync(flag, { force: true });
    const again = cli(dir, "run", "-t", "full", "-n", "5");
    expect(again.status).toBe(0);
    const log = JSON.parse(cli(dir, "log", "-t", "full", "--json").stdout) as {
      id: number;
      decision: string;
    }[];
    expect(log.map((e) => e.id)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(log.every((e) => e.decision !== "pending")).toBe(true);
  });
});
