import type {
  AdviceRecord,
  AdviceVerdict,
  ExperimentRecord,
  HookRunRecord,
  HookStatus,
  ImportedResultRecord,
  NoteRecord,
  RunRecord,
  SessionRecord,
  TrialRecord,
} from "../core/ledger.ts";
import type { DecisionAction, Direction, TrialStatus } from "../core/types.ts";

/**
 * The notebook's rows as SQLite returns them, and one mapping per table from a row to the
 * record type of src/core/ledger.ts. Every query of src/ledger/ reads through these: a column
 * is named, typed and converted in one place (the schema is src/ledger/migrations.ts; columns
 * added by a later migration are optional here, absent in rows of an older query shape).
 * A query casts its result once (`as RunRow[]`): node:sqlite types rows loosely.
 */

export interface RunRow {
  id: number;
  tag: string;
  branch: string;
  program_path: string;
  program_name: string;
  metric: string;
  direction: Direction;
  base_commit: string;
  protected_hashes: string;
  seed: number;
  started_at: string;
  contract: string | null;
  program_blob?: string | null;
  seed_key?: string | null;
}

/** An experiments row with its decision's columns (LEFT JOIN decisions: all null when undecided). */
export type ExperimentRow = ExperimentColumns & (DecisionColumns | Nulls<DecisionColumns>);

interface ExperimentColumns {
  id: number;
  run_id: number;
  n: number;
  agent: string;
  parent_commit: string;
  commit_sha: string;
  ref: string;
  hypothesis: string;
  mechanism: string | null;
  expected: string | null;
  params: string | null;
  diff_files: number;
  diff_insertions: number;
  diff_deletions: number;
  usage: string | null;
  created_at: string;
  role?: string | null;
  rebase_of?: number | null;
}

/** decisions, as the experiments query names them (`d_` where experiments has the same name). */
interface DecisionColumns {
  action: DecisionAction;
  d_reason: string;
  d_metric: number | null;
  mechanism_confirmed: number | null;
  decided_at: string;
  /** Migration 8 (the tree frontier): 1 for a tree node, else null. */
  tree_node?: number | null;
}

/** A trial_starts row with its result's columns (LEFT JOIN trial_results: all null while open). */
export type TrialRow = TrialStartColumns & (TrialResultColumns | Nulls<TrialResultColumns>);

interface TrialStartColumns {
  id: number;
  experiment_id: number;
  attempt: number;
  seed: number;
  command: string;
  commit_sha: string;
  budget_ms: number;
  env: string;
  started_at: string;
  slot?: number | null;
}

interface TrialResultColumns {
  status: TrialStatus;
  reason: string | null;
  exit_code: number | null;
  signal: string | null;
  wall_s: number;
  cpu_s: number;
  peak_rss_mb: number;
  metrics: string;
  self_reported: number;
  stdout_path: string;
  stderr_path: string;
  log_dir: string;
  log_tail: string;
  finished_at: string;
  progress?: string | null;
}

/** The columns of a LEFT JOIN's missing row. */
type Nulls<T> = { [K in keyof T]: null };

export interface NoteRow {
  id: number;
  run_id: number;
  experiment_id: number | null;
  text: string;
  created_at: string;
}

export interface SessionRow {
  id: number;
  run_id: number;
  slots: number;
  pid: number;
  started_at: string;
  sandbox?: string | null;
}

/** `SELECT MAX(id) AS m …` */
export interface MaxRow {
  m: number | null;
}

export function toRun(r: RunRow): RunRecord {
  return {
    id: r.id,
    tag: r.tag,
    branch: r.branch,
    programPath: r.program_path,
    programName: r.program_name,
    metric: r.metric,
    direction: r.direction,
    baseCommit: r.base_commit,
    protectedHashes: JSON.parse(r.protected_hashes),
    seed: r.seed,
    ...(r.contract ? { contract: JSON.parse(r.contract) } : {}),
    ...(typeof r.program_blob === "string" ? { programBlob: r.program_blob } : {}),
    ...(typeof r.seed_key === "string" ? { seedKey: r.seed_key } : {}),
    startedAt: r.started_at,
  };
}

export function toTrial(t: TrialRow): TrialRecord {
  const rec: TrialRecord = {
    id: t.id,
    attempt: t.attempt,
    seed: t.seed,
    command: t.command,
    commit: t.commit_sha,
    budgetMs: t.budget_ms,
    env: JSON.parse(t.env),
    startedAt: t.started_at,
  };
  if (t.slot !== null && t.slot !== undefined) rec.slot = t.slot;
  if (t.status !== null) {
    rec.result = {
      status: t.status,
      ...(t.reason !== null ? { reason: t.reason } : {}),
      exitCode: t.exit_code,
      signal: t.signal,
      wallS: t.wall_s,
      cpuS: t.cpu_s,
      peakRssMb: t.peak_rss_mb,
      metrics: parseMetrics(t.metrics),
      selfReported: t.self_reported === 1,
      seed: t.seed,
      command: t.command,
      stdoutPath: t.stdout_path,
      stderrPath: t.stderr_path,
      logTail: t.log_tail,
      logDir: t.log_dir,
      finishedAt: t.finished_at,
      ...(t.progress ? { progress: JSON.parse(t.progress) } : {}),
    };
  }
  return rec;
}

