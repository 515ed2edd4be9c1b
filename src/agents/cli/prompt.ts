import { isAbsolute, join } from "node:path";
import { fileRules, isGlob, matchedFiles } from "../../core/file-patterns.ts";
import type { ProposalContext } from "../../core/types.ts";
import { redactHoldouts } from "../../core/views.ts";

/** The summary every researcher ends with, as a JSON schema (for `--json-schema` and submit tools). */
export const SUMMARY_JSON_SCHEMA = {
  type: "object",
  properties: {
    hypothesis: { type: "string", description: "The one idea this change tests, in one sentence." },
    mechanism: { type: "string", description: "Why it should work." },
    expected: { type: "string", description: "The expected effect on the objective metric." },
  },
  required: ["hypothesis", "mechanism", "expected"],
  additionalProperties: false,
} as const;

export interface PromptOptions {
  /** A tool the CLI offers for the summary (e.g. pi's submit_summary); the JSON block is asked for anyway. */
  summaryTool?: string;
}

/**
 * Absolute paths of the program's editable files inside the worktree: each file or directory
 * entry as written, and for a glob the files it matches now (src/core/file-patterns.ts; never a
 * protected or holdout file). CLI presets turn these into permission rules, which know no globs
 * of ours; a glob gives no permission to create a file.
 */
export function editablePaths(ctx: ProposalContext): string[] {
  const rules = fileRules(ctx.program.files);
  const paths = ctx.program.files.editable.flatMap((p) =>
    isGlob(p) ? matchedFiles(ctx.worktree, [p], rules.editable) : [p],
  );
  return [...new Set(paths)].map((p) => abs(ctx.worktree, p));
}

/** Absolute paths of the program's protected entries (files, directories, globs) inside the worktree. */
export function protectedPaths(ctx: ProposalContext): string[] {
  return ctx.program.files.protected.map((p) => abs(ctx.worktree, p));
}

function abs(root: string, p: string): string {
  return isAbsolute(p) ? p : join(root, p);
}

/**
 * The researcher prompt: what to do, where, what not to touch, the notebook (the only view of
 * past experiments an agent gets: built by core/views.ts, holdouts never in it), and the summary
 * to end with. Paths are absolute: some CLIs (Claude Code) only edit absolute paths.
 */
export function buildPrompt(ctx: ProposalContext, opts: PromptOptions = {}): string {
  if (ctx.task === "advise") return advisorPrompt(ctx, opts);
  const { program } = ctx;
  const metric = program.objective.metric;
  const direction = program.objective.direction === "minimize" ? "lower is better" : "higher is better";
  const editable = editablePaths(ctx);
  const prot = protectedPaths(ctx);
  const lines = [
    "You are the researcher of an autonomous research lab (autolab).",
    `The objective is ${metric} (${direction}). The harness runs every experiment under a fixed budget and scores it with a protected evaluator; a change is kept only if it beats the current best.`,
    "",
    "## Your task",
    "",
    "Make ONE focused change to test ONE hypothesis about how to improve " +
      `${metric}. Read the editable files first, then edit them in place.`,
    "",
    "Editable files (change only these):",
    ...editable.map((p) => `- ${p}`),
    "",
    "Do not touch anything else:",
    ...(prot.length ? [`- protected (the evaluation; a change to it is rejected): ${prot.join(", ")}`] : []),
    "- no new files, no deleted files, no changes outside the editable files above: such a candidate is rejected unseen;",
    "- do not run the experiment, install packages, or commit: the harness does all of that after you finish.",
    "",
    "## The lab notebook",
    "",
    // Built by core/views.ts, redacted there; again here, in case a caller built its own.
    redactHoldouts(ctx.contextText.trim(), ctx.program),
    "",
    "## When you are done",
    "",
    ...(opts.summaryTool
      ? [
          `Call the \`${opts.summaryTool}\` tool with your summary, then also end your final answer with it as below.`,
        ]
      : []),
    "End your final answer with this JSON block (and nothing after it):",
    "",
    "```json",
    `{"hypothesis": "the one idea this change tests", "mechanism": "why it should work", "expected": "expected effect on ${metric}"}`,
    "```",
    "",
  ];
  return lines.join("\n");
}

/**
 * The advisor's prompt (src/core/advisor.ts): no edit, the brief (core/views.ts
 * buildAdvisorContext: the notebook's summary and the question), and the answer in the summary's
 * hypothesis as IDEA:/STOP: lines.
 */
function advisorPrompt(ctx: ProposalContext, opts: PromptOptions): string {
  return [
    "You are the advisor of an autonomous research lab (autolab). Its researchers have stalled; you get a fresh summary of the run's notebook and answer one question.",
    "Do NOT edit, create or delete any file, and do not run anything: an advisor that changes a file has its answer thrown away.",
    "",
    redactHoldouts(ctx.contextText.trim(), ctx.program),
    "",
    "## When you are done",
    "",
    ...(opts.summaryTool
      ? [
          `Call the \`${opts.summaryTool}\` tool with your answer as the hypothesis, then also end your final answer as below.`,
        ]
      : []),
    'End your final answer with this JSON block (and nothing after it); your answer goes in "hypothesis", one tagged line each:',
    "",
    "```json",
    '{"hypothesis": "IDEA: first idea\\nIDEA: second idea", "mechanism": "why these, briefly"}',
    "```",
    "",
    'or, to stop the run: {"hypothesis": "STOP: the reason"}',
    "",
  ].join("\n");
}
