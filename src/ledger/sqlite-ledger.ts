import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { DatabaseSync, type SQLInputValue } from "node:sqlite";
import { AutolabError } from "../core/errors.ts";
import type {
  ExperimentRecord,
  Ledger,
  NewExperiment,
  NewTrial,
  RunRecord,
  SessionRecord,
  TrialRecord,
} from "../core/ledger.ts";
import type { Decision, DecisionAction, Direction, TrialResult, TrialStatus } from "../core/types.ts";
import { MIGRATIONS } from "./migrations.ts";

type Row = Record<string, SQLInputValue>;

const now = () => new Date().toISOString();

/**
 * The embedded ledger: `.autolab/lab.db`. WAL mode, so a harness killed at any moment leaves
 * every committed row intact; each write is its own transaction.
 */
export class SqliteLedger implements Ledger {
  readonly db: DatabaseSync;

  constructor(path: string) {
    this.db = openDatabase(path);
    try {
      this.migrate();
    } catch (err) {
      // A refused notebook (too new, broken) must not stay open: the caller never gets `this`.
      this.db.close();
      throw err;
    }
  }

  private migrate(): void {
    this.db.exec(
      "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)",
    );
    const row = this.db.prepare("SELECT MAX(version) AS v FROM schema_migrations").get() as {
      v: number | null;
    };
    const current = row.v ?? 0;
    if (current > MIGRATIONS.length) {
      throw new AutolabError(
        "LEDGER_TOO_NEW",
        `the lab notebook has schema version ${current}, newer than this autolab understands (${MIGRATIONS.length}).`,
        "Upgrade autolab.",
      );
    }
    for (let v = current + 1; v <= MIGRATIONS.length; v++) {
      this.db.exec("BEGIN IMMEDIATE");
      try {
        this.db.exec(MIGRATIONS[v - 1] as string);
        this.db.prepare("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)").run(v, now());
        this.db.exec("COMMIT");
      } catch (err) {
        this.db.exec("ROLLBACK");
        throw err;
      }
    }
  }

  createRun(run: Omit<RunRecord, "id" | "startedAt">): RunRecord {
    const startedAt = now();
    const res = this.db
      .prepare(
        `INSERT INTO runs (tag, branch, program_path, program_name, metric, direction, base_commit,
          protected_hashes, seed, started_at, contract) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        run.tag,
        run.branch,
        run.programPath,
        run.programName,
        run.metric,
        run.direction,
        run.baseCommit,
        JSON.stringify(run.protectedHashes),
        run.seed,
        startedAt,
        run.contract ? JSON.stringify(run.contract) : null,
      );
    return { ...run, id: Number(res.lastInsertRowid), startedAt };
  }

  getRun(tag: string): RunRecord | undefined {
    const row = this.db.prepare("SELECT * FROM runs WHERE tag = ?").get(tag) as Row | undefined;
    return row ? toRun(row) : undefined;
  }

  latestRun(): RunRecord | undefined {
    const row = this.db.prepare("SELECT * FROM runs ORDER BY id DESC LIMIT 1").get() as Row | undefined;
    return row ? toRun(row) : undefined;
  }

  listRuns(): RunRecord[] {
    return (this.db.prepare("SELECT * FROM runs ORDER BY id").all() as Row[]).map(toRun);
  }

  addExperiment(exp: NewExperiment): ExperimentRecord {
    const createdAt = now();
    const res = this.db
      .prepare(
        `INSERT INTO experiments (run_id, n, agent, parent_commit, commit_sha, ref, hypothesis, mechanism,
          expected, params, diff_files, diff_insertions, diff_deletions, usage, created_at, role, rebase_of)
          VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        exp.runId,
        exp.n,
        exp.agent,
        exp.parentCommit,
        exp.commit,
        exp.ref,
        exp.hypothesis,
        exp.mechanism ?? null,
        exp.expected ?? null,
        exp.params ? JSON.stringify(exp.params) : null,
        exp.diff.files,
        exp.diff.insertions,
        exp.diff.deletions,
        exp.usage ? JSON.stringify(exp.usage) : null,
        createdAt,
        exp.role ?? null,
        exp.rebaseOf ?? null,
      );
    return { ...exp, id: Number(res.lastInsertRowid), createdAt, trials: [] };
  }

