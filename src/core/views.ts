import { formatMetric } from "./format.ts";
import type { ExperimentRecord, RunRecord } from "./ledger.ts";
import type { ExperimentView, Program, TrialResult } from "./types.ts";

/**
 * What agents may see of the notebook. Holdout metrics never leave this module: every view
 * an agent (or `autolab context`) reads is built here, from the objective metric only.
 */

/** The last finished trial of an experiment. */
export function lastResult(e: ExperimentRecord): TrialResult | undefined {
  for (let i = e.trials.length - 1; i >= 0; i--) {
    const r = e.trials[i]?.result;
    if (r && r.status !== "interrupted") return r;
  }
  return undefined;
}

/** The experiment's objective value: the decision's when decided, else the last trial's. */
export function objectiveOf(e: ExperimentRecord, metric: string): number | undefined {
  if (e.decision?.metric !== undefined) return e.decision.metric;
  const v = lastResult(e)?.metrics[metric];
  return v !== undefined && Number.isFinite(v) ? v : undefined;
}

/** The current best: the last kept experiment (the baseline is kept first). */
export function bestOf(exps: ExperimentRecord[]): ExperimentRecord | undefined {
  let best: ExperimentRecord | undefined;
  for (const e of exps) if (e.decision?.action === "keep") best = e;
  return best;
}

export function toView(e: ExperimentRecord, program: Program): ExperimentView {
  const v: ExperimentView = { n: e.n, hypothesis: e.hypothesis };
  if (e.mechanism) v.mechanism = e.mechanism;
  if (e.params) v.params = e.params;
  if (e.decision) {
    v.action = e.decision.action;
    v.reason = e.decision.reason;
  }
  const m = objectiveOf(e, program.objective.metric);
  if (m !== undefined) v.metric = m;
  return v;
}

export interface ContextOptions {
  /** Most recent experiments listed in full. */
  recent?: number;
  /** Character budget of the whole text. */
  maxChars?: number;
  /** The org role the reader proposes for: its name and instructions (kept whole, before the history). */
  role?: { name: string; instructions: string };
}

/**
 * The notebook rendered for a researcher: directions, the best state, recent experiments as
 * hypothesis → outcome, failures and refuted mechanisms. The same text is `autolab context`.
 */
export function buildContext(
  program: Program,
  run: RunRecord | undefined,
  exps: ExperimentRecord[],
  opts: ContextOptions = {},
): string {
  const recentN = opts.recent ?? 20;
  const maxChars = opts.maxChars ?? 12_000;
  const metric = program.objective.metric;
  const lines: string[] = [];
  lines.push(`# Lab notebook: ${program.name}`);
  lines.push(
    `Objective: ${program.objective.direction} ${metric}. Editable files: ${program.files.editable.join(", ")}.` +
      (program.files.protected.length
        ? ` Protected (never edit): ${program.files.protected.join(", ")}.`
        : ""),
  );
  if (opts.role) lines.push("", `## Your role: ${opts.role.name}`, opts.role.instructions.trim());
  if (!run) {
    lines.push("", "No run yet. `autolab run` starts one (the first experiment measures the baseline).");
  } else {
    const best = bestOf(exps);
    const baseline = exps.find((e) => e.n === 0);
    const bm = baseline ? objectiveOf(baseline, metric) : undefined;
    lines.push(`Run ${run.tag} on branch ${run.branch}: ${exps.length} experiments.`);
    if (best) {
      lines.push(
        `Best: #${best.n} ${metric} = ${formatMetric(objectiveOf(best, metric))} (baseline ${formatMetric(bm)}), commit ${best.commit.slice(0, 8)}: ${firstLine(best.hypothesis)}`,
      );
    }
    const kept = exps.filter((e) => e.decision?.action === "keep" && e.n !== 0);
    if (kept.length) {
      lines.push("", "## Kept changes (the best builds on all of these)");
      for (const e of kept)
        lines.push(`- #${e.n} ${firstLine(e.hypothesis)} → ${formatMetric(objectiveOf(e, metric))}`);
    }
    const refuted = exps.filter((e) => e.decision?.mechanismConfirmed === false && e.mechanism);
    if (refuted.length) {
      lines.push("", "## Tried and not better (hypothesis — mechanism)");
      for (const e of refuted.slice(-10)) {
        lines.push(`- #${e.n} ${firstLine(e.hypothesis)} — ${firstLine(e.mechanism ?? "")}`);
      }
    }
    const failures = exps.filter((e) => e.decision?.action === "crash" || e.decision?.action === "reject");
    if (failures.length) {
      lines.push("", "## Failures (crashes and rejections)");
      for (const e of failures.slice(-10)) {
        lines.push(
          `- #${e.n} ${firstLine(e.hypothesis)} → ${e.decision?.action}: ${firstLine(e.decision?.reason ?? "")}`,
        );
      }
    }
    lines.push("", `## Recent experiments (last ${Math.min(recentN, exps.length)})`);
    for (const e of exps.slice(-recentN)) {
      const m = objectiveOf(e, metric);
      const outcome = e.decision ? `${e.decision.action}` : "pending";
      lines.push(
        `- #${e.n} ${firstLine(e.hypothesis)} → ${outcome}${m !== undefined ? ` ${metric}=${formatMetric(m)}` : ""}`,
      );
    }
  }
  if (program.directions.trim()) lines.push("", "## Research directions", program.directions.trim());
  let text = lines.join("\n");
  if (text.length > maxChars)
    text = `${text.slice(0, maxChars - 40)}\n… (notebook truncated to ${maxChars} chars)`;
  return text;
}

/** The first line of a text, at most 160 characters. */
export function firstLine(s: string): string {
  const line = s.split("\n")[0] ?? "";
  return line.length > 160 ? `${line.slice(0, 157)}…` : line;
}

/** Log tails are shown to agents: lines that mention a holdout metric are removed. */
export function redactHoldouts(text: string, holdout: string[]): string {
  if (!holdout.length) return text;
  return text
    .split("\n")
    .filter((l) => !holdout.some((h) => l.includes(h)))
    .join("\n");
}

/** Crashed and rejected experiments with reasons and (redacted) log tails: `autolab failures`. */
export function failuresText(exps: ExperimentRecord[], holdout: string[]): string {
  const failed = exps.filter((e) => e.decision?.action === "crash" || e.decision?.action === "reject");
  if (!failed.length) return "No crashed or rejected experiments.";
  const lines: string[] = [];
  for (const e of failed) {
    lines.push(
      `#${e.n} ${e.decision?.action}: ${firstLine(e.hypothesis)}`,
      `  reason: ${e.decision?.reason}`,
    );
    const tail = redactHoldouts(lastResult(e)?.logTail ?? "", holdout)
      .trim()
      .split("\n")
      .slice(-5);
    if (tail.length && tail[0]) lines.push(...tail.map((l) => `  | ${l}`));
  }
  return lines.join("\n");
}
