/**
 * Prior work: a store of decided experiments across runs and projects on this machine
 * (docs/notebook.md "Prior work"), so a new run's researcher starts from what other runs found.
 * The store itself (SQLite full-text search) is src/ledger/knowledge-store.ts; this module is
 * what goes in (entriesOf: holdout values never), how a run asks (priorWorkQuery) and the
 * source the loop reads (priorWorkSource: synced, searched every K experiments, never throws).
 */
import { objectiveOf } from "./experiments.ts";
import type { ExperimentRecord, RunRecord } from "./ledger.ts";
import type { DecisionAction, Direction, Program } from "./types.ts";
import { holdoutNames, redactHoldouts } from "./views.ts";

/** One decided experiment as the store keeps it. Texts are the researcher's: untrusted. */
export interface KnowledgeEntry {
  /** The project's identity: the absolute path of its program.md. */
  project: string;
  /** program.md's `name:` when the run started. */
  projectName: string;
  /** The run's tag. */
  run: string;
  n: number;
  /** When it was decided (ISO 8601). */
  date: string;
  hypothesis: string;
  mechanism?: string;
  action: DecisionAction;
  reason: string;
  /** The objective metric's name and direction. */
  metric: string;
  direction: Direction;
  /** Its objective value (absent: a crash, a rejection). */
  value?: number;
  /** The value of the experiment it was built on. */
  parentValue?: number;
  /** value vs parentValue, positive when better in `direction`. */
  gain?: number;
  /**
   * Its program opted in to sharing (program.md `prior_work: machine`): other projects that opted
   * in may be shown it. Otherwise only runs of the same project are.
   */
  shared?: boolean;
}

export interface KnowledgeHit extends KnowledgeEntry {
  /** Higher is closer to the query (bm25, or the fallback's term count). */
  score: number;
}

export interface KnowledgeSearchOptions {
  /** Leave out this run of this project (the run asking: its own results are in its notebook). */
  exclude?: { project: string; run: string };
  /**
   * Only what a researcher of this project may be shown (docs/notebook.md "Prior work"): entries
   * of the same objective (metric and direction) from the same project — and, when `shared`
   * (the program opted in with `prior_work: machine`), those other projects shared too.
   * Absent: every entry (the user's own `autolab knowledge search`).
   */
  scope?: KnowledgeScope;
}

/** Whose results a project's researcher may be shown. */
export interface KnowledgeScope {
  /** The project's identity: the absolute path of its program.md. */
  project: string;
  metric: string;
  direction: Direction;
  /** Also other projects' shared entries (the program opted in). */
  shared: boolean;
}

/** The scope of a program's prior work: its own project and objective, others' shared ones when it opted in. */
export function knowledgeScope(
  program: Pick<Program, "priorWork">,
  project: string,
  objective: { metric: string; direction: Direction },
): KnowledgeScope {
  return {
    project,
    metric: objective.metric,
    direction: objective.direction,
    shared: program.priorWork === "machine",
  };
}

export interface KnowledgeStats {
  path: string;
  entries: number;
  projects: number;
  runs: number;
  /** "fts5", or "scan" where SQLite lacks FTS5 (a LIKE scan over the newest entries). */
  search: "fts5" | "scan";
}

/** The machine-wide store of prior results (src/ledger/knowledge-store.ts). */
export interface KnowledgeStore {
  /** Adds entries; one already there (same project, run, n) is left as it is. Returns how many were new. */
  record(entries: readonly KnowledgeEntry[]): number;
  /** The k entries closest to `query`, closest first. A query with no words finds nothing. */
  search(query: string, k: number, opts?: KnowledgeSearchOptions): KnowledgeHit[];
  stats(): KnowledgeStats;
  close(): void;
}

/**
 * The entries of a run's decided experiments: the baseline and failed proposals (the
 * researcher, not the idea, failed) left out. Holdout values never enter: only the objective
 * metric is taken, and every text passes through redactHoldouts with the program's and the
 * run's holdout names.
 */
