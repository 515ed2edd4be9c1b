/**
 * The advisor (docs/advisor.md): when a run stalls — `advisor.after_discards` discards in a row,
 * or `advisor.plateau` experiments decided without a keep — a researcher backend is asked a
 * different question with a fresh, compact context (views.ts buildAdvisorContext: the notebook's
 * summary, never the evaluator's code or holdout values): up to three ideas for the next
 * researchers, or STOP with its reason. The serial loop (loop.ts) and the scheduler
 * (scheduler.ts) both ask through `consultAdvisor` between experiments.
 *
 * The trigger is derived from the notebook (decisions and advice rows), so a resumed run counts
 * the same. Every answer is recorded, garbage included (unparseable, too long, a crash, a
 * timeout, an edit: the advisor must not edit, its edits are reset); only a stop ends the run.
 */

import { join } from "node:path";
import { isAgentFailure } from "./agent-failure.ts";
import { crashPoint } from "./crash-points.ts";
import type { LoopEvent } from "./events.ts";
import { shortLine } from "./format.ts";
import type { AdviceRecord, ExperimentRecord, NewAdvice, SessionRecord } from "./ledger.ts";
import { type LoopDeps, measuredBest } from "./loop-deps.ts";
import { setupFilesOf } from "./setup.ts";
import type { Program, Proposal, ProposalContext } from "./types.ts";
import { freshDir } from "./untrusted-file.ts";
import { buildAdvisorContext } from "./views.ts";
import type { Workspace } from "./workspace.ts";

/** Ideas an answer may hold. */
export const MAX_IDEAS = 3;
/** Characters an answer may have (hypothesis, mechanism and expected together). */
export const MAX_ANSWER_CHARS = 4000;

export type ParsedAdvice =
  | { verdict: "ideas"; ideas: string[] }
  | { verdict: "stop"; reason: string }
  | { verdict: "garbage"; reason: string };

/** Decided candidates in the order they were decided (baseline left out). */
function decidedInOrder(exps: readonly ExperimentRecord[]): ExperimentRecord[] {
  return exps
    .filter((e) => e.n > 0 && e.decision)
    .sort((a, b) => (a.decision?.decidedAt ?? "").localeCompare(b.decision?.decidedAt ?? "") || a.n - b.n);
}

/**
 * Why the advisor is due now, or undefined. Only decisions after the last advice count (an
 * answer of any kind, garbage too, starts the count afresh). `after_discards`: the newest
 * decisions are that many discards in a row (crashes and rejections neither count nor break
 * it: the researcher's failures have their own limit); `plateau`: that many decisions since the
 * last keep. A winner discarded because it was rebased onto a newer best (parallel runs) is
 * skipped: its merge is decided on its own.
 */
export function adviceDue(
  advisor: Program["advisor"],
  exps: readonly ExperimentRecord[],
  advice: readonly AdviceRecord[],
): string | undefined {
  if (!advisor) return undefined;
  const rebased = new Set(exps.map((e) => e.rebaseOf).filter((n): n is number => n !== undefined));
  const since = decidedInOrder(exps)
    .slice(advice.at(-1)?.decided ?? 0)
    .filter((e) => !rebased.has(e.n));
  let discards = 0;
  for (let i = since.length - 1; i >= 0; i--) {
    const action = since[i]?.decision?.action;
    if (action === "keep") break;
    if (action === "discard") discards++;
  }
  if (advisor.afterDiscards !== undefined && discards >= advisor.afterDiscards)
    return `${discards} discards in a row`;
  let withoutKeep = 0;
  for (let i = since.length - 1; i >= 0 && since[i]?.decision?.action !== "keep"; i--) withoutKeep++;
  if (advisor.plateau !== undefined && withoutKeep >= advisor.plateau)
    return `plateau: ${withoutKeep} experiments without a keep`;
  return undefined;
}

const STOP = /^STOP\s*[:\-–—]\s*(.*)$/i;
const IDEA = /^IDEA\s*\d*\s*[:.)\-–—]\s*(.*)$/i;

