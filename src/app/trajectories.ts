/**
 * `autolab export --format trajectories | trajectories-sft | trajectories-dpo` (docs/learning.md
 * "Trajectory export"): what a trainer needs from a run, one JSON object per line, without glue.
 * Per proposal: the context its researcher saw, its output (the backend's transcript), the diff,
 * the outcome, a reward in noise units with a cost, and hindsight labels. Holdout values never
 * appear: holdout metrics are left out of every metrics object, and every text passes through
 * the researchers' own redaction (src/core/views.ts) a second time.
 */
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { AutolabError } from "../core/errors.ts";
import { objectiveOf } from "../core/experiments.ts";
import type { ExperimentRecord, HookRunRecord, Ledger, RunRecord } from "../core/ledger.ts";
import { mean } from "../core/stats.ts";
import { isFullBudget, valuesAt } from "../core/trial-values.ts";
import type { Program, TrialResult, TrialStatus } from "../core/types.ts";
import { readUntrustedText, refusedText } from "../core/untrusted-file.ts";
import { buildContext, holdoutNames, redactHoldoutsDeep } from "../core/views.ts";
import { loadProgram } from "../program/index.ts";
import { fitNoise, sigmaOf } from "../trust/noise-model.ts";
import { git } from "../workspace/git.ts";
import { findRepo } from "../workspace/git-workspace.ts";
import { openLedger, selectRun } from "./lab.ts";

export const TRAJECTORY_SCHEMA = "autolab.trajectory/1";
/** Formats of `autolab export` this module writes. */
export const TRAJECTORY_FORMATS = ["trajectories", "trajectories-sft", "trajectories-dpo"] as const;
export type TrajectoryFormat = (typeof TRAJECTORY_FORMATS)[number];

/** Characters kept of a transcript (its end: where the proposal is) and of a diff (its start). */
export const OUTPUT_CAP = 64_000;
export const DIFF_CAP = 64_000;
/** Reward: |noise units| is clipped here (a deterministic metric has σ 0). */
export const UNITS_CLIP = 10;
/** Reward of a crashed or rejected proposal (no measured value): a clear loss. */
export const FAILED_UNITS = -3;
/** Reward: cost per trial the proposal used, in noise units. */
export const COST_PER_TRIAL = 0.1;
/** A label "faster" / "less memory" needs this relative margin over the parent (5%). */
export const LABEL_MARGIN = 0.05;
/** The backends' transcripts in the proposal's agent log directory, the first found is used. */
export const TRANSCRIPT_FILES = ["llm-transcript.jsonl", "agent.stdout.log", "aider.chat.history.md"];

/** The system message of the chat formats: what the assistant turn is asked to be. */
export const SFT_SYSTEM =
  "You are a researcher in an autolab run. The user message is the lab notebook: the program's objective and " +
  "directions, the best result so far and the experiments tried. Propose one change to the editable files: " +
  "state the hypothesis, the mechanism by which it should work and the expected effect, then give the change " +
  "as a unified diff.";

