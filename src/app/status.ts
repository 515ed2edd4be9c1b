import { advisorStop, advisorStopReason } from "../core/advisor.ts";
import { type Evidence, evidenceOf } from "../core/evidence.ts";
import { bestOf, lastResult, objectiveOf } from "../core/experiments.ts";
import { formatMetric } from "../core/format.ts";
import {
  type AdviceRecord,
  countDecisions,
  type ExperimentRecord,
  type ImportedResultRecord,
  type NoteRecord,
  type RunRecord,
  type SessionRecord,
} from "../core/ledger.ts";
import { costPerProposal, costSpent } from "../core/run-budget.ts";
import type { Alarm, Program } from "../core/types.ts";
import { type PredictedBest, predictedBest } from "../trust/posterior.ts";
import { alarmsOf, ladderOf, noiseOf } from "./alarms.ts";
import { frontOf, type StatusFront } from "./front.ts";
import { orgView, type RoleCredit, type SlotUse } from "./org-view.ts";
import { type PriorHistory, priorHistoryOf } from "./prior-history.ts";

/** `autolab status --json`. Field by field in docs/cli.md; add fields, never rename them. */
export interface StatusJson {
  tag: string;
  branch: string;
  program: string;
  metric: string;
  direction: "minimize" | "maximize";
  baseline: { id: number; metric: number | null } | null;
  best: { id: number; metric: number | null; commit: string; hypothesis: string } | null;
  /** best − baseline, and the same relative to |baseline|. */
  improvement: { absolute: number; relative: number } | null;
  counts: {
    total: number;
    kept: number;
    discarded: number;
    crashed: number;
    rejected: number;
    pending: number;
  };
  /** True when the objective comes from editable code (no protected evaluate step). */
  selfReported: boolean;
  /** Seconds spent in trials (the experiment commands' wall time). */
  trialSeconds: number;
  startedAt: string;
  lastActivity: string | null;
  /** The acceptance rule in force (from program.md), when the program could be read. */
  acceptance: Program["acceptance"] | null;
  /** Run-to-run noise of the objective, from the baseline's repeated trials. */
  noise: { sigma: number; reason: string } | null;
  /**
   * With the built-in optimizer's knobs: the evaluated configuration a model of all of them
   * predicts best (src/trust/posterior.ts) — it may differ from `best`, the last kept one.
   */
  predictedBest: PredictedBest | null;
  /** Things to look at: overfitting canaries, a baseline too noisy to accept anything. */
  alarms: Alarm[];
  /** The proxy ladder per pair of adjacent rungs (`null` without `ladder:` in program.md). */
  ladder: StatusLadderStep[] | null;
  /** Credit per org role, in order of first appearance; empty without an org (src/app/org-view.ts). */
  roles: RoleCredit[];
  /** The slots of the latest harness session and their utilization; `count` 0 without a session. */
  slots: StatusSlots;
  /**
   * How the latest harness session confined trials and researchers ("bubblewrap 0.8.0",
   * "unsandboxed: <why>"); null when no session recorded it (older notebooks).
   */
  sandbox: string | null;
  /** True when any session of the run ran unsandboxed: its results had no sandbox's guarantees. */
  unsandboxed: boolean;
  /**
   * Results imported by `autolab init --from` (claims from before autolab, not re-measured:
   * never the baseline or the best); null when the notebook has none.
   */
  imported: PriorHistory | null;
  /**
   * Several objectives (program.md `objective.metrics`): the kept experiments no other kept one
   * dominates, with each metric (src/app/front.ts); null with one objective.
   */
  front: StatusFront | null;
  /** What the advisor answered (docs/advisor.md); null when it was never asked. */
  advisor: StatusAdvisor | null;
  /** How the best's value was measured (src/core/evidence.ts); null without a best. */
  bestEvidence: Evidence | null;
  /**
   * What the researchers reported spending (usage.costUsd, USD) over the run, and per kept
   * change; null where no proposal reported a cost.
   */
  cost: { usd: number; perKept: number | null } | null;
}

