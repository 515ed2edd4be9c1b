import { revisitOf } from "../core/advisor.ts";
import type { Evidence } from "../core/evidence.ts";
import { objectiveOf } from "../core/experiments.ts";
import type { ExperimentRecord, HookRunRecord, RunRecord } from "../core/ledger.ts";
import type { Params } from "../core/types.ts";
import { type Holdouts, redactHoldouts } from "../core/views.ts";
import { loadProgram } from "../program/index.ts";
import { visibleMetrics } from "./status.ts";

/**
 * The JSON shape of one experiment, shared by `autolab log/show --json`, `export --format
 * jsonl` and the HTTP API (docs/cli.md). Fields are added over time, never renamed.
 */
export interface ExperimentJson {
  id: number;
  agent: string;
  hypothesis: string;
  mechanism: string | null;
  expected: string | null;
  /** What the proposal cost the researcher: inputTokens, outputTokens, costUsd, wallS (when known). */
  usage: Record<string, number> | null;
  /** Knob values (numbers, or text/booleans of categorical knobs). */
  params: Params | null;
  commit: string;
  parent: string;
  ref: string;
  diff: { files: number; insertions: number; deletions: number };
  decision: "keep" | "discard" | "crash" | "reject" | "pending";
  reason: string | null;
  mechanismConfirmed: boolean | null;
  metric: number | null;
  metrics: Record<string, number>;
  trials: {
    attempt: number;
    seed: number;
    status: string;
    reason: string | null;
    wallS: number | null;
    cpuS: number | null;
    peakRssMb: number | null;
    selfReported: boolean | null;
    logDir: string | null;
  }[];
  createdAt: string;
  decidedAt: string | null;
  /** The discarded experiment this one tries again on a newer best (`revisit #n:` hypothesis, docs/advisor.md); null if none. */
  revisitOf: number | null;
  /** How the result was measured (src/core/evidence.ts); absent where the view did not grade it. */
  evidence?: Evidence;
}

export function experimentJson(
  e: ExperimentRecord,
  holdout: string[],
  showHoldout: boolean,
  metric: string,
  evidence?: Evidence,
): ExperimentJson {
  return {
    id: e.n,
    agent: e.agent,
    hypothesis: e.hypothesis,
    mechanism: e.mechanism ?? null,
    expected: e.expected ?? null,
    usage: e.usage ?? null,
    params: e.params ?? null,
    commit: e.commit,
    parent: e.parentCommit,
    ref: e.ref,
    diff: e.diff,
    decision: e.decision?.action ?? "pending",
    reason: e.decision?.reason ?? null,
    mechanismConfirmed: e.decision?.mechanismConfirmed ?? null,
    metric: objectiveOf(e, metric) ?? null,
    metrics: visibleMetrics(e, holdout, showHoldout),
    trials: e.trials.map((t) => ({
      attempt: t.attempt,
      seed: t.seed,
      status: t.result?.status ?? "running",
      reason: t.result?.reason ?? null,
      wallS: t.result?.wallS ?? null,
      cpuS: t.result?.cpuS ?? null,
      peakRssMb: t.result?.peakRssMb ?? null,
      selfReported: t.result?.selfReported ?? null,
      logDir: t.result?.logDir ?? null,
    })),
    createdAt: e.createdAt,
    decidedAt: e.decision?.decidedAt ?? null,
    revisitOf: revisitOf(e.hypothesis) ?? null,
    ...(evidence ? { evidence } : {}),
  };
}

/** One hook run (program.md `hooks:`) as `autolab show --json` and the HTTP API give it. */
export interface HookJson {
  phase: "before" | "after";
  command: string;
  status: "ok" | "failed" | "timeout" | "interrupted";
  reason: string | null;
  exitCode: number | null;
  wallS: number;
  /** The tail of its output, capped (src/core/hooks.ts): trial-controlled text. */
  output: string;
  logDir: string;
  finishedAt: string;
}

/**
 * Hook runs as a viewer shows them: their output and reason are trial-controlled text, so holdout
 * values are redacted like every trial text unless the viewer asked for them (`show`).
 */
export function viewedHooks(
  hooks: readonly HookRunRecord[],
  holdout: Holdouts,
  show: boolean,
): HookRunRecord[] {
  if (show) return [...hooks];
  return hooks.map((h) => ({
    ...h,
    output: redactHoldouts(h.output, holdout),
    ...(h.reason !== undefined ? { reason: redactHoldouts(h.reason, holdout) } : {}),
  }));
}

export function hookJson(h: HookRunRecord): HookJson {
  return {
    phase: h.phase,
    command: h.command,
    status: h.status,
    reason: h.reason ?? null,
    exitCode: h.exitCode,
    wallS: h.wallS,
    output: h.output,
    logDir: h.logDir,
    finishedAt: h.finishedAt,
  };
}

/**
 * Holdout metric names of a run: the contract it started with, else its program.md now.
 * When neither can be read, nothing can be named, so nothing is hidden.
 */
export function holdoutOf(run: RunRecord): string[] {
  const recorded = run.contract?.["metrics.holdout"];
  if (Array.isArray(recorded)) return recorded.filter((h): h is string => typeof h === "string");
  try {
    return loadProgram(run.programPath).metrics.holdout;
  } catch {
    return [];
  }
}
