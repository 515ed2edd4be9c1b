import type { EventFeed, NotebookEvent } from "../core/notebook-reader.ts";
import {
  type AdviceRow,
  type ExperimentRow,
  type MaxRow,
  type RunRow,
  type TrialRow,
  toAdvice,
} from "./rows.ts";
import { placeholders, type Sql, type SqlValue } from "./sql.ts";

// The columns each query of the feed reads: projections of rows.ts's row types.
type RunInfoRow = Pick<RunRow, "id" | "tag" | "metric">;
type KeptRow = Pick<ExperimentRow, "run_id" | "n"> & { metric: number };
type IdRow = { id: number };
/** A row with its place in commit order (Sql.order) as `o`. */
type Ordered = { o: number };
type CreatedRow = Pick<ExperimentRow, "id" | "run_id" | "n" | "hypothesis" | "commit_sha" | "created_at">;
type StartedRow = Pick<TrialRow, "id" | "attempt" | "seed" | "budget_ms" | "started_at" | "slot"> &
  Pick<ExperimentRow, "run_id" | "n" | "hypothesis">;
type FinishedRow = { trial_id: number; status: NonNullable<TrialRow["status"]> } & Pick<
  TrialRow,
  "reason" | "attempt"
> & { wall_s: number; metrics: string; finished_at: string } & Pick<ExperimentRow, "run_id" | "n">;
type DecidedRow = { experiment_id: number; action: NonNullable<ExperimentRow["action"]>; reason: string } & {
  metric: number | null;
  decided_at: string;
} & Pick<ExperimentRow, "run_id" | "n">;

interface RunInfo {
  tag: string;
  metric: string;
}

/**
 * Loop events derived from the notebook, for viewers in another process than `autolab run`
 * (the dashboard's SSE stream, `autolab watch`). The loop writes each row before it emits the
 * matching event, so the rows are the events: new experiment rows → experiment_created, trial
 * starts → trial_started, trial results → trial_finished, decisions → decision, runs →
 * run_started, advice → advice (the advisor's answer; its advice_started is never written). Progress metrics and run_finished are never written, so they never appear.
 *
 * Incremental: remembers the last seen ids, and the trials and experiments still waiting for
 * a result or decision (with parallel slots they need not finish in id order). A poll that
 * finds the database unchanged (the ledger's version(): PRAGMA data_version, total_changes)
 * costs one tiny query. Watermarks are in commit order (Sql.order: ids on SQLite, the notebook
 * clock's stamp on PostgreSQL, where ids can commit out of order). Made by SqlLedger.eventFeed();
 * outside src/ledger/ it is an EventFeed.
 */
export class SqlEventFeed implements EventFeed {
  private lastRunId = 0;
  private lastExperimentId = 0;
  private lastTrialId = 0;
  private lastAdviceId = 0;
  private readonly runs = new Map<number, RunInfo>();
  private readonly best = new Map<number, { n: number; metric: number }>();
  /** Trials started without a result yet: trial id → (experiment id). */
  private readonly openTrials = new Set<number>();
  /** Experiments without a decision yet. */
  private readonly openExperiments = new Set<number>();
  private version = "";

  /** `sql`'s change token is the ledger's version(): one definition of "the notebook changed". */
  private readonly sql: Sql;

  constructor(sql: Sql) {
    this.sql = sql;
  }

  /** Marks everything the notebook holds now as seen; later polls report only what is new. */
  prime(): void {
    const version = this.sql.changeToken();
    this.read(() => {
      for (const r of this.all<RunInfoRow & Ordered>(
        `SELECT id, tag, metric, ${this.o} AS o FROM runs ORDER BY ${this.o}`,
      ))
        this.addRun(r);
      for (const r of this.all<KeptRow>(
        `SELECT e.run_id, e.n, d.metric FROM decisions d JOIN experiments e ON e.id = d.experiment_id
         WHERE d.action = 'keep' AND d.metric IS NOT NULL ORDER BY e.${this.o}`,
      ))
        this.best.set(r.run_id, { n: r.n, metric: r.metric });
      this.lastExperimentId = this.max("experiments");
      this.lastTrialId = this.max("trial_starts");
      this.lastAdviceId = this.max("advice");
      for (const r of this.all<IdRow>(
        "SELECT e.id FROM experiments e LEFT JOIN decisions d ON d.experiment_id = e.id WHERE d.experiment_id IS NULL",
      ))
        this.openExperiments.add(r.id);
      for (const r of this.all<IdRow>(
        "SELECT s.id FROM trial_starts s LEFT JOIN trial_results t ON t.trial_id = s.id WHERE t.trial_id IS NULL",
      ))
        this.openTrials.add(r.id);
    });
    this.version = version;
  }

