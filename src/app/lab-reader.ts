import { dirname, join } from "node:path";
import type { ExperimentRecord, RunRecord, SessionRecord } from "../core/ledger.ts";
import type { SqliteLedger } from "../ledger/sqlite-ledger.ts";
import { gitRaw } from "../workspace/git.ts";
import { findRepo } from "../workspace/git-workspace.ts";
import { holdoutOf } from "./experiment-json.ts";
import { selectRun } from "./lab.ts";
import { lockHolder } from "./lock.ts";

export interface RunSummary {
  tag: string;
  branch: string;
  program: string;
  metric: string;
  direction: "minimize" | "maximize";
  startedAt: string;
  experiments: number;
}

/** A trial with a start row and no result yet. */
export interface OpenTrial {
  n: number;
  attempt: number;
  hypothesis: string;
  startedAt: string;
  budgetMs: number;
  /**
   * "running" while a harness holds the run's lock; "interrupted" when none does (the harness
   * died or was stopped: `autolab run` runs the experiment again).
   */
  state: "running" | "interrupted";
}

const MAX_DIFF_CHARS = 512 * 1024;

/**
 * Read-only access to a notebook for viewers (the dashboard, `autolab watch`) that run while
 * another process writes it. Experiments are cached per run; when the database changes
 * (PRAGMA data_version moves on another connection's commit, total_changes on this one's)
 * only the experiments that can have changed are read again, so a lab of 10,000 costs the
 * same as a small one while it runs.
 */
export class LabReader {
  readonly ledger: SqliteLedger;
  /** `.autolab/` of the notebook: lock files tell whether a harness is running. */
  readonly stateDir: string | undefined;
  private readonly cache = new Map<
    number,
    { version: string; exps: ExperimentRecord[]; maxTrialId: number }
  >();
  private readonly holdouts = new Map<number, string[]>();
  private readonly sessionCache = new Map<number, { version: string; sessions: SessionRecord[] }>();
  private readonly diffs = new Map<string, string>();

  constructor(ledger: SqliteLedger, opts: { stateDir?: string } = {}) {
    this.ledger = ledger;
    this.stateDir = opts.stateDir;
  }

  version(): string {
    const v = this.ledger.db.prepare("PRAGMA data_version").get() as { data_version: number };
    const c = this.ledger.db.prepare("SELECT total_changes() AS c").get() as { c: number };
    return `${v.data_version}:${c.c}`;
  }

  runs(): RunSummary[] {
    const counts = new Map<number, number>();
    for (const r of this.ledger.db
      .prepare("SELECT run_id, COUNT(*) AS c FROM experiments GROUP BY run_id")
      .all() as { run_id: number; c: number }[])
      counts.set(r.run_id, r.c);
    return this.ledger.listRuns().map((r) => ({
      tag: r.tag,
      branch: r.branch,
      program: r.programName,
      metric: r.metric,
      direction: r.direction,
      startedAt: r.startedAt,
      experiments: counts.get(r.id) ?? 0,
    }));
  }

  /** The run named by `tag`, else the newest; RUN_NOT_FOUND otherwise. */
  run(tag?: string): RunRecord {
    return selectRun(this.ledger, tag || undefined);
  }

  experiments(run: RunRecord): ExperimentRecord[] {
    const version = this.version();
    const hit = this.cache.get(run.id);
    if (hit && hit.version === version) return hit.exps;
    const maxTrialId = this.maxTrialId();
    const exps = (hit && this.update(run, hit.exps, hit.maxTrialId)) ?? this.ledger.listExperiments(run.id);
    this.cache.set(run.id, { version, exps, maxTrialId });
    return exps;
  }

