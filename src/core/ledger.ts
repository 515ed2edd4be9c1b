import type { Decision, DecisionAction, Direction, Params, TrialResult, TrialStatus } from "./types.ts";

/**
 * The lab notebook. Records are appended, never rewritten: an experiment row, then trial
 * starts, trial results and one decision, each in its own table. State (pending, decided,
 * interrupted) is derived from which records exist, so a harness killed between any two
 * writes leaves a notebook that says exactly how far it got.
 */

export interface RunRecord {
  id: number;
  tag: string;
  branch: string;
  programPath: string;
  programName: string;
  metric: string;
  direction: Direction;
  baseCommit: string;
  /** sha256 of each protected file at the base commit. */
  protectedHashes: Record<string, string>;
  /** The run's seed: the built-in researcher's and the frontier's (trials' seeds come from seedKey). */
  seed: number;
  /**
   * The secret every trial seed of the run derives from (src/core/trial-seeds.ts): drawn at random
   * when the run starts, never shown to a researcher. Absent for runs recorded before it, whose
   * trial k ran with seed + k.
   */
  seedKey?: string;
  /** The program's contract when the run started (objective, commands, budget, files, holdouts). */
  contract?: Record<string, unknown>;
  /**
   * Git blob id of the program.md the run started from: the committed one (`git show <blob>`
   * prints it). Absent for runs recorded before autolab knew.
   */
  programBlob?: string;
  startedAt: string;
}

export interface DiffStats {
  files: number;
  insertions: number;
  deletions: number;
}

export interface NewExperiment {
  runId: number;
  n: number;
  agent: string;
  parentCommit: string;
  commit: string;
  ref: string;
  hypothesis: string;
  mechanism?: string;
  expected?: string;
  params?: Params;
  diff: DiffStats;
  usage?: Record<string, number>;
  /** The org role that proposed it (absent without an org). */
  role?: string;
  /** Set on a merge candidate: the experiment whose change was rebased onto a newer best. */
  rebaseOf?: number;
}

export interface TrialRecord {
  id: number;
  attempt: number;
  seed: number;
  command: string;
  commit: string;
  budgetMs: number;
  /** Environment the harness gave the trial (AUTOLAB_SEED, AUTOLAB_BUDGET_S, AUTOLAB_TRIAL_TOKEN). */
  env: Record<string, string>;
  /** The slot (0-based) the trial ran on; absent in notebooks from before slots. */
  slot?: number;
  startedAt: string;
  /** Absent while the trial runs, or forever if the harness died during it (then: interrupted). */
  result?: TrialResult & { finishedAt: string; logDir: string };
}

export interface ExperimentRecord extends NewExperiment {
  id: number;
  createdAt: string;
  trials: TrialRecord[];
  decision?: Decision & { decidedAt: string };
}

export interface NewTrial {
  experimentId: number;
  attempt: number;
  seed: number;
  command: string;
  commit: string;
  budgetMs: number;
  env: Record<string, string>;
  slot?: number;
}

/** One start of the harness on a run: how many slots it ran (slot utilization is per session). */
export interface NoteRecord {
  experimentId: number | null;
  text: string;
  createdAt: string;
}

export interface SessionRecord {
  id: number;
  runId: number;
  slots: number;
  pid: number;
  startedAt: string;
  /**
   * How trials and researchers were confined: "bubblewrap <version>", or "unsandboxed: <why>"
   * (`sandbox: off`, bubblewrap missing, …). Absent for sessions recorded before autolab knew.
   */
  sandbox?: string;
}

/**
 * A result another tool recorded before autolab (autoresearch's results.tsv, pi-autoresearch's
 * log.jsonl), imported by `autolab init --from`: a claim, not a measurement. It belongs to the
 * notebook, not to a run; it is never a baseline, never the best, never counted toward
 * acceptance — views show it as "before autolab, not re-measured" (docs/migrate.md).
 */
export interface NewImportedResult {
  /** The tool and file it came from, e.g. `autoresearch:results.tsv`, `pi-autoresearch:.auto/log.jsonl`. */
  source: string;
  /** Its place in the source, from 1 (row or run order). */
  seq: number;
  /** The commit the source names (often 7 characters; may be empty). */
  commit: string;
  /** The values the source claims (only finite numbers; a crash row's placeholder 0 is left out). */
  metrics: Record<string, number>;
  /** As the source wrote it: keep, discard, crash, checks_failed, … */
  status: string;
  /** Untrusted text from the source: escape wherever it is shown. */
  description: string;
  /** pi-autoresearch's segment (a new config header starts one); absent for other sources. */
  segment?: number;
}

export interface ImportedResultRecord extends NewImportedResult {
  id: number;
  importedAt: string;
}

/** Which side of an experiment a hook ran on (program.md `hooks:`). */
export type HookPhase = "before" | "after";

/**
 * How a hook ended: `failed` (non-zero exit, could not start), `timeout` (killed at its
 * budget + grace), `interrupted` (Ctrl-C). A hook's outcome never stops the run.
 */
