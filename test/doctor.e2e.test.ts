// `autolab doctor` as a user runs it: on a toy project (nothing to fix), on a directory without
// program.md, and on a project whose researcher lacks its key. The checks themselves, against
// fake machines: doctor.test.ts.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createToyProject, runCli, stackLines } from "./helpers/toy-project.ts";

const cleanups: (() => void)[] = [];
afterAll(() => {
  for (const c of cleanups) c();
});

describe("autolab doctor", () => {
  it("a toy project: every line ok or warn, exit code 0", async () => {
    const toy = createToyProject();
    cleanups.push(toy.cleanup);
    const r = await runCli(["doctor"], { cwd: toy.dir });
    expect(r.stderr).toBe("");
    expect(r.code, r.stdout).toBe(0);
    const lines = r.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^ok {4}git: git \d+\.\d+/);
    expect(r.stdout).toMatch(/^ok {4}node: Node\.js \d+\.\d+\.\d+ \(autolab needs >=24\)$/m);
    expect(r.stdout).toMatch(/^(ok|warn) {2,4}sandbox: /m);
    expect(r.stdout).toContain(`ok    program: ${join(toy.dir, "program.md")} (toy)`);
    expect(r.stdout).toContain("ok    researcher builtin (agent): the built-in optimizer");
    expect(r.stdout).toMatch(/^ok {4}notebook: none yet/m);
    expect(r.stdout).toMatch(/^(ok|warn) {2,4}gpu: /m);
    expect(lines.at(-1)).toMatch(/^Nothing to fix/);
    // GIT_CONFIG_GLOBAL=/dev/null in the tests: no identity, a warning with its fix.
    expect(r.stdout).toMatch(
      /^warn {2}git identity: no git identity.*\n {6}fix: git config --global user\.name/m,
    );
  });

  it("a directory without program.md: FAIL with the fix, exit code 1, no stack", async () => {
    const dir = mkdtempSync(join(tmpdir(), "autolab-doctor-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const r = await runCli(["doctor", dir], { cwd: tmpdir() });
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(
      `FAIL  program: no program.md at ${join(dir, "program.md")}\n      fix: Create one: \`autolab init\``,
    );
    expect(r.stdout).not.toMatch(/researcher/);
    expect(r.stdout.trim().split("\n").at(-1)).toMatch(/^1 problem to fix/);
    expect(stackLines(r.stdout + r.stderr)).toEqual([]);
  });

  it("a researcher without its key: FAIL naming the variable; after a run the notebook is counted", async () => {
    const toy = createToyProject({
      agent: "{ backend: llm, provider: anthropic, model: claude-sonnet-4-5 }",
    });
    cleanups.push(toy.cleanup);
    const env = { ANTHROPIC_API_KEY: "" };
    const r = await runCli(["doctor", toy.dir], { cwd: tmpdir(), env });
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(
      /^FAIL {2}researcher llm \(agent\): .*ANTHROPIC_API_KEY.*\n {6}fix: export ANTHROPIC_API_KEY=/m,
    );

    const run = await runCli(["run", "-n", "0", "-a", "builtin"], { cwd: toy.dir });
    expect(run.code, run.stderr).toBe(0);
    const after = await runCli(["doctor"], { cwd: toy.dir, env: { ANTHROPIC_API_KEY: "sk-test" } });
    expect(after.stdout).toMatch(
      /^ok {4}researcher llm \(agent\): provider anthropic, model claude-sonnet-4-5$/m,
    );
    expect(after.stdout).toMatch(/^ok {4}notebook: .*lab\.db: 1 run$/m);
    expect(after.code, after.stdout).toBe(0);
  });
});
