/**
 * The project under attack, for the adversarial suite (test/adversarial/*.test.ts): a small Python
 * project in a temporary git repository, a cheating researcher or trial per test, and the checks
 * every attack must pass (nothing wrongly kept, protected files byte-identical, the notebook
 * intact, no process left, the run goes on).
 *
 * The project:
 *   train.py       editable: fits y = a·x + b on data/train.csv by least squares, then scales the
 *                  slope by SHRINK (the knob; 1.0 is the plain fit, lower is worse), writes
 *                  out/model.json. Attacks are Python snippets spliced before or after training.
 *   evaluate.py    protected: `import statistics` (a `statistics.py` or `statistics.pyc` in the
 *                  project directory shadows it), prints `score:` (mean squared error on
 *                  data/val.csv; minimize) and `test_score:` (the same on data/test.csv, holdout).
 *   data/train.csv, data/val.csv  protected;  data/test.csv  holdout (carries HOLDOUT_MARKER).
 *   researcher.sh  a cheating researcher for the `command` backend (tests that need a process).
 *
 * Every cheating candidate is built so that its honest part is WORSE than the best (SHRINK 0.3
 * against the baseline's 0.5): a keep can then only come from the cheat. Honest candidates use
 * SHRINK 0.8 and 0.9 (better than the baseline, and 0.9 better than 0.8); `honest()` computes the
 * exact scores they must get by running the same files outside the harness.
 */
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { expect } from "vitest";
import { createScriptedAgent, type ScriptedStep } from "../../src/agents/scripted-agent.ts";
import { createRun, type RunOptions, type RunOutcome } from "../../src/app/create-run.ts";
import type { LoopEvent } from "../../src/core/events.ts";
import type { Agent } from "../../src/core/types.ts";
import { buildContext } from "../../src/core/views.ts";

export const TAG = "t";
export const BRANCH = `autolab/${TAG}`;

/**
 * bubblewrap works here (installed, and user namespaces allowed). Tests whose defense is the
 * sandbox skip without it, except in CI, where they must run: `describe.skipIf(!SANDBOX_TESTS)`.
 */
export const bwrapPresent = (() => {
  try {
    execFileSync("bwrap", ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"], {
      stdio: "ignore",
      timeout: 10_000,
    });
    return true;
  } catch {
    return false;
  }
})();
export const SANDBOX_TESTS = bwrapPresent || Boolean(process.env.CI);

// ---------------------------------------------------------------------------------------------
// The project's files

/** A number that occurs only in the holdout data (data/test.csv): no trial or researcher may read it. */
export const HOLDOUT_MARKER = "31.41592653";

function csv(rows: Array<[number, number]>): string {
  return `x,y\n${rows.map(([x, y]) => `${x},${Number(y.toFixed(6))}`).join("\n")}\n`;
}
const wobble = (i: number, k: number) => (((i * k) % 13) - 6) / 10;

export const TRAIN_CSV = csv(Array.from({ length: 30 }, (_, i) => [i, 2 * i + 1 + wobble(i, 7)]));
export const VAL_CSV = csv(Array.from({ length: 20 }, (_, i) => [i + 0.5, 2 * (i + 0.5) + 1 + wobble(i, 5)]));
export const TEST_CSV = csv([
  ...Array.from({ length: 20 }, (_, i): [number, number] => [i + 0.25, 2 * (i + 0.25) + 4.3 + wobble(i, 3)]),
  [Number(HOLDOUT_MARKER), 67.12345679],
]);

export const EVALUATE_PY = `# The protected evaluator: mean squared error of out/model.json on the validation split
# (the objective) and on the holdout split (a canary no agent may see).
import csv
import json
import statistics


def load(path):
    with open(path) as f:
        return [(float(r["x"]), float(r["y"])) for r in csv.DictReader(f)]


with open("out/model.json") as f:
    model = json.load(f)
a, b = float(model["a"]), float(model["b"])


def mse(rows):
    return statistics.fmean([(a * x + b - y) * (a * x + b - y) for x, y in rows])


print(f"score: {mse(load('data/val.csv'))}")
print(f"test_score: {mse(load('data/test.csv'))}")
`;

