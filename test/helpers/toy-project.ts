/**
 * Fixture for end-to-end tests: a tiny project the real `autolab` CLI can optimize, and helpers
 * to run that CLI as a separate process and read what it left behind (notebook, git refs).
 *
 * The toy's `train.mjs` has two knobs (`const LR = …;`, `const WIDTH = …;`) and a smooth score
 * with its minimum at LR = 0.01, WIDTH = 32, so the built-in optimizer finds improvements in a
 * few experiments. Each invocation of train.mjs appends a line to a counter file outside the
 * repository; `plan[i]` says how the i-th invocation behaves (0 is the baseline), which lets a
 * test make one particular trial crash, hang or tamper with the protected evaluator.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { fileURLToPath } from "node:url";
import { afterAll } from "vitest";
import { PgLedger } from "../../src/ledger/pg/pg-ledger.ts";

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const CLI_MAIN = join(REPO_ROOT, "src", "cli", "main.ts");

/** The value the protected evaluator prints as `secret_holdout:`; no view for agents may show it. */
export const TOY_HOLDOUT = 4242.4242;

/** How one invocation of train.mjs behaves. */
export type TrialBehavior =
  | "ok"
  | "crash" // exits 3 with a message on stderr
  | "hang" // sleeps far beyond any budget
  | "tamper" // rewrites the protected evaluate.mjs to report a perfect score
  | "no-metric"; // exits 0 without producing a score

export interface ToyOptions {
  /** Each trial sleeps this long before producing its score. Default 0. */
  sleepMs?: number;
  /** Adds a protected `evaluate: node evaluate.mjs` step printing `score:` and `secret_holdout:`. */
  evaluate?: boolean;
  /** Adds `setup: node setup.mjs`, which sleeps this long (ms) once per worktree. */
  setupMs?: number;
  /** Behaviour of the i-th invocation of train.mjs (0 = baseline); later invocations are "ok". */
  plan?: TrialBehavior[];
  /** run.budget (default "5s"). */
  budget?: string;
  /** run.grace (default: the harness's). */
  grace?: string;
  /** Replaces run.command (default "node train.mjs"). */
  command?: string;
  /** Initial knob values (default LR 0.5, WIDTH 10). */
  lr?: number;
  width?: number;
  /** program.md `agent:` (default: not set, i.e. builtin). */
  agent?: string;
  /** program.md `acceptance:` (default greedy: one trial per experiment keeps these tests about mechanics). */
  acceptance?: "greedy" | "noise";
  /**
   * "loss" (default): a smooth function of the knobs. "decreasing": the i-th invocation scores
   * 100 - i, so every candidate beats the best and is kept (for tests that need a keep).
   */
  score?: "loss" | "decreasing";
  /** program.md `slots:` (default: not set, i.e. one slot and the serial loop). */
  slots?: number;
  /** `off`: trials run without the sandbox (program.md `sandbox: off`). */
  sandbox?: "off";
  /** program.md `hooks:` (docs/program.md "Hooks"): commands run before each proposal and after each decision. */
  hooks?: { before?: string; after?: string; budget?: string };
  /** Don't commit: leaves a repository with the files staged but no commit. */
  noCommit?: boolean;
  /** Don't create a git repository at all. */
  noGit?: boolean;
}

export interface ToyProject {
  /** The project directory (a git repository holding program.md). */
  dir: string;
  /** Scratch directory next to the project (outside git): the invocation counter lives here. */
  scratch: string;
  /** How many times train.mjs has started so far. */
  invocations(): number;
  git(args: string[]): string;
  cleanup(): void;
}

/** Git with no user or system config, so a developer's hooks, signing or aliases can't interfere. */
export const GIT_ENV: Record<string, string> = {
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_TERMINAL_PROMPT: "0",
};

const GIT_ID = ["-c", "user.name=toy", "-c", "user.email=toy@example.com"];

export function git(cwd: string, args: string[]): string {
  return execFileSync("git", args, {
    cwd,
    encoding: "utf8",
    env: { ...process.env, ...GIT_ENV },
    stdio: ["ignore", "pipe", "pipe"],
  });
}