export interface TrajectoryRecord {
  schema: typeof TRAJECTORY_SCHEMA;
  run: { tag: string; program: string; metric: string; direction: string };
  n: number;
  /** The experiment number of the node it was built on (null when not found in the notebook). */
  parent: number | null;
  agent: string;
  role: string | null;
  /**
   * What the researcher was shown. `recorded`: the text itself (notebooks from migration 11 on).
   * `rebuilt`: rendered again from the notebook as it stood when the proposal was made (older
   * notebooks; `missing` says what may differ). null: neither possible (`missing` says why).
   */
  context: { source: "recorded" | "rebuilt" | null; text: string | null; missing: string | null };
  proposal: {
    hypothesis: string;
    mechanism: string | null;
    expected: string | null;
    params: Record<string, unknown> | null;
  };
  /** The backend's transcript (its last OUTPUT_CAP characters); null when it keeps none. */
  output: { file: string; path: string; text: string; truncated: boolean } | null;
  diff: {
    files: number;
    insertions: number;
    deletions: number;
    text: string | null;
    truncated: boolean;
  };
  outcome: {
    decision: string;
    reason: string;
    metric: number | null;
    parentMetric: number | null;
    mechanismConfirmed: boolean | null;
    treeNode: boolean;
    trials: {
      attempt: number;
      seed: number;
      status: string;
      metrics: Record<string, number>;
      wallS: number;
      peakRssMb: number;
    }[];
  };
  reward: {
    /** noiseUnits − cost: the number to train on. */
    value: number;
    /**
     * Improvement over the parent in σ (better is positive), clipped to ±UNITS_CLIP; FAILED_UNITS
     * for a crash or reject, 0 for a discard without a value.
     */
    noiseUnits: number;
    /** Improvement in metric units (better is positive); null without a value. */
    improvement: number | null;
    sigma: number | null;
    /** Where σ came from: the run's noise model (pooled, floor, prior, deterministic), or the spread of the run's values. */
    sigmaSource: string;
    cost: number;
    trials: number;
  };
  labels: {
    ranClean: boolean | null;
    faster: boolean | null;
    lessMemory: boolean | null;
    mechanismConfirmed: boolean | null;
    wallS: number | null;
    parentWallS: number | null;
    peakRssMb: number | null;
    parentPeakRssMb: number | null;
  };
  usage: Record<string, number> | null;
}

export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

export interface TrajectoryInput {
  run: RunRecord;
  exps: ExperimentRecord[];
  ledger: Pick<Ledger, "listImportedResults" | "listHookRuns" | "listAdvice" | "proposalContext">;
  /** program.md as it is now (undefined when it no longer parses): rebuilt contexts need it. */
  program: Program | undefined;
  /** The lab's state directory (.autolab): the agents' logs are under logs/<tag>/<n>/agent. */
  stateDir: string;
}

const meanOrNone = (xs: number[]) => (xs.length ? mean(xs) : undefined);
const finished = (e: ExperimentRecord): TrialResult[] =>
  e.trials.map((t) => t.result).filter((r): r is NonNullable<typeof r> => !!r && r.status !== "interrupted");

/** One trajectory record per decided proposal (n > 0, merges left out), in order of n. */
export async function trajectoryRecords(input: TrajectoryInput): Promise<TrajectoryRecord[]> {
  const out: TrajectoryRecord[] = [];
  for await (const r of trajectoryStream(input)) out.push(r);
  return out;
}

