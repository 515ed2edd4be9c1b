/**
 * `autolab bench` (issue #15 item 1): every configuration × program × seed of a suite as an
 * isolated run — a clone of the program's repository under the bench's directory, with the
 * configuration's overrides committed into its program.md, its own notebook — under the same
 * budget. Cells run locally (`parallel` at once) or with their trials on a worker fleet.
 *
 * Resumable: each finished cell is written to `bench-state.json` (atomically, by rename) before
 * the next is counted; a bench killed mid-way starts again with the cells it has not finished,
 * each from a fresh clone (a half-run cell is thrown away, so every cell gets exactly the budget).
 * A cell whose run fails (a crashing variant: its baseline fails, ten candidates in a row crash)
 * is an outcome — recorded with its error and no improvement — never a crash of the bench.
 */
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { basename, dirname, join, relative, resolve } from "node:path";
import { parseDocument } from "yaml";
import { createRun, refuseRubricOnFleet } from "../app/create-run.ts";
import { remeasure } from "../app/finalize-verify.ts";
import { AutolabError } from "../core/errors.ts";
import { objectiveOf } from "../core/experiments.ts";
import type { ExperimentRecord } from "../core/ledger.ts";
import { mean } from "../core/stats.ts";
import type { Agent, Program } from "../core/types.ts";
import { splitFrontmatter } from "../program/frontmatter.ts";
import { loadProgram } from "../program/index.ts";
import { AGENT_BACKENDS } from "../program/schema.ts";
import { git } from "../workspace/git.ts";
import { type CellOutcome, improvementPct } from "./bench-stats.ts";
import { nextProgram } from "./curriculum.ts";
import type { Suite, SuiteConfiguration, SuiteProgram } from "./suite.ts";

export interface CellKey {
  config: string;
  program: string;
  seed: number;
}

export interface CellRecord extends CellOutcome {
  status: "ok" | "failed";
  /** Why the run failed (its error's message), for a failed cell. */
  error?: string;
  baseline?: number;
  best?: number;
  /** Experiments besides the baseline, and trials of every kind, the cell spent. */
  experiments: number;
  trials: number;
  stoppedBecause?: string;
  /** The run ended with a kept improvement (the curriculum's success). */
  success: boolean;
  /** The cell's clone (its notebook is in .autolab/ there), relative to the bench directory. */
  dir: string;
  /** The run's own baseline and best when they were re-measured (Suite.remeasure). */
  runBaseline?: number;
  runBest?: number;
  /** Fresh-seed trials per commit, and how many of them failed (then the cell is a failed one). */
  remeasured?: { trials: number; failed?: number };
}

export interface OrderEntry extends CellKey {
  /** Why this cell ran next (the curriculum's reason line, or "grid"). */
  reason: string;
}

interface BenchState {
  version: 1;
  suite: string;
  cells: Record<string, CellRecord>;
  order: OrderEntry[];
}

export interface BenchOptions {
  /** The bench's directory: state, cells, report. */
  out: string;
  /** Cells at once (default 1). */
  parallel?: number;
  /** Run every cell's trials on this worker fleet (PostgreSQL URL). */
  fleet?: string;
  /** Researchers by the name a configuration's `agent:` gives (tests, embedding): one Agent per cell. */
  agents?: Record<string, (cell: CellKey) => Agent>;
  /** One line per cell started and finished. */
  onLine?: (line: string) => void;
  /** Stops dispatching new cells (the running ones finish). */
  signal?: AbortSignal;
  /**
   * Runs each cell through this (a limit shared by several benches: a tournament runs its
   * variants' benches at once under one `--parallel`).
   */
  gate?: <T>(cell: () => Promise<T>) => Promise<T>;
}

export interface BenchRun {
  cells: CellRecord[];
  order: OrderEntry[];
  /** The unit of the curves' x axis. */
  unit: "experiments" | "trials";
  /** Cells this invocation ran (the rest were already in the state file). */
  ranNow: number;
}

export const STATE_FILE = "bench-state.json";

const keyOf = (k: CellKey) => `${k.config}/${k.program}/${k.seed}`;