export function toExperiment(r: ExperimentRow, trials: TrialRecord[]): ExperimentRecord {
  const exp: ExperimentRecord = {
    id: r.id,
    runId: r.run_id,
    n: r.n,
    agent: r.agent,
    parentCommit: r.parent_commit,
    commit: r.commit_sha,
    ref: r.ref,
    hypothesis: r.hypothesis,
    diff: { files: r.diff_files, insertions: r.diff_insertions, deletions: r.diff_deletions },
    createdAt: r.created_at,
    trials,
  };
  if (r.mechanism !== null) exp.mechanism = r.mechanism;
  if (r.expected !== null) exp.expected = r.expected;
  if (r.params !== null) exp.params = JSON.parse(r.params);
  if (r.usage !== null) exp.usage = JSON.parse(r.usage);
  if (r.role !== null && r.role !== undefined) exp.role = r.role;
  if (r.rebase_of !== null && r.rebase_of !== undefined) exp.rebaseOf = r.rebase_of;
  if (r.action !== null) {
    exp.decision = {
      action: r.action,
      reason: r.d_reason,
      ...(r.d_metric !== null ? { metric: r.d_metric } : {}),
      mechanismConfirmed: r.mechanism_confirmed === null ? null : r.mechanism_confirmed === 1,
      decidedAt: r.decided_at,
      ...(r.tree_node === 1 ? { treeNode: true } : {}),
    };
  }
  return exp;
}

export function toNote(r: NoteRow): NoteRecord {
  return { experimentId: r.experiment_id ?? null, text: r.text, createdAt: r.created_at };
}

export function toSession(r: SessionRow): SessionRecord {
  return {
    id: r.id,
    runId: r.run_id,
    slots: r.slots,
    pid: r.pid,
    startedAt: r.started_at,
    ...(typeof r.sandbox === "string" ? { sandbox: r.sandbox } : {}),
  };
}

/** JSON cannot hold NaN/Infinity; the ledger writes them as strings (see finishTrial). */
export function parseMetrics(text: string): Record<string, number> {
  const raw = JSON.parse(text) as Record<string, number | string>;
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(raw)) out[k] = typeof v === "number" ? v : Number(v);
  return out;
}

export interface ImportedResultRow {
  id: number;
  source: string;
  seq: number;
  commit_sha: string;
  metrics: string;
  status: string;
  description: string;
  segment: number | null;
  imported_at: string;
}

export function toImportedResult(r: ImportedResultRow): ImportedResultRecord {
  return {
    id: r.id,
    source: r.source,
    seq: r.seq,
    commit: r.commit_sha,
    metrics: JSON.parse(r.metrics) as Record<string, number>,
    status: r.status,
    description: r.description,
    ...(r.segment !== null ? { segment: r.segment } : {}),
    importedAt: r.imported_at,
  };
}

export interface HookRunRow {
  id: number;
  run_id: number;
  n: number;
  phase: string;
  command: string;
  status: string;
  reason: string | null;
  exit_code: number | null;
  wall_s: number;
  output: string;
  log_dir: string;
  finished_at: string;
}

export function toHookRun(r: HookRunRow): HookRunRecord {
  return {
    id: r.id,
    runId: r.run_id,
    n: r.n,
    phase: r.phase === "after" ? "after" : "before",
    command: r.command,
    status: r.status as HookStatus,
    ...(r.reason !== null ? { reason: r.reason } : {}),
    exitCode: r.exit_code,
    wallS: r.wall_s,
    output: r.output,
    logDir: r.log_dir,
    finishedAt: r.finished_at,
  };
}

export interface AdviceRow {
  id: number;
  run_id: number;
  trigger: string;
  decided: number;
  after_n: number;
  agent: string;
  verdict: string;
  ideas: string;
  reason: string;
  created_at: string;
}

export function toAdvice(r: AdviceRow): AdviceRecord {
  const ideas = JSON.parse(r.ideas) as unknown;
  return {
    id: r.id,
    runId: r.run_id,
    trigger: r.trigger,
    decided: r.decided,
    afterN: r.after_n,
    agent: r.agent,
    verdict: r.verdict as AdviceVerdict,
    ideas: Array.isArray(ideas) ? ideas.filter((i): i is string => typeof i === "string") : [],
    reason: r.reason,
    createdAt: r.created_at,
  };
}
