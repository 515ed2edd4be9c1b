import { mkdirSync, mkdtempSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createConfinement } from "../src/app/confinement.ts";
import { statusOf } from "../src/app/status.ts";
import { AutolabError } from "../src/core/errors.ts";
import type { Workspace } from "../src/core/workspace.ts";
import { parseProgram } from "../src/program/index.ts";

const program = (extra = "") =>
  parseProgram(
    `---
name: c
objective: { metric: score, direction: minimize }
run: { command: python3 train.py, evaluate: python3 evaluate.py, budget: 5s }
files:
  editable: [train.py]
  protected: [evaluate.py]
  holdout: [data/test.csv]
outputs: [out/model.json]
${extra}---
`,
    "program.md",
  );

const root = mkdtempSync(join(tmpdir(), "autolab-confine-"));
const paths = {
  repoRoot: root,
  programDir: root,
  stateDir: join(root, ".autolab"),
  gitCommonDir: join(root, ".git"),
};
const wt = join(root, ".autolab", "worktrees", "t");
const ws = { worktree: wt, projectDir: wt } as unknown as Workspace;
const noBwrap = {
  ok: false as const,
  reason: "bubblewrap (bwrap) is not installed",
  hint: "apt-get install bubblewrap",
};
const bwrap = { ok: true as const, version: "0.8.0", bwrap: "/usr/bin/bwrap" };

describe("the run's confinement", () => {
  it("without bubblewrap runs unsandboxed and says why; `required: true` refuses instead", () => {
    const c = createConfinement(program(), paths, noBwrap);
    expect(c.sandboxed).toBe(false);
    expect(c.description).toBe("unsandboxed: bubblewrap (bwrap) is not installed");
    expect(c.hint).toBe("apt-get install bubblewrap");
    expect(c.trial(ws, [], {})).toBeUndefined();
    try {
      createConfinement(program("sandbox: { required: true }\n"), paths, noBwrap);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(AutolabError);
      expect((err as AutolabError).code).toBe("SANDBOX_UNAVAILABLE");
      expect((err as AutolabError).message).toMatch(/requires a sandbox.*not installed/);
    }
  });

  it("a researcher sees neither the home nor the user's checkout (its tools there do), and has no network of the host's", () => {
    const home = mkdtempSync(join(tmpdir(), "autolab-confine-home-"));
    const tools = join(home, ".nvm", "versions", "node", "v24", "bin");
    const venv = join(root, ".venv", "bin");
    mkdirSync(tools, { recursive: true });
    mkdirSync(venv, { recursive: true });
    mkdirSync(wt, { recursive: true });
    writeFileSync(join(wt, "train.py"), "");
    const saved = { HOME: process.env.HOME, PATH: process.env.PATH };
    process.env.HOME = home;
    process.env.PATH = `${tools}:${venv}:${home}:/usr/bin`;
    try {
      const spec = createConfinement(program(), paths, bwrap).researcher(ws, [], [join(root, "logs")]);
      if (!spec) throw new Error("expected a sandbox");
      expect(spec.network).toBe(false);
      expect(spec.hidden).toEqual(expect.arrayContaining([home, root]));
      expect(spec.readOnly).not.toContain(root);
      // The PATH directories inside them, with the package tree around a bin/ (never the home itself).
      expect(spec.readOnly).toEqual(
        expect.arrayContaining([realpathSync(join(tools, "..")), realpathSync(join(venv, ".."))]),
      );
      expect(spec.readOnly).not.toContain(realpathSync(home));
      expect(spec.readOnly).toContain(wt);
    } finally {
      process.env.HOME = saved.HOME;
      process.env.PATH = saved.PATH;
    }
  });

  it("`sandbox: off` is an explicit choice, named as such", () => {
    const c = createConfinement(program("sandbox: off\n"), paths, bwrap);
    expect(c.description).toBe("unsandboxed: sandbox: off in program.md");
  });

  it("hides the holdout from the command, not from evaluate; the notebook and .git from both; no secret env", () => {
    process.env.AUTOLAB_TEST_SECRET = "s3cr3t";
    try {
      const c = createConfinement(program("sandbox: { env: [HF_HOME] }\n"), paths, bwrap);
      const specs = c.trial(ws, ["data"], { CUDA_VISIBLE_DEVICES: "1" });
      if (!specs) throw new Error("expected a sandbox");
      const { command, evaluate } = specs;
      expect(command.hidden).toEqual(
        expect.arrayContaining([paths.stateDir, paths.gitCommonDir, join(wt, "data/test.csv")]),
      );
      expect(evaluate.hidden).not.toContain(join(wt, "data/test.csv"));
      expect(evaluate.hidden).toEqual(expect.arrayContaining([paths.stateDir, paths.gitCommonDir]));
      expect(command.readOnly).toEqual(
        expect.arrayContaining([join(wt, ".git"), join(wt, "evaluate.py"), join(wt, "data")]),
      );
      expect(command.writable).toEqual([wt]);
      expect(command.network).toBe(false);
      expect(command.env.AUTOLAB_TEST_SECRET).toBeUndefined();
      expect(command.env.CUDA_VISIBLE_DEVICES).toBe("1");
      expect(command.env.TMPDIR).toBe("/tmp");
    } finally {
      delete process.env.AUTOLAB_TEST_SECRET;
    }
  });

  it("status marks a run unsandboxed when any session was", () => {
    const run = {
      id: 1,
      tag: "t",
      branch: "autolab/t",
      programPath: "/p/program.md",
      programName: "c",
      metric: "score",
      direction: "minimize" as const,
      baseCommit: "abc",
      protectedHashes: {},
      seed: 0,
      startedAt: "2026-11-24T00:00:00.000Z",
    };
    const session = (id: number, sandbox: string) => ({
      id,
      runId: 1,
      slots: 1,
      pid: 1,
      startedAt: run.startedAt,
      sandbox,
    });
    const s = statusOf(run, [], undefined, {
      sessions: [session(1, "unsandboxed: sandbox: off in program.md"), session(2, "bubblewrap 0.8.0")],
    });
    expect(s.sandbox).toBe("bubblewrap 0.8.0");
    expect(s.unsandboxed).toBe(true);
    expect(statusOf(run, [], undefined, { sessions: [session(1, "bubblewrap 0.8.0")] }).unsandboxed).toBe(
      false,
    );
  });
});