  startTrial(t: NewTrial): number {
    const res = this.db
      .prepare(
        `INSERT INTO trial_starts (experiment_id, attempt, seed, command, commit_sha, budget_ms, env, started_at, slot)
          VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        t.experimentId,
        t.attempt,
        t.seed,
        t.command,
        t.commit,
        t.budgetMs,
        JSON.stringify(t.env),
        now(),
        t.slot ?? null,
      );
    return Number(res.lastInsertRowid);
  }

  finishTrial(trialId: number, r: TrialResult, logDir: string): void {
    this.db
      .prepare(
        `INSERT INTO trial_results (trial_id, status, reason, exit_code, signal, wall_s, cpu_s, peak_rss_mb,
          metrics, self_reported, stdout_path, stderr_path, log_dir, log_tail, finished_at, progress)
          VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        trialId,
        r.status,
        r.reason ?? null,
        r.exitCode,
        r.signal,
        r.wallS,
        r.cpuS,
        r.peakRssMb,
        JSON.stringify(r.metrics, finiteOrString),
        r.selfReported ? 1 : 0,
        r.stdoutPath,
        r.stderrPath,
        logDir,
        r.logTail,
        now(),
        r.progress?.length ? JSON.stringify(r.progress) : null,
      );
  }

  decide(experimentId: number, d: Decision): void {
    this.db
      .prepare(
        `INSERT INTO decisions (experiment_id, action, reason, metric, mechanism_confirmed, decided_at)
          VALUES (?, ?, ?, ?, ?, ?)`,
      )
      .run(
        experimentId,
        d.action,
        d.reason,
        d.metric ?? null,
        d.mechanismConfirmed === undefined || d.mechanismConfirmed === null
          ? null
          : d.mechanismConfirmed
            ? 1
            : 0,
        now(),
      );
  }

  getExperiment(runId: number, n: number): ExperimentRecord | undefined {
    return this.queryExperiments("e.run_id = ? AND e.n = ?", [runId, n])[0];
  }

  listExperiments(runId: number): ExperimentRecord[] {
    return this.queryExperiments("e.run_id = ?", [runId]);
  }

  addNote(runId: number, experimentId: number | null, text: string): void {
    this.db
      .prepare("INSERT INTO notes (run_id, experiment_id, text, created_at) VALUES (?, ?, ?, ?)")
      .run(runId, experimentId, text, now());
  }

  startSession(runId: number, slots: number): SessionRecord {
    const startedAt = now();
    const res = this.db
      .prepare("INSERT INTO sessions (run_id, slots, pid, started_at) VALUES (?, ?, ?, ?)")
      .run(runId, slots, process.pid, startedAt);
    return { id: Number(res.lastInsertRowid), runId, slots, pid: process.pid, startedAt };
  }

  listSessions(runId: number): SessionRecord[] {
    const rows = this.db.prepare("SELECT * FROM sessions WHERE run_id = ? ORDER BY id").all(runId) as Row[];
    return rows.map((r) => ({
      id: r.id as number,
      runId: r.run_id as number,
      slots: r.slots as number,
      pid: r.pid as number,
      startedAt: r.started_at as string,
    }));
  }

  close(): void {
    if (this.db.isOpen) this.db.close();
  }

  private queryExperiments(where: string, args: SQLInputValue[]): ExperimentRecord[] {
    const rows = this.db
      .prepare(
        `SELECT e.*, d.action, d.reason AS d_reason, d.metric AS d_metric, d.mechanism_confirmed, d.decided_at
         FROM experiments e LEFT JOIN decisions d ON d.experiment_id = e.id
         WHERE ${where} ORDER BY e.n`,
      )
      .all(...args) as Row[];
    if (rows.length === 0) return [];
    const ids = rows.map((r) => r.id as number);
    const trialRows = this.db
      .prepare(
        `SELECT s.*, r.status, r.reason, r.exit_code, r.signal, r.wall_s, r.cpu_s, r.peak_rss_mb, r.metrics,
           r.self_reported, r.stdout_path, r.stderr_path, r.log_dir, r.log_tail, r.finished_at, r.progress
         FROM trial_starts s LEFT JOIN trial_results r ON r.trial_id = s.id
         WHERE s.experiment_id IN (${ids.map(() => "?").join(",")}) ORDER BY s.experiment_id, s.attempt`,
      )
      .all(...ids) as Row[];
    const trialsByExp = new Map<number, TrialRecord[]>();
    for (const t of trialRows) {
      const list = trialsByExp.get(t.experiment_id as number) ?? [];
      list.push(toTrial(t));
      trialsByExp.set(t.experiment_id as number, list);
    }
    return rows.map((r) => toExperiment(r, trialsByExp.get(r.id as number) ?? []));
  }
}

