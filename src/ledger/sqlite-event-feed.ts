import type { DatabaseSync, SQLInputValue } from "node:sqlite";
import type { LoopEvent } from "../core/events.ts";
import type { DecisionAction, TrialStatus } from "../core/types.ts";

/** A loop event as another process sees it in the notebook: which run it belongs to, and when. */
export type NotebookEvent = LoopEvent & { run: string; at: string };

type Row = Record<string, SQLInputValue>;

interface RunInfo {
  tag: string;
  metric: string;
}

/**
 * Loop events derived from the notebook, for viewers in another process than `autolab run`
 * (the dashboard's SSE stream, `autolab watch`). The loop writes each row before it emits the
 * matching event, so the rows are the events: new experiment rows → experiment_created, trial
 * starts → trial_started, trial results → trial_finished, decisions → decision, runs →
 * run_started. Progress metrics and run_finished are never written, so they never appear.
 *
 * Incremental: remembers the last seen ids, and the trials and experiments still waiting for
 * a result or decision (with parallel slots they need not finish in id order). A poll that
 * finds the database unchanged (PRAGMA data_version, total_changes) costs two tiny queries.
 */
export class SqliteEventFeed {
  private readonly db: DatabaseSync;
  private lastRunId = 0;
  private lastExperimentId = 0;
  private lastTrialId = 0;
  private readonly runs = new Map<number, RunInfo>();
  private readonly best = new Map<number, { n: number; metric: number }>();
  /** Trials started without a result yet: trial id → (experiment id). */
  private readonly openTrials = new Set<number>();
  /** Experiments without a decision yet. */
  private readonly openExperiments = new Set<number>();
  private version = "";

  constructor(db: DatabaseSync) {
    this.db = db;
  }

  /** Marks everything the notebook holds now as seen; later polls report only what is new. */
  prime(): void {
    const version = this.currentVersion();
    this.read(() => {
      for (const r of this.all("SELECT id, tag, metric FROM runs ORDER BY id")) this.addRun(r);
      for (const r of this.all(
        `SELECT e.run_id, e.n, d.metric FROM decisions d JOIN experiments e ON e.id = d.experiment_id
         WHERE d.action = 'keep' AND d.metric IS NOT NULL ORDER BY e.id`,
      ))
        this.best.set(r.run_id as number, { n: r.n as number, metric: r.metric as number });
      this.lastExperimentId = this.max("experiments");
      this.lastTrialId = this.max("trial_starts");
      for (const r of this.all(
        "SELECT e.id FROM experiments e LEFT JOIN decisions d ON d.experiment_id = e.id WHERE d.experiment_id IS NULL",
      ))
        this.openExperiments.add(r.id as number);
      for (const r of this.all(
        "SELECT s.id FROM trial_starts s LEFT JOIN trial_results t ON t.trial_id = s.id WHERE t.trial_id IS NULL",
      ))
        this.openTrials.add(r.id as number);
    });
    this.version = version;
  }