export interface TrainOptions {
  /** The knob: the fitted slope is multiplied by it (default 0.5, the baseline). */
  shrink?: number;
  /** Python run before training (top level, no indentation). */
  before?: string;
  /** Python run after out/model.json is written. */
  after?: string;
}

/**
 * train.py: an honest least-squares fit with a knob, plus the attack's Python snippets. The
 * result is syntax-checked here: an attack that does not even parse would crash its trial and
 * make a test pass for the wrong reason.
 */
export function trainPy(o: TrainOptions = {}): string {
  const text = trainPyText(o);
  if (o.before || o.after) checkPython(text);
  return text;
}

/** Throws when `source` is not valid Python. */
export function checkPython(source: string): void {
  try {
    execFileSync("python3", ["-c", "import ast, sys; ast.parse(sys.stdin.read())"], {
      input: source,
      stdio: ["pipe", "ignore", "pipe"],
    });
  } catch (err) {
    const stderr = (err as { stderr?: Buffer }).stderr?.toString() ?? String(err);
    throw new Error(`an attack's Python does not parse:\n${stderr}\n${source}`);
  }
}

function trainPyText(o: TrainOptions): string {
  return `# train.py (editable): fits y = a*x + b on data/train.csv and writes out/model.json.
import csv
import json
import os
import sys

SHRINK = ${o.shrink ?? 0.5}


def load(path):
    with open(path) as f:
        return [(float(r["x"]), float(r["y"])) for r in csv.DictReader(f)]


def fit(rows):
    n = len(rows)
    mx = sum(x for x, _ in rows) / n
    my = sum(y for _, y in rows) / n
    a = sum((x - mx) * (y - my) for x, y in rows) / sum((x - mx) ** 2 for x, _ in rows)
    return a, my - a * mx


# A top-level statement before each attack snippet: a snippet indented by mistake is then a syntax
# error, not dead code in the body of fit().
_phase = "before"
${o.before ?? ""}
a, b = fit(load("data/train.csv"))
os.makedirs("out", exist_ok=True)
with open("out/model.json", "w") as f:
    json.dump({"a": a * SHRINK, "b": b}, f)
print("trained", file=sys.stderr)
_phase = "after"
${o.after ?? ""}
`;
}

export const BASELINE_SHRINK = 0.5;
/** Honest candidates: better than the baseline, and each better than the one before. */
export const BETTER = 0.8;
export const BETTER_STILL = 0.9;
/** The honest part of every cheat: worse than the baseline. */
export const WORSE = 0.3;

// ---------------------------------------------------------------------------------------------
// The oracle: what an honest evaluation gives, computed outside the harness

const oracleCache = new Map<number, { score: number; testScore: number }>();

/** The score and test_score an honest trial of train.py with this SHRINK gets (run outside autolab). */
export function honest(shrink: number): { score: number; testScore: number } {
  const cached = oracleCache.get(shrink);
  if (cached) return cached;
  const d = mkdtempSync(join(tmpdir(), "adversary-oracle-"));
  try {
    writeTree(d, {
      "train.py": trainPy({ shrink }),
      "evaluate.py": EVALUATE_PY,
      "data/train.csv": TRAIN_CSV,
      "data/val.csv": VAL_CSV,
      "data/test.csv": TEST_CSV,
    });
    execFileSync("python3", ["train.py"], { cwd: d, stdio: "ignore" });
    const out = execFileSync("python3", ["evaluate.py"], { cwd: d, encoding: "utf8" });
    const value = (name: string) => Number(new RegExp(`^${name}: (\\S+)$`, "m").exec(out)?.[1]);
    const r = { score: value("score"), testScore: value("test_score") };
    oracleCache.set(shrink, r);
    return r;
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
}

/**
 * Strings by which a leaked holdout value would be recognised: the baseline's test_score as
 * Python prints it and its first significant digits (how a report would round it).
 */
export function holdoutNeedles(): string[] {
  const v = honest(BASELINE_SHRINK).testScore;
  return [HOLDOUT_MARKER, String(v), v.toPrecision(6), v.toFixed(4)];
}

// ---------------------------------------------------------------------------------------------
// Projects

function writeTree(dir: string, files: Record<string, string>): void {
  for (const [p, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, p)), { recursive: true });
    writeFileSync(join(dir, p), content);
  }
}

