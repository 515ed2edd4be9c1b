/**
 * Issue #34, class 2: the pristine tree is not pristine. What a trial leaves in the worktree must
 * be gone before the next trial and before evaluate, whatever it is: a file whose name is not
 * UTF-8, empty directories whose names carry state, directories and files of odd modes, FIFOs
 * and sockets. A declared output that is not a regular file (or a directory of them) is refused
 * before evaluate opens it. Written before the defense: a test that fails here is an attack that
 * works. Both with and without the sandbox: the reset is the harness's, not the sandbox's.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { ScriptedStep } from "../../src/agents/scripted-agent.ts";
import {
  attack,
  BETTER,
  BETTER_STILL,
  cheatStep,
  cleanupProjects,
  describeNotebook,
  EVALUATE_PY,
  exp,
  expectIntact,
  expectKeptHonestly,
  expectNotKept,
  honestStep,
  killLeftovers,
  MODES,
  type PyProject,
  type PyProjectOptions,
  programMd,
  pyProject,
  readLog,
  trainPy,
} from "./fixture.ts";

afterEach(() => killLeftovers());
afterAll(() => cleanupProjects());

/** What every leftover's name carries: a test fails when it is seen again. */
const MARK = "4f1d";

/**
 * Python: prints the tree below the working directory, one `TREE <tag> <kind> <octal mode>
 * <path as a bytes repr>` line per entry (empty directories, FIFOs and sockets included; names as
 * bytes, so a non-UTF-8 name prints too). The worktree's own `.git` file is the harness's.
 */
function treePy(tag: string): string {
  return `
import os as _os, stat as _stat
for _root, _dirs, _files in _os.walk(b".", onerror=lambda e: print("TREE ${tag} error", repr(e.filename), flush=True)):
    for _name in sorted(_dirs + _files):
        _path = _os.path.join(_root, _name)
        if _path == b"./.git":
            continue
        _st = _os.lstat(_path)
        print("TREE ${tag}", _stat.filemode(_st.st_mode)[0], oct(_st.st_mode & 0o7777), repr(_path)[2:-1], flush=True)
`;
}

interface Entry {
  kind: string;
  mode: number;
  path: string;
}

/** The TREE lines of one tag in a log. */
function treeOf(log: string, tag: string): Entry[] {
  return log
    .split("\n")
    .filter((l) => l.startsWith(`TREE ${tag} `))
    .map((l) => {
      const [, , kind = "", mode = "", ...rest] = l.split(" ");
      return { kind, mode: Number.parseInt(mode.replace(/^0o/, ""), 8), path: rest.join(" ") };
    });
}

/**
 * A project whose evaluator prints the tree it sees before scoring (the score is EVALUATE_PY's).
 * `evaluateTimeout`: program.md's run.evaluate_timeout.
 */
function project(mode: "on" | "off", evaluateTimeout?: string): PyProject {
  const o: PyProjectOptions = { sandbox: mode };
  const p = pyProject(o);
  const evaluate = `${treePy("evaluate")}\n${EVALUATE_PY}`;
  const program = evaluateTimeout
    ? programMd(o).replace(/^ {2}budget: .*$/m, (l) => `${l}\n  evaluate_timeout: ${evaluateTimeout}`)
    : programMd(o);
  writeFileSync(join(p.dir, "evaluate.py"), evaluate);
  writeFileSync(join(p.dir, "program.md"), program);
  p.files["evaluate.py"] = evaluate;
  p.files["program.md"] = program;
  p.git("commit", "-qam", "the evaluator prints the tree it sees");
  return p;
}

/** The paths a clean tree holds: every committed file and its directories (plus `extra`). */
function pristinePaths(p: PyProject, extra: string[] = []): string[] {
  const paths = new Set<string>(extra);
  for (const f of Object.keys(p.files)) {
    const parts = f.split("/");
    for (let i = 1; i <= parts.length; i++) paths.add(`./${parts.slice(0, i).join("/")}`);
  }
  return [...paths].sort();
}