/** `status.advisor`: its answers so far, the newest ideas, and its stop when that ended the run. */
export interface StatusAdvisor {
  /** Times it was asked (answers recorded, garbage included). */
  asked: number;
  /** Answers not used (unparseable, too long, a crash, a timeout, an edit). */
  garbage: number;
  /** Its newest ideas (what researchers read as the advisor's). */
  ideas: { afterN: number; ideas: string[] } | null;
  /** Its stop verdict, when that is how the run ended (no harness session started after it). */
  stop: { agent: string; afterN: number; reason: string; at: string; stoppedBecause: string } | null;
  /** Its newest answer. */
  last: { agent: string; afterN: number; trigger: string; verdict: string; reason: string; at: string };
}

/** One step of the proxy ladder: candidates measured on `low`, promoted to `high`, and the rungs' rank correlation. */
export interface StatusLadderStep {
  low: string;
  high: string;
  measured: number;
  promoted: number;
  /** Spearman's rho over the most recent pairs; `null` below 3 pairs. */
  rho: number | null;
  pairs: number;
}

/** `status.slots`: always an object (count 0 and nulls when the notebook has no session). */
export interface StatusSlots {
  count: number;
  /** The latest session's start, and the end of its window (now while live, else its last activity). */
  since: string | null;
  until: string | null;
  live: boolean;
  windowS: number;
  busyS: number;
  /** busyS / (windowS × count); null without a session. */
  utilization: number | null;
  perSlot: SlotUse[];
}

/** What status needs beyond the experiments to show slots: the run's sessions and a clock. */
export interface StatusOrgInput {
  sessions?: SessionRecord[];
  /** Default: the current time. */
  now?: Date | number | string;
  /** Whether a harness runs the latest session (its lock is held); default: inferred from open trials. */
  live?: boolean;
  /** The run's notes: tampering alarms (`ALARM tamper:…`) are shown with the other alarms. */
  notes?: NoteRecord[];
  /** The notebook's imported results (Ledger.listImportedResults). */
  imported?: readonly ImportedResultRecord[];
  /** The run's advice (Ledger.listAdvice). */
  advice?: readonly AdviceRecord[];
}

export function statusOf(
  run: RunRecord,
  exps: ExperimentRecord[],
  program?: Program,
  org: StatusOrgInput = {},
): StatusJson {
  const baseline = exps.find((e) => e.n === 0);
  const best = bestOf(exps);
  const bm = baseline ? objectiveOf(baseline, run.metric) : undefined;
  const km = best ? objectiveOf(best, run.metric) : undefined;
  const counts = countDecisions(exps);
  let trialSeconds = 0;
  let last: string | null = null;
  let selfReported = false;
  for (const e of exps) {
    for (const t of e.trials) {
      trialSeconds += t.result?.wallS ?? 0;
      if (t.result?.selfReported) selfReported = true;
      const at = t.result?.finishedAt ?? t.startedAt;
      if (!last || at > last) last = at;
    }
    if (e.decision && (!last || e.decision.decidedAt > last)) last = e.decision.decidedAt;
  }
  const alarms = [...(program ? alarmsOf(program, exps) : []), ...tamperAlarms(org.notes ?? [])];
  return {
    tag: run.tag,
    branch: run.branch,
    program: run.programName,
    metric: run.metric,
    direction: run.direction,
    baseline: baseline ? { id: 0, metric: bm ?? null } : null,
    best: best ? { id: best.n, metric: km ?? null, commit: best.commit, hypothesis: best.hypothesis } : null,
    improvement:
      bm !== undefined && km !== undefined
        ? { absolute: km - bm, relative: bm === 0 ? 0 : (km - bm) / Math.abs(bm) }
        : null,
    counts: {
      total: exps.length,
      kept: counts.keep,
      discarded: counts.discard,
      crashed: counts.crash,
      rejected: counts.reject,
      pending: counts.pending,
    },
    selfReported,
    trialSeconds: Math.round(trialSeconds * 100) / 100,
    startedAt: run.startedAt,
    lastActivity: last,
    acceptance: program?.acceptance ?? null,
    noise: noiseLine(program, exps),
    predictedBest: program ? (predictedBest(program, exps) ?? null) : null,
    alarms,
    ladder: program ? ladderStatus(program, exps) : null,
    ...orgStatus(run, exps, org),
    sandbox: [...(org.sessions ?? [])].reverse().find((s) => s.sandbox !== undefined)?.sandbox ?? null,
    unsandboxed: (org.sessions ?? []).some((s) => s.sandbox?.startsWith("unsandboxed") === true),
    imported: priorHistoryOf(org.imported ?? [], run.metric),
    front: frontOf(program, exps),
    advisor: advisorStatus(org.advice ?? [], org.sessions ?? []),
    cost: costOfRun(exps, counts.keep),
    bestEvidence: best
      ? evidenceOf(best, { holdout: program?.metrics.holdout ?? [], notes: org.notes ?? [], alarms })
      : null,
  };
}

