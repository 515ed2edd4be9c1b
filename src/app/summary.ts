/**
 * `autolab summary [--since 8h]`: what happened overnight (issue #36), from the notebook alone —
 * read-only, no trial. One pure function builds it (`summaryOf`), one renders it as markdown
 * (`summaryMarkdown`: the terminal prints the same text). Researcher text in it (hypotheses,
 * reasons) is untrusted: whoever shows it escapes it (the CLI through safeText).
 */
import { type Evidence, type EvidenceGrade, evidenceLabel } from "../core/evidence.ts";
import { objectiveOf } from "../core/experiments.ts";
import {
  formatChange,
  formatComputeTime,
  formatCount,
  formatMetric,
  formatUtcMinute,
} from "../core/format.ts";
import type { ExperimentRecord, RunRecord } from "../core/ledger.ts";
import type { Alarm } from "../core/types.ts";
import { predictedBestLine, type StatusJson } from "./status.ts";

export interface SummaryKept {
  n: number;
  hypothesis: string;
  /** The kept value, and the change from the experiment it built on (or the baseline). */
  value: number | null;
  change: string | null;
  /** What the keep rests on: its grade (src/core/evidence.ts), trials, the rule's margin if stated. */
  evidence: string;
  grade: EvidenceGrade | null;
  trials: number;
}

export interface SummaryJson {
  tag: string;
  program: string;
  metric: string;
  /** The window: experiments created at or after `since` (ISO), up to `until`. */
  since: string;
  until: string;
  experiments: number;
  trials: number;
  kept: SummaryKept[];
  /** Before and after the window, when both are known. */
  bestBefore: number | null;
  bestNow: number | null;
  /** What to look at first, most important first. */
  reviewFirst: string[];
  /** Failures seen more than once in the window, with their count. */
  failedRepeatedly: { count: number; reason: string; last: number }[];
  cost: { usd: number | null; tokens: number; perKept: number | null; trialSeconds: number };
  /** The latest harness session's slot utilization (0–1), when one is recorded. */
  utilization: number | null;
  nextIdeas: string[];
}

/** The part of a failure reason that repeats (numbers and hashes vary between occurrences). */
function reasonKey(reason: string): string {
  return reason
    .replace(/\b[0-9a-f]{7,40}\b/g, "…")
    .replace(/-?\d+(\.\d+)?/g, "#")
    .slice(0, 120);
}

function marginOf(reason: string): string | undefined {
  return /margin -?[\d.]+σ[^;)]*?(?= ≥| after|;|\)|$)/.exec(reason)?.[0];
}

/**
 * The summary of `exps` created in [since, now]. `status` is the run's status (alarms, slots,
 * the predicted best, the advisor's ideas) as `statusOf` makes it.
 */