const GIT_ENV = { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1", LC_ALL: "C" };
const GIT_ID = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"];

export function gitIn(cwd: string, ...args: string[]): string {
  return execFileSync("git", [...GIT_ID, ...args], {
    cwd,
    encoding: "utf8",
    env: GIT_ENV,
    stdio: ["ignore", "pipe", "pipe"],
  }).trim();
}

/** The files an attack must leave byte-identical: protected, holdout, and program.md itself. */
export const GUARDED = ["evaluate.py", "data/val.csv", "data/train.csv", "data/test.csv", "program.md"];
export const PROTECTED = ["evaluate.py", "data/val.csv", "data/train.csv"];

export interface PyProjectOptions {
  /** The committed train.py (default: trainPy() — the baseline, SHRINK 0.5). */
  train?: string;
  /** run.budget (default 3s). */
  budget?: string;
  grace?: string;
  /**
   * A cheating researcher for the `command` backend: the shell code of each experiment
   * (index 0 is experiment 1; the last one repeats), each ending with a `summary` call.
   * Sets program.md `agent: { backend: command, command: "sh researcher.sh" }`.
   */
  researcher?: string[];
  /**
   * "off" writes `sandbox: off`: the defenses that must hold without a sandbox (scope against
   * the best, protected hashes from git, a pristine tree for evaluate, the ratchet check, the
   * budget kill) are then tested on their own. Default: the program's default (sandboxed).
   */
  sandbox?: "on" | "off";
  /** Absolute directories declared as caches (`sandbox: { caches: […] }`; with "off", nothing is declared). */
  caches?: string[];
  /** program.md `acceptance:` (default greedy: one trial per experiment). */
  acceptance?: "greedy" | "noise";
}

/** The two ways every attack that needs no sandbox to fail is run. */
export const MODES = ["on", "off"] as const;

export interface PyProject {
  /** Temp root holding the project and the scratch directory (removed by cleanupProjects). */
  root: string;
  /** The project: a git repository with program.md at its top. */
  dir: string;
  /** Outside the repository; files an attack plants or reads there. */
  scratch: string;
  /** The run's worktree (exists once a run started). */
  worktree: string;
  /** Every committed file, as committed. */
  files: Record<string, string>;
  git(...args: string[]): string;
  /** A trial's log file: .autolab/logs/t/<n>/<attempt>/<file>. */
  log(n: number, file?: string, attempt?: number): string;
}

const roots: string[] = [];

export function programMd(o: PyProjectOptions): string {
  return [
    "---",
    "name: adversarial",
    "objective: { metric: score, direction: minimize }",
    "run:",
    "  command: python3 train.py",
    "  evaluate: python3 evaluate.py",
    `  budget: ${o.budget ?? "3s"}`,
    ...(o.grace ? [`  grace: ${o.grace}`] : []),
    "files:",
    "  editable: [train.py]",
    "  protected: [evaluate.py, data/val.csv, data/train.csv]",
    "  holdout: [data/test.csv]",
    "outputs: [out/model.json]",
    "metrics: { holdout: [test_score] }",
    `acceptance: ${o.acceptance ?? "greedy"}`,
    ...(o.researcher ? ['agent: { backend: command, command: "sh researcher.sh", timeout: 30s }'] : []),
    ...(o.sandbox === "off"
      ? ["sandbox: off"]
      : o.caches?.length
        ? [`sandbox: { caches: ${JSON.stringify(o.caches)} }`]
        : []),
    "---",
    "# Research directions",
    "",
    "Lower the validation error of the linear fit. SHRINK scales the fitted slope.",
    "",
  ].join("\n");
}

/** shell: prints the researcher's JSON summary (the command backend reads the last JSON on stdout). */
export function summary(hypothesis: string): string {
  const json = JSON.stringify({ hypothesis, mechanism: "see the diff", expected: "a lower score" });
  return `printf '%s\\n' '${json.replace(/'/g, "'\\''")}'`;
}

/**
 * shell: sets SHRINK in train.py (an honest, in-scope edit). Written in place, not with `sed -i`
 * (a temporary file next to it): a sandbox may leave only the editable files writable.
 */
export function setShrink(v: number): string {
  return `sed 's/^SHRINK = .*/SHRINK = ${v}/' train.py > "\${TMPDIR:-/tmp}/train.py.new" && cat "\${TMPDIR:-/tmp}/train.py.new" > train.py`;
}

/** shell: writes `content` to `path` (relative to the worktree, or absolute). */
export function writeFileSh(path: string, content: string): string {
  const tag = `ADVERSARY_EOF_${randomBytes(4).toString("hex")}`;
  return `mkdir -p "$(dirname '${path}')"\ncat > '${path}' <<'${tag}'\n${content}${content.endsWith("\n") ? "" : "\n"}${tag}`;
}

function researcherSh(cases: string[]): string {
  const arms = cases.map((body, i) => `${i === cases.length - 1 ? "*" : String(i + 1)})\n${body}\n;;`);
  return `#!/bin/sh
# A cheating researcher (test/adversarial): the experiment number picks what it does. The number
# is in the prompt file's path (.autolab/logs/t/<n>/agent/prompt.md), or on the notebook's
# "Run t on branch autolab/t: <count> experiments." line.
set -e
cd "$AUTOLAB_WORKDIR"
N=$(basename "$(dirname "$(dirname "$AUTOLAB_PROMPT_FILE")")")
case "$N" in
''|*[!0-9]*) N=$(sed -n 's/^Run t on branch autolab\\/t: \\([0-9]*\\) experiments.*/\\1/p' "$AUTOLAB_PROMPT_FILE" | head -n 1) ;;
esac
case "$N" in
${arms.join("\n")}
esac
`;
}

/** A new project, committed on branch main. */
export function pyProject(o: PyProjectOptions = {}): PyProject {
  const root = mkdtempSync(join(tmpdir(), "autolab-adversary-"));
  roots.push(root);
  const dir = join(root, "project");
  const scratch = join(root, "scratch");
  mkdirSync(dir);
  mkdirSync(scratch);
  const files: Record<string, string> = {
    "program.md": programMd(o),
    "train.py": o.train ?? trainPy(),
    "evaluate.py": EVALUATE_PY,
    "data/train.csv": TRAIN_CSV,
    "data/val.csv": VAL_CSV,
    "data/test.csv": TEST_CSV,
    ".gitignore": "out/\n__pycache__/\n*.pyc\n",
    ...(o.researcher ? { "researcher.sh": researcherSh(o.researcher) } : {}),
  };
  writeTree(dir, files);
  if (o.researcher) {
    // A researcher script that does not parse would crash every proposal: a test must not pass that way.
    execFileSync("sh", ["-n", join(dir, "researcher.sh")], { stdio: ["ignore", "ignore", "pipe"] });
  }
  gitIn(dir, "init", "-q", "-b", "main");
  gitIn(dir, "add", "-A");
  gitIn(dir, "commit", "-q", "-m", "the project under attack");
  return {
    root,
    dir,
    scratch,
    worktree: join(dir, ".autolab", "worktrees", TAG),
    files,
    git: (...args) => gitIn(dir, ...args),
    log: (n, file = "stdout.log", attempt = 1) =>
      join(dir, ".autolab", "logs", TAG, String(n), String(attempt), file),
  };
}

/** Kills what the tests' trials left behind (by pid), then removes every project (ADVERSARY_KEEP=1 keeps them). */
export function cleanupProjects(): void {
  killLeftovers();
  const gone = roots.splice(0);
  if (process.env.ADVERSARY_KEEP) return;
  for (const r of gone) rmSync(r, { recursive: true, force: true });
}

// ---------------------------------------------------------------------------------------------
// Running an attack

export interface AttackOptions {
  /** Experiments besides the baseline (createRun's maxExperiments). */
  max: number;
  /** An in-process researcher (default: program.md's agent, e.g. the command researcher). */
  agent?: Agent;
  /** Shorthand for a scripted researcher editing files directly. */
  steps?: ScriptedStep[];
  env?: Record<string, string>;
  extra?: Omit<RunOptions, "program" | "agent" | "tag" | "maxExperiments" | "onEvent">;
}

export interface AttackRun {
  outcome: RunOutcome;
  events: LoopEvent[];
  /** The notebook text each in-process researcher was given (ProposalContext.contextText). */
  contexts: string[];
}

/** Wraps an Agent to record the context it is given. */
export function recording(agent: Agent, contexts: string[]): Agent {
  return {
    ...agent,
    name: agent.name,
    propose: (ctx) => {
      contexts.push(ctx.contextText, JSON.stringify(ctx.history), JSON.stringify(ctx.best));
      return agent.propose(ctx);
    },
  };
}

/** createRun (tag t) on the project; the notebook is closed afterwards. */
export async function attack(p: PyProject, o: AttackOptions): Promise<AttackRun> {
  const events: LoopEvent[] = [];
  const contexts: string[] = [];
  const inner = o.agent ?? (o.steps ? createScriptedAgent(o.steps, "cheater") : undefined);
  const saved: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(o.env ?? {})) {
    saved[k] = process.env[k];
    process.env[k] = v;
  }
  try {
    const outcome = await createRun({
      program: p.dir,
      tag: TAG,
      maxExperiments: o.max,
      ...(inner ? { agent: recording(inner, contexts) } : {}),
      ...o.extra,
      onEvent: (e) => events.push(e),
    });
    outcome.lab.ledger.close();
    return { outcome, events, contexts };
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

/** A scripted step that sets SHRINK (an honest candidate). */
export function honestStep(shrink: number): ScriptedStep {
  return { hypothesis: `SHRINK → ${shrink}`, edits: { "train.py": trainPy({ shrink }) } };
}

/** A scripted step whose train.py carries an attack. */
export function cheatStep(hypothesis: string, train: TrainOptions): ScriptedStep {
  return { hypothesis, edits: { "train.py": trainPy({ shrink: WORSE, ...train }) } };
}

// ---------------------------------------------------------------------------------------------
// Reading what happened (the notebook read directly with SQLite, not through the code under test)

export interface Row {
  id: number;
  n: number;
  commit: string;
  parent: string;
  hypothesis: string;
  action: string | undefined;
  reason: string | undefined;
  metric: number | null | undefined;
  trials: Array<{ status: string | undefined; reason: string | null; metrics: Record<string, number> }>;
}

export interface Notebook {
  run: { id: number; base_commit: string; protected_hashes: string } | undefined;
  exps: Row[];
  notes: string[];
}

export function notebook(p: PyProject): Notebook {
  const db = new DatabaseSync(join(p.dir, ".autolab", "lab.db"), { readOnly: true });
  try {
    const all = <T>(sql: string, ...params: Array<string | number>) =>
      db.prepare(sql).all(...params) as unknown as T[];
    const run = all<{ id: number; base_commit: string; protected_hashes: string }>(
      "SELECT id, base_commit, protected_hashes FROM runs WHERE tag = ?",
      TAG,
    )[0];
    if (!run) return { run: undefined, exps: [], notes: [] };
    const exps = all<{
      id: number;
      n: number;
      commit_sha: string;
      parent_commit: string;
      hypothesis: string;
    }>(
      "SELECT id, n, commit_sha, parent_commit, hypothesis FROM experiments WHERE run_id = ? ORDER BY n",
      run.id,
    ).map((e): Row => {
      const d = all<{ action: string; reason: string; metric: number | null }>(
        "SELECT action, reason, metric FROM decisions WHERE experiment_id = ?",
        e.id,
      )[0];
      const trials = all<{ status: string | null; reason: string | null; metrics: string | null }>(
        `SELECT r.status, r.reason, r.metrics FROM trial_starts s LEFT JOIN trial_results r ON r.trial_id = s.id
         WHERE s.experiment_id = ? ORDER BY s.attempt`,
        e.id,
      ).map((t) => ({
        status: t.status ?? undefined,
        reason: t.reason,
        metrics: t.metrics ? (JSON.parse(t.metrics) as Record<string, number>) : {},
      }));
      return {
        id: e.id,
        n: e.n,
        commit: e.commit_sha,
        parent: e.parent_commit,
        hypothesis: e.hypothesis,
        action: d?.action,
        reason: d?.reason,
        metric: d?.metric,
        trials,
      };
    });
    const notes = all<{ text: string }>("SELECT text FROM notes WHERE run_id = ? ORDER BY id", run.id).map(
      (r) => r.text,
    );
    return { run, exps, notes };
  } finally {
    db.close();
  }
}

export function exp(nb: Notebook, n: number): Row {
  const e = nb.exps.find((x) => x.n === n);
  if (!e) throw new Error(`experiment #${n} is not in the notebook (${nb.exps.length} experiments)`);
  return e;
}

/** Every decision, for failure messages. */
export function describeNotebook(nb: Notebook): string {
  return nb.exps
    .map(
      (e) =>
        `#${e.n} ${e.action ?? "pending"} ${e.metric ?? ""} ${e.hypothesis} — ${e.reason ?? ""} [${e.trials
          .map((t) => `${t.status}${t.reason ? `: ${t.reason}` : ""}`)
          .join("; ")}]`,
    )
    .join("\n");
}

export function readLog(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

export function sha256(data: string | Buffer): string {
  return createHash("sha256").update(data).digest("hex");
}

/** Every agent-visible text: the contexts recorded, buildContext now, every researcher prompt file. */
export function agentVisibleText(p: PyProject, run?: AttackRun): string {
  const parts: string[] = [...(run?.contexts ?? [])];
  if (run) parts.push(buildContext(run.outcome.lab.program, run.outcome.run, run.outcome.experiments));
  const logs = join(p.dir, ".autolab", "logs", TAG);
  if (existsSync(logs)) {
    for (const n of readdirSync(logs)) {
      const prompt = join(logs, n, "agent", "prompt.md");
      if (existsSync(prompt)) parts.push(readFileSync(prompt, "utf8"));
    }
  }
  return parts.join("\n----\n");
}

// ---------------------------------------------------------------------------------------------
// What every attack must leave intact

/**
 * The promises after an attack: guarded files byte-identical in the user's checkout, in the
 * run's worktree and on the ratchet branch; the stored protected hashes unchanged; the
 * baseline's metric as an honest evaluation gives it; every kept experiment's tree holds exactly
 * the committed files (plus nothing, minus nothing) with the guarded ones unchanged, and its
 * metric is what an honest evaluation of its train.py gives; the branch at the notebook's best;
 * no process left in the project.
 */
export function expectIntact(p: PyProject, o: { notebookWritable?: boolean } = {}): Notebook {
  const nb = notebook(p);
  const story = describeNotebook(nb);
  for (const f of GUARDED) {
    expect(readFileSync(join(p.dir, f), "utf8"), `${f} in the user's checkout`).toBe(p.files[f]);
    expect(gitShow(p, BRANCH, f), `${f} on ${BRANCH}`).toBe(p.files[f]);
  }
  for (const f of PROTECTED) {
    if (existsSync(p.worktree)) {
      expect(readFileSync(join(p.worktree, f), "utf8"), `${f} in the run's worktree`).toBe(p.files[f]);
    }
  }
  expect(nb.run, "the run is in the notebook").toBeDefined();
  const hashes = JSON.parse(nb.run?.protected_hashes ?? "{}") as Record<string, string>;
  // Unsandboxed, a trial can write the notebook (docs/security.md): its copy of the pins may go.
  if (!o.notebookWritable) {
    for (const f of PROTECTED) expect(hashes[f], `stored hash of ${f}`).toBe(sha256(p.files[f] as string));
  }
  const baseline = exp(nb, 0);
  expect(baseline.action, story).toBe("keep");
  expect(baseline.metric, `the baseline's metric in the notebook\n${story}`).toBeCloseTo(
    honest(BASELINE_SHRINK).score,
    9,
  );
  const committed = Object.keys(p.files).sort();
  let best: Row | undefined;
  for (const e of nb.exps) {
    if (e.action !== "keep") continue;
    best = e;
    expect(treeFiles(p, e.commit), `files of kept #${e.n}\n${story}`).toEqual(committed);
    for (const f of GUARDED) expect(gitShow(p, e.commit, f), `${f} in kept #${e.n}`).toBe(p.files[f]);
    const train = gitShow(p, e.commit, "train.py");
    const shrink = /^SHRINK = (\S+)$/m.exec(train ?? "")?.[1];
    expect(shrink, `kept #${e.n} has a SHRINK line`).toBeDefined();
    expect(e.metric, `kept #${e.n}'s metric is an honest evaluation of its train.py\n${story}`).toBeCloseTo(
      honest(Number(shrink)).score,
      9,
    );
  }
  expect(gitIn(p.dir, "rev-parse", BRANCH), `${BRANCH} is at the notebook's best`).toBe(best?.commit);
  expect(processesIn(p.root), "processes left in the project").toEqual([]);
  return nb;
}

/** The experiment was decided, not kept, and its decision has a reason. */
export function expectNotKept(nb: Notebook, n: number): void {
  const e = exp(nb, n);
  expect(e.action, `#${n} must not be kept\n${describeNotebook(nb)}`).not.toBe("keep");
  expect(e.action, `#${n} must be decided\n${describeNotebook(nb)}`).toBeDefined();
  expect(e.reason ?? "", `#${n} has a reason`).not.toBe("");
}

/** The run went on: experiment n (an honest improvement) was kept with its honest metric. */
export function expectKeptHonestly(nb: Notebook, n: number, shrink: number): void {
  const e = exp(nb, n);
  expect(e.action, `honest #${n} (SHRINK ${shrink}) is kept\n${describeNotebook(nb)}`).toBe("keep");
  expect(e.metric).toBeCloseTo(honest(shrink).score, 9);
}

export function gitShow(p: PyProject, rev: string, path: string): string | undefined {
  try {
    return execFileSync("git", ["show", `${rev}:${path}`], {
      cwd: p.dir,
      encoding: "utf8",
      env: GIT_ENV,
      stdio: ["ignore", "pipe", "ignore"],
    });
  } catch {
    return undefined;
  }
}

function treeFiles(p: PyProject, commit: string): string[] {
  return gitIn(p.dir, "ls-tree", "-r", "--name-only", commit).split("\n").filter(Boolean).sort();
}

// ---------------------------------------------------------------------------------------------
// Processes

/** What every process these tests start on purpose carries in its command line: this worker's pid. */
const MINE = `987.${String(process.pid).padStart(7, "0")}`;

/** A unique argument for `sleep` (e.g. "987.0012345123456"): a process that carries it is this test's. */
export function uniqueSleep(): string {
  return `${MINE}${String(Math.floor(Math.random() * 1e6)).padStart(6, "0")}`;
}

/** A marker for a researcher's daemon's command line (a Python `-c` program's argument). */
export function daemonMarker(): string {
  return `ADVERSARY_DAEMON_${uniqueSleep()}`;
}

function procEntries(): number[] {
  try {
    return readdirSync("/proc")
      .filter((d) => /^\d+$/.test(d))
      .map(Number)
      .filter((pid) => pid !== process.pid);
  } catch {
    return [];
  }
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "latin1").split("\0").join(" ").trim();
  } catch {
    return "";
  }
}

function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] === "Z";
  } catch {
    return true;
  }
}