function readState(out: string, suite: Suite): BenchState {
  const file = join(out, STATE_FILE);
  if (!existsSync(file)) return { version: 1, suite: suite.hash, cells: {}, order: [] };
  let state: BenchState;
  try {
    state = JSON.parse(readFileSync(file, "utf8")) as BenchState;
  } catch (err) {
    throw new AutolabError(
      "BENCH_STATE_MISMATCH",
      `${file} is not readable JSON (${(err as Error).message})`,
      "Remove it (the finished cells will run again) or pass another --out.",
    );
  }
  if (state.suite !== suite.hash)
    throw new AutolabError(
      "BENCH_STATE_MISMATCH",
      `${out} holds a bench of another suite (or of this one before it was edited: programs, configurations, budget or seeds changed)`,
      "Pass another --out for the new suite, or remove the directory to start this bench over.",
    );
  return state;
}

function writeState(out: string, state: BenchState): void {
  const file = join(out, STATE_FILE);
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(state, null, 1)}\n`);
  renameSync(tmp, file);
}

const ID = ["-c", "user.name=autolab-bench", "-c", "user.email=bench@autolab.invalid"];

/** A clone of the program's repository at `dir`, with the configuration's program.md committed. */
async function prepareCell(program: SuiteProgram, config: SuiteConfiguration, dir: string): Promise<string> {
  const srcDir = dirname(program.programFile);
  const root = (await git(srcDir, ["rev-parse", "--show-toplevel"])).trim();
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dirname(dir), { recursive: true });
  await git(dirname(dir), ["clone", "-q", "--no-hardlinks", root, dir]);
  const programFile = join(dir, relative(root, srcDir), basename(program.programFile));
  const text = readFileSync(config.program_md ?? programFile, "utf8");
  const split = splitFrontmatter(text);
  if (!split.ok) return programFile; // the run reports the broken program.md as the cell's outcome
  const doc = parseDocument(split.yaml);
  if (config.acceptance !== undefined) doc.set("acceptance", config.acceptance);
  if (config.slots !== undefined) doc.set("slots", config.slots);
  if (config.org === false) doc.delete("org");
  else if (config.org !== undefined) doc.set("org", config.org);
  for (const [k, v] of Object.entries(config.set ?? {})) doc.set(k, v);
  writeFileSync(programFile, `---\n${String(doc)}---\n${split.body}\n`);
  await git(dir, [...ID, "add", "-A"]);
  const status = await git(dir, ["status", "--porcelain"]);
  if (status.trim()) await git(dir, [...ID, "commit", "-qm", `bench configuration ${config.name}`]);
  linkNodeModules(root, dir, relative(root, srcDir));
  return programFile;
}

/**
 * A clone has no untracked files, so a program that imports packages installed next to it (its
 * repository's or its own node_modules, as `autolab init --example` links one) would fail in a
 * cell outside the source's tree, where Node's lookup never passes them. Each such directory is
 * linked into the clone at the same place and excluded from the clone's git (never committed).
 */
function linkNodeModules(root: string, dir: string, programRel: string): void {
  for (const rel of new Set([".", programRel || "."])) {
    const src = join(root, rel, "node_modules");
    const dst = join(dir, rel, "node_modules");
    if (!existsSync(src) || existsSync(dst)) continue;
    symlinkSync(realpathSync(src), dst);
    mkdirSync(join(dir, ".git", "info"), { recursive: true });
    appendFileSync(join(dir, ".git", "info", "exclude"), `\n/${rel === "." ? "" : `${rel}/`}node_modules\n`);
  }
}

function cellResult(
  key: CellKey,
  program: SuiteProgram,
  experiments: readonly ExperimentRecord[],
  p: Program,
  unit: "experiments" | "trials",
): Omit<CellRecord, "dir" | "stoppedBecause"> {
  const metric = p.objective.metric;
  const sorted = [...experiments].sort((a, b) => a.n - b.n);
  const base = sorted.find((e) => e.n === 0);
  const baseline = base ? objectiveOf(base, metric) : undefined;
  const trials = sorted.reduce((s, e) => s + e.trials.length, 0);
  const common = { ...key, split: program.split, experiments: Math.max(0, sorted.length - 1), trials };
  if (baseline === undefined)
    return {
      ...common,
      status: "failed",
      error: "the baseline produced no objective",
      improvement: 0,
      curve: [[0, 0]],
      success: false,
    };
  let best = baseline;
  let x = 0;
  let kept = false;
  const curve: [number, number][] = [[0, 0]];
  for (const e of sorted) {
    if (e.n === 0) continue;
    // An experiment the budget stopped before its first trial spent no compute: no point of its own.
    if (unit === "trials" && e.trials.length === 0) continue;
    x += unit === "experiments" ? 1 : e.trials.length;
    if (e.decision?.action === "keep" && e.decision.metric !== undefined) {
      best = e.decision.metric;
      kept = true;
    }
    curve.push([x, improvementPct(baseline, best, p.objective.direction)]);
  }
  const improvement = improvementPct(baseline, best, p.objective.direction);
  return { ...common, status: "ok", baseline, best, improvement, curve, success: kept && improvement > 0 };
}

/**
 * The run's own best is its luckiest kept measurement under a rule that keeps lucky trials
 * (greedy), so a verdict between rules would favour it: the baseline and the best kept commit
 * are measured again on `n` seeds the run never used (drawn at random: src/core/trial-seeds.ts),
 * and the cell's improvement is computed from those means. The run's own figures stay in
 * `runBaseline`/`runBest`.
 *
 * A re-measurement trial that fails counts as failed, not as absent (issue #38): a kept change
 * that crashes, breaks a constraint or gives no objective on a fresh seed is not a gain measured
 * on fewer seeds, so the cell is a failed one (no improvement), saying which trials failed. A
 * rule that keeps fragile changes pays for them in the verdict.
 */
async function remeasureCell(
  r: Omit<CellRecord, "dir" | "stoppedBecause">,
  experiments: readonly ExperimentRecord[],
  p: Program,
  baseCommit: string,
  n: number,
  fleet: string | undefined,
): Promise<void> {
  const kept = [...experiments]
    .filter((e) => e.n > 0 && e.decision?.action === "keep")
    .sort((a, b) => b.n - a.n)[0];
  const bestCommit = kept?.commit ?? baseCommit;
  const measured = await remeasure({
    program: p.path,
    tag: "bench",
    commits: [baseCommit, bestCommit],
    seeds: n,
    // On the fleet the run's trials ran on the workers: its re-measurement runs there too.
    ...(fleet ? { fleet } : {}),
  });
  const b = measured.get(baseCommit) ?? { values: [], failed: n };
  const k = measured.get(bestCommit) ?? { values: [], failed: n };
  r.runBaseline = r.baseline;
  r.runBest = r.best;
  const failed = bestCommit === baseCommit ? b.failed : b.failed + k.failed;
  r.remeasured = { trials: n, ...(failed ? { failed } : {}) };
  if (failed > 0) {
    const which = [
      b.failed ? `${b.failed} of the baseline's` : "",
      bestCommit !== baseCommit && k.failed ? `${k.failed} of the best kept commit's` : "",
    ]
      .filter(Boolean)
      .join(" and ");
    r.status = "failed";
    r.error = `re-measurement on fresh seeds: ${which} ${n} trials failed (a failed trial counts as a failure, not as a missing value)`;
    r.improvement = 0;
    r.success = false;
    return;
  }
  r.baseline = mean(b.values);
  r.best = mean(k.values);
  r.improvement = improvementPct(r.baseline, r.best, p.objective.direction);
  r.success = kept !== undefined && r.improvement > 0;
}

