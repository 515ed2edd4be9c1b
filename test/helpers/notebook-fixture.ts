/**
 * Fixture notebooks for the viewers (API, dashboard, report, watch, the dashboard benchmark):
 * rows written through SqliteLedger exactly as the loop writes them, without running anything.
 */
import { join } from "node:path";
import type { RunRecord } from "../../src/core/ledger.ts";
import type { DecisionAction, Params, TrialStatus } from "../../src/core/types.ts";
import { SqliteLedger } from "../../src/ledger/sqlite-ledger.ts";

export interface FixtureExperiment {
  /** "running": a trial started, no result, no decision. "pending": no trial, no decision. */
  action: DecisionAction | "pending" | "running";
  /** The objective value (absent for crashes and running trials). */
  metric?: number;
  hypothesis?: string;
  mechanism?: string;
  reason?: string;
  /** Trial status; default from the action (crash → "crash", else "ok"). */
  status?: TrialStatus;
  /** Extra metrics of the trial (holdouts included, as the runner records them). */
  metrics?: Record<string, number>;
  /** The trial's learning curve ([fraction of the budget, value]), as the loop records it. */
  progress?: Array<[number, number]>;
  /** The researcher's usage (tokens, cost, wallS), as agents report it. */
  usage?: Record<string, number>;
  logTail?: string;
  commit?: string;
  parent?: string;
  params?: Params;
  wallS?: number;
  /** The org role that proposed it, and on a merge candidate the experiment it rebases. */
  role?: string;
  rebaseOf?: number;
  /** The slot its trial ran on (absent: a serial run). */
  slot?: number;
  /** A discard kept in the tree (the tree frontier): it beat its parent, not the best. */
  treeNode?: boolean;
}

export interface FixtureRun {
  tag?: string;
  /** program.md the run claims; its directory is where diffs are looked up (a git repo, or not). */
  programPath?: string;
  programName?: string;
  metric?: string;
  direction?: "minimize" | "maximize";
  holdout?: string[];
  budgetMs?: number;
  /** The commit the run started from (default: forty zeros). */
  baseCommit?: string;
  experiments: FixtureExperiment[];
}

/** Writes a run and its experiments; `bulk` wraps it all in one transaction (10,000 rows in a second). */
export function writeRun(ledger: SqliteLedger, spec: FixtureRun, opts: { bulk?: boolean } = {}): RunRecord {
  if (opts.bulk) ledger.db.exec("BEGIN");
  try {
    const metric = spec.metric ?? "val_bpb";
    const tag = spec.tag ?? "fixture";
    const run = ledger.createRun({
      tag,
      branch: `autolab/${tag}`,
      programPath: spec.programPath ?? "/nonexistent/program.md",
      programName: spec.programName ?? "fixture-lab",
      metric,
      direction: spec.direction ?? "minimize",
      baseCommit: spec.baseCommit ?? "0".repeat(40),
      protectedHashes: {},
      seed: 0,
      contract: {
        objective: { metric, direction: spec.direction ?? "minimize" },
        "metrics.holdout": spec.holdout ?? [],
      },
    });
    spec.experiments.forEach((x, n) => {
      appendExperiment(ledger, run, n, x, spec.budgetMs ?? 10_000);
    });
    if (opts.bulk) ledger.db.exec("COMMIT");
    return run;
  } catch (err) {
    if (opts.bulk) ledger.db.exec("ROLLBACK");
    throw err;
  }
}

/** Appends experiment `n` to `run`, with its trial and decision as `x` says. */
export function appendExperiment(
  ledger: SqliteLedger,
  run: RunRecord,
  n: number,
  x: FixtureExperiment,
  budgetMs = 10_000,
): void {
  const commit = x.commit ?? fakeSha(run.id * 1_000_000 + n + 1);
  const e = ledger.addExperiment({
    runId: run.id,
    n,
    agent: "builtin",
    parentCommit: x.parent ?? fakeSha(run.id * 1_000_000 + n),
    commit,
    ref: `refs/autolab/${run.tag}/${n}`,
    hypothesis: x.hypothesis ?? (n === 0 ? "baseline" : `LEARNING_RATE step ${n}`),
    ...(x.mechanism ? { mechanism: x.mechanism } : {}),
    ...(x.params ? { params: x.params } : {}),
    ...(x.usage ? { usage: x.usage } : {}),
    ...(x.role !== undefined ? { role: x.role } : {}),
    ...(x.rebaseOf !== undefined ? { rebaseOf: x.rebaseOf } : {}),
    diff: { files: n === 0 ? 0 : 1, insertions: n === 0 ? 0 : 1, deletions: n === 0 ? 0 : 1 },
  });
  if (x.action === "pending") return;
  const trial = ledger.startTrial({
    experimentId: e.id,
    attempt: 1,
    seed: 0,
    command: "node train.ts",
    commit,
    budgetMs,
    env: {},
    ...(x.slot !== undefined ? { slot: x.slot } : {}),
  });
  if (x.action === "running") return;
  const status = x.status ?? (x.action === "crash" ? "crash" : "ok");
  const metrics = { ...(x.metric !== undefined ? { [run.metric]: x.metric } : {}), ...x.metrics };
  ledger.finishTrial(
    trial,
    {
      status,
      ...(status !== "ok" ? { reason: x.reason ?? "exit code 1" } : {}),
      exitCode: status === "crash" ? 1 : 0,
      signal: null,
      wallS: x.wallS ?? 9.5 + (n % 7) / 10,
      cpuS: 9,
      peakRssMb: 80 + (n % 5),
      metrics,
      selfReported: false,
      seed: 0,
      command: "node train.ts",
      stdoutPath: "/dev/null",
      stderrPath: "/dev/null",
      logTail: x.logTail ?? `step 100 loss 2.5\n${run.metric}: ${x.metric ?? "nan"}\n`,
      ...(x.progress ? { progress: x.progress } : {}),
    },
    `/nonexistent/logs/${n}`,
  );
  ledger.decide(e.id, {
    action: x.action,
    reason: x.reason ?? defaultReason(x.action, x.metric),
    ...(x.metric !== undefined && x.action !== "crash" ? { metric: x.metric } : {}),
    mechanismConfirmed: x.action === "keep" ? true : x.action === "discard" ? false : null,
    ...(x.treeNode ? { treeNode: true } : {}),
  });
}