/** The records one at a time: a run of thousands with 64 kB transcripts never sits in memory whole. */
export async function* trajectoryStream(input: TrajectoryInput): AsyncGenerator<TrajectoryRecord> {
  const { run, exps, program } = input;
  const holdout = holdoutNames(program, run);
  const sigmaOfN = noiseUnitsOf(run, exps, program);
  const parentOf = parentsOf(exps);
  const repo = await findRepo(dirname(run.programPath)).catch(() => undefined);
  for (const e of exps) {
    if (e.n === 0 || !e.decision || e.rebaseOf !== undefined) continue;
    const parent = parentOf(e);
    const parentMetric = parent ? (objectiveOf(parent, run.metric) ?? null) : null;
    const metric =
      e.decision.action === "keep" || e.decision.action === "discard" ? (e.decision.metric ?? null) : null;
    const improvement =
      metric !== null && parentMetric !== null
        ? run.direction === "minimize"
          ? parentMetric - metric
          : metric - parentMetric
        : null;
    const sigma = sigmaOfN(e.n);
    // No value: a crash or a reject is a clear loss; a discard left unmeasured (the run's budget
    // ran out before its trials) is no evidence either way.
    const failed = e.decision.action === "crash" || e.decision.action === "reject";
    const noiseUnits = improvement !== null ? unitsOf(improvement, sigma.sigma) : failed ? FAILED_UNITS : 0;
    const results = finished(e);
    const cost = COST_PER_TRIAL * results.length;
    // Speed and memory compare ok trials at the full budget only: a crash's or a cheaper rung's
    // short wall time says nothing.
    const ok = (x: ExperimentRecord) =>
      x.trials
        .filter((t) => !program || isFullBudget(program, t))
        .map((t) => t.result)
        .filter((r): r is NonNullable<typeof r> => r?.status === "ok");
    const wall = meanOrNone(
      ok(e)
        .map((r) => r.wallS)
        .filter((w) => w > 0),
    );
    const parentWall = parent
      ? meanOrNone(
          ok(parent)
            .map((r) => r.wallS)
            .filter((w) => w > 0),
        )
      : undefined;
    const rss = maxOf(ok(e).map((r) => r.peakRssMb));
    const parentRss = parent ? maxOf(ok(parent).map((r) => r.peakRssMb)) : undefined;
    const record: TrajectoryRecord = {
      schema: TRAJECTORY_SCHEMA,
      run: { tag: run.tag, program: run.programName, metric: run.metric, direction: run.direction },
      n: e.n,
      parent: parent?.n ?? null,
      agent: e.agent,
      role: e.role ?? null,
      context: contextOf(input, e),
      proposal: {
        hypothesis: e.hypothesis,
        mechanism: e.mechanism ?? null,
        expected: e.expected ?? null,
        params: e.params ?? null,
      },
      output: outputOf(input, e),
      diff: { ...e.diff, ...(await diffOf(repo?.root, e)) },
      outcome: {
        decision: e.decision.action,
        reason: e.decision.reason,
        metric,
        parentMetric,
        mechanismConfirmed: e.decision.mechanismConfirmed ?? null,
        treeNode: e.decision.treeNode === true,
        trials: e.trials.flatMap((t) => {
          const r = t.result;
          if (!r) return [];
          const metrics = { ...r.metrics };
          for (const h of holdout) delete metrics[h];
          return [
            {
              attempt: t.attempt,
              seed: t.seed,
              status: r.status,
              metrics,
              wallS: r.wallS,
              peakRssMb: r.peakRssMb,
            },
          ];
        }),
      },
      reward: {
        value: round(noiseUnits - cost),
        noiseUnits: round(noiseUnits),
        improvement,
        sigma: sigma.sigma ?? null,
        sigmaSource: sigma.source,
        cost: round(cost),
        trials: results.length,
      },
      labels: {
        ranClean: results.length ? !results.some((r) => UNCLEAN.has(r.status)) : null,
        faster:
          wall !== undefined && parentWall !== undefined ? wall < parentWall * (1 - LABEL_MARGIN) : null,
        lessMemory:
          rss !== undefined && parentRss !== undefined ? rss < parentRss * (1 - LABEL_MARGIN) : null,
        mechanismConfirmed: e.decision.mechanismConfirmed ?? null,
        wallS: wall ?? null,
        parentWallS: parentWall ?? null,
        peakRssMb: rss ?? null,
        parentPeakRssMb: parentRss ?? null,
      },
      usage: e.usage ?? null,
    };
    // Every text once more through the researchers' redaction: holdout values never leave.
    yield redactHoldoutsDeep(record, holdout);
  }
}

/** Statuses that mean the code did not run clean (a pruned trial was stopped by the harness). */
const UNCLEAN = new Set<TrialStatus>(["crash", "timeout", "missing_metric", "nonfinite_metric", "tampered"]);

const round = (x: number) => Math.round(x * 1e6) / 1e6;
const maxOf = (xs: number[]) => {
  const known = xs.filter((x) => Number.isFinite(x) && x > 0);
  return known.length ? Math.max(...known) : undefined;
};

function unitsOf(improvement: number, sigma: number | undefined): number {
  if (improvement === 0) return 0;
  if (sigma === undefined || !(sigma > 0)) return Math.sign(improvement) * UNITS_CLIP;
  return Math.max(-UNITS_CLIP, Math.min(UNITS_CLIP, improvement / sigma));
}