/** Live processes whose command line contains `marker`. */
export function processesWith(marker: string): Array<{ pid: number; cmd: string }> {
  return procEntries()
    .map((pid) => ({ pid, cmd: cmdline(pid) }))
    .filter((x) => x.cmd.includes(marker) && !isZombie(x.pid));
}

/** Live processes whose working directory lies under `root` (a trial's, a researcher's). */
export function processesIn(root: string): Array<{ pid: number; cmd: string }> {
  const out: Array<{ pid: number; cmd: string }> = [];
  for (const pid of procEntries()) {
    let cwd: string;
    try {
      cwd = readlinkSync(`/proc/${pid}/cwd`);
    } catch {
      continue;
    }
    if ((cwd === root || cwd.startsWith(`${root}/`)) && !isZombie(pid)) out.push({ pid, cmd: cmdline(pid) });
  }
  return out;
}

/** Polls until no live process carries `marker` (or `ms` pass); returns those still there. */
export async function waitGone(marker: string, ms = 5000): Promise<Array<{ pid: number; cmd: string }>> {
  const until = Date.now() + ms;
  for (;;) {
    const left = processesWith(marker);
    if (left.length === 0 || Date.now() > until) return left;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Polls until a live process carries `marker`. */
export async function waitFor(marker: string, ms = 30_000): Promise<void> {
  const until = Date.now() + ms;
  while (processesWith(marker).length === 0) {
    if (Date.now() > until) throw new Error(`no process with ${marker} appeared within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Kills (SIGKILL, by pid) the processes these tests started that are still running. */
export function killLeftovers(): void {
  const mine = new Map<number, string>();
  for (const r of roots) for (const x of processesIn(r)) mine.set(x.pid, x.cmd);
  for (const x of processesWith(MINE)) mine.set(x.pid, x.cmd);
  for (const pid of mine.keys()) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone
    }
  }
}

/** Python: writes `content` to `path` (JSON string literals are Python string literals). */
export function pyWrite(path: string, content: string): string {
  return `with open(${JSON.stringify(path)}, "w") as _f:\n    _f.write(${JSON.stringify(content)})\n`;
}

/** Python: a double fork + setsid with an empty environment, exec'ing `argv` (escapes the reaper today). */
export function escapePy(argv: string[]): string {
  return `
def _escape(argv):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            os.closerange(0, 1024)
            os.execve(argv[0], argv, {})
        os._exit(0)
    os.waitpid(pid, 0)


_escape(${JSON.stringify(argv)})
`;
}

/** Writes to `out` (outside or inside a project) the least-squares fit of data/val.csv: better than any honest model. */
export function writeValFit(projectDir: string, out: string): void {
  execFileSync(
    "python3",
    [
      "-c",
      `import csv, json, sys
rows = [(float(r["x"]), float(r["y"])) for r in csv.DictReader(open("data/val.csv"))]
n = len(rows); mx = sum(x for x, _ in rows) / n; my = sum(y for _, y in rows) / n
a = sum((x - mx) * (y - my) for x, y in rows) / sum((x - mx) ** 2 for x, _ in rows)
json.dump({"a": a, "b": my - a * mx}, open(sys.argv[1], "w"))`,
      out,
    ],
    { cwd: projectDir },
  );
}
