/**
 * program.md's files: lists as users of other tools write them: a file, a directory (with or
 * without its trailing slash) or a glob. One matcher (src/core/file-patterns.ts) decides
 * everywhere; these tests attack it through the real harness (real git, real trials, the real
 * sandbox where there is one): an edit outside an editable glob, a new file in a protected
 * directory, a researcher reaching for the files a holdout glob covers.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createFileTools, type ToolState } from "../src/agents/llm/file-tools.ts";
import { createConfinement } from "../src/app/confinement.ts";
import { createRun } from "../src/app/create-run.ts";
import { AutolabError } from "../src/core/errors.ts";
import { fileMatcher, fileRules, matchedFiles, matchedPaths } from "../src/core/file-patterns.ts";
import type { Workspace } from "../src/core/workspace.ts";
import { parseProgram } from "../src/program/index.ts";
import { probeSandbox } from "../src/runner/sandbox.ts";
import { runScripted } from "./helpers/scripted-run.ts";

const roots: string[] = [];
afterAll(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

const git = (cwd: string, ...args: string[]) =>
  execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@localhost", ...args], {
    cwd,
    encoding: "utf8",
  }).trim();

const HOLDOUT_A = "HOLDOUT-A-2718281828";
const HOLDOUT_B = "HOLDOUT-B-1414213562";

/**
 * A project with its code in directories: work/impl.mjs holds the knob X (the score), work/
 * extra.mjs a second module, lib/util.mjs a helper nobody may edit, eval/ the runner and the
 * evaluator, data/test-a.csv and data/test-b.csv the holdout data (read by the evaluator only).
 */
function project(files: string, extra = "", more: Record<string, string> = {}): string {
  const root = mkdtempSync(join(tmpdir(), "autolab-patterns-"));
  roots.push(root);
  const dir = join(root, "project");
  for (const d of ["work", "lib", "eval", "data"]) mkdirSync(join(dir, d), { recursive: true });
  writeFileSync(join(dir, "work", "impl.mjs"), "export const X = 5;\n");
  writeFileSync(join(dir, "work", "extra.mjs"), "export const Y = 1;\n");
  writeFileSync(join(dir, "lib", "util.mjs"), "export const half = (x) => x / 2;\n");
  writeFileSync(
    join(dir, "eval", "run.mjs"),
    `import { writeFileSync } from "node:fs";\nimport { X } from "../work/impl.mjs";\nwriteFileSync("out.txt", String(X));\n`,
  );
  writeFileSync(
    join(dir, "eval", "evaluate.mjs"),
    `import { readFileSync } from "node:fs";\nconst x = Number(readFileSync("out.txt", "utf8"));\nconst h = readFileSync("data/test-a.csv", "utf8").length;\nconsole.log(\`score: \${x}\`);\nconsole.log(\`holdout_len: \${h}\`);\n`,
  );
  writeFileSync(join(dir, "data", "test-a.csv"), `x\n${HOLDOUT_A}\n`);
  writeFileSync(join(dir, "data", "test-b.csv"), `x\n${HOLDOUT_B}\n`);
  writeFileSync(join(dir, "data", "train.csv"), "x\n1\n");
  writeFileSync(join(dir, ".gitignore"), "out.txt\n");
  for (const [f, content] of Object.entries(more)) writeFileSync(join(dir, f), content);
  writeFileSync(
    join(dir, "program.md"),
    `---
name: patterns
objective: { metric: score, direction: minimize }
run:
  command: node eval/run.mjs
  evaluate: node eval/evaluate.mjs
  budget: 10s
files:
${files}
outputs: [out.txt]
metrics: { holdout: [holdout_len] }
acceptance: greedy
${extra}---
Lower X.
`,
  );
  git(dir, "init", "-q", "-b", "main");
  git(dir, "add", "-A");
  git(dir, "commit", "-qm", "init");
  return dir;
}

const setX = (x: number) => ({ "work/impl.mjs": `export const X = ${x};\n` });