/**
 * The advisor's answer: tagged lines anywhere in its summary — `IDEA: …` (at most three; an idea
 * may be `IDEA: revisit #12: …`) or one `STOP: <reason>`. Anything else is garbage, with why:
 * no tagged line, both kinds, a STOP without a reason, too many ideas, too long.
 */
export function parseAdvice(text: string): ParsedAdvice {
  if (text.length > MAX_ANSWER_CHARS)
    return {
      verdict: "garbage",
      reason: `the answer is too long (${text.length} characters, at most ${MAX_ANSWER_CHARS})`,
    };
  const lines = text.split(/\r?\n/).map((l) =>
    l
      .trim()
      .replace(/^(?:[-*•]|\d+[.)])\s+/, "")
      .replace(/^\*\*(IDEA|STOP)\*\*/i, "$1"),
  );
  const stops = lines.flatMap((l) => STOP.exec(l)?.[1]?.trim() ?? []);
  const ideas = lines.flatMap((l) => IDEA.exec(l)?.[1]?.trim() ?? []).filter((i) => i.length > 0);
  if (stops.length && ideas.length)
    return { verdict: "garbage", reason: "the answer holds both STOP and IDEA lines: one or the other" };
  if (stops.length) {
    const reason = stops.find((s) => s.length > 0);
    return reason
      ? { verdict: "stop", reason }
      : { verdict: "garbage", reason: "STOP without a reason (`STOP: <why>`)" };
  }
  if (ideas.length > MAX_IDEAS)
    return { verdict: "garbage", reason: `${ideas.length} ideas: at most ${MAX_IDEAS}` };
  if (ideas.length) return { verdict: "ideas", ideas };
  const said = shortLine(text.trim()) || "(nothing)";
  return { verdict: "garbage", reason: `no \`IDEA:\` or \`STOP:\` line in the answer: ${said}` };
}

/** The text an advisor's summary answers in: its hypothesis, mechanism and expected, in that order. */
export function answerText(p: Proposal): string {
  return [p.hypothesis, p.mechanism, p.expected].filter((s): s is string => !!s?.trim()).join("\n");
}