/**
 * The node each proposal was built on: the kept (or tree-node) experiment before it with its
 * parent commit, else any experiment before it with that commit.
 */
function parentsOf(exps: ExperimentRecord[]): (e: ExperimentRecord) => ExperimentRecord | undefined {
  const byCommit = new Map<string, ExperimentRecord[]>();
  for (const x of exps) byCommit.set(x.commit, [...(byCommit.get(x.commit) ?? []), x]);
  return (e) => {
    const same = (byCommit.get(e.parentCommit) ?? []).filter((x) => x.n < e.n);
    return (
      same.findLast((x) => x.decision?.action === "keep" || x.decision?.treeNode === true) ?? same.at(-1)
    );
  };
}

/**
 * σ for experiment n: the run's noise model (every configuration's repeated trials, as the judge
 * and status fit it); where it has none (nothing repeated: greedy acceptance), the standard
 * deviation of the run's decided values, said as `run-spread`.
 */
function noiseUnitsOf(
  run: RunRecord,
  exps: ExperimentRecord[],
  program: Program | undefined,
): (n: number) => { sigma: number | undefined; source: string } {
  const values = (e: ExperimentRecord) =>
    program
      ? valuesAt(program, e, "full")
      : finished(e)
          .filter((r) => r.status === "ok" && Number.isFinite(r.metrics[run.metric]))
          .map((r) => r.metrics[run.metric] as number);
  const best = exps.findLast((e) => e.decision?.action === "keep");
  const model = fitNoise(
    exps.map((e) => ({ n: e.n, values: values(e) })),
    best ? (objectiveOf(best, run.metric) ?? 0) : 0,
  );
  const decided = exps
    .map((e) => e.decision?.metric)
    .filter((v): v is number => v !== undefined && Number.isFinite(v));
  const m = meanOrNone(decided);
  const spread =
    m !== undefined && decided.length >= 2
      ? Math.sqrt(decided.reduce((a, v) => a + (v - m) ** 2, 0) / (decided.length - 1))
      : undefined;
  return (n) => {
    if (model.source === "deterministic") return { sigma: 0, source: "deterministic" };
    const s = sigmaOf(model, n);
    if (Number.isFinite(s.sigma) && s.sigma > 0) return { sigma: s.sigma, source: model.source };
    if (spread !== undefined && spread > 0) return { sigma: spread, source: "run-spread" };
    return { sigma: undefined, source: "unknown" };
  };
}

const NOT_RECORDED =
  "not recorded (a notebook from before migration 11, an interactive agent over MCP that read the notebook " +
  "through its tools, or a candidate adopted from git after a crash)";

/** The context as recorded with the row, else rebuilt from the notebook as it stood then. */
function contextOf(input: TrajectoryInput, e: ExperimentRecord): TrajectoryRecord["context"] {
  const recorded = input.ledger.proposalContext?.(input.run.id, e.n);
  if (recorded !== undefined) return { source: "recorded", text: recorded, missing: null };
  const { program, run } = input;
  if (!program) {
    return {
      source: null,
      text: null,
      missing: `${NOT_RECORDED}, and program.md no longer parses`,
    };
  }
  const at = e.createdAt;
  // What the notebook held when n was proposed: rows created before it, without later writes.
  const before = input.exps
    .filter((x) => x.n !== e.n && x.createdAt < at)
    .map((x) => {
      const trials = x.trials
        .filter((t) => t.startedAt < at)
        .map((t) => (t.result && t.result.finishedAt >= at ? { ...t, result: undefined } : t))
        .map(({ result, ...t }) => (result ? { ...t, result } : t));
      const { decision, ...rest } = x;
      return { ...rest, trials, ...(decision && decision.decidedAt < at ? { decision } : {}) };
    });
  const hooks: HookRunRecord[] = [];
  if (program.hooks) {
    const all = input.ledger.listHookRuns(run.id);
    const after = all.filter((h) => h.phase === "after" && h.finishedAt < at).at(-1);
    const own = all.filter((h) => h.phase === "before" && h.n === e.n).at(-1);
    if (after) hooks.push(after);
    if (own) hooks.push(own);
  }
  const text = buildContext(program, run, before, {
    imported: input.ledger.listImportedResults(),
    hooks,
    advice: input.ledger.listAdvice(run.id).filter((a) => a.createdAt < at),
  });
  return {
    source: "rebuilt",
    text,
    missing:
      `${NOT_RECORDED}: rebuilt from the notebook with program.md as it is now; ` +
      "not kept for it: prior work from other runs, an org role's instructions, the tree node it built on",
  };
}