/** Opens (creating it and its directory if needed) and configures the database; any failure is LEDGER_OPEN_FAILED. */
function openDatabase(path: string): DatabaseSync {
  let db: DatabaseSync | undefined;
  try {
    if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
    db = new DatabaseSync(path);
    db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;");
    db.exec("PRAGMA busy_timeout = 5000;");
    return db;
  } catch (err) {
    if (db?.isOpen) db.close();
    throw new AutolabError(
      "LEDGER_OPEN_FAILED",
      `cannot open the lab notebook ${path}: ${(err as Error).message}`,
      "Check that the directory is writable and the disk is not full.",
    );
  }
}

/** JSON cannot hold NaN/Infinity; keep them as strings so a non-finite metric is still on record. */
function finiteOrString(_key: string, value: unknown): unknown {
  return typeof value === "number" && !Number.isFinite(value) ? String(value) : value;
}

function parseMetrics(text: string): Record<string, number> {
  const raw = JSON.parse(text) as Record<string, number | string>;
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(raw)) out[k] = typeof v === "number" ? v : Number(v);
  return out;
}

function toRun(r: Row): RunRecord {
  return {
    id: r.id as number,
    tag: r.tag as string,
    branch: r.branch as string,
    programPath: r.program_path as string,
    programName: r.program_name as string,
    metric: r.metric as string,
    direction: r.direction as Direction,
    baseCommit: r.base_commit as string,
    protectedHashes: JSON.parse(r.protected_hashes as string),
    seed: r.seed as number,
    ...(r.contract ? { contract: JSON.parse(r.contract as string) } : {}),
    startedAt: r.started_at as string,
  };
}

function toTrial(t: Row): TrialRecord {
  const rec: TrialRecord = {
    id: t.id as number,
    attempt: t.attempt as number,
    seed: t.seed as number,
    command: t.command as string,
    commit: t.commit_sha as string,
    budgetMs: t.budget_ms as number,
    env: JSON.parse(t.env as string),
    startedAt: t.started_at as string,
  };
  if (t.slot !== null && t.slot !== undefined) rec.slot = t.slot as number;
  if (t.status !== null) {
    rec.result = {
      status: t.status as TrialStatus,
      ...(t.reason !== null ? { reason: t.reason as string } : {}),
      exitCode: t.exit_code as number | null,
      signal: t.signal as string | null,
      wallS: t.wall_s as number,
      cpuS: t.cpu_s as number,
      peakRssMb: t.peak_rss_mb as number,
      metrics: parseMetrics(t.metrics as string),
      selfReported: t.self_reported === 1,
      seed: t.seed as number,
      command: t.command as string,
      stdoutPath: t.stdout_path as string,
      stderrPath: t.stderr_path as string,
      logTail: t.log_tail as string,
      logDir: t.log_dir as string,
      finishedAt: t.finished_at as string,
      ...(t.progress ? { progress: JSON.parse(t.progress as string) } : {}),
    };
  }
  return rec;
}

function toExperiment(r: Row, trials: TrialRecord[]): ExperimentRecord {
  const exp: ExperimentRecord = {
    id: r.id as number,
    runId: r.run_id as number,
    n: r.n as number,
    agent: r.agent as string,
    parentCommit: r.parent_commit as string,
    commit: r.commit_sha as string,
    ref: r.ref as string,
    hypothesis: r.hypothesis as string,
    diff: {
      files: r.diff_files as number,
      insertions: r.diff_insertions as number,
      deletions: r.diff_deletions as number,
    },
    createdAt: r.created_at as string,
    trials,
  };
  if (r.mechanism !== null) exp.mechanism = r.mechanism as string;
  if (r.expected !== null) exp.expected = r.expected as string;
  if (r.params !== null) exp.params = JSON.parse(r.params as string);
  if (r.usage !== null) exp.usage = JSON.parse(r.usage as string);
  if (r.role !== null && r.role !== undefined) exp.role = r.role as string;
  if (r.rebase_of !== null && r.rebase_of !== undefined) exp.rebaseOf = r.rebase_of as number;
  if (r.action !== null) {
    exp.decision = {
      action: r.action as DecisionAction,
      reason: r.d_reason as string,
      ...(r.d_metric !== null ? { metric: r.d_metric as number } : {}),
      mechanismConfirmed: r.mechanism_confirmed === null ? null : r.mechanism_confirmed === 1,
      decidedAt: r.decided_at as string,
    };
  }
  return exp;
}