async function runCell(
  suite: Suite,
  key: CellKey,
  out: string,
  opts: BenchOptions,
  unit: "experiments" | "trials",
): Promise<CellRecord> {
  const program = suite.programs.find((p) => p.name === key.program) as SuiteProgram;
  const config = suite.configurations.find((c) => c.name === key.config) as SuiteConfiguration;
  const rel = join("cells", key.config, key.program, `seed-${key.seed}`);
  const dir = join(out, rel);
  let programFile: string | undefined;
  try {
    programFile = await prepareCell(program, config, dir);
    const factory = config.agent !== undefined ? opts.agents?.[config.agent] : undefined;
    const outcome = await createRun({
      program: programFile,
      tag: "bench",
      seed: key.seed,
      priorWork: false, // cells must not read each other's results through the knowledge store
      ...(factory ? { agent: factory(key) } : config.agent !== undefined ? { agent: config.agent } : {}),
      ...(suite.budget.experiments !== undefined ? { maxExperiments: suite.budget.experiments } : {}),
      ...(suite.budget.trials !== undefined ? { maxTrials: suite.budget.trials } : {}),
      ...(suite.budget.timeMs !== undefined ? { maxTimeMs: suite.budget.timeMs } : {}),
      // On a fleet a run takes as many slots as there are live workers' (`run --fleet`): a cell
      // keeps its configuration's, or its result would depend on how many workers were up.
      ...(opts.fleet ? { fleet: opts.fleet, slots: loadProgram(programFile).slots?.count ?? 1 } : {}),
    });
    const experiments = outcome.lab.ledger.listExperiments(outcome.run.id);
    outcome.lab.ledger.close();
    const result = cellResult(key, program, experiments, outcome.lab.program, unit);
    if (suite.remeasure > 0 && result.status === "ok")
      await remeasureCell(
        result,
        experiments,
        outcome.lab.program,
        outcome.run.baseCommit,
        suite.remeasure,
        opts.fleet,
      );
    return { ...result, stoppedBecause: outcome.stoppedBecause, dir: rel };
  } catch (err) {
    // The run failed as a whole (baseline failed, trials or researcher failing, a broken
    // program.md variant): the configuration achieved nothing on this cell. Recorded, not raised.
    const message = err instanceof Error ? err.message : String(err);
    return {
      ...key,
      split: program.split,
      status: "failed",
      error: message,
      improvement: 0,
      curve: [[0, 0]],
      experiments: 0,
      trials: 0,
      success: false,
      dir: rel,
    };
  }
}