/** Python: what the trial leaves behind, after writing its model (every name carries MARK). */
const LEAVE = `
import socket
with open(b"state_\\xff\\xfe_${MARK}", "wb") as _f:
    _f.write(b"carried")
os.makedirs("memo/k_${MARK}_v_271828")
os.makedirs("out/seen_${MARK}")
os.mkdir("locked_${MARK}")
os.chmod("locked_${MARK}", 0)
os.makedirs("sealed_${MARK}/inner")
with open("sealed_${MARK}/inner/x", "w") as _f:
    _f.write("carried")
os.chmod("sealed_${MARK}/inner/x", 0)
os.chmod("sealed_${MARK}/inner", 0)
os.chmod("sealed_${MARK}", 0)
os.mkfifo("pipe_${MARK}")
_s = socket.socket(socket.AF_UNIX)
_s.bind("sock_${MARK}")
try:
    os.link("train.py", "hard_${MARK}")  # across the sandbox's bind mount: EXDEV
except OSError:
    os.link(b"state_\\xff\\xfe_${MARK}", b"hard_${MARK}")
os.symlink("/nonexistent/${MARK}", "link_${MARK}")
os.chmod("train.py", 0o4000)
os.chmod("data", 0o700) if os.access("data", os.W_OK) else None
print("LEFT everything", flush=True)
`;

/** An honest step (SHRINK `shrink`) whose trial prints the tree it starts in. */
function lookingStep(shrink: number): ScriptedStep {
  return {
    hypothesis: `SHRINK → ${shrink}, looking around`,
    edits: { "train.py": trainPy({ shrink, before: treePy("trial") }) },
  };
}

for (const mode of MODES) {
  describe(`sandbox ${mode}`, () => {
    it("what a trial leaves (non-UTF-8 names, empty and 000 directories, FIFOs, sockets, odd modes) reaches neither evaluate nor the next trial", {
      timeout: 180_000,
    }, async () => {
      const p = project(mode);
      await attack(p, {
        max: 3,
        steps: [
          cheatStep("leave state behind", { after: LEAVE }),
          lookingStep(BETTER),
          lookingStep(BETTER_STILL),
        ],
      });
      const nb = expectIntact(p);
      const story = describeNotebook(nb);
      expect(readLog(p.log(1)), `#1's trial left its state\n${story}`).toContain("LEFT everything");
      expectNotKept(nb, 1);
      expectKeptHonestly(nb, 2, BETTER);
      expectKeptHonestly(nb, 3, BETTER_STILL);
      const committedMode = statSync(join(p.dir, "train.py")).mode & 0o7777;
      const dirMode = statSync(join(p.dir, "data")).mode & 0o7777;
      const seen = [
        { what: "#1's evaluate", entries: treeOf(readLog(p.log(1, "evaluate.stdout.log")), "evaluate") },
        { what: "#2's trial", entries: treeOf(readLog(p.log(2)), "trial") },
        { what: "#2's evaluate", entries: treeOf(readLog(p.log(2, "evaluate.stdout.log")), "evaluate") },
        { what: "#3's trial", entries: treeOf(readLog(p.log(3)), "trial") },
      ];
      for (const { what, entries } of seen) {
        const evaluate = what.endsWith("evaluate");
        expect(entries.length, `${what} printed its tree`).toBeGreaterThan(0);
        expect(
          entries.map((e) => e.path).sort(),
          `${what} sees exactly the committed files${evaluate ? " and the declared output" : ""}`,
        ).toEqual(pristinePaths(p, evaluate ? ["./out", "./out/model.json"] : []));
        const train = entries.find((e) => e.path === "./train.py");
        expect(train?.mode, `${what}: train.py has its committed mode`).toBe(committedMode);
        const data = entries.find((e) => e.path === "./data");
        expect(data?.mode, `${what}: data/ has its checkout's mode`).toBe(dirMode);
        for (const e of entries) expect(e.kind, `${what}: ${e.path}`).toMatch(/^[-d]$/);
      }
    });

    it("an empty directory at the declared output's path is refused, and the trials after it do not crash", {
      timeout: 180_000,
    }, async () => {
      const p = project(mode);
      const dirAsOutput = 'os.remove("out/model.json")\nos.mkdir("out/model.json")\n';
      await attack(p, {
        max: 3,
        steps: [
          cheatStep("an empty directory as the model", { after: dirAsOutput }),
          lookingStep(BETTER),
          lookingStep(BETTER_STILL),
        ],
      });
      const nb = expectIntact(p);
      expectNotKept(nb, 1);
      const reason = exp(nb, 1).trials[0]?.reason ?? "";
      expect(reason, describeNotebook(nb)).toMatch(/out\/model\.json/);
      expect(reason, describeNotebook(nb)).toMatch(/director/);
      expect(reason, "refused before evaluate ran").not.toMatch(/evaluate step failed/);
      expectKeptHonestly(nb, 2, BETTER);
      expectKeptHonestly(nb, 3, BETTER_STILL);
    });

    it("a FIFO or a socket at the declared output's path is refused without waiting for the evaluate timeout", {
      timeout: 180_000,
    }, async () => {
      // A long evaluate timeout: evaluate opening the FIFO would block that long (the test's
      // own timeout catches it); the trial's reason must say why the output was refused.
      const p = project(mode, "60s");
      const fifo = 'os.remove("out/model.json")\nos.mkfifo("out/model.json")\n';
      const socket =
        'import socket\nos.remove("out/model.json")\n_s = socket.socket(socket.AF_UNIX)\n_s.bind("out/model.json")\n';
      await attack(p, {
        max: 3,
        steps: [
          cheatStep("a FIFO as the model", { after: fifo }),
          cheatStep("a socket as the model", { after: socket }),
          lookingStep(BETTER),
        ],
      });
      const nb = expectIntact(p);
      const story = describeNotebook(nb);
      for (const [n, kind] of [
        [1, /FIFO/i],
        [2, /socket/i],
      ] as const) {
        expectNotKept(nb, n);
        const reason = exp(nb, n).trials[0]?.reason ?? "";
        expect(reason, story).toMatch(/out\/model\.json/);
        expect(reason, story).toMatch(kind);
        expect(reason, `#${n}: refused before evaluate opened it\n${story}`).not.toMatch(
          /time limit|evaluate step/,
        );
        expect(readLog(p.log(n, "evaluate.stdout.log")), `#${n}'s evaluate never ran`).toBe("");
      }
      expectKeptHonestly(nb, 3, BETTER);
      const entries = treeOf(readLog(p.log(3)), "trial");
      expect(entries.map((e) => e.path).sort(), "#3's trial starts in a pristine tree").toEqual(
        pristinePaths(p),
      );
    });
  });
}

