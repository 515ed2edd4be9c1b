import { dirname, join } from "node:path";
import type {
  AdviceRecord,
  ExperimentRecord,
  HookRunRecord,
  ImportedResultRecord,
  RunRecord,
  SessionRecord,
} from "../core/ledger.ts";
import type { ReadableNotebook } from "../core/notebook-reader.ts";
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
 * another process writes it. Everything it reads comes through the notebook's interfaces
 * (Ledger, NotebookReader): the notebook keeps its own incremental cache, so a lab of 10,000
 * costs the same as a small one while it runs. Here, per run, the last list is kept with the
 * notebook's version: an unchanged notebook hands back the very same list (callers may key
 * derived views by it).
 */
export class LabReader {
  readonly ledger: ReadableNotebook;
  /** `.autolab/` of the notebook: lock files tell whether a harness is running. */
  readonly stateDir: string | undefined;
  private readonly cache = new Map<number, { version: string; exps: ExperimentRecord[] }>();
  private readonly holdouts = new Map<number, string[]>();
  private readonly sessionCache = new Map<number, { version: string; sessions: SessionRecord[] }>();
  private readonly diffs = new Map<string, string>();
  private importedCache: { version: string; rows: readonly ImportedResultRecord[] } | undefined;

  constructor(ledger: ReadableNotebook, opts: { stateDir?: string } = {}) {
    this.ledger = ledger;
    this.stateDir = opts.stateDir;
  }

  /** The notebook's change token (NotebookReader.version). */
  version(): string {
    return this.ledger.version();
  }

  runs(): RunSummary[] {
    const counts = this.ledger.experimentCounts();
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
    const exps = this.ledger.listExperiments(run.id);
    this.cache.set(run.id, { version, exps });
    return exps;
  }

  /** Results imported by `autolab init --from` (claims from before autolab), re-read only when the notebook changed. */
  imported(): readonly ImportedResultRecord[] {
    const version = this.version();
    if (this.importedCache?.version === version) return this.importedCache.rows;
    const rows = this.ledger.listImportedResults();
    this.importedCache = { version, rows };
    return rows;
  }

  /** Experiment n's hook runs (program.md `hooks:`), oldest first. */
  hooks(run: RunRecord, n: number): HookRunRecord[] {
    return this.ledger.listHookRuns(run.id, n);
  }

  /** The run's advice, oldest first (docs/advisor.md). */
  advice(run: RunRecord): AdviceRecord[] {
    return this.ledger.listAdvice(run.id);
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