describe("the matcher", () => {
  it("covers files, directories (with or without /) and globs, anchored at the project root", () => {
    const m = (patterns: string[], path: string) => fileMatcher(patterns)(path);
    expect(m(["work"], "work/impl.mjs")).toBe(true);
    expect(m(["work"], "workshop/a.mjs")).toBe(false);
    expect(m(["*.py"], "train.py")).toBe(true);
    expect(m(["*.py"], "src/train.py")).toBe(false);
    expect(m(["src/**/*.py"], "src/train.py")).toBe(true);
    expect(m(["src/**/*.py"], "src/a/b/train.py")).toBe(true);
    expect(m(["src/**/*.py"], "lib/train.py")).toBe(false);
    expect(m(["cfg/*.yaml"], "cfg/a.yaml")).toBe(true);
    expect(m(["cfg/*.yaml"], "cfg/sub/a.yaml")).toBe(false);
    expect(m(["cfg/*.{yaml,yml}"], "cfg/a.yml")).toBe(true);
    expect(m(["data/test-?.csv"], "data/test-a.csv")).toBe(true);
    expect(m(["data/[ab].csv"], "data/c.csv")).toBe(false);
    expect(m(["train.py"], "trainxpy")).toBe(false);
  });

  it("never matches outside the project, nor .git or .autolab, whatever the pattern", () => {
    const all = fileMatcher(["**", "*", "."]);
    for (const p of [
      "../x",
      "../../etc/passwd",
      "/etc/passwd",
      ".git/config",
      "sub/.git/HEAD",
      ".autolab/lab.db",
    ]) {
      expect(all(p), p).toBe(false);
    }
    expect(all("a/b.txt")).toBe(true);
  });

  it("lets protected and holdout beat an editable glob", () => {
    const rules = fileRules({ editable: ["**/*.mjs"], protected: ["eval"], holdout: ["data/test-*"] });
    expect(rules.editable("work/impl.mjs")).toBe(true);
    expect(rules.editable("eval/evaluate.mjs")).toBe(false);
    expect(rules.editable("eval/new.mjs")).toBe(false);
    expect(rules.editable("data/test-x.mjs")).toBe(false);
  });

  it("expands against the files there: a glob's matches, a plain path as written", () => {
    const dir = project("  editable: [work/]");
    expect(matchedPaths(dir, ["data/test-*", "eval", "nope.txt"])).toEqual([
      "data/test-a.csv",
      "data/test-b.csv",
      "eval",
      "nope.txt",
    ]);
    expect(matchedFiles(dir, ["work/", "**/util.mjs"])).toEqual([
      "lib/util.mjs",
      "work/extra.mjs",
      "work/impl.mjs",
    ]);
  });
});