/** The run's researcher cost, and per kept change (the baseline's keep not counted). */
function costOfRun(exps: ExperimentRecord[], keeps: number): StatusJson["cost"] {
  if (costPerProposal(exps) === undefined) return null;
  const usd = Math.round(costSpent(exps) * 10_000) / 10_000;
  const kept = Math.max(0, keeps - 1);
  return { usd, perKept: kept > 0 ? Math.round((usd / kept) * 10_000) / 10_000 : null };
}

function advisorStatus(
  advice: readonly AdviceRecord[],
  sessions: readonly SessionRecord[],
): StatusAdvisor | null {
  const last = advice.at(-1);
  if (!last) return null;
  const ideas = advice.filter((a) => a.verdict === "ideas").at(-1);
  const stop = advisorStop(advice, sessions);
  return {
    asked: advice.length,
    garbage: advice.filter((a) => a.verdict === "garbage").length,
    ideas: ideas ? { afterN: ideas.afterN, ideas: [...ideas.ideas] } : null,
    stop: stop
      ? {
          agent: stop.agent,
          afterN: stop.afterN,
          reason: stop.reason,
          at: stop.createdAt,
          stoppedBecause: advisorStopReason(stop),
        }
      : null,
    last: {
      agent: last.agent,
      afterN: last.afterN,
      trigger: last.trigger,
      verdict: last.verdict,
      reason: last.verdict === "ideas" ? last.ideas.join(" | ") : last.reason,
      at: last.createdAt,
    },
  };
}

/**
 * One line on the configuration predicted best, for status and the end of a run: said when a
 * model could be fitted; when it is not the last kept one, it says so and where its code is.
 */
export function predictedBestLine(s: Pick<StatusJson, "predictedBest" | "best">): string | undefined {
  const p = s.predictedBest;
  if (!p) return undefined;
  const value = `${formatMetric(p.predicted)} ± ${Number(p.sd.toPrecision(2))}`;
  const model = `a model of all ${p.configurations} measured configurations`;
  if (s.best && p.id === s.best.id) return `Predicted best: #${p.id}, the last kept (${value} by ${model})`;
  return `Predicted best: #${p.id} ${p.commit.slice(0, 8)} (${value} by ${model}), not the last kept${s.best ? ` #${s.best.id}` : ""}: its neighbours make it the better bet — \`git checkout ${p.commit.slice(0, 8)}\` for its code`;
}

/** `ALARM tamper:<what>: <reason>` notes (written by the loop and createRun) as alarms. */
function tamperAlarms(notes: NoteRecord[]): Alarm[] {
  const out: Alarm[] = [];
  for (const n of notes) {
    const m = /^ALARM (tamper:[^:\s]+): (.*)$/s.exec(n.text);
    if (m) out.push({ kind: m[1] as string, reason: m[2] as string });
  }
  return out;
}