/**
 * The researcher wrote this directory: each transcript is read through the one door
 * (src/core/untrusted-file.ts). A file there that is a symlink, a FIFO or anything but a plain
 * file is not read: its text is the refusal (`[refused: … is a symbolic link; not read]`).
 */
function outputOf(input: TrajectoryInput, e: ExperimentRecord): TrajectoryRecord["output"] {
  const dir = agentLogDir(join(input.stateDir, "logs", input.run.tag, String(e.n)));
  if (!dir) return null;
  for (const file of TRANSCRIPT_FILES) {
    const path = join(dir, file);
    // Bytes enough for OUTPUT_CAP characters of any UTF-8 text.
    const r = readUntrustedText(path, { maxBytes: OUTPUT_CAP * 4, keep: "tail" });
    if (!r.ok) {
      if (r.missing) continue;
      return { file, path, text: refusedText(path, r.reason), truncated: false };
    }
    const cut = r.text.length > OUTPUT_CAP;
    return { file, path, text: cut ? r.text.slice(-OUTPUT_CAP) : r.text, truncated: cut || r.truncated };
  }
  return null;
}

/** The proposal's agent log directory: `agent`, or its latest `agent-<k>` (proposed again after an interruption). */
function agentLogDir(expDir: string): string | undefined {
  let names: string[];
  try {
    names = readdirSync(expDir);
  } catch {
    return undefined;
  }
  let best: { k: number; name: string } | undefined;
  for (const name of names) {
    const m = /^agent(?:-(\d+))?$/.exec(name);
    if (!m) continue;
    const k = m[1] ? Number(m[1]) : 1;
    if (!best || k > best.k) best = { k, name };
  }
  return best ? join(expDir, best.name) : undefined;
}

async function diffOf(
  root: string | undefined,
  e: ExperimentRecord,
): Promise<{ text: string | null; truncated: boolean }> {
  if (!root) return { text: null, truncated: false };
  if (e.parentCommit === e.commit) return { text: "", truncated: false };
  try {
    const all = await git(root, ["diff", "--no-renames", "--no-color", e.parentCommit, e.commit]);
    const truncated = all.length > DIFF_CAP;
    return { text: truncated ? all.slice(0, DIFF_CAP) : all, truncated };
  } catch {
    return { text: null, truncated: false };
  }
}

/** The assistant turn of a proposal: hypothesis, mechanism, expected effect and the diff. */
export function assistantText(r: TrajectoryRecord): string {
  const lines = [`Hypothesis: ${r.proposal.hypothesis}`];
  if (r.proposal.mechanism) lines.push(`Mechanism: ${r.proposal.mechanism}`);
  if (r.proposal.expected) lines.push(`Expected: ${r.proposal.expected}`);
  if (r.diff.text) lines.push("", "```diff", r.diff.text.trimEnd(), "```");
  return lines.join("\n");
}

const usable = (r: TrajectoryRecord) => r.context.text !== null && r.diff.text !== null;

/** Supervised fine-tuning: the kept proposals as chat conversations. */
export function sftRecords(records: TrajectoryRecord[]): { messages: ChatMessage[] }[] {
  return records
    .filter((r) => r.outcome.decision === "keep" && usable(r))
    .map((r) => ({
      messages: [
        { role: "system", content: SFT_SYSTEM },
        { role: "user", content: r.context.text as string },
        { role: "assistant", content: assistantText(r) },
      ],
    }));
}

