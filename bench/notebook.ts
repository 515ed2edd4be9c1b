/**
 * Ledger cost per experiment of the research loop's access pattern, by notebook size.
 *
 * The loop reads the notebook several times per experiment (best, attempt count, the best's
 * learning curve, finished trials, the best after deciding). Without a cache each list reads
 * every experiment and trial of the run again: O(n) per experiment, O(n²) over a run.
 *
 * For each size (experiments already in the run, 2 finished trials each, all decided) and each
 * mode, a copy of the same notebook gets `experiments` more experiments, each with this pattern
 * (what src/core/loop.ts does for an experiment with two trials):
 *   listExperiments, addExperiment, listExperiments,
 *   2 × (getExperiment, startTrial, listExperiments, finishTrial, getExperiment),
 *   decide, getExperiment, listExperiments
 * Modes: "uncached" (SqliteLedger { cache: false }: every list reads the run again, as before
 * the cache), "cached", "cached + writer" (another connection commits a note before each
 * experiment, as `autolab note` or a second tool would: every first read then syncs), and
 * "writes only" (the same writes without any read: the floor).
 * A few unmeasured experiments warm each cell up. Uncached cells measure fewer experiments at
 * large sizes (each costs seconds there).
 *
 * With AUTOLAB_PG_URL (postgres://…), the cached, cached + writer and writes-only cells run on
 * the PostgreSQL notebook too (a copy of the same notebook in a schema of its own, dropped
 * after; sizes up to 1,000 unless AUTOLAB_PG_SIZES says otherwise).
 *
 * `npm run bench -- notebook [sizes=100,1000,5000,10000] [experiments=200]`
 */
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Ledger, NewExperiment, NewTrial } from "../src/core/ledger.ts";
import type { TrialResult } from "../src/core/types.ts";
import { copyNotebook } from "../src/ledger/copy-notebook.ts";
import { PgLedger } from "../src/ledger/pg/pg-ledger.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";

type Mode = "uncached" | "cached" | "writer" | "writes";
const MODES: Mode[] = ["uncached", "cached", "writer", "writes"];

