/**
 * program.md's `run.evaluate: { rubric: …, grade: …, judges: … }` (docs/learning.md
 * "Rubric-graded evaluation"): the rules across fields, and the rubric file read and parsed at
 * program load, so a malformed rubric.md stops `autolab run` before anything starts.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileRules, normalizePath } from "../core/file-patterns.ts";
import type { JudgeSpec, RubricEvaluation } from "../rubric/grade.ts";
import { parseRubric } from "../rubric/rubric.ts";
import type { ProgramIssue } from "./checks.ts";
import type { RubricEvaluateYaml } from "./schema.ts";

export const RUBRIC_DEFAULTS = {
  panel: 2,
  canaryMax: 30,
  canaryEvery: 1,
  judgeTimeoutMs: 60_000,
  disagreement: 0.5,
} as const;

function list(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
}

/** Rules across fields, read from the raw YAML defensively (shape errors are the schema's). */
export function rubricIssues(raw: unknown, projectDir: string): ProgramIssue[] {
  const r = raw as {
    run?: { evaluate?: unknown };
    files?: { protected?: unknown; editable?: unknown; holdout?: unknown };
  };
  const ev = r?.run?.evaluate;
  if (!ev || typeof ev !== "object" || Array.isArray(ev)) return [];
  const e = ev as { rubric?: unknown; judges?: unknown };
  const issues: ProgramIssue[] = [];
  const rules = fileRules({
    editable: list(r.files?.editable),
    protected: list(r.files?.protected),
    holdout: list(r.files?.holdout),
  });
  if (typeof e.rubric === "string" && e.rubric.trim()) {
    const file = normalizePath(e.rubric);
    if (!rules.protected(file) && !rules.holdout(file)) {
      issues.push({
        path: ["run", "evaluate", "rubric"],
        message: `${JSON.stringify(e.rubric)} must be protected, or a researcher could rewrite what it is graded on: add it to files.protected (or files.holdout, to hide it from researchers too)`,
        example: `files:\n  protected: [${file}]`,
      });
    } else if (!existsSync(join(projectDir, file))) {
      issues.push({
        path: ["run", "evaluate", "rubric"],
        message: `${JSON.stringify(e.rubric)} does not exist next to program.md: write the rubric there (docs/learning.md "Rubric-graded evaluation")`,
      });
    }
  }
  const executor = (raw as { executor?: { fleet?: unknown } })?.executor;
  if (executor && typeof executor === "object" && executor.fleet !== undefined) {
    issues.push({
      path: ["run", "evaluate"],
      message:
        "rubric-graded evaluation runs in the harness of `autolab run` (it calls the judges), which the worker fleet does not do yet: use the local or Slurm executor",
    });
  }
  if (Array.isArray(e.judges)) {
    const seen = new Set<string>();
    e.judges.forEach((j, i) => {
      if (!j || typeof j !== "object") return;
      const judge = j as { name?: unknown; provider?: unknown; base_url?: unknown };
      if ((judge.provider ?? "openai-compatible") === "openai-compatible" && judge.base_url === undefined) {
        issues.push({
          path: ["run", "evaluate", "judges", i],
          message: "a judge with provider openai-compatible (the default) needs base_url, the server's URL",
          example: "- { base_url: http://127.0.0.1:8000/v1, model: Qwen/Qwen2.5-32B-Instruct }",
        });
      }
      if (typeof judge.name === "string") {
        if (seen.has(judge.name)) {
          issues.push({
            path: ["run", "evaluate", "judges", i, "name"],
            message: `two judges are named ${JSON.stringify(judge.name)}: each needs its own name (it names its metrics)`,
          });
        }
        seen.add(judge.name);
      }
    });
  }
  return issues;
}

/** The validated map → RubricEvaluation, with the rubric read and parsed (RUBRIC_INVALID). */
export function loadRubricEvaluation(ev: RubricEvaluateYaml, projectDir: string): RubricEvaluation {
  const rubricFile = ev.rubric;
  const rubric = parseRubric(readFileSync(join(projectDir, rubricFile), "utf8"), rubricFile);
  const taken = new Set(ev.judges.flatMap((j) => (j.name ? [j.name] : [])));
  const judges: JudgeSpec[] = ev.judges.map((j) => {
    let name = j.name;
    if (!name) {
      const base = j.model.replace(/[^A-Za-z0-9_-]+/g, "_").replace(/^[^A-Za-z_]/, "_$&");
      name = base;
      for (let k = 2; taken.has(name); k++) name = `${base}-${k}`;
      taken.add(name);
    }
    return {
      name,
      provider: j.provider ?? "openai-compatible",
      model: j.model,
      ...(j.base_url ? { baseUrl: j.base_url } : {}),
      ...(j.api_key_env ? { apiKeyEnv: j.api_key_env } : {}),
    };
  });
  return {
    rubricFile,
    rubric,
    grade: ev.grade,
    judges,
    panel: ev.panel ?? RUBRIC_DEFAULTS.panel,
    canaryMax: ev.canary_max ?? RUBRIC_DEFAULTS.canaryMax,
    canaryEvery: ev.canary_every ?? RUBRIC_DEFAULTS.canaryEvery,
    judgeTimeoutMs: ev.judge_timeout ?? RUBRIC_DEFAULTS.judgeTimeoutMs,
    disagreement: ev.disagreement ?? RUBRIC_DEFAULTS.disagreement,
  };
}