export function entriesOf(
  program: Program,
  run: RunRecord,
  exps: readonly ExperimentRecord[],
  /** Only these experiments (by n); the others are still read for their values as parents. */
  only?: ReadonlySet<number>,
): KnowledgeEntry[] {
  const names = holdoutNames(program, run);
  const r = (s: string) => redactHoldouts(s, names);
  const metric = run.metric;
  const byCommit = new Map(exps.map((e) => [e.commit, e]));
  const out: KnowledgeEntry[] = [];
  for (const e of exps) {
    if (only && !only.has(e.n)) continue;
    if (e.n === 0 || !e.decision || e.hypothesis.startsWith("(no proposal")) continue;
    const value = objectiveOf(e, metric);
    const parent = byCommit.get(e.parentCommit);
    const parentValue = parent ? objectiveOf(parent, metric) : undefined;
    const entry: KnowledgeEntry = {
      project: run.programPath,
      projectName: run.programName,
      run: run.tag,
      n: e.n,
      date: e.decision.decidedAt,
      hypothesis: r(e.hypothesis),
      action: e.decision.action,
      reason: r(e.decision.reason),
      metric,
      direction: run.direction,
    };
    if (program.priorWork === "machine") entry.shared = true;
    if (e.mechanism) entry.mechanism = r(e.mechanism);
    if (value !== undefined && Number.isFinite(value)) entry.value = value;
    if (parentValue !== undefined && Number.isFinite(parentValue)) entry.parentValue = parentValue;
    if (entry.value !== undefined && entry.parentValue !== undefined) {
      const d = entry.value - entry.parentValue;
      entry.gain = run.direction === "minimize" ? -d : d;
    }
    out.push(entry);
  }
  return out;
}

/** What a run asks the store: program.md's name, its research directions and its objective metric. */
export function priorWorkQuery(program: Pick<Program, "name" | "directions" | "objective">): string {
  return [program.name, program.objective.metric, program.directions].join("\n");
}

// Words too common to tell one result from another.
const STOP = new Set(
  "the a an and or of to in on for with is are be it this that as at by from into not no do does was were has have had can will may our we you your its their them then than".split(
    " ",
  ),
);

/** The words of a query, lowercased, without stop words and repeats: at most 64. */
export function queryTerms(query: string): string[] {
  const words = (query.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).filter(
    (w) => w.length > 1 && !STOP.has(w),
  );
  return [...new Set(words)].slice(0, 64);
}

/** How the loop reads prior work (LoopDeps.priorWork). */
export interface PriorWorkSource {
  /**
   * Records the run's decided experiments not yet in the store, then the closest prior results
   * of other runs: searched at the first call and again every `refreshEvery` experiments.
   * Never throws: a store that cannot be opened or written (damaged, locked) is warned about
   * once and the run goes on without prior work.
   */
  for(exps: readonly ExperimentRecord[]): readonly KnowledgeHit[];
  /** Records what is decided (the end of a run) and closes the store. Never throws. */
  close(exps?: readonly ExperimentRecord[]): void;
}

export interface PriorWorkOptions {
  /** Results shown (default 5). */
  k?: number;
  /** Experiments between searches (default 10). */
  refreshEvery?: number;
  /** Told once why the store is not used (then the run goes on without it). */
  warn: (message: string) => void;
}

/**
 * The prior-work source of one run over a store opened lazily by `open` (the store is shared
 * by every run on the machine, so it is opened once per run, not at every step).
 */
export function priorWorkSource(
  open: () => KnowledgeStore,
  program: Program,
  run: RunRecord,
  opts: PriorWorkOptions,
): PriorWorkSource {
  const k = opts.k ?? 5;
  const every = opts.refreshEvery ?? 10;
  let store: KnowledgeStore | undefined;
  let broken = false;
  const recorded = new Set<number>();
  let hits: readonly KnowledgeHit[] = [];
  let searchedAt: number | undefined;
  const guard = <T>(what: string, fn: (s: KnowledgeStore) => T): T | undefined => {
    if (broken) return undefined;
    try {
      store ??= open();
      return fn(store);
    } catch (err) {
      broken = true;
      try {
        store?.close();
      } catch {}
      store = undefined;
      opts.warn(
        `prior work is off for this run: the knowledge store could not be ${what} (${(err as Error).message}); the run goes on without it`,
      );
      return undefined;
    }
  };
  const sync = (exps: readonly ExperimentRecord[]) => {
    const fresh = exps.filter((e) => e.decision && !recorded.has(e.n));
    if (!fresh.length) return;
    // Every experiment goes in (a parent's value is read from it), only the new ones come out.
    const news = new Set(fresh.map((e) => e.n));
    const ok = guard("written", (s) => s.record(entriesOf(program, run, exps, news)));
    if (ok !== undefined) for (const e of fresh) recorded.add(e.n);
  };
  return {
    for(exps) {
      sync(exps);
      if (searchedAt === undefined || exps.length - searchedAt >= every) {
        searchedAt = exps.length;
        hits =
          guard("read", (s) =>
            s.search(priorWorkQuery(program), k, {
              exclude: { project: run.programPath, run: run.tag },
              scope: knowledgeScope(program, run.programPath, run),
            }),
          ) ?? [];
      }
      return hits;
    },
    close(exps) {
      if (exps) sync(exps);
      try {
        store?.close();
      } catch {}
      store = undefined;
    },
  };
}