export type HookStatus = "ok" | "failed" | "timeout" | "interrupted";

/** One run of a hook (src/core/hooks.ts): written once it has finished. */
export interface NewHookRun {
  runId: number;
  /** The experiment it ran around: `before` the proposal of n, `after` n's decision. */
  n: number;
  phase: HookPhase;
  command: string;
  status: HookStatus;
  reason?: string;
  exitCode: number | null;
  wallS: number;
  /** The tail of its stdout + stderr, capped (HOOK_OUTPUT_CHARS): trial-controlled text, escape wherever shown. */
  output: string;
  /** Its full (capped) logs: stdout.log, stderr.log. */
  logDir: string;
}

export interface HookRunRecord extends NewHookRun {
  id: number;
  finishedAt: string;
}

/**
 * What the advisor answered when the loop asked it (src/core/advisor.ts): up to three ideas for
 * the next researchers, a stop verdict with its reason, or garbage (unparseable, too long, a
 * crash, a timeout, an edit) recorded with why; the run goes on after ideas and garbage.
 */
export type AdviceVerdict = "ideas" | "stop" | "garbage";

export interface NewAdvice {
  runId: number;
  /** What made the loop ask: "8 discards in a row", "plateau: 12 experiments without a keep". */
  trigger: string;
  /** How many experiments of the run were decided when it was asked (the trigger counts after it). */
  decided: number;
  /** The highest experiment number decided when it was asked (shown as "after #n"). */
  afterN: number;
  /** The advisor's backend (program.md `advisor.agent`). */
  agent: string;
  verdict: AdviceVerdict;
  /** With verdict ideas: one to three, as the advisor wrote them ("revisit #12: …" marks a revisit). */
  ideas: string[];
  /** Stop: the advisor's reason; garbage: what was wrong with the answer. Untrusted text. */
  reason: string;
}

export interface AdviceRecord extends NewAdvice {
  id: number;
  createdAt: string;
}

export interface Ledger {
  createRun(run: Omit<RunRecord, "id" | "startedAt">): RunRecord;
  getRun(tag: string): RunRecord | undefined;
  latestRun(): RunRecord | undefined;
  listRuns(): RunRecord[];
  /**
   * Records an experiment; `context` is the text its researcher was shown (buildContext), kept
   * with the row in one write and read back only by `proposalContext` (never in the records).
   */
  addExperiment(exp: NewExperiment, context?: string): ExperimentRecord;
  /** The context experiment n's researcher was shown, when it was recorded (migration 11). */
  proposalContext?(runId: number, n: number): string | undefined;
  startTrial(trial: NewTrial): number;
  finishTrial(trialId: number, result: TrialResult, logDir: string): void;
  decide(experimentId: number, decision: Decision): void;
  getExperiment(runId: number, n: number): ExperimentRecord | undefined;
  listExperiments(runId: number): ExperimentRecord[];
  addNote(runId: number, experimentId: number | null, text: string): void;
  /** A run's notes, oldest first (alarms such as `ALARM tamper:ratchet: …` are notes). */
  listNotes(runId: number): NoteRecord[];
  startSession(runId: number, slots: number, sandbox?: string): SessionRecord;
  /** Sessions of a run, oldest first. */
  listSessions(runId: number): SessionRecord[];
  /**
   * Records imported results (`autolab init --from`), all or none: a failure writes nothing.
   * A source already imported is refused (IMPORT_EXISTS): importing twice would double history.
   */
  addImportedResults(rows: NewImportedResult[]): void;
  /** Every imported result, by source in import order, then by seq. */
  listImportedResults(): ImportedResultRecord[];
  /** Records a finished hook run (program.md `hooks:`); returns the record. */
  addHookRun(hook: NewHookRun): HookRunRecord;
  /** A run's hook runs, oldest first; with `n`, only those around experiment n. */
  listHookRuns(runId: number, n?: number): HookRunRecord[];
  /** The most recent hook run of each phase of a run (at most one `before`, one `after`), oldest first. */
  latestHookRuns(runId: number): HookRunRecord[];
  /** Records one answer of the advisor (docs/advisor.md). */
  addAdvice(advice: NewAdvice): AdviceRecord;
  /** A run's advice, oldest first. */
  listAdvice(runId: number): AdviceRecord[];
  close(): void;
}

export const TERMINAL_STATUSES: readonly TrialStatus[] = [
  "ok",
  "crash",
  "timeout",
  "missing_metric",
  "nonfinite_metric",
  "tampered",
  "interrupted",
];

export function isKept(e: ExperimentRecord): boolean {
  return e.decision?.action === "keep";
}

export function countDecisions(exps: ExperimentRecord[]): Record<DecisionAction | "pending", number> {
  const counts = { keep: 0, discard: 0, crash: 0, reject: 0, pending: 0 };
  for (const e of exps) counts[e.decision?.action ?? "pending"]++;
  return counts;
}