function defaultReason(action: DecisionAction, metric: number | undefined): string {
  switch (action) {
    case "keep":
      return `improved: ${metric}`;
    case "discard":
      return `not better: ${metric}`;
    case "crash":
      return "crash: exit code 1";
    default:
      return "constraint violated: peak_rss_mb <= 4096";
  }
}

export function fakeSha(i: number): string {
  return i.toString(16).padStart(40, "a");
}

/**
 * A lab that looks like a long optimizer run: a noisy search that improves less and less
 * often and plateaus, with crashes (~5 %) and constraint rejections (~2 %). Deterministic for a seed.
 */
export function syntheticExperiments(count: number, seed = 7): FixtureExperiment[] {
  const rand = mulberry32(seed);
  const gauss = () => Math.sqrt(-2 * Math.log(rand() || 1e-12)) * Math.cos(2 * Math.PI * rand());
  let best = 3.2;
  const out: FixtureExperiment[] = [{ action: "keep", metric: best, hypothesis: "baseline" }];
  for (let n = 1; n < count; n++) {
    const lr = (10 ** (-4 + 3 * rand())).toPrecision(3);
    const hidden = Math.round(16 + rand() * 400);
    const hypothesis = `LEARNING_RATE → ${lr}, HIDDEN → ${hidden}`;
    const r = rand();
    if (r < 0.05) {
      out.push({ action: "crash", hypothesis, reason: "crash: exit code 1 (out of memory)" });
      continue;
    }
    // Improvements get rarer as the run goes on: about 20 % of the first experiments, 0.1 % late.
    const metric = Number((best + 0.04 * (gauss() + 0.8 + 2.2 * (1 - Math.exp(-n / 800)))).toFixed(5));
    if (r < 0.07) {
      out.push({ action: "reject", metric, hypothesis, reason: "constraint violated: peak_rss_mb <= 4096" });
    } else if (metric < best) {
      best = metric;
      out.push({ action: "keep", metric, hypothesis, mechanism: "TPE: sampled near the best" });
    } else {
      out.push({ action: "discard", metric, hypothesis });
    }
  }
  return out;
}

function mulberry32(a: number): () => number {
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Makes `dir/.autolab/lab.db` holding `runs`; returns the notebook path. */
export function buildNotebook(dir: string, runs: FixtureRun[], opts: { bulk?: boolean } = {}): string {
  const path = join(dir, ".autolab", "lab.db");
  const ledger = new SqliteLedger(path);
  try {
    for (const r of runs) writeRun(ledger, r, opts);
  } finally {
    ledger.close();
  }
  return path;
}

/**
 * A run that branched (the tree frontier): #2 grew from the baseline and stays a tree node, #3
 * grew from #2 and beat the best (the ratchet moved to it), #4 grew from #1 and was discarded.
 * Tree: 0 → {1 → {4}, 2 → {3}}. #3's hypothesis is hostile markup.
 */
export const TREE_LAB: FixtureExperiment[] = [
  { action: "keep", metric: 10, commit: fakeSha(100) },
  { action: "keep", metric: 8, commit: fakeSha(101), parent: fakeSha(100), hypothesis: "steep side" },
  {
    action: "discard",
    treeNode: true,
    metric: 9,
    commit: fakeSha(102),
    parent: fakeSha(100),
    hypothesis: "gentle side",
    reason: "kept in the tree: better than #0; the best #1 (8) stays",
  },
  {
    action: "keep",
    metric: 7,
    commit: fakeSha(103),
    parent: fakeSha(102),
    hypothesis: "<img src=x onerror=alert(1)> further [x](javascript:alert(1))",
  },
  { action: "discard", metric: 8.5, commit: fakeSha(104), parent: fakeSha(101), hypothesis: "steeper" },
];