  /** Events for every row written since the last poll (or prime), oldest first. */
  poll(): NotebookEvent[] {
    const version = this.sql.changeToken();
    if (version === this.version) return [];
    const events: { e: NotebookEvent; phase: number }[] = [];
    this.read(() => {
      for (const r of this.all<RunRow & Ordered>(
        `SELECT *, ${this.o} AS o FROM runs WHERE ${this.o} > ? ORDER BY ${this.o}`,
        this.lastRunId,
      )) {
        const run = this.addRun(r);
        events.push({
          phase: 0,
          e: {
            type: "run_started",
            run: run.tag,
            at: r.started_at,
            tag: run.tag,
            branch: r.branch,
            metric: run.metric,
            resumed: false,
            experiments: 0,
          },
        });
      }

      for (const r of this.all<CreatedRow & Ordered>(
        `SELECT id, run_id, n, hypothesis, commit_sha, created_at, ${this.o} AS o FROM experiments
         WHERE ${this.o} > ? ORDER BY ${this.o}`,
        this.lastExperimentId,
      )) {
        this.lastExperimentId = r.o;
        this.openExperiments.add(r.id);
        events.push({
          phase: 1,
          e: {
            type: "experiment_created",
            run: this.tagOf(r.run_id),
            at: r.created_at,
            n: r.n,
            hypothesis: r.hypothesis,
            commit: r.commit_sha,
          },
        });
      }

      for (const r of this.all<StartedRow & Ordered>(
        `SELECT s.id, s.attempt, s.seed, s.budget_ms, s.started_at, s.slot, e.run_id, e.n, e.hypothesis, s.${this.o} AS o
         FROM trial_starts s JOIN experiments e ON e.id = s.experiment_id WHERE s.${this.o} > ? ORDER BY s.${this.o}`,
        this.lastTrialId,
      )) {
        this.lastTrialId = r.o;
        this.openTrials.add(r.id);
        events.push({
          phase: 2,
          e: {
            type: "trial_started",
            run: this.tagOf(r.run_id),
            at: r.started_at,
            n: r.n,
            attempt: r.attempt,
            seed: r.seed,
            budgetMs: r.budget_ms,
            startedAt: Date.parse(r.started_at),
            hypothesis: r.hypothesis,
            ...(r.slot !== null && r.slot !== undefined ? { slot: r.slot } : {}),
          },
        });
      }

      for (const r of this.allIn<FinishedRow>(
        `SELECT t.trial_id, t.status, t.reason, t.wall_s, t.metrics, t.finished_at, s.attempt, e.run_id, e.n
         FROM trial_results t JOIN trial_starts s ON s.id = t.trial_id JOIN experiments e ON e.id = s.experiment_id
         WHERE t.trial_id IN (?)`,
        this.openTrials,
      )) {
        this.openTrials.delete(r.trial_id);
        const runId = r.run_id;
        const metric = objective(r.metrics, this.runs.get(runId)?.metric);
        events.push({
          phase: 3,
          e: {
            type: "trial_finished",
            run: this.tagOf(runId),
            at: r.finished_at,
            n: r.n,
            attempt: r.attempt,
            status: r.status,
            ...(metric !== undefined ? { metric } : {}),
            wallS: r.wall_s,
            ...(r.reason !== null ? { reason: r.reason } : {}),
          },
        });
      }

      const decisions = this.allIn<DecidedRow>(
        `SELECT d.experiment_id, d.action, d.reason, d.metric, d.decided_at, e.run_id, e.n
         FROM decisions d JOIN experiments e ON e.id = d.experiment_id WHERE d.experiment_id IN (?)`,
        this.openExperiments,
      );
      // In decision order, so each event carries the best as it was right after that decision.
      decisions.sort((a, b) => a.decided_at.localeCompare(b.decided_at) || a.experiment_id - b.experiment_id);
      for (const r of decisions) {
        this.openExperiments.delete(r.experiment_id);
        const runId = r.run_id;
        const action = r.action;
        const metric = r.metric === null ? undefined : r.metric;
        if (action === "keep" && metric !== undefined) this.best.set(runId, { n: r.n, metric });
        events.push({
          phase: 4,
          e: {
            type: "decision",
            run: this.tagOf(runId),
            at: r.decided_at,
            n: r.n,
            action,
            reason: r.reason,
            ...(metric !== undefined ? { metric } : {}),
            best: this.best.get(runId) ?? { n: -1, metric: Number.NaN },
          },
        });
      }

      for (const row of this.all<AdviceRow & Ordered>(
        `SELECT *, ${this.o} AS o FROM advice WHERE ${this.o} > ? ORDER BY ${this.o}`,
        this.lastAdviceId,
      )) {
        this.lastAdviceId = row.o;
        const a = toAdvice(row);
        events.push({
          phase: 5,
          e: {
            type: "advice",
            run: this.tagOf(a.runId),
            at: a.createdAt,
            agent: a.agent,
            trigger: a.trigger,
            afterN: a.afterN,
            verdict: a.verdict,
            ideas: a.ideas,
            reason: a.reason,
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

  private addRun(r: RunInfoRow & Ordered): RunInfo {
    const info = { tag: r.tag, metric: r.metric };
    this.runs.set(r.id, info);
    if (r.o > this.lastRunId) this.lastRunId = r.o;
    return info;
  }

  private tagOf(runId: number): string {
    return this.runs.get(runId)?.tag ?? String(runId);
  }

  /** The commit-order column (Sql.order). */
  private get o(): string {
    return this.sql.order;
  }

  private max(table: string): number {
    return this.sql.get<MaxRow>(`SELECT MAX(${this.o}) AS m FROM ${table}`)?.m ?? 0;
  }

  /** The rows of `sql`, typed by the caller's projection (one cast per query, here). */
  private all<R>(sql: string, ...args: SqlValue[]): R[] {
    return this.sql.all<R>(sql, ...args);
  }

  /** `sql` with its `IN (?)` expanded for `ids`, in chunks that stay under SQLite's variable limit. */
  private allIn<R>(sql: string, ids: Set<number>): R[] {
    const list = [...ids];
    const rows: R[] = [];
    for (let i = 0; i < list.length; i += 500) {
      const chunk = list.slice(i, i + 500);
      rows.push(...this.all<R>(sql.replace("IN (?)", `IN (${placeholders(chunk.length)})`), ...chunk));
    }
    return rows;
  }

  /** One read transaction: every query of a poll sees the same snapshot. */
  private read(fn: () => void): void {
    this.sql.read(fn);
  }
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