  /**
   * The cached list brought up to date by re-reading only what can have changed: rows are
   * appended, never rewritten, so an experiment that is decided and has no open trial stays
   * as it is unless a new trial of it started. Undefined when too much changed (read it all).
   */
  private update(
    run: RunRecord,
    exps: ExperimentRecord[],
    maxTrialId: number,
  ): ExperimentRecord[] | undefined {
    const db = this.ledger.db;
    const touched = new Set<number>(
      (
        db.prepare("SELECT DISTINCT experiment_id AS id FROM trial_starts WHERE id > ?").all(maxTrialId) as {
          id: number;
        }[]
      ).map((r) => r.id),
    );
    const changed = new Set<number>();
    for (const e of exps) {
      if (!e.decision || touched.has(e.id) || e.trials.some((t) => !t.result)) changed.add(e.n);
    }
    const lastN = exps.at(-1)?.n ?? -1;
    const added = (
      db.prepare("SELECT n FROM experiments WHERE run_id = ? AND n > ? ORDER BY n").all(run.id, lastN) as {
        n: number;
      }[]
    ).map((r) => r.n);
    if (changed.size + added.length > 500) return undefined;
    const out = exps.slice();
    for (let i = 0; i < out.length; i++) {
      const e = out[i] as ExperimentRecord;
      if (!changed.has(e.n)) continue;
      const fresh = this.ledger.getExperiment(run.id, e.n);
      if (fresh) out[i] = fresh;
    }
    for (const n of added) {
      const fresh = this.ledger.getExperiment(run.id, n);
      if (fresh) out.push(fresh);
    }
    return out;
  }

  private maxTrialId(): number {
    const row = this.ledger.db.prepare("SELECT MAX(id) AS m FROM trial_starts").get() as { m: number | null };
    return row.m ?? 0;
  }

  /** The run's harness sessions, oldest first (re-read only when the notebook changed). */
  sessions(run: RunRecord): SessionRecord[] {
    const version = this.version();
    const hit = this.sessionCache.get(run.id);
    if (hit && hit.version === version) return hit.sessions;
    const sessions = this.ledger.listSessions(run.id);
    this.sessionCache.set(run.id, { version, sessions });
    return sessions;
  }

  holdout(run: RunRecord): string[] {
    let h = this.holdouts.get(run.id);
    if (!h) {
      h = holdoutOf(run);
      this.holdouts.set(run.id, h);
    }
    return h;
  }

  /** Whether a live harness holds the run's lock (unknown state dir: assume it does). */
  harnessAlive(run: RunRecord): boolean {
    if (!this.stateDir) return true;
    return lockHolder(join(this.stateDir, `run-${run.tag}.lock`)) !== undefined;
  }

  /** Trials started and not finished, of experiments not decided. */
  openTrials(run: RunRecord, exps: ExperimentRecord[]): OpenTrial[] {
    const out: OpenTrial[] = [];
    let alive: boolean | undefined;
    // Undecided experiments sit at the end of the notebook: stop after 50 decided ones.
    for (let i = exps.length - 1, decided = 0; i >= 0 && decided < 50; i--) {
      const e = exps[i] as ExperimentRecord;
      if (e.decision) {
        decided++;
        continue;
      }
      const t = e.trials[e.trials.length - 1];
      if (!t || t.result) continue;
      alive ??= this.harnessAlive(run);
      out.push({
        n: e.n,
        attempt: t.attempt,
        hypothesis: e.hypothesis,
        startedAt: t.startedAt,
        budgetMs: t.budgetMs,
        state: alive ? "running" : "interrupted",
      });
    }
    return out.reverse();
  }

  /** The unified diff of an experiment against its parent, from the run's repository (cached: commits never change). */
  async diff(run: RunRecord, e: ExperimentRecord): Promise<string> {
    if (e.parentCommit === e.commit) return "";
    const key = `${e.parentCommit}..${e.commit}`;
    const hit = this.diffs.get(key);
    if (hit !== undefined) return hit;
    let text: string;
    try {
      const repo = await findRepo(dirname(run.programPath));
      const out = await gitRaw(repo.root, ["diff", "--no-renames", e.parentCommit, e.commit]);
      text =
        out.code === 0
          ? out.stdout
          : `(diff unavailable: ${out.stderr.trim().split("\n")[0] ?? `git exit ${out.code}`})`;
    } catch {
      text = "(diff unavailable: the repository is not reachable)";
    }
    if (text.length > MAX_DIFF_CHARS) text = `${text.slice(0, MAX_DIFF_CHARS)}\n… (diff truncated)`;
    if (this.diffs.size > 500) this.diffs.clear();
    this.diffs.set(key, text);
    return text;
  }
}