function orgStatus(
  run: RunRecord,
  exps: ExperimentRecord[],
  org: StatusOrgInput,
): Pick<StatusJson, "roles" | "slots"> {
  const view = orgView(run, exps, org.sessions ?? [], org.now ?? Date.now(), {
    ...(org.live !== undefined ? { live: org.live } : {}),
    maxFindings: 0,
  });
  const s = view.session;
  return {
    roles: view.roles,
    slots: {
      count: s?.slots ?? 0,
      since: s?.startedAt ?? null,
      until: s?.until ?? null,
      live: s?.live ?? false,
      windowS: s?.windowS ?? 0,
      busyS: s?.busyS ?? 0,
      utilization: s ? s.utilization : null,
      perSlot: view.slots,
    },
  };
}

/** The metrics of an experiment's last trial, without holdout metrics unless asked for. */
export function visibleMetrics(
  e: ExperimentRecord,
  holdout: string[],
  showHoldout: boolean,
): Record<string, number> {
  const m = { ...(lastResult(e)?.metrics ?? {}) };
  if (!showHoldout) for (const h of holdout) delete m[h];
  return m;
}

/**
 * A researcher that failed before proposing anything: no experiment ran, so it is no result in
 * another tool's log (autoresearch and pi-autoresearch record runs, not failed proposals).
 */
export function ranNothing(e: ExperimentRecord): boolean {
  return e.decision?.action === "crash" && e.trials.length === 0;
}

/** The GPU memory autoresearch's memory_gb means, where a trial printed it (memory_gb or peak_vram_mb). */
function memoryGb(e: ExperimentRecord): number | undefined {
  const m = lastResult(e)?.metrics ?? {};
  if (Number.isFinite(m.memory_gb)) return m.memory_gb;
  if (Number.isFinite(m.peak_vram_mb)) return (m.peak_vram_mb as number) / 1024;
  return undefined;
}

/**
 * autoresearch's results.tsv: commit, metric, memory_gb, status (keep|discard|crash), description.
 * memory_gb is autoresearch's peak GPU memory: written only when the trials printed it
 * (memory_gb or peak_vram_mb), never made up from the process's RAM.
 */
export function resultsTsv(
  run: RunRecord,
  exps: ExperimentRecord[],
  /** Force the memory_gb column (0.0 where unmeasured): rows appended under a file that has it. */
  memoryColumn = false,
): string {
  const withMemory = memoryColumn || exps.some((e) => memoryGb(e) !== undefined);
  const rows = [
    ["commit", run.metric, ...(withMemory ? ["memory_gb"] : []), "status", "description"].join("\t"),
  ];
  for (const e of exps) {
    if (!e.decision || ranNothing(e)) continue;
    const m = objectiveOf(e, run.metric);
    const action = e.decision.action;
    const status =
      action === "reject" ? (e.decision.reason.startsWith("timeout") ? "crash" : "discard") : action;
    const description = (e.n === 0 ? "baseline" : e.hypothesis).replace(/[\t\n]+/g, " ");
    rows.push(
      [
        e.commit.slice(0, 7),
        m !== undefined && status !== "crash" ? m.toFixed(6) : "0.000000",
        ...(withMemory ? [(memoryGb(e) ?? 0).toFixed(1)] : []),
        status,
        description,
      ].join("\t"),
    );
  }
  return `${rows.join("\n")}\n`;
}

function noiseLine(program: Program | undefined, exps: ExperimentRecord[]): StatusJson["noise"] {
  const n = program ? noiseOf(program, exps) : undefined;
  return n && Number.isFinite(n.sigma) ? { sigma: n.sigma, reason: n.reason } : null;
}

function ladderStatus(program: Program, exps: ExperimentRecord[]): StatusLadderStep[] | null {
  const steps = ladderOf(program, exps);
  if (!steps) return null;
  return steps.map((s) => ({
    low: s.low,
    high: s.high,
    measured: s.measured,
    promoted: s.promoted,
    rho: Number.isFinite(s.check.rho) ? Math.round(s.check.rho * 1000) / 1000 : null,
    pairs: s.check.pairs,
  }));
}
