import { AutolabError } from "../core/errors.ts";
import type {
  AdviceRecord,
  ExperimentRecord,
  HookRunRecord,
  ImportedResultRecord,
  Ledger,
  NewAdvice,
  NewExperiment,
  NewHookRun,
  NewImportedResult,
  NewTrial,
  NoteRecord,
  RunRecord,
  SessionRecord,
  TrialRecord,
} from "../core/ledger.ts";
import type { EventFeed, NotebookReader } from "../core/notebook-reader.ts";
import type { Decision, TrialResult } from "../core/types.ts";
import { redactingWrites } from "./redacting-sql.ts";
import {
  type AdviceRow,
  type ExperimentRow,
  type HookRunRow,
  type ImportedResultRow,
  type MaxRow,
  type NoteRow,
  type RunRow,
  type SessionRow,
  type TrialRow,
  toAdvice,
  toExperiment,
  toHookRun,
  toImportedResult,
  toNote,
  toRun,
  toSession,
  toTrial,
} from "./rows.ts";
import { finiteOrString, placeholders, type Sql, type SqlValue } from "./sql.ts";
import { SqlEventFeed } from "./sql-event-feed.ts";

const now = () => new Date().toISOString();

export interface SqlLedgerOptions {
  /**
   * Keep each listed run's experiments in memory (default true). false reads every experiment
   * and trial of the run again on each listExperiments (the plain read path; bench/notebook.ts
   * compares the two).
   */
  cache?: boolean;
}

/** One run's experiments as of the last sync with the database, plus this instance's own writes. */
interface RunCache {
  /** Sql.syncToken at the last sync: another connection's commit changes it. */
  version: string;
  /** Highest experiments and trial_starts in commit order (Sql.order) at the last sync (append-only). */
  maxExpId: number;
  maxTrialId: number;
  /** Ordered by n; frozen records, replaced (never changed) when a row of theirs is added. */
  sorted: ExperimentRecord[];
  byN: Map<number, ExperimentRecord>;
  /** Ids of experiments that are not settled (see settled): a sync reads them again. */
  unsettled: Set<number>;
}

/** Above this many experiments to re-read, a sync reads the whole run again instead. */
const MAX_INCREMENTAL = 500;

/**
 * The notebook's logic over any SQL store (sql.ts): SqliteLedger (`.autolab/lab.db`) and
 * PgLedger (PostgreSQL) are this class with a connection and migrations. Each write is its own
 * transaction.
 *
 * Reads are cached per run (see docs/notebook.md): the first listExperiments of a run reads it
 * whole; this instance's own writes then re-read only the experiment they touched, and a commit
 * by another connection (the sync token moves) re-reads only the experiments that can have
 * changed — new ones, undecided ones, ones with an open trial or a new trial start. So the
 * loop's many reads per experiment cost O(1) database work instead of O(experiments).
 * Records from listExperiments/getExperiment are then deeply frozen and shared: treat them as
 * read-only (a write to one throws). The array listExperiments returns is the caller's own.
 * (Writes are assumed to commit: whoever opens a transaction around ledger writes and rolls it
 * back must use a ledger with `{ cache: false }`; nothing in autolab does either.)
 */
export class SqlLedger implements Ledger, NotebookReader {
  private readonly caching: boolean;
  private readonly runs = new Map<number, RunCache>();

  protected readonly sql: Sql;

  constructor(sql: Sql, opts: SqlLedgerOptions = {}) {
    // Every written string without secrets (redacting-sql.ts).
    this.sql = redactingWrites(sql);
    this.caching = opts.cache ?? true;
  }