export function programMd(o: ToyOptions, scratch?: string): string {
  const run = [
    ...(o.setupMs !== undefined ? ["  setup: node setup.mjs"] : []),
    `  command: ${o.command ?? "node train.mjs"}`,
    ...(o.evaluate ? ["  evaluate: node evaluate.mjs"] : []),
    `  budget: ${o.budget ?? "5s"}`,
    ...(o.grace ? [`  grace: ${o.grace}`] : []),
  ];
  return [
    "---",
    "name: toy",
    "objective: { metric: score, direction: minimize }",
    "run:",
    ...run,
    "files:",
    "  editable: [train.mjs]",
    ...(o.evaluate ? ["  protected: [evaluate.mjs]", "outputs: [out/]"] : []),
    ...(o.evaluate ? ["metrics:", "  holdout: [secret_holdout]", "  progress: train_loss"] : []),
    ...(o.agent ? [`agent: ${o.agent}`] : []),
    `acceptance: ${o.acceptance ?? "greedy"}`,
    ...(o.slots !== undefined ? [`slots: ${o.slots}`] : []),
    ...(o.hooks
      ? [
          "hooks:",
          ...(o.hooks.before !== undefined ? [`  before: ${JSON.stringify(o.hooks.before)}`] : []),
          ...(o.hooks.after !== undefined ? [`  after: ${JSON.stringify(o.hooks.after)}`] : []),
          ...(o.hooks.budget !== undefined ? [`  budget: ${o.hooks.budget}`] : []),
        ]
      : []),
    // train.mjs counts its invocations in the scratch directory: writable in the sandbox.
    ...(o.sandbox === "off" ? ["sandbox: off"] : []),
    ...(scratch && o.sandbox !== "off" ? [`sandbox: { caches: [${JSON.stringify(scratch)}] }`] : []),
    "search:",
    "  LR: { low: 0.0001, high: 1, log: true }",
    "  WIDTH: { low: 2, high: 256, int: true, log: true }",
    "---",
    "# Research directions",
    "",
    "Tune LR and WIDTH. The score is smooth in log(LR) and log(WIDTH).",
    "",
  ].join("\n");
}

function trainMjs(o: ToyOptions, counter: string): string {
  return `import { appendFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";

const LR = ${o.lr ?? 0.5};
const WIDTH = ${o.width ?? 10};

const SLEEP_MS = ${o.sleepMs ?? 0};
const EVALUATE = ${o.evaluate ? "true" : "false"};
const PLAN = ${JSON.stringify(o.plan ?? [])};
const COUNTER = ${JSON.stringify(counter)};

let i = 0;
try {
  i = readFileSync(COUNTER, "utf8").split("\\n").filter(Boolean).length;
} catch {}
appendFileSync(COUNTER, \`\${process.pid}\\n\`);
const mode = PLAN[i] ?? "ok";
rmSync("out", { recursive: true, force: true });

const loss = ${o.score === "decreasing" ? "100 - i" : "(Math.log10(LR) + 2) ** 2 + (Math.log2(WIDTH) - 5) ** 2 / 10"};
console.log(\`METRIC train_loss=\${(loss * 2).toFixed(6)}\`);
if (mode === "crash") {
  console.error("toy: simulated crash (CUDA out of memory)");
  process.exit(3);
}
if (mode === "tamper") writeFileSync("evaluate.mjs", 'console.log("score: 0");\\n');
if (mode === "hang") await new Promise((r) => setTimeout(r, 600_000));
if (SLEEP_MS > 0) await new Promise((r) => setTimeout(r, SLEEP_MS));
if (mode !== "no-metric") {
  mkdirSync("out", { recursive: true });
  writeFileSync("out/result.json", JSON.stringify({ loss }));
  if (!EVALUATE) console.log(\`score: \${loss}\`);
}
`;
}

const EVALUATE_MJS = `import { readFileSync } from "node:fs";
const { loss } = JSON.parse(readFileSync("out/result.json", "utf8"));
console.log(\`score: \${loss}\`);
console.log("secret_holdout: ${TOY_HOLDOUT}");
`;