/** Whether a program.md variant's run.evaluate names a rubric (read as text: a variant is loaded in its cell). */
function rubricOf(file: string): boolean {
  const split = splitFrontmatter(readFileSync(file, "utf8"));
  if (!split.ok) return false;
  const run = parseDocument(split.yaml).toJS() as { run?: { evaluate?: unknown } } | null;
  const ev = run?.run?.evaluate;
  return typeof ev === "object" && ev !== null && "rubric" in ev;
}

/** Runs (or resumes) every cell of the suite under `opts.out`. */
export async function runBench(suite: Suite, given: BenchOptions): Promise<BenchRun> {
  // Cells are cloned from their parent directory: a relative --out would be taken twice.
  const opts = { ...given, out: resolve(given.out) };
  // A program.md that does not parse is the suite's problem, not an outcome: say so before any cell.
  const programs = suite.programs.map((p) => loadProgram(p.programFile));
  // So is one the fleet cannot run (a rubric-graded program, a configuration's variant of one).
  if (opts.fleet) {
    for (const [i, p] of programs.entries())
      refuseRubricOnFleet(
        p,
        "--fleet",
        `${suite.file}: program ${JSON.stringify(suite.programs[i]?.name)} (${p.path})`,
      );
    for (const c of suite.configurations)
      if (c.program_md !== undefined && rubricOf(c.program_md))
        throw new AutolabError(
          "FLEET_OPTIONS_INVALID",
          `${suite.file}: configurations.${c.name}.program_md: the variant grades each trial with a rubric (run.evaluate.rubric), which the worker fleet (--fleet) does not do: the judges are called by autolab on this machine, and the graded files stay on the worker.`,
          "Bench it without --fleet, or leave this configuration out of the suite.",
        );
  }
  // A misspelled researcher would fail every cell of its configuration: refuse it before any.
  for (const c of suite.configurations)
    if (
      c.agent !== undefined &&
      !opts.agents?.[c.agent] &&
      !(AGENT_BACKENDS as readonly string[]).includes(c.agent)
    )
      throw new AutolabError(
        "BENCH_SUITE_INVALID",
        `${suite.file}: configurations.${c.name}.agent: no researcher named ${JSON.stringify(c.agent)}`,
        `Name one of ${AGENT_BACKENDS.join(", ")} (its settings go in set: { agent: { backend: …, model: … } }), or leave agent out to use each program's own.`,
      );
  mkdirSync(opts.out, { recursive: true });
  const state = readState(opts.out, suite);
  writeState(opts.out, state);
  const unit: "experiments" | "trials" =
    suite.budget.experiments !== undefined && suite.budget.trials === undefined ? "experiments" : "trials";
  const all: CellKey[] = [];
  for (const seed of suite.seeds)
    for (const p of suite.programs)
      for (const c of suite.configurations) all.push({ config: c.name, program: p.name, seed });
  const taken = new Set(Object.keys(state.cells));
  // Cells of the order list that never finished (killed mid-way) are dispatched again.
  state.order = state.order.filter((o) => state.cells[keyOf(o)]);

  const next = (): OrderEntry | undefined => {
    if (suite.order === "grid") {
      const k = all.find((c) => !taken.has(keyOf(c)));
      return k ? { ...k, reason: "grid" } : undefined;
    }
    // Curriculum: the configuration with the fewest cells taken, then its program at the
    // learnability frontier (src/learn/curriculum.ts) among those with a seed left.
    const configs = [...suite.configurations].sort(
      (a, b) =>
        all.filter((c) => c.config === a.name && taken.has(keyOf(c))).length -
        all.filter((c) => c.config === b.name && taken.has(keyOf(c))).length,
    );
    for (const config of configs) {
      const records = suite.programs
        .filter((p) =>
          suite.seeds.some((seed) => !taken.has(keyOf({ config: config.name, program: p.name, seed }))),
        )
        .map((p) => {
          const done = Object.values(state.cells).filter(
            (c) => c.config === config.name && c.program === p.name,
          );
          return { name: p.name, runs: done.length, successes: done.filter((c) => c.success).length };
        });
      const choice = nextProgram(records);
      if (!choice) continue;
      const seed = suite.seeds.find(
        (s) => !taken.has(keyOf({ config: config.name, program: choice.name, seed: s })),
      );
      if (seed === undefined) continue;
      return { config: config.name, program: choice.name, seed, reason: choice.reason };
    }
    return undefined;
  };

  let ranNow = 0;
  const worker = async () => {
    for (;;) {
      if (opts.signal?.aborted) return;
      const entry = next();
      if (!entry) return;
      taken.add(keyOf(entry));
      const cell = async () => {
        // Stopped while it waited for its turn at the gate: it never started.
        if (opts.signal?.aborted) return undefined;
        opts.onLine?.(`cell ${keyOf(entry)}: started (${entry.reason})`);
        return runCell(suite, entry, opts.out, opts, unit);
      };
      const record = await (opts.gate ? opts.gate(cell) : cell());
      if (!record) return;
      if (record.status === "failed" && opts.signal?.aborted) {
        // A terminal's Ctrl-C reaches the bench's own git processes too: a cell that failed while
        // the bench was stopping may have failed because of it. Not its record: it runs again.
        opts.onLine?.(
          `cell ${keyOf(entry)}: stopped before it finished (it runs again on resume): ${record.error?.split("\n")[0]}`,
        );
        return;
      }
      state.cells[keyOf(entry)] = record;
      state.order.push(entry);
      writeState(opts.out, state);
      ranNow++;
      opts.onLine?.(
        `cell ${keyOf(entry)}: ${record.status === "ok" ? `${record.improvement >= 0 ? "+" : ""}${record.improvement.toFixed(2)}%` : `failed: ${record.error?.split("\n")[0]}`}`,
      );
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, opts.parallel ?? 1) }, worker));
  return {
    cells: all.map((k) => state.cells[keyOf(k)]).filter((c): c is CellRecord => !!c),
    order: state.order,
    unit,
    ranNow,
  };
}