/** `revisit #12: …` at the start of a hypothesis: the discarded experiment it tries again. */
export function revisitOf(hypothesis: string): number | undefined {
  const m = /^\s*\[?revisit\s+#(\d+)\b/i.exec(hypothesis);
  return m ? Number(m[1]) : undefined;
}

/** An advisor's answer on one line (`autolab run`'s progress, `autolab watch`). */
export function adviceLine(a: {
  agent: string;
  afterN: number;
  verdict: AdviceRecord["verdict"];
  ideas: readonly string[];
  reason: string;
}): string {
  const who = `advisor (${a.agent}) after #${a.afterN}`;
  if (a.verdict === "ideas") return `${who}: ${a.ideas.map((i) => `IDEA: ${i}`).join(" | ")}`;
  if (a.verdict === "stop") return `${who}: STOP — ${a.reason}`;
  return `${who}: answer not used (${a.reason}); the run goes on`;
}

/** LoopSummary.stoppedBecause for a stop verdict: names the advisor and its reason. */
export function advisorStopReason(a: Pick<AdviceRecord, "agent" | "reason" | "afterN">): string {
  return `the advisor (${a.agent}) stopped the run after #${a.afterN}: ${shortLine(a.reason)}`;
}

/**
 * The run's stop by its advisor, if the newest advice is a stop and no harness session started
 * after it (`autolab run` continues a stopped run; then the stop is history. Candidates still
 * being proposed or queued when it came are finished by the session it stopped): what status,
 * the report and the dashboard say.
 */
export function advisorStop(
  advice: readonly AdviceRecord[],
  sessions: readonly Pick<SessionRecord, "startedAt">[],
): AdviceRecord | undefined {
  const last = advice.at(-1);
  if (last?.verdict !== "stop") return undefined;
  return sessions.some((s) => s.startedAt > last.createdAt) ? undefined : last;
}

export interface ConsultOptions {
  emit?: (e: LoopEvent) => void;
  signal?: AbortSignal;
  /** The worktree the advisor runs in (reset to the best before and after); default deps.workspace. */
  workspace?: Workspace;
}

/**
 * Asks the advisor when it is due (adviceDue), records its answer and returns it; undefined when
 * there is no advisor, it is not due, or the signal stopped it (then nothing is recorded). The
 * advisor runs in `workspace` at the best, with the researcher's sandbox; any file it changed
 * makes its answer garbage and is reset.
 */
export async function consultAdvisor(
  deps: LoopDeps,
  opts: ConsultOptions = {},
): Promise<AdviceRecord | undefined> {
  const { program, ledger, run, advisor } = deps;
  if (!advisor || !program.advisor) return undefined;
  const exps = ledger.listExperiments(run.id);
  const previous = ledger.listAdvice(run.id);
  const trigger = adviceDue(program.advisor, exps, previous);
  if (!trigger) return undefined;
  const best = measuredBest(program, exps);
  if (!best) return undefined;
  const ws = opts.workspace ?? deps.workspace;
  await ws.resetTo(best.exp.commit);
  const before = await ws.snapshot();
  // Writable by the advisor's process: made now, never one an earlier (interrupted) advice filled.
  const logDir = freshDir(join(deps.logDir, "advisor"), String(previous.length + 1));
  const decided = decidedInOrder(exps);
  const afterN = Math.max(0, ...decided.map((e) => e.n));
  opts.emit?.({ type: "advice_started", trigger, agent: advisor.name });
  const ctx: ProposalContext = {
    worktree: ws.projectDir,
    program,
    best: { n: best.exp.n, metric: best.metric },
    // A fresh, compact context: the summary only, no experiment list.
    history: [],
    contextText: buildAdvisorContext(program, run, exps, { trigger, advice: previous }),
    logDir,
    task: "advise",
    ...(opts.signal ? { signal: opts.signal } : {}),
  };
  const sandbox = deps.confinement?.researcher(ws, setupFilesOf(deps), [logDir]);
  if (sandbox) ctx.sandbox = sandbox;
  let parsed: ParsedAdvice;
  try {
    parsed = parseAdvice(answerText(await advisor.propose(ctx)));
  } catch (err) {
    if (opts.signal?.aborted) {
      await ws.resetTo(best.exp.commit);
      return undefined;
    }
    const what = isAgentFailure(err)
      ? `the advisor ${err.kind === "timeout" ? "timed out" : err.kind.replace("_", " ")}: ${err.message}`
      : `the advisor failed: ${err instanceof Error ? err.message : String(err)}`;
    parsed = { verdict: "garbage", reason: what };
  }
  if (opts.signal?.aborted) {
    await ws.resetTo(best.exp.commit);
    return undefined;
  }
  const changed = await ws.changes(before);
  if (changed.length) {
    await ws.resetTo(best.exp.commit, changed);
    const files = changed.slice(0, 5).join(", ") + (changed.length > 5 ? `, … (${changed.length})` : "");
    parsed = {
      verdict: "garbage",
      reason: `the advisor edited files (${files}): an advisor must not edit; the edits were reset and its answer not used`,
    };
  }
  const row: NewAdvice = {
    runId: run.id,
    trigger,
    decided: decided.length,
    afterN,
    agent: advisor.name,
    verdict: parsed.verdict,
    ideas: parsed.verdict === "ideas" ? parsed.ideas : [],
    reason: parsed.verdict === "ideas" ? "" : parsed.reason,
  };
  const record = ledger.addAdvice(row);
  crashPoint("after-advice");
  opts.emit?.({
    type: "advice",
    agent: record.agent,
    trigger,
    afterN,
    verdict: record.verdict,
    ideas: record.ideas,
    reason: record.reason,
  });
  return record;
}