describe("validation of files: entries", () => {
  const parse = (files: string, extra = "") =>
    parseProgram(
      `---\nname: v\nobjective: { metric: score, direction: minimize }\nrun: { command: node x.mjs, budget: 5s }\nfiles:\n${files}\n${extra}---\n`,
      "program.md",
    );
  const problems = (files: string, extra = ""): string => {
    try {
      parse(files, extra);
    } catch (err) {
      expect(err).toBeInstanceOf(AutolabError);
      expect((err as AutolabError).code).toBe("PROGRAM_INVALID");
      return (err as AutolabError).message;
    }
    throw new Error("expected PROGRAM_INVALID");
  };

  it("accepts directories and globs, normalized", () => {
    const p = parse('  editable: ["work/", "./src/**/*.py", "cfg/*.{yaml,yml}"]\n  holdout: ["data/test-*"]');
    expect(p.files.editable).toEqual(["work", "src/**/*.py", "cfg/*.{yaml,yml}"]);
    expect(p.files.holdout).toEqual(["data/test-*"]);
  });

  it("refuses patterns that leave the project or reach into .git or .autolab, naming them", () => {
    expect(problems('  editable: ["../x/*.py"]')).toMatch(
      /files\.editable\[0\]: "\.\.\/x\/\*\.py" leaves the project/,
    );
    expect(problems('  editable: ["/etc/*"]')).toMatch(/"\/etc\/\*" is absolute/);
    expect(problems('  editable: ["{..,src}/*.py"]')).toMatch(/leaves the project/);
    expect(problems('  editable: [train.py]\n  protected: [".git/hooks/*"]')).toMatch(
      /files\.protected\[0\]: "\.git\/hooks\/\*" names \.git\//,
    );
    expect(problems('  editable: [".autolab/"]')).toMatch(/names \.autolab\//);
  });

  it("refuses broken glob syntax, and globs where only paths make sense (outputs)", () => {
    expect(problems('  editable: ["src/[ab.py"]')).toMatch(/has a "\[" without its "\]"/);
    expect(problems('  editable: ["src/{a,b.py"]')).toMatch(/has a "\{" without its "\}"/);
    expect(problems('  editable: ["src/a**.py"]')).toMatch(/\*\* must be a whole path segment/);
    expect(problems("  editable: [train.py]", 'outputs: ["out/*.json"]\n')).toMatch(
      /outputs\[0\]: "out\/\*\.json" is a glob/,
    );
  });

  it("a glob or directory matching no committed file is a clear error at the start of a run", async () => {
    const dir = project('  editable: ["work/*.mjx"]');
    await expect(createRun({ program: dir, tag: "t", maxExperiments: 0 })).rejects.toMatchObject({
      code: "FILE_MISSING",
      message: expect.stringContaining(
        'the glob "work/*.mjx", which matches no file in the repository (a typo?)',
      ),
    });
    const empty = project('  editable: [work/, "scratch/"]');
    await expect(createRun({ program: empty, tag: "t", maxExperiments: 0 })).rejects.toMatchObject({
      code: "FILE_MISSING",
      message: expect.stringContaining("scratch, which does not exist"),
      hint: expect.stringContaining("git keeps no empty directory"),
    });
  });
});

describe("an editable directory or glob in a run", () => {
  it("an editable directory (work/) takes edits of the files in it", async () => {
    const dir = project("  editable: [work/]\n  protected: [eval/]");
    const { experiments } = await runScripted(dir, [{ hypothesis: "X 5 → 3", edits: setX(3) }]);
    expect(experiments[1]?.decision?.action, experiments[1]?.decision?.reason).toBe("keep");
    expect(experiments[1]?.decision?.metric).toBe(3);
  });

  it("attack: an edit outside an editable glob is rejected, unrun; the glob's own files are fine", async () => {
    const dir = project('  editable: ["work/*.mjs"]\n  protected: [eval/]');
    const { experiments } = await runScripted(dir, [
      {
        hypothesis: "and halve in the helper",
        edits: { ...setX(3), "lib/util.mjs": "export const half = () => 0;\n" },
      },
      { hypothesis: "X 5 → 4", edits: setX(4) },
    ]);
    const sneaky = experiments[1];
    expect(sneaky?.decision?.action).toBe("reject");
    expect(sneaky?.decision?.reason).toMatch(
      /scope: changed non-editable file lib\/util\.mjs \(editable: work\/\*\.mjs\)/,
    );
    expect(sneaky?.trials).toHaveLength(0);
    expect(experiments[2]?.decision?.action).toBe("keep");
  });

  it("attack: a new file in a protected directory is rejected, even where an editable glob covers it", async () => {
    const dir = project('  editable: ["**/*.mjs"]\n  protected: [eval/]');
    const { experiments } = await runScripted(dir, [
      {
        hypothesis: "a helper next to the evaluator",
        edits: { ...setX(3), "eval/helper.mjs": "export {};\n" },
      },
      { hypothesis: "rewrite the evaluator", edits: { "eval/evaluate.mjs": 'console.log("score: -1");\n' } },
      { hypothesis: "X 5 → 4", edits: setX(4) },
    ]);
    expect(experiments[1]?.decision?.action).toBe("reject");
    expect(experiments[1]?.decision?.reason).toMatch(/changed protected file eval\/helper\.mjs/);
    expect(experiments[2]?.decision?.action).toBe("reject");
    expect(experiments[2]?.decision?.reason).toMatch(/changed protected file eval\/evaluate\.mjs/);
    expect(experiments[3]?.decision?.action).toBe("keep");
  });

  it("attack: a trial that drops a file into a protected directory is caught as tampering", async () => {
    // Unsandboxed, so the file can be written at all (in a sandbox eval/ is read-only).
    const dir = project('  editable: ["work/*.mjs"]\n  protected: [eval/]', "sandbox: off\n");
    const plant = (old: string) =>
      `import { writeFileSync } from "node:fs";\nwriteFileSync("eval/planted.mjs", "export {};\\n");\n${old.replace("5", "2")}`;
    const { experiments } = await runScripted(dir, [
      { hypothesis: "plant", edits: { "work/impl.mjs": plant } },
    ]);
    // work/impl.mjs is imported by the command, so the plant runs inside the trial.
    const trial = experiments[1]?.trials[0]?.result;
    expect(trial?.status).toBe("tampered");
    expect(trial?.reason).toMatch(/new file in protected paths: eval\/planted\.mjs/);
    expect(experiments[1]?.decision?.action).not.toBe("keep");
  });

  it("the built-in optimizer finds its knobs in an editable directory and under a glob", async () => {
    for (const editable of ["[work/]", '["work/*.mjs"]']) {
      const dir = project(
        `  editable: ${editable}\n  protected: [eval/]`,
        "search: { X: { low: 1, high: 9 } }\n",
      );
      const outcome = await createRun({ program: dir, tag: "t", maxExperiments: 2, agent: "builtin" });
      outcome.lab.ledger.close();
      const candidates = outcome.experiments.filter((e) => e.n > 0);
      expect(candidates).toHaveLength(2);
      for (const e of candidates) {
        expect(e.decision?.action, e.decision?.reason).not.toBe("reject");
        expect(typeof e.params?.X).toBe("number");
      }
    }
  });
});

describe("a holdout glob hides every file it matches from researchers", () => {
  it("the llm researcher's tools refuse to read them and do not list them", async () => {
    const dir = project('  editable: [work/]\n  holdout: ["data/test-*"]');
    const program = parseProgram(readFileSync(join(dir, "program.md"), "utf8"), join(dir, "program.md"));
    const state: ToolState = { changed: [] };
    const tools = createFileTools(dir, program, state);
    const call = async (name: keyof typeof tools, input: Record<string, unknown>): Promise<string> => {
      const t = tools[name] as unknown as { execute: (i: unknown, o: unknown) => Promise<string> };
      try {
        return await t.execute(input, { toolCallId: "1", messages: [] });
      } catch (err) {
        return `refused: ${(err as Error).message}`;
      }
    };
    for (const path of ["data/test-a.csv", "./data/test-b.csv", join(dir, "data", "test-a.csv")]) {
      const out = await call("read_file", { path });
      expect(out).toMatch(/^refused: .*holdout data/);
      expect(out).not.toContain("HOLDOUT-");
    }
    expect(await call("read_file", { path: "data/train.csv" })).toBe("x\n1\n");
    const dirListing = await call("read_file", { path: "data" });
    expect(dirListing).toContain("train.csv");
    expect(dirListing).not.toContain("test-a");
    expect(await call("write_file", { path: "data/test-a.csv", content: "x" })).toMatch(/holdout data/);
  });

  it("the sandbox hides each matched file from the command and the researcher, not from evaluate", () => {
    const files = '  editable: [work/]\n  holdout: ["data/test-*"]';
    const dir = project(files);
    const wt = project(files); // stands in for the run's worktree: the same files
    const program = parseProgram(readFileSync(join(dir, "program.md"), "utf8"), join(dir, "program.md"));
    const paths = {
      repoRoot: dir,
      programDir: dir,
      stateDir: join(dir, ".autolab"),
      gitCommonDir: join(dir, ".git"),
    };
    const c = createConfinement(program, paths, { ok: true, version: "0.8.0", bwrap: "/usr/bin/bwrap" });
    const ws = { worktree: wt, projectDir: wt } as unknown as Workspace;
    const holdout = (root: string) => [join(root, "data", "test-a.csv"), join(root, "data", "test-b.csv")];
    const specs = c.trial(ws, [], {});
    expect(specs?.command.hidden).toEqual(expect.arrayContaining([...holdout(wt), ...holdout(dir)]));
    // evaluate reads the worktree's holdout data (and never the user's checkout).
    expect(specs?.evaluate.hidden).toEqual(expect.arrayContaining(holdout(dir)));
    expect(specs?.evaluate.hidden).not.toContain(holdout(wt)[0]);
    const researcher = c.researcher(ws, [], [])?.hidden;
    expect(researcher).toEqual(expect.arrayContaining([...holdout(wt), ...holdout(dir)]));
    expect(researcher).not.toContain(join(wt, "data", "train.csv"));
  });
});

/** A researcher (the `command` backend, in the sandbox) that copies whatever it can read of the holdout into its edit. */
const PEEK_SH = `WT=$(pwd)
CHECKOUT=$(cd "$WT/../../.." && pwd)
seen=$(cat data/test-a.csv data/test-b.csv "$CHECKOUT/data/test-a.csv" "$CHECKOUT/data/test-b.csv" 2>&1 | tr '\\n' ' ')
ls=$(ls data 2>&1 | tr '\\n' ' ')
printf 'export const X = 3; // seen: %s ls: %s\\n' "$seen" "$ls" > work/impl.mjs
echo '{"hypothesis": "peek", "mechanism": "m", "expected": "lower"}'
`;

describe.skipIf(!probeSandbox().ok)("attack: a sandboxed researcher reads what a holdout glob covers", () => {
  it("reads them as empty, in the worktree and in the user's checkout; its edit goes on", async () => {
    const dir = project(
      '  editable: [work/]\n  protected: [eval/, peek.sh]\n  holdout: ["data/test-*"]',
      'agent: { backend: command, command: "sh peek.sh" }\n',
      { "peek.sh": PEEK_SH },
    );
    const outcome = await createRun({ program: dir, tag: "t", maxExperiments: 1 });
    outcome.lab.ledger.close();
    const e = outcome.experiments[1];
    expect(e?.decision?.action, e?.decision?.reason).toBe("keep");
    const edit = git(dir, "show", `${e?.commit}:work/impl.mjs`);
    // It could list the directory (and reach train.csv), but no holdout byte came through.
    expect(edit).toContain("test-a.csv");
    expect(edit).not.toContain("HOLDOUT-");
    // The evaluator did read the holdout (its length is the holdout metric).
    expect(e?.trials[0]?.result?.metrics.holdout_len).toBe(`x\n${HOLDOUT_A}\n`.length);
  });
});