function setupMjs(ms: number): string {
  return `import { mkdirSync, writeFileSync } from "node:fs";
await new Promise((r) => setTimeout(r, ${ms}));
mkdirSync("data", { recursive: true });
writeFileSync("data/ready", "yes\\n");
`;
}

/** Creates the toy project in a new temporary directory and commits it on branch main. */
/**
 * Toy projects and other temporary directories of one test file, removed after its tests:
 * `const { toy, removeLater } = toysOfFile();` at the top of the file.
 */
export function toysOfFile(): {
  toy: (opts?: ToyOptions) => ToyProject;
  removeLater: (dir: string) => string;
} {
  const toys: ToyProject[] = [];
  const dirs: string[] = [];
  afterAll(() => {
    for (const t of toys) t.cleanup();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  return {
    toy: (opts = {}) => {
      const t = createToyProject(opts);
      toys.push(t);
      return t;
    },
    removeLater: (dir) => {
      dirs.push(dir);
      return dir;
    },
  };
}

export function createToyProject(opts: ToyOptions = {}): ToyProject {
  const root = mkdtempSync(join(tmpdir(), "autolab-e2e-"));
  const dir = join(root, "project");
  const scratch = join(root, "scratch");
  mkdirSync(dir);
  mkdirSync(scratch);
  const counter = join(scratch, "invocations");
  writeFileSync(join(dir, "program.md"), programMd(opts, scratch));
  writeFileSync(join(dir, "train.mjs"), trainMjs(opts, counter));
  writeFileSync(join(dir, ".gitignore"), "out/\ndata/\n");
  if (opts.evaluate) writeFileSync(join(dir, "evaluate.mjs"), EVALUATE_MJS);
  if (opts.setupMs !== undefined) writeFileSync(join(dir, "setup.mjs"), setupMjs(opts.setupMs));
  if (!opts.noGit) {
    git(dir, ["init", "-q", "-b", "main"]);
    git(dir, ["add", "-A"]);
    if (!opts.noCommit) git(dir, [...GIT_ID, "commit", "-q", "-m", "toy project"]);
  }
  return {
    dir,
    scratch,
    invocations: () => {
      try {
        return readFileSync(counter, "utf8").split("\n").filter(Boolean).length;
      } catch {
        return 0;
      }
    },
    git: (args) => git(dir, args),
    cleanup: () => rmSync(root, { recursive: true, force: true }),
  };
}

/** Commits everything in `dir` (for tests that change the project after creating it). */
export function commitAll(dir: string, message: string): void {
  git(dir, ["add", "-A"]);
  git(dir, [...GIT_ID, "commit", "-q", "-m", message]);
}

export interface CliOptions {
  cwd: string;
  env?: Record<string, string>;
  /** The process is SIGKILLed after this long and the promise rejects. Default 60 s. */
  timeoutMs?: number;
}

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * The environment of a CLI process: the test's, without any fault injection left over, with
 * git isolated from user config, and with Node's compile cache (it halves the CLI's start-up
 * time, which dominates these tests).
 */
function cliEnv(extra: Record<string, string> | undefined): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...GIT_ENV,
    NODE_COMPILE_CACHE: join(tmpdir(), "autolab-test-compile-cache"),
    NO_COLOR: "1",
    ...extra,
  };
  if (!extra?.AUTOLAB_CRASH_AT) delete env.AUTOLAB_CRASH_AT;
  return env;
}

export interface CliProcess {
  child: ChildProcess;
  /** Everything written to stdout so far. */
  stdout(): string;
  stderr(): string;
  /** Resolves once stdout (or stderr) matches; rejects after timeoutMs or if the process exits first. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<void>;
  /** Resolves when the process has exited and its output is complete. */
  done: Promise<CliResult>;
}