export function summaryOf(
  run: RunRecord,
  exps: readonly ExperimentRecord[],
  status: StatusJson,
  window: { since: Date; now: Date },
  grades: ReadonlyMap<number, Evidence> = new Map(),
): SummaryJson {
  const since = window.since.toISOString();
  const until = window.now.toISOString();
  const inWindow = exps.filter((e) => e.createdAt >= since && e.createdAt <= until);
  const kept = inWindow.filter((e) => e.decision?.action === "keep" && e.n !== 0);
  const byN = new Map(exps.map((e) => [e.n, e]));
  const keptBefore = exps.filter((e) => e.decision?.action === "keep" && e.createdAt < since);
  const before = keptBefore.at(-1);

  const keptRows: SummaryKept[] = kept.map((e) => {
    const value = objectiveOf(e, run.metric) ?? null;
    // The gain of a keep: over the best it replaced (the last kept before it).
    const replaced = exps.filter((p) => p.decision?.action === "keep" && p.n < e.n).at(-1) ?? byN.get(0);
    const from = replaced ? objectiveOf(replaced, run.metric) : undefined;
    const trials = e.trials.filter((t) => t.result?.status === "ok").length;
    const margin = marginOf(e.decision?.reason ?? "");
    const ev = grades.get(e.n);
    return {
      n: e.n,
      hypothesis: e.hypothesis,
      value,
      change: value !== null && from !== undefined ? formatChange(from, value) : null,
      evidence: `${ev ? `${evidenceLabel(ev)}, ` : ""}${formatCount(trials, "trial")}${margin ? `, ${margin}` : ""}`,
      grade: ev?.grade ?? null,
      trials,
    };
  });

  const review: string[] = status.alarms.map((a: Alarm) => `alarm ${a.kind}: ${a.reason}`);
  if (status.selfReported)
    review.push("the metric is self-reported (no protected evaluate step): check the kept code by hand");
  // Keeps on one trial rest on one measurement: the likeliest to be luck.
  for (const k of keptRows.filter((r) => r.grade === "invalidated"))
    review.push(`#${k.n} was kept, but the evidence now contradicts it (${grades.get(k.n)?.why ?? ""})`);
  for (const k of keptRows.filter((r) => r.trials <= 1))
    review.push(
      `#${k.n} was kept on ${k.trials} trial: re-measure it (autolab finalize --verify) before building on it`,
    );
  const predicted = predictedBestLine(status);
  if (status.predictedBest && status.best && status.predictedBest.id !== status.best.id && predicted)
    review.push(predicted);

  const failures = new Map<string, { count: number; reason: string; last: number }>();
  for (const e of inWindow) {
    const d = e.decision;
    if (!d || (d.action !== "crash" && d.action !== "reject")) continue;
    const key = `${d.action}:${reasonKey(d.reason)}`;
    const said = d.reason.startsWith(`${d.action}:`) ? d.reason : `${d.action}: ${d.reason}`;
    const f = failures.get(key) ?? { count: 0, reason: said, last: e.n };
    f.count++;
    f.last = e.n;
    failures.set(key, f);
  }
  const failedRepeatedly = [...failures.values()]
    .filter((f) => f.count > 1)
    .sort((a, b) => b.count - a.count);

  let usd = 0;
  let priced = false;
  let tokens = 0;
  let trialSeconds = 0;
  let trials = 0;
  for (const e of inWindow) {
    const u = e.usage ?? {};
    if (Number.isFinite(u.costUsd)) {
      usd += u.costUsd as number;
      priced = true;
    }
    tokens += (u.inputTokens ?? 0) + (u.outputTokens ?? 0);
    for (const t of e.trials) {
      trials++;
      trialSeconds += t.result?.wallS ?? 0;
    }
  }

  const nextIdeas = [...(status.advisor?.ideas?.ideas ?? [])];
  const pending = inWindow.filter((e) => !e.decision).length;
  if (pending)
    nextIdeas.push(
      `${pending} experiment${pending === 1 ? " is" : "s are"} still undecided: \`autolab run\` resumes ${pending === 1 ? "it" : "them"}`,
    );

  return {
    tag: run.tag,
    program: run.programName,
    metric: run.metric,
    since,
    until,
    experiments: inWindow.length,
    trials,
    kept: keptRows,
    bestBefore: before ? (objectiveOf(before, run.metric) ?? null) : null,
    bestNow: status.best?.metric ?? null,
    reviewFirst: review,
    failedRepeatedly,
    cost: {
      usd: priced ? Math.round(usd * 10_000) / 10_000 : null,
      tokens,
      perKept: priced && keptRows.length ? Math.round((usd / keptRows.length) * 10_000) / 10_000 : null,
      trialSeconds: Math.round(trialSeconds),
    },
    utilization: status.slots.utilization,
    nextIdeas,
  };
}

/** The summary as markdown: what the terminal prints and the dashboard's top panel shows. */
export function summaryMarkdown(s: SummaryJson): string {
  const out: string[] = [];
  const window = `${formatUtcMinute(s.since)} → ${formatUtcMinute(s.until)} UTC`;
  out.push(`# ${s.program}, run ${s.tag}: ${window}`, "");
  const best =
    s.bestBefore !== null && s.bestNow !== null && s.bestBefore !== s.bestNow
      ? `; best ${s.metric} ${formatMetric(s.bestBefore)} → ${formatMetric(s.bestNow)} (${formatChange(s.bestBefore, s.bestNow)})`
      : s.bestNow !== null
        ? `; best ${s.metric} ${formatMetric(s.bestNow)}`
        : "";
  out.push(
    `${formatCount(s.experiments, "experiment")}, ${formatCount(s.trials, "trial")}, ${s.kept.length} kept${best}.`,
    "",
  );
  out.push("## Kept");
  if (s.kept.length === 0) out.push("- nothing was kept in this window");
  for (const k of s.kept)
    out.push(
      `- #${k.n} ${s.metric} ${formatMetric(k.value ?? undefined)}${k.change ? ` (${k.change})` : ""} — ${k.hypothesis} [evidence: ${k.evidence}]`,
    );
  out.push("", "## Review first");
  if (s.reviewFirst.length === 0) out.push("- nothing stands out");
  for (const r of s.reviewFirst) out.push(`- ${r}`);
  out.push("", "## Failed repeatedly");
  if (s.failedRepeatedly.length === 0) out.push("- no failure repeated");
  for (const f of s.failedRepeatedly) out.push(`- ${f.count}× (last #${f.last}) ${f.reason}`);
  out.push("", "## Cost and utilization");
  const cost =
    s.cost.usd !== null
      ? `$${s.cost.usd.toFixed(2)}${s.cost.perKept !== null ? ` ($${s.cost.perKept.toFixed(2)} per kept change)` : ""}`
      : "no priced usage recorded";
  out.push(
    `- researchers: ${cost}${s.cost.tokens ? `, ${s.cost.tokens.toLocaleString("en-US")} tokens` : ""}`,
  );
  out.push(
    `- trials: ${formatComputeTime(s.cost.trialSeconds)}${s.utilization !== null ? `; slots busy ${Math.round(s.utilization * 100)}% of the latest session` : ""}`,
  );
  out.push("", "## Next ideas");
  if (s.nextIdeas.length === 0) out.push("- none recorded (an advisor writes them: docs/advisor.md)");
  for (const i of s.nextIdeas) out.push(`- ${i}`);
  return `${out.join("\n")}\n`;
}
