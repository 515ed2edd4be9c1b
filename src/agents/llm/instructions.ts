import { formatMetric, formatSpokenSeconds } from "../../core/format.ts";
import type { ProposalContext } from "../../core/types.ts";
import { redactHoldouts } from "../../core/views.ts";

/**
 * The llm researcher's system instructions: its role, the rules of the lab, then the notebook
 * (ctx.contextText, built by core/views.ts, so it never holds holdout metrics; redacted again
 * here, in case a caller built its own).
 */
export function researcherInstructions(ctx: ProposalContext, maxTurns: number): string {
  if (ctx.task === "advise") return advisorInstructions(ctx, maxTurns);
  const p = ctx.program;
  const { metric, direction } = p.objective;
  const better = direction === "minimize" ? "lower" : "higher";
  const prot = p.files.protected.length ? p.files.protected.join(", ") : "none";
  return `You are a researcher in an autonomous research lab. Each time you are called you propose ONE experiment: a focused change to the editable files that you expect to improve the objective. Then you call finish.

The harness, not you, runs the experiment: it commits your change, runs \`${p.run.command}\` with a fixed time budget of ${formatSpokenSeconds(p.run.budgetMs)}, scores it with a protected evaluator and keeps the change only if ${metric} is truly ${better} than the current best (experiment #${ctx.best.n}, ${metric} = ${formatMetric(ctx.best.metric)}). Otherwise the change is discarded and the next experiment starts again from the best.

Rules:
- You may change only the editable files: ${p.files.editable.join(", ")}. Protected files (${prot}) are read-only, and so is everything else. A change anywhere else gets the experiment rejected.
- Tools: list_files and read_file to look; edit_file (exact text replacement) or write_file to change an editable file; finish to end your turn. There is no shell: do not try to run anything, the harness does that.
- Make one coherent change per experiment, so its result tells what worked. Learn from the notebook below: build on kept changes, do not repeat what was tried and was not better, avoid what crashed.
- The change must fit the budget: code that runs past ${formatSpokenSeconds(p.run.budgetMs)} is killed and counts as a failure.
- When your change is in the files, call finish with hypothesis (one line: what you changed and what you expect), mechanism (why it should help) and expected (the ${metric} you expect). finish ends your turn; the files are evaluated as they are at that moment.
- You have at most ${maxTurns} steps; read what you need, then act.

${redactHoldouts(ctx.contextText, ctx.program)}`;
}

export const PROPOSE_PROMPT =
  "Propose the next experiment: look at what you need, make one change to the editable files, then call finish.";

export const ADVISE_PROMPT =
  "Answer the advisor's question: call finish with your IDEA: lines (at most three) or one STOP: line as the hypothesis. Edit nothing.";

export const NUDGE_PROMPT =
  "You stopped without calling finish, so no experiment can run. If your change is made, call finish now with hypothesis, mechanism and expected. If not, make it with edit_file or write_file first, then call finish.";

/** The advisor's instructions (src/core/advisor.ts): read, edit nothing, answer through finish. */
function advisorInstructions(ctx: ProposalContext, maxTurns: number): string {
  return `You are the advisor of an autonomous research lab. Its researchers have stalled; you get a fresh summary of the run's notebook and answer one question.

Rules:
- Do not edit or write any file: an advisor that changes a file has its answer thrown away. list_files and read_file are there if you need to look at the editable files.
- Answer by calling finish with hypothesis holding your answer as tagged lines: up to three lines \`IDEA: <idea>\`, or one line \`STOP: <reason>\`; mechanism may say why, briefly.
- You have at most ${maxTurns} steps.

${redactHoldouts(ctx.contextText, ctx.program)}`;
}