/** Starts `autolab <args>` (Node running src/cli/main.ts, as bin/autolab.mjs does under Node 24). */
export function spawnCli(args: string[], opts: CliOptions): CliProcess {
  const child = spawn(process.execPath, [CLI_MAIN, ...args], {
    cwd: opts.cwd,
    env: cliEnv(opts.env),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  const waiters = new Set<() => void>();
  const notify = () => {
    for (const w of [...waiters]) w();
  };
  child.stdout?.setEncoding("utf8").on("data", (d: string) => {
    out += d;
    notify();
  });
  child.stderr?.setEncoding("utf8").on("data", (d: string) => {
    err += d;
    notify();
  });
  const timeoutMs = opts.timeoutMs ?? 60_000;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill("SIGKILL");
  }, timeoutMs);
  const done = new Promise<CliResult>((res, rej) => {
    child.on("error", rej);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      notify();
      if (timedOut) {
        rej(new Error(`autolab ${args.join(" ")} did not finish within ${timeoutMs} ms\n${out}\n${err}`));
      } else res({ code, signal, stdout: out, stderr: err });
    });
  });
  let exited = false;
  done.then(
    () => {
      exited = true;
      notify();
    },
    () => {
      exited = true;
      notify();
    },
  );
  const waitFor = (pattern: RegExp, ms = 30_000) =>
    new Promise<void>((res, rej) => {
      const check = () => {
        if (pattern.test(out) || pattern.test(err)) {
          cleanup();
          res();
        } else if (exited || child.exitCode !== null || child.signalCode !== null) {
          cleanup();
          rej(new Error(`autolab exited before printing ${pattern}\n--- stdout\n${out}\n--- stderr\n${err}`));
        }
      };
      const t = setTimeout(() => {
        cleanup();
        rej(
          new Error(
            `timed out after ${ms} ms waiting for ${pattern}\n--- stdout\n${out}\n--- stderr\n${err}`,
          ),
        );
      }, ms);
      const cleanup = () => {
        clearTimeout(t);
        waiters.delete(check);
      };
      waiters.add(check);
      check();
    });
  return { child, stdout: () => out, stderr: () => err, waitFor, done };
}

/** Runs `autolab <args>` to completion. */
export function runCli(args: string[], opts: CliOptions): Promise<CliResult> {
  return spawnCli(args, opts).done;
}

/** Lines of a stack trace (an expected error must be a message and a fix, never a stack). */
export function stackLines(text: string): string[] {
  return text.split("\n").filter((l) => /^\s{4}at /.test(l));
}

export interface LedgerDump {
  runs: { id: number; tag: string; base_commit: string }[];
  experiments: {
    id: number;
    run_id: number;
    n: number;
    commit_sha: string;
    ref: string;
    parent_commit: string;
    rebase_of: number | null;
  }[];
  trialStarts: { id: number; experiment_id: number; attempt: number }[];
  trialResults: { trial_id: number; status: string; reason: string | null }[];
  decisions: { experiment_id: number; action: string; reason: string; metric: number | null }[];
}

/**
 * The raw tables of `<dir>/.autolab/lab.db` — or of the PostgreSQL notebook at `pgUrl` — read with
 * plain SQL (not through the ledger's reads under test).
 */
export function readLedger(dir: string, pgUrl?: string): LedgerDump {
  return withRawNotebook(dir, pgUrl, (all) => ({
    runs: all("SELECT id, tag, base_commit FROM runs ORDER BY id"),
    experiments: all(
      "SELECT id, run_id, n, commit_sha, ref, parent_commit, rebase_of FROM experiments ORDER BY run_id, n, id",
    ),
    trialStarts: all("SELECT id, experiment_id, attempt FROM trial_starts ORDER BY id"),
    trialResults: all("SELECT trial_id, status, reason FROM trial_results ORDER BY trial_id"),
    decisions: all("SELECT experiment_id, action, reason, metric FROM decisions ORDER BY experiment_id"),
  }));
}

/** Runs `read` with a raw query function over the lab's notebook (SQLite file, or PostgreSQL at `pgUrl`). */
export function withRawNotebook<R>(
  dir: string,
  pgUrl: string | undefined,
  read: (all: <T>(sql: string) => T[]) => R,
): R {
  if (pgUrl) {
    const l = new PgLedger(pgUrl);
    try {
      return read(<T>(sql: string) => l.pg.query<T>(sql));
    } finally {
      l.close();
    }
  }
  const db = new DatabaseSync(join(dir, ".autolab", "lab.db"), { readOnly: true });
  try {
    return read(<T>(sql: string) => db.prepare(sql).all() as unknown as T[]);
  } finally {
    db.close();
  }
}