export interface DpoRecord {
  prompt: ChatMessage[];
  chosen: ChatMessage[];
  rejected: ChatMessage[];
}

/**
 * Preference pairs: each proposal that lost (discard, crash, reject; tree nodes left out) paired
 * with a kept proposal built on the same parent, the keeps taken in turn. The prompt is the kept
 * one's context.
 */
export function dpoRecords(records: TrajectoryRecord[]): DpoRecord[] {
  const byParent = new Map<number, { kept: TrajectoryRecord[]; lost: TrajectoryRecord[] }>();
  for (const r of records) {
    if (r.parent === null || !usable(r)) continue;
    const g = byParent.get(r.parent) ?? { kept: [], lost: [] };
    if (r.outcome.decision === "keep") g.kept.push(r);
    else if (!r.outcome.treeNode) g.lost.push(r);
    byParent.set(r.parent, g);
  }
  const out: DpoRecord[] = [];
  for (const g of byParent.values()) {
    if (!g.kept.length) continue;
    g.lost.forEach((lost, i) => {
      const kept = g.kept[i % g.kept.length] as TrajectoryRecord;
      out.push({
        prompt: [
          { role: "system", content: SFT_SYSTEM },
          { role: "user", content: kept.context.text as string },
        ],
        chosen: [{ role: "assistant", content: assistantText(kept) }],
        rejected: [{ role: "assistant", content: assistantText(lost) }],
      });
    });
  }
  return out;
}

/**
 * The export's lines (one JSON object each, without the newline), as they are made: records and
 * chats stream; preference pairs wait for the run's end (a loss may precede its keep), holding
 * only the texts they need.
 */
export async function* trajectoryLines(
  format: TrajectoryFormat,
  input: TrajectoryInput,
): AsyncGenerator<string> {
  const forPairs: TrajectoryRecord[] = [];
  for await (const r of trajectoryStream(input)) {
    if (format === "trajectories") yield JSON.stringify(r);
    else if (format === "trajectories-sft") for (const chat of sftRecords([r])) yield JSON.stringify(chat);
    else forPairs.push({ ...r, output: null });
  }
  for (const pair of dpoRecords(forPairs)) yield JSON.stringify(pair);
}

/** The export's text: one JSON object per line. */
export async function trajectoryJsonl(format: TrajectoryFormat, input: TrajectoryInput): Promise<string> {
  let text = "";
  for await (const line of trajectoryLines(format, input)) text += `${line}\n`;
  return text;
}

/**
 * The lines `autolab export --format <format>` writes (default `trajectories`), one JSON object
 * each, from the notebook of `program` (program.md or its directory; default: the working
 * directory's) — SQLite or PostgreSQL, found as the CLI finds it — for the run `tag` (default the
 * newest). The notebook stays open while the lines are read and is closed when the generator
 * ends (or is left early: `break`, `return()`). NO_NOTEBOOK / RUN_NOT_FOUND as the CLI says them.
 */
export async function* exportTrajectories(
  opts: { program?: string; tag?: string; format?: TrajectoryFormat } = {},
): AsyncGenerator<string> {
  const format = opts.format ?? "trajectories";
  if (!(TRAJECTORY_FORMATS as readonly string[]).includes(format))
    throw new AutolabError(
      "BAD_FORMAT",
      `unknown trajectory format "${format}".`,
      `Use ${TRAJECTORY_FORMATS.join(", ")}.`,
    );
  const { ledger, stateDir } = openLedger(opts.program);
  try {
    const run = selectRun(ledger, opts.tag);
    let program: Program | undefined;
    try {
      program = loadProgram(run.programPath);
    } catch {
      program = undefined; // program.md no longer parses: contexts are not rebuilt (docs/learning.md)
    }
    yield* trajectoryLines(format, { run, exps: ledger.listExperiments(run.id), program, stateDir, ledger });
  } finally {
    ledger.close();
  }
}