export async function main(args: string[]): Promise<Record<string, number | string>> {
  const sizes = (args[0] ?? "100,1000,5000,10000").split(",").map(Number);
  const perSize = Number(args[1] ?? 200);
  const dir = mkdtempSync(join(tmpdir(), "autolab-bench-notebook-"));
  const figures: Record<string, number | string> = { benchmark: "notebook", experiments_measured: perSize };
  console.log(
    `ledger cost per experiment, median ms (pattern: 5 lists, 5 gets, 1 add, 2 trial starts and results, 1 decision; ${perSize} experiments per cell, uncached fewer)`,
  );
  console.log("size     uncached (n)    cached  cached+writer  writes only  speedup  first list");
  try {
    for (const size of sizes) {
      const template = join(dir, `template-${size}.db`);
      const runId = fill(template, size);
      const row: Record<Mode, number> = { uncached: 0, cached: 0, writer: 0, writes: 0 };
      let cold = 0;
      const uncachedCount = Math.max(5, Math.min(perSize, Math.round(20_000 / size)));
      for (const mode of MODES) {
        const path = join(dir, `${mode}-${size}.db`);
        copyFileSync(template, path);
        const open = (cache: boolean) => new SqliteLedger(path, { cache });
        const m = measure(open, runId, size, mode === "uncached" ? uncachedCount : perSize, mode);
        row[mode] = m.medianMs;
        if (mode === "cached") {
          cold = m.coldListMs;
          figures[`cached_mean_ms_${size}`] = round(m.meanMs);
        }
        figures[`${mode}_ms_${size}`] = round(m.medianMs);
      }
      figures[`speedup_${size}`] = round(row.uncached / row.cached);
      figures[`first_list_ms_${size}`] = round(cold);
      console.log(
        `${String(size).padEnd(8)} ${fmt(row.uncached, 8)} (${String(uncachedCount).padStart(3)}) ${fmt(row.cached, 9)} ${fmt(row.writer, 14)} ${fmt(row.writes, 12)} ${fmt(row.uncached / row.cached, 7)}×  ${fmt(cold, 9)}`,
      );
    }
    const pgUrl = process.env.AUTOLAB_PG_URL;
    if (pgUrl) {
      const pgSizes = (process.env.AUTOLAB_PG_SIZES ?? "100,1000").split(",").map(Number);
      console.log("\nPostgreSQL notebook (the same pattern through the worker-thread bridge), median ms:");
      console.log("size       cached  cached+writer  writes only  first list");
      for (const size of pgSizes) {
        const template = join(dir, `pg-template-${size}.db`);
        const runId = fill(template, size);
        const row: Partial<Record<Mode, number>> = {};
        let cold = 0;
        for (const mode of ["cached", "writer", "writes"] as const) {
          const u = new URL(pgUrl);
          u.searchParams.set("schema", `bench_${mode}_${size}_${process.pid}`);
          const url = u.toString();
          const from = new SqliteLedger(template);
          const to = new PgLedger(url);
          copyNotebook(from, to);
          from.close();
          try {
            const m = measure((cache) => new PgLedger(url, { cache }), runId, size, perSize, mode);
            row[mode] = m.medianMs;
            if (mode === "cached") cold = m.coldListMs;
            figures[`pg_${mode}_ms_${size}`] = round(m.medianMs);
          } finally {
            to.pg.query(`DROP SCHEMA "${new URL(url).searchParams.get("schema")}" CASCADE`);
            to.close();
          }
        }
        figures[`pg_first_list_ms_${size}`] = round(cold);
        console.log(
          `${String(size).padEnd(8)} ${fmt(row.cached ?? 0, 9)} ${fmt(row.writer ?? 0, 14)} ${fmt(row.writes ?? 0, 12)}  ${fmt(cold, 9)}`,
        );
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return figures;
}

/** A notebook with one run of `size` decided experiments, 2 finished trials each. */
function fill(path: string, size: number): number {
  const l = new SqliteLedger(path, { cache: false });
  const run = l.createRun({
    tag: "bench",
    branch: "autolab/bench",
    programPath: "/bench/program.md",
    programName: "bench",
    metric: "score",
    direction: "minimize",
    baseCommit: "0".repeat(40),
    protectedHashes: { "score.awk": "a".repeat(64) },
    seed: 1,
  });
  l.db.exec("BEGIN");
  for (let n = 0; n < size; n++) {
    const e = l.addExperiment(experiment(run.id, n));
    for (const attempt of [1, 2]) l.finishTrial(l.startTrial(trial(e.id, attempt)), result(n), logDir(n));
    l.decide(e.id, { action: n % 7 === 0 ? "keep" : "discard", reason: "bench", metric: 1 / (n + 1) });
  }
  l.db.exec("COMMIT");
  l.close();
  return run.id;
}

function measure(
  open: (cache: boolean) => Ledger,
  runId: number,
  size: number,
  count: number,
  mode: Mode,
): { medianMs: number; meanMs: number; coldListMs: number } {
  const l = open(mode === "cached" || mode === "writer");
  const other = mode === "writer" ? open(true) : undefined;
  const reads = mode !== "writes";
  let t = performance.now();
  if (reads) l.listExperiments(runId);
  const coldListMs = performance.now() - t;
  const warmup = mode === "uncached" ? 2 : 5;
  const times: number[] = [];
  let sink = 0;
  for (let i = 0; i < warmup + count; i++) {
    const n = size + i;
    other?.addNote(runId, null, `note ${i}`);
    t = performance.now();
    if (reads) sink += l.listExperiments(runId).length;
    const e = l.addExperiment(experiment(runId, n));
    if (reads) sink += l.listExperiments(runId).length;
    for (const attempt of [1, 2]) {
      if (reads) sink += l.getExperiment(runId, n)?.trials.length ?? 0;
      const id = l.startTrial(trial(e.id, attempt));
      if (reads) sink += l.listExperiments(runId).length;
      l.finishTrial(id, result(n), logDir(n));
      if (reads) sink += l.getExperiment(runId, n)?.trials.length ?? 0;
    }
    l.decide(e.id, { action: "discard", reason: "bench", metric: 2 });
    if (reads) sink += l.getExperiment(runId, n)?.decision ? 1 : 0;
    if (reads) sink += l.listExperiments(runId).length;
    if (i >= warmup) times.push(performance.now() - t);
  }
  if (sink < 0) console.log(sink);
  other?.close();
  l.close();
  times.sort((a, b) => a - b);
  const medianMs = times[Math.floor(times.length / 2)] as number;
  return { medianMs, meanMs: times.reduce((a, b) => a + b, 0) / times.length, coldListMs };
}

function experiment(runId: number, n: number): NewExperiment {
  return {
    runId,
    n,
    agent: "builtin",
    parentCommit: "p".repeat(40),
    commit: `${n}`.padStart(40, "c"),
    ref: `refs/autolab/bench/${n}`,
    hypothesis: `X = ${(n % 97) / 97}, Y = ${n % 13}: a smaller X lowers the score`,
    mechanism: "the score is quadratic in X around 0.3",
    params: { X: (n % 97) / 97, Y: n % 13 },
    diff: { files: 1, insertions: 2, deletions: 2 },
    usage: { wallS: 0.01 },
  };
}

function trial(experimentId: number, attempt: number): NewTrial {
  return {
    experimentId,
    attempt,
    seed: attempt,
    command: "awk -f score.awk knobs.py",
    commit: "c".repeat(40),
    budgetMs: 10_000,
    env: { AUTOLAB_SEED: String(attempt), AUTOLAB_BUDGET_S: "10", AUTOLAB_TRIAL_TOKEN: "t".repeat(24) },
  };
}

function result(n: number): TrialResult {
  return {
    status: "ok",
    exitCode: 0,
    signal: null,
    wallS: 0.004,
    cpuS: 0.003,
    peakRssMb: 3.5,
    metrics: { score: 1 / (n + 1) },
    selfReported: false,
    seed: 1,
    command: "awk -f score.awk knobs.py",
    stdoutPath: `/logs/${n}/stdout.log`,
    stderrPath: `/logs/${n}/stderr.log`,
    logTail: `score: ${1 / (n + 1)}\n`,
    progress: [
      [0.5, 2],
      [1, 1],
    ],
  };
}

const logDir = (n: number) => `/logs/${n}`;

function fmt(x: number, width: number): string {
  const s = x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x >= 1 ? x.toFixed(2) : x.toFixed(3);
  return s.padStart(width);
}

function round(x: number): number {
  return x >= 10 ? Math.round(x * 10) / 10 : Math.round(x * 1000) / 1000;
}
