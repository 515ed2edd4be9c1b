/**
 * The rubric step of a trial, run by the harness after the pristine-tree check (and after the
 * evaluate command, if there is one): reads the graded files from the trial's worktree, asks the
 * judges, writes `rubric.json` next to the trial's other logs and returns the metrics.
 *
 * Why the harness calls the judges and not a process in the sandbox: the sandbox's network is
 * all or nothing (docs/security.md), and a judge's API key would have to enter it. Here only the
 * judge endpoints program.md names are contacted, the key stays in the harness, and the graded
 * files are data read under the same rules as any protected step (no symlinks, nothing outside
 * the project).
 */
import { lstatSync, realpathSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { isAbsolute, join, relative, sep } from "node:path";
import type { TrialGradeOutcome, TrialGrader } from "../core/types.ts";
import { readUntrustedText } from "../core/untrusted-file.ts";
import {
  type AskJudge,
  type GradeReport,
  gradeAnswer,
  type JudgeSpec,
  type RubricEvaluation,
} from "./grade.ts";

/** At most this much of each graded file reaches a judge. */
export const MAX_GRADED_CHARS = 60_000;

/** Asks a judge through the llm backend's providers (src/agents/llm/provider.ts): one call, no tools. */
export const askWithProvider: AskJudge = async (judge, system, prompt, signal) => {
  // The AI SDK is large: loaded when a judge is first asked, not by every run (as the llm backend).
  const [{ generateText }, { resolveModel }] = await Promise.all([
    import("ai"),
    import("../agents/llm/provider.ts"),
  ]);
  const resolved = resolveModel({
    backend: "llm",
    provider: judge.provider,
    model: judge.model,
    ...(judge.baseUrl ? { baseUrl: judge.baseUrl } : {}),
    ...(judge.apiKeyEnv ? { apiKeyEnv: judge.apiKeyEnv } : {}),
    args: [],
    env: {},
  });
  const out = await generateText({
    model: resolved.model,
    system,
    prompt,
    temperature: 0,
    maxRetries: 0,
    abortSignal: signal,
  });
  return {
    text: out.text,
    ...(out.usage.inputTokens !== undefined ? { inputTokens: out.usage.inputTokens } : {}),
    ...(out.usage.outputTokens !== undefined ? { outputTokens: out.usage.outputTokens } : {}),
  };
};

/**
 * The text the judges grade: each graded file, named, in order. A file that is missing, a
 * symlink, not a regular file or outside the project is the trial's failure (returned as a
 * string), never read.
 */
export function gradedText(cwd: string, files: string[]): { text: string } | { problem: string } {
  const root = realpathSync(cwd);
  const parts: string[] = [];
  for (const f of files) {
    const p = join(cwd, f);
    let st: ReturnType<typeof lstatSync>;
    try {
      st = lstatSync(p);
    } catch {
      return {
        problem: `the graded file ${f} does not exist (run.evaluate.grade in program.md; declare it under outputs: if the command writes it)`,
      };
    }
    if (st.isSymbolicLink()) return { problem: `the graded file ${f} is a symlink: it is not read` };
    if (!st.isFile()) return { problem: `the graded file ${f} is not a regular file` };
    const real = realpathSync(p);
    const rel = relative(root, real);
    if (rel.startsWith(`..${sep}`) || rel === ".." || isAbsolute(rel)) {
      return { problem: `the graded file ${f} lies outside the project: it is not read` };
    }
    // Checked above, read through the one door: the file may have been swapped since lstat.
    const read = readUntrustedText(real, { maxBytes: MAX_GRADED_CHARS * 4 });
    if (!read.ok) return { problem: `the graded file ${f} is ${read.reason}: it is not read` };
    let body = read.text;
    if (body.length > MAX_GRADED_CHARS)
      body = `${body.slice(0, MAX_GRADED_CHARS)}\n[… cut at ${MAX_GRADED_CHARS} characters]`;
    parts.push(files.length > 1 ? `=== ${f} ===\n${body}` : body);
  }
  return { text: parts.join("\n\n") };
}

export type TrialGrade = TrialGradeOutcome;

/** The LoopDeps.grade of a program with a rubric (src/app/create-run.ts). */
export function rubricGrader(ev: RubricEvaluation, ask?: AskJudge): TrialGrader {
  return (o) => gradeTrial(ev, { ...o, ...(ask ? { ask } : {}) });
}

/** Grades one trial's files; writes the whole report to `<logDir>/rubric.json`. */
export async function gradeTrial(
  ev: RubricEvaluation,
  o: { cwd: string; logDir: string; seedIndex: number; signal?: AbortSignal; ask?: AskJudge },
): Promise<TrialGrade> {
  const text = gradedText(o.cwd, ev.grade);
  if ("problem" in text)
    return { status: "crash", reason: `rubric: ${text.problem}`, metrics: {}, warnings: [] };
  const report: GradeReport = await gradeAnswer(ev, text.text, {
    seedIndex: o.seedIndex,
    ask: o.ask ?? askWithProvider,
    ...(o.signal ? { signal: o.signal } : {}),
  });
  const judges = ev.judges.map((j: JudgeSpec) => ({
    name: j.name,
    provider: j.provider,
    model: j.model,
    ...(j.baseUrl ? { baseUrl: j.baseUrl } : {}),
  }));
  try {
    await writeFile(join(o.logDir, "rubric.json"), `${JSON.stringify({ judges, ...report }, null, 2)}\n`);
  } catch {
    // The report is a convenience; the metrics carry the result.
  }
  return {
    status: report.status,
    ...(report.reason ? { reason: report.reason } : {}),
    metrics: report.metrics,
    warnings: report.warnings,
  };
}