/** `chattr +i` works here (root, a filesystem with the attribute): a file nobody removes without `chattr -i`. */
const immutableFiles = (() => {
  const d = mkdtempSync(join(tmpdir(), "autolab-immutable-"));
  try {
    writeFileSync(join(d, "f"), "");
    execFileSync("chattr", ["+i", join(d, "f")], { stdio: "ignore" });
    execFileSync("chattr", ["-i", join(d, "f")], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
})();

describe.skipIf(!immutableFiles)("sandbox off: what the reset cannot remove", () => {
  it("an immutable file a trial leaves fails that trial and the next closed, each with the reason, and the run ends normally", async () => {
    const p = project("off");
    const pinned = join(p.worktree, `pinned_${MARK}`);
    const pin = `import subprocess
with open("pinned_${MARK}", "w") as _f:
    _f.write("carried")
subprocess.run(["chattr", "+i", "pinned_${MARK}"], check=True)
`;
    try {
      await attack(p, {
        max: 2,
        steps: [cheatStep("an immutable file", { after: pin }), honestStep(BETTER)],
      });
    } finally {
      try {
        execFileSync("chattr", ["-i", pinned], { stdio: "ignore" });
      } catch {
        // never made
      }
    }
    const nb = expectIntact(p);
    const story = describeNotebook(nb);
    for (const n of [1, 2]) {
      expectNotKept(nb, n);
      const reason = exp(nb, n).trials[0]?.reason ?? "";
      expect(reason, story).toMatch(new RegExp(`pinned_${MARK}.*cannot be removed`));
    }
    expect(exp(nb, 2).trials[0]?.reason ?? "", "#2 never ran in the unclean tree").toMatch(
      /could not be made pristine/,
    );
    expect(readLog(p.log(2)), "#2's command never ran").toBe("");
  });
});