  /** Events for every row written since the last poll (or prime), oldest first. */
  poll(): NotebookEvent[] {
    const version = this.currentVersion();
    if (version === this.version) return [];
    const events: { e: NotebookEvent; phase: number }[] = [];
    this.read(() => {
      for (const r of this.all("SELECT * FROM runs WHERE id > ? ORDER BY id", this.lastRunId)) {
        const run = this.addRun(r);
        events.push({
          phase: 0,
          e: {
            type: "run_started",
            run: run.tag,
            at: r.started_at as string,
            tag: run.tag,
            branch: r.branch as string,
            metric: run.metric,
            resumed: false,
            experiments: 0,
          },
        });
      }

      for (const r of this.all(
        "SELECT id, run_id, n, hypothesis, commit_sha, created_at FROM experiments WHERE id > ? ORDER BY id",
        this.lastExperimentId,
      )) {
        this.lastExperimentId = r.id as number;
        this.openExperiments.add(r.id as number);
        events.push({
          phase: 1,
          e: {
            type: "experiment_created",
            run: this.tagOf(r.run_id as number),
            at: r.created_at as string,
            n: r.n as number,
            hypothesis: r.hypothesis as string,
            commit: r.commit_sha as string,
          },
        });
      }

      for (const r of this.all(
        `SELECT s.id, s.attempt, s.seed, s.budget_ms, s.started_at, s.slot, e.run_id, e.n, e.hypothesis
         FROM trial_starts s JOIN experiments e ON e.id = s.experiment_id WHERE s.id > ? ORDER BY s.id`,
        this.lastTrialId,
      )) {
        this.lastTrialId = r.id as number;
        this.openTrials.add(r.id as number);
        events.push({
          phase: 2,
          e: {
            type: "trial_started",
            run: this.tagOf(r.run_id as number),
            at: r.started_at as string,
            n: r.n as number,
            attempt: r.attempt as number,
            seed: r.seed as number,
            budgetMs: r.budget_ms as number,
            startedAt: Date.parse(r.started_at as string),
            hypothesis: r.hypothesis as string,
            ...(r.slot !== null && r.slot !== undefined ? { slot: r.slot as number } : {}),
          },
        });
      }

      for (const r of this.allIn(
        `SELECT t.trial_id, t.status, t.reason, t.wall_s, t.metrics, t.finished_at, s.attempt, e.run_id, e.n
         FROM trial_results t JOIN trial_starts s ON s.id = t.trial_id JOIN experiments e ON e.id = s.experiment_id
         WHERE t.trial_id IN (?)`,
        this.openTrials,
      )) {
        this.openTrials.delete(r.trial_id as number);
        const runId = r.run_id as number;
        const metric = objective(r.metrics as string, this.runs.get(runId)?.metric);
        events.push({
          phase: 3,
          e: {
            type: "trial_finished",
            run: this.tagOf(runId),
            at: r.finished_at as string,
            n: r.n as number,
            attempt: r.attempt as number,
            status: r.status as TrialStatus,
            ...(metric !== undefined ? { metric } : {}),
            wallS: r.wall_s as number,
            ...(r.reason !== null ? { reason: r.reason as string } : {}),
          },
        });
      }

      const decisions = this.allIn(
        `SELECT d.experiment_id, d.action, d.reason, d.metric, d.decided_at, e.run_id, e.n
         FROM decisions d JOIN experiments e ON e.id = d.experiment_id WHERE d.experiment_id IN (?)`,
        this.openExperiments,
      );
      // In decision order, so each event carries the best as it was right after that decision.
      decisions.sort(
        (a, b) =>
          String(a.decided_at).localeCompare(String(b.decided_at)) ||
          Number(a.experiment_id) - Number(b.experiment_id),
      );
      for (const r of decisions) {
        this.openExperiments.delete(r.experiment_id as number);
        const runId = r.run_id as number;
        const action = r.action as DecisionAction;
        const metric = r.metric === null ? undefined : (r.metric as number);
        if (action === "keep" && metric !== undefined) this.best.set(runId, { n: r.n as number, metric });
        events.push({
          phase: 4,
          e: {
            type: "decision",
            run: this.tagOf(runId),
            at: r.decided_at as string,
            n: r.n as number,
            action,
            reason: r.reason as string,
            ...(metric !== undefined ? { metric } : {}),
            best: this.best.get(runId) ?? { n: -1, metric: Number.NaN },
          },
        });
      }
    });
    // A commit after `version` was read is either in this snapshot or changes the version again.
    this.version = version;
    // Rows of one poll in the order they were written; ties (same millisecond) in loop order.
    events.sort((a, b) => (a.e.at < b.e.at ? -1 : a.e.at > b.e.at ? 1 : a.phase - b.phase));
    return events.map((x) => x.e);
  }

  private addRun(r: Row): RunInfo {
    const info = { tag: r.tag as string, metric: r.metric as string };
    this.runs.set(r.id as number, info);
    if ((r.id as number) > this.lastRunId) this.lastRunId = r.id as number;
    return info;
  }

  private tagOf(runId: number): string {
    return this.runs.get(runId)?.tag ?? String(runId);
  }

  private max(table: string): number {
    const row = this.db.prepare(`SELECT MAX(id) AS m FROM ${table}`).get() as { m: number | null };
    return row.m ?? 0;
  }

  private all(sql: string, ...args: SQLInputValue[]): Row[] {
    return this.db.prepare(sql).all(...args) as Row[];
  }

  /** `sql` with its `IN (?)` expanded for `ids`, in chunks that stay under SQLite's variable limit. */
  private allIn(sql: string, ids: Set<number>): Row[] {
    const list = [...ids];
    const rows: Row[] = [];
    for (let i = 0; i < list.length; i += 500) {
      const chunk = list.slice(i, i + 500);
      rows.push(...this.all(sql.replace("IN (?)", `IN (${placeholders(chunk.length)})`), ...chunk));
    }
    return rows;
  }

  /** Another connection's commit changes data_version; this connection's own writes change total_changes. */
  private currentVersion(): string {
    const v = this.db.prepare("PRAGMA data_version").get() as { data_version: number };
    const c = this.db.prepare("SELECT total_changes() AS c").get() as { c: number };
    return `${v.data_version}:${c.c}`;
  }

  /** One read transaction: every query of a poll sees the same snapshot (WAL readers never block the writer). */
  private read(fn: () => void): void {
    if (this.db.isTransaction) {
      fn();
      return;
    }
    this.db.exec("BEGIN");
    try {
      fn();
    } finally {
      this.db.exec("COMMIT");
    }
  }
}

function placeholders(n: number): string {
  return Array.from({ length: n }, () => "?").join(",");
}

function objective(metricsJson: string, metric: string | undefined): number | undefined {
  if (!metric) return undefined;
  try {
    const v = Number((JSON.parse(metricsJson) as Record<string, unknown>)[metric]);
    return Number.isFinite(v) ? v : undefined;
  } catch {
    return undefined;
  }
}