  createRun(run: Omit<RunRecord, "id" | "startedAt">): RunRecord {
    const startedAt = now();
    const id = this.sql.insert(
      `INSERT INTO runs (tag, branch, program_path, program_name, metric, direction, base_commit,
          protected_hashes, seed, started_at, contract, program_blob, seed_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
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
      run.programBlob ?? null,
      run.seedKey ?? null,
    );
    return { ...run, id: id, startedAt };
  }

  getRun(tag: string): RunRecord | undefined {
    const row = this.sql.get<RunRow>("SELECT * FROM runs WHERE tag = ?", tag);
    return row ? toRun(row) : undefined;
  }

  latestRun(): RunRecord | undefined {
    const row = this.sql.get<RunRow>("SELECT * FROM runs ORDER BY id DESC LIMIT 1");
    return row ? toRun(row) : undefined;
  }

  listRuns(): RunRecord[] {
    return this.sql.all<RunRow>("SELECT * FROM runs ORDER BY id").map(toRun);
  }

  addExperiment(exp: NewExperiment, context?: string): ExperimentRecord {
    const createdAt = now();
    // The row and the context the researcher saw commit together: no state between them.
    const id =
      context === undefined
        ? this.insertExperiment(exp, createdAt)
        : this.sql.write(() => {
            const id = this.insertExperiment(exp, createdAt);
            this.sql.run("INSERT INTO proposal_contexts (experiment_id, text) VALUES (?, ?)", id, context);
            return id;
          });
    if (this.runs.has(exp.runId)) this.reread([id]);
    return { ...exp, id, createdAt, trials: [] };
  }

  proposalContext(runId: number, n: number): string | undefined {
    return this.sql.get<{ text: string }>(
      `SELECT c.text FROM proposal_contexts c JOIN experiments e ON e.id = c.experiment_id
       WHERE e.run_id = ? AND e.n = ?`,
      runId,
      n,
    )?.text;
  }

  private insertExperiment(exp: NewExperiment, createdAt: string): number {
    return this.sql.insert(
      `INSERT INTO experiments (run_id, n, agent, parent_commit, commit_sha, ref, hypothesis, mechanism,
          expected, params, diff_files, diff_insertions, diff_deletions, usage, created_at, role, rebase_of)
          VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
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
  }

  startTrial(t: NewTrial): number {
    const id = this.sql.insert(
      `INSERT INTO trial_starts (experiment_id, attempt, seed, command, commit_sha, budget_ms, env, started_at, slot)
          VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
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
    if (this.runs.size > 0) this.reread([t.experimentId]);
    return id;
  }

  finishTrial(trialId: number, r: TrialResult, logDir: string): void {
    this.sql.run(
      `INSERT INTO trial_results (trial_id, status, reason, exit_code, signal, wall_s, cpu_s, peak_rss_mb,
          metrics, self_reported, stdout_path, stderr_path, log_dir, log_tail, finished_at, progress)
          VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
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
    if (this.runs.size > 0) {
      const row = this.sql.get<{ experiment_id: number }>(
        "SELECT experiment_id FROM trial_starts WHERE id = ?",
        trialId,
      );
      if (row) this.reread([row.experiment_id]);
    }
  }

  decide(experimentId: number, d: Decision): void {
    this.sql.run(
      `INSERT INTO decisions (experiment_id, action, reason, metric, mechanism_confirmed, decided_at, tree_node)
          VALUES (?, ?, ?, ?, ?, ?, ?)`,
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
      d.treeNode ? 1 : null,
    );
    if (this.runs.size > 0) this.reread([experimentId]);
  }

  getExperiment(runId: number, n: number): ExperimentRecord | undefined {
    // A run nobody listed is not worth reading whole for one experiment (`autolab show`).
    if (!this.runs.has(runId)) return this.queryExperiments("e.run_id = ? AND e.n = ?", [runId, n])[0];
    return this.current(runId).byN.get(n);
  }

  listExperiments(runId: number): ExperimentRecord[] {
    if (!this.caching) return this.queryExperiments("e.run_id = ?", [runId]);
    return this.current(runId).sorted.slice();
  }

  listNotes(runId: number): NoteRecord[] {
    return this.sql.all<NoteRow>("SELECT * FROM notes WHERE run_id = ? ORDER BY id", runId).map(toNote);
  }

  addNote(runId: number, experimentId: number | null, text: string): void {
    this.sql.run(
      "INSERT INTO notes (run_id, experiment_id, text, created_at) VALUES (?, ?, ?, ?)",

      runId,
      experimentId,
      text,
      now(),
    );
  }

  startSession(runId: number, slots: number, sandbox?: string): SessionRecord {
    const startedAt = now();
    const id = this.sql.insert(
      "INSERT INTO sessions (run_id, slots, pid, started_at, sandbox) VALUES (?, ?, ?, ?, ?)",
      runId,
      slots,
      process.pid,
      startedAt,
      sandbox ?? null,
    );
    return {
      id: id,
      runId,
      slots,
      pid: process.pid,
      startedAt,
      ...(sandbox !== undefined ? { sandbox } : {}),
    };
  }

  listSessions(runId: number): SessionRecord[] {
    return this.sql
      .all<SessionRow>("SELECT * FROM sessions WHERE run_id = ? ORDER BY id", runId)
      .map(toSession);
  }

  addImportedResults(rows: NewImportedResult[]): void {
    if (rows.length === 0) return;
    const importedAt = now();
    this.sql.write(() => {
      const sources = [...new Set(rows.map((r) => r.source))];
      for (const source of sources) {
        if (this.sql.get("SELECT 1 FROM imported_results WHERE source = ? LIMIT 1", source)) {
          throw new AutolabError(
            "IMPORT_EXISTS",
            `the lab notebook already holds results imported from ${source}.`,
            "Imported history is recorded once; `autolab status` shows it.",
          );
        }
      }
      for (const r of rows) {
        this.sql.run(
          `INSERT INTO imported_results (source, seq, commit_sha, metrics, status, description, segment, imported_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
          r.source,
          r.seq,
          r.commit,
          JSON.stringify(r.metrics, finiteOrString),
          r.status,
          r.description,
          r.segment ?? null,
          importedAt,
        );
      }
    });
  }

  listImportedResults(): ImportedResultRecord[] {
    // Sources in the order they were imported (the lowest id of each), rows by seq within one.
    const rows = this.sql.all<ImportedResultRow>(
      `SELECT i.* FROM imported_results i
         JOIN (SELECT source, MIN(id) AS first FROM imported_results GROUP BY source) s ON s.source = i.source
       ORDER BY s.first, i.seq`,
    );
    return rows.map((r) => deepFreeze(toImportedResult(r)));
  }

  addHookRun(hook: NewHookRun): HookRunRecord {
    const finishedAt = now();
    const id = this.sql.insert(
      `INSERT INTO hook_runs (run_id, n, phase, command, status, reason, exit_code, wall_s, output, log_dir, finished_at)
          VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      hook.runId,
      hook.n,
      hook.phase,
      hook.command,
      hook.status,
      hook.reason ?? null,
      hook.exitCode,
      hook.wallS,
      hook.output,
      hook.logDir,
      finishedAt,
    );
    return deepFreeze({ ...hook, id: id, finishedAt });
  }

  listHookRuns(runId: number, n?: number): HookRunRecord[] {
    const rows =
      n === undefined
        ? this.sql.all<HookRunRow>("SELECT * FROM hook_runs WHERE run_id = ? ORDER BY id", runId)
        : this.sql.all<HookRunRow>(
            "SELECT * FROM hook_runs WHERE run_id = ? AND n = ? ORDER BY id",
            runId,
            n,
          );
    return rows.map((r) => deepFreeze(toHookRun(r)));
  }

  latestHookRuns(runId: number): HookRunRecord[] {
    const rows = this.sql.all<HookRunRow>(
      `SELECT * FROM hook_runs WHERE id IN (SELECT MAX(id) FROM hook_runs WHERE run_id = ? GROUP BY phase) ORDER BY id`,
      runId,
    );
    return rows.map((r) => deepFreeze(toHookRun(r)));
  }

  addAdvice(advice: NewAdvice): AdviceRecord {
    const createdAt = now();
    const ideas = [...advice.ideas];
    const id = this.sql.insert(
      `INSERT INTO advice (run_id, trigger, decided, after_n, agent, verdict, ideas, reason, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      advice.runId,
      advice.trigger,
      advice.decided,
      advice.afterN,
      advice.agent,
      advice.verdict,
      JSON.stringify(ideas),
      advice.reason,
      createdAt,
    );
    return deepFreeze({ ...advice, ideas, id: id, createdAt });
  }

  listAdvice(runId: number): AdviceRecord[] {
    return this.sql
      .all<AdviceRow>("SELECT * FROM advice WHERE run_id = ? ORDER BY id", runId)
      .map((r) => deepFreeze(toAdvice(r)));
  }

  /** Another connection's commit moves PRAGMA data_version; this connection's own writes move total_changes. */
  version(): string {
    return this.sql.changeToken();
  }

  experimentCounts(): Map<number, number> {
    const rows = this.sql.all<{ run_id: number; c: number }>(
      "SELECT run_id, COUNT(*) AS c FROM experiments GROUP BY run_id",
    );
    return new Map(rows.map((r) => [r.run_id, r.c]));
  }

  eventFeed(): EventFeed {
    return new SqlEventFeed(this.sql);
  }

  close(): void {
    this.runs.clear();
    this.sql.close();
  }

  /**
   * Applies the migrations this notebook lacks, in one transaction (`lock`: run first, so that
   * processes opening one notebook together migrate it once: PostgreSQL's advisory lock;
   * SQLite's BEGIN IMMEDIATE already serializes them).
   */
  protected migrate(migrations: readonly string[], lock?: () => void): void {
    this.sql.write(() => {
      lock?.();
      this.sql.exec(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)",
      );
      const current =
        this.sql.get<{ v: number | null }>("SELECT MAX(version) AS v FROM schema_migrations")?.v ?? 0;
      if (current > migrations.length) {
        throw new AutolabError(
          "LEDGER_TOO_NEW",
          `the lab notebook has schema version ${current}, newer than this autolab understands (${migrations.length}).`,
          "Upgrade autolab.",
        );
      }
      for (let v = current + 1; v <= migrations.length; v++) {
        this.sql.exec(migrations[v - 1] as string);
        this.sql.run("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)", v, now());
      }
      this.schema = { from: current, to: migrations.length };
    });
  }

  /** The schema version this notebook had when opened, and the one it has now (`autolab db migrate`). */
  schema: { from: number; to: number } = { from: 0, to: 0 };

  /**
   * The sync point's watermarks. Read after the sync token and before the rows: a commit after
   * the token was read moves it again (the next read syncs again, from these watermarks), and a
   * row at or below them was committed before the rows are read, so it is seen. Watermarks are
   * in commit order (Sql.order), which ids are not on PostgreSQL.
   */
  private watermarks(): { version: string; maxExpId: number; maxTrialId: number } {
    const version = this.sql.syncToken();
    const o = this.sql.order;
    const e = this.sql.get<MaxRow>(`SELECT MAX(${o}) AS m FROM experiments`);
    const t = this.sql.get<MaxRow>(`SELECT MAX(${o}) AS m FROM trial_starts`);
    return { version, maxExpId: e?.m ?? 0, maxTrialId: t?.m ?? 0 };
  }

  /** The run's cache, read whole the first time and brought up to date after that. */
  private current(runId: number): RunCache {
    const cache = this.runs.get(runId);
    if (!cache) return this.load(runId);
    return this.sql.syncToken() === cache.version ? cache : this.sync(runId, cache);
  }

  /** Reads a run whole into a new cache entry. */
  private load(runId: number): RunCache {
    const marks = this.watermarks();
    const cache: RunCache = { ...marks, sorted: [], byN: new Map(), unsettled: new Set() };
    for (const e of this.queryExperiments("e.run_id = ?", [runId])) {
      cache.sorted.push(deepFreeze(e));
      cache.byN.set(e.n, e);
      if (!settled(e)) cache.unsettled.add(e.id);
    }
    this.runs.set(runId, cache);
    return cache;
  }

  /**
   * Brings a cached run up to date after another connection committed. Rows are only ever
   * added, so an experiment can change only by a new trial start (above the watermark), a
   * result of a trial the cache has open, or a decision the cache lacks; new experiments are
   * above the watermark. Those are read again; everything else stands.
   */
  private sync(runId: number, cache: RunCache): RunCache {
    const marks = this.watermarks();
    const ids = new Set(cache.unsettled);
    const o = this.sql.order;
    const fresh = this.sql.all<{ id: number }>(
      // `+run_id`: walk the rows above the watermarks, not the run's whole index (SQLite's planner hint; harmless elsewhere).
      `SELECT id FROM experiments WHERE ${o} > ? AND +run_id = ?
       UNION ALL SELECT s.experiment_id FROM trial_starts s JOIN experiments e ON e.id = s.experiment_id
         WHERE s.${o} > ? AND +e.run_id = ?`,
      cache.maxExpId,
      runId,
      cache.maxTrialId,
      runId,
    );
    for (const r of fresh) ids.add(r.id);
    if (ids.size > MAX_INCREMENTAL) return this.load(runId);
    this.reread([...ids]);
    Object.assign(cache, marks);
    return cache;
  }

  /** Reads these experiments again and puts them into their runs' caches (if cached). */
  private reread(ids: number[]): void {
    if (ids.length === 0) return;
    const exps =
      ids.length === 1
        ? this.queryExperiments("e.id = ?", ids)
        : this.queryExperiments(`e.id IN (${placeholders(ids.length)})`, ids);
    for (const e of exps) {
      const cache = this.runs.get(e.runId);
      if (cache) upsert(cache, deepFreeze(e));
    }
  }

  /** Experiments matching `where` (over `e`, experiments) with their trials, ordered by n. */
  private queryExperiments(where: string, args: SqlValue[]): ExperimentRecord[] {
    const rows = this.sql.all<ExperimentRow>(
      `SELECT e.*, d.action, d.reason AS d_reason, d.metric AS d_metric, d.mechanism_confirmed, d.decided_at,
         d.tree_node
       FROM experiments e LEFT JOIN decisions d ON d.experiment_id = e.id
       WHERE ${where} ORDER BY e.n`,
      ...args,
    );
    if (rows.length === 0) return [];
    const trialRows = this.sql.all<TrialRow>(
      `SELECT s.*, r.status, r.reason, r.exit_code, r.signal, r.wall_s, r.cpu_s, r.peak_rss_mb, r.metrics,
         r.self_reported, r.stdout_path, r.stderr_path, r.log_dir, r.log_tail, r.finished_at, r.progress
       FROM trial_starts s LEFT JOIN trial_results r ON r.trial_id = s.id
       WHERE s.experiment_id IN (SELECT e.id FROM experiments e WHERE ${where})
       ORDER BY s.experiment_id, s.attempt`,
      ...args,
    );
    const trialsByExp = new Map<number, TrialRecord[]>();
    for (const t of trialRows) {
      const list = trialsByExp.get(t.experiment_id) ?? [];
      list.push(toTrial(t));
      trialsByExp.set(t.experiment_id, list);
    }
    return rows.map((r) => toExperiment(r, trialsByExp.get(r.id) ?? []));
  }
}

/** Puts a record into its place by n, replacing the one with the same n. */
function upsert(cache: RunCache, e: ExperimentRecord): void {
  const list = cache.sorted;
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((list[mid] as ExperimentRecord).n < e.n) lo = mid + 1;
    else hi = mid;
  }
  if (list[lo]?.n === e.n) list[lo] = e;
  else list.splice(lo, 0, e);
  cache.byN.set(e.n, e);
  if (settled(e)) cache.unsettled.delete(e.id);
  else cache.unsettled.add(e.id);
}

/** Decided, with every trial finished: no row can be added to it except a new trial start. */
function settled(e: ExperimentRecord): boolean {
  return e.decision !== undefined && e.trials.every((t) => t.result !== undefined);
}

/** Freezes an object and everything it holds (records are plain objects and arrays). */
function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
