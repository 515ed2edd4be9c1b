/**
 * Rules across fields of program.md. They read the raw YAML value defensively, so they can
 * be reported together with shape errors elsewhere in the file instead of one round later.
 */
import { isGlob, normalizePath } from "../core/file-patterns.ts";
import { formatDuration } from "../core/format.ts";
import { parseDuration } from "./duration.ts";
import type { FieldPath } from "./locate.ts";
import { searchIssues } from "./search-checks.ts";

export interface ProgramIssue {
  path: FieldPath;
  message: string;
  /** A valid example for this issue; when absent, the field's generic example is used. */
  example?: string;
}

function at(raw: unknown, path: FieldPath): unknown {
  let v = raw;
  for (const seg of path) {
    if (typeof v !== "object" || v === null) return undefined;
    v = (v as Record<string | number, unknown>)[seg];
  }
  return v;
}

/** The string items of a list, with their indexes; anything else is the schema's problem. */
function strings(raw: unknown, path: FieldPath): [number, string][] {
  const v = at(raw, path);
  if (!Array.isArray(v)) return [];
  return v.flatMap((x, i): [number, string][] => (typeof x === "string" ? [[i, x]] : []));
}

// "data" contains "data/x.csv"; "." contains everything. Globs are not compared here: a file an
// editable glob shares with a protected or holdout entry is protected or holdout (file-patterns.ts).
function contains(dir: string, p: string): boolean {
  if (isGlob(dir) || isGlob(p)) return false;
  return dir === "." || p === dir || p.startsWith(`${dir}/`);
}

export function crossFieldIssues(raw: unknown): ProgramIssue[] {
  const issues: ProgramIssue[] = [];

  const editable = strings(raw, ["files", "editable"]).map(([, p]) => normalizePath(p));
  for (const [i, p] of strings(raw, ["files", "protected"])) {
    const prot = normalizePath(p);
    const clash = editable.find((e) => contains(e, prot) || contains(prot, e));
    if (clash === undefined) continue;
    const how =
      clash === prot
        ? `${JSON.stringify(p)} is listed as both editable and protected`
        : `protected ${JSON.stringify(p)} overlaps editable ${JSON.stringify(clash)}`;
    issues.push({
      path: ["files", "protected", i],
      message: `${how}: a file is either editable or protected, never both`,
    });
  }

  const protectedPaths = strings(raw, ["files", "protected"]).map(([, p]) => normalizePath(p));
  const holdout = strings(raw, ["files", "holdout"]).map(([, p]) => normalizePath(p));
  for (const [i, p] of strings(raw, ["files", "holdout"])) {
    const h = normalizePath(p);
    const clash = editable.find((e) => contains(e, h) || contains(h, e));
    if (clash === undefined) continue;
    issues.push({
      path: ["files", "holdout", i],
      message: `holdout ${JSON.stringify(p)} overlaps editable ${JSON.stringify(clash)}: holdout data is hidden from researchers, so it cannot be editable`,
    });
  }
  for (const [i, p] of strings(raw, ["outputs"])) {
    const o = normalizePath(p);
    if (o === ".") {
      issues.push({
        path: ["outputs", i],
        message: `${JSON.stringify(p)} is the whole project: name the files or directories the command writes for evaluate (e.g. out/)`,
      });
      continue;
    }
    const clash = [...editable, ...protectedPaths, ...holdout].find((f) => contains(f, o) || contains(o, f));
    if (clash === undefined) continue;
    issues.push({
      path: ["outputs", i],
      message: `output ${JSON.stringify(p)} overlaps ${JSON.stringify(clash)} listed under files: outputs are what the command writes, never the project's own files`,
    });
  }

  const listed = objectiveNames(raw);
  for (const [i, h] of strings(raw, ["metrics", "holdout"])) {
    if (!listed.includes(h)) continue;
    issues.push({
      path: ["metrics", "holdout", i],
      message: `${JSON.stringify(h)} is ${listed.length > 1 ? "an" : "the"} objective metric: it cannot also be a holdout (holdouts are never shown to agents)`,
    });
  }
  issues.push(...objectiveIssues(raw));
  issues.push(...ladderIssues(raw));
  issues.push(...searchIssues(raw));
  return issues;
}

/** The objective's metric names as written (one, or the `metrics:` list's). */
function objectiveNames(raw: unknown): string[] {
  const list = at(raw, ["objective", "metrics"]);
  if (Array.isArray(list)) {
    return list.flatMap((m) => {
      const name = at({ m }, ["m", "metric"]);
      return typeof name === "string" ? [name] : [];
    });
  }
  const one = at(raw, ["objective", "metric"]);
  return typeof one === "string" ? [one] : [];
}

const SEVERAL = "several objectives: 2 or 3 entries under metrics:, each { metric, direction }";

/**
 * `objective:` is either { metric, direction } or { metrics: [2–3 of them], mode, threshold? }
 * (docs/objectives.md): the form, the count, duplicates, the mode and its threshold.
 */
function objectiveIssues(raw: unknown): ProgramIssue[] {
  const o = at(raw, ["objective"]);
  if (typeof o !== "object" || o === null || Array.isArray(o)) return [];
  const obj = o as Record<string, unknown>;
  const issues: ProgramIssue[] = [];
  const list = obj.metrics;
  if (list === undefined) {
    for (const key of ["metric", "direction"] as const) {
      if (obj[key] === undefined) issues.push({ path: ["objective", key], message: "is required" });
    }
    for (const key of ["mode", "threshold"] as const) {
      if (obj[key] !== undefined) {
        issues.push({
          path: ["objective", key],
          message: `applies to several objectives only (objective.metrics); with one metric there is nothing to trade off`,
        });
      }
    }
    return issues;
  }
  for (const key of ["metric", "direction"] as const) {
    if (obj[key] !== undefined) {
      issues.push({
        path: ["objective", key],
        message: `give either metric/direction (one objective) or metrics: (${SEVERAL}), not both`,
      });
    }
  }
  if (!Array.isArray(list)) return issues; // the schema says it must be a list
  if (list.length < 2 || list.length > 3) {
    issues.push({
      path: ["objective", "metrics"],
      message:
        list.length < 2
          ? `lists ${list.length} metric${list.length === 1 ? "" : "s"}: ${SEVERAL} (one objective is written objective: { metric, direction })`
          : `lists ${list.length} metrics: ${SEVERAL} (a front over more is too thin to judge)`,
    });
  }
  const names = objectiveNames(raw);
  const seen = new Map<string, number>();
  list.forEach((m, i) => {
    const name = at({ m }, ["m", "metric"]);
    if (typeof name !== "string") return;
    const first = seen.get(name);
    if (first !== undefined) {
      issues.push({
        path: ["objective", "metrics", i, "metric"],
        message: `${JSON.stringify(name)} is listed twice (also objective.metrics[${first}]): each metric once`,
      });
    } else seen.set(name, i);
  });
  const mode = obj.mode ?? "pareto";
  const threshold = obj.threshold;
  if (mode === "threshold_then_optimize") {
    if (threshold === undefined) {
      issues.push({
        path: ["objective", "mode"],
        message:
          "threshold_then_optimize needs threshold: { metric, bar } (the metric to bring past the bar first)",
        example: "threshold: { metric: accuracy, bar: 0.9 }",
      });
    }
    if (list.length > 2) {
      issues.push({
        path: ["objective", "metrics"],
        message: `threshold_then_optimize takes exactly two metrics (the one with the bar, the one optimized after it), not ${list.length}`,
      });
    }
  } else if (mode === "pareto" && threshold !== undefined) {
    issues.push({
      path: ["objective", "threshold"],
      message: "a threshold applies to mode: threshold_then_optimize only (pareto has no bar)",
      example: "mode: threshold_then_optimize",
    });
  }
  const tm = at(raw, ["objective", "threshold", "metric"]);
  if (typeof tm === "string" && !names.includes(tm)) {
    issues.push({
      path: ["objective", "threshold", "metric"],
      message: `${JSON.stringify(tm)} is not one of the objective's metrics (${[...new Set(names)].join(", ")}): the bar is on a listed metric`,
    });
  }
  return issues;
}

/** A duration as written, in ms; undefined when it is not one (the schema reports that). */
function durationAt(raw: unknown, path: FieldPath): number | undefined {
  const v = at(raw, path);
  if (typeof v !== "string" && typeof v !== "number") return undefined;
  try {
    const ms = parseDuration(v);
    return Number.isFinite(ms) && ms > 0 ? ms : undefined;
  } catch {
    return undefined;
  }
}

/** The ladder's budgets climb: ascending, each below run.budget (the top rung). */
function ladderIssues(raw: unknown): ProgramIssue[] {
  const ladder = at(raw, ["ladder"]);
  const list = Array.isArray(ladder) ? ladder : at(raw, ["ladder", "budgets"]);
  if (!Array.isArray(list)) return [];
  const path = (i: number): FieldPath => (Array.isArray(ladder) ? ["ladder", i] : ["ladder", "budgets", i]);
  const top = durationAt(raw, ["run", "budget"]);
  const issues: ProgramIssue[] = [];
  let previous: number | undefined;
  for (let i = 0; i < list.length; i++) {
    const ms = durationAt({ v: list[i] }, ["v"]);
    if (ms === undefined) continue;
    if (top !== undefined && ms >= top) {
      issues.push({
        path: path(i),
        message: `${formatDuration(ms)} is not below run.budget (${formatDuration(top)}): list only the cheaper rungs; run.budget is the top rung`,
      });
    } else if (previous !== undefined && ms <= previous) {
      issues.push({
        path: path(i),
        message: `${formatDuration(ms)} does not come after ${formatDuration(previous)}: list the rungs cheapest first, each budget larger than the one before`,
      });
    }
    previous = ms;
  }
  return issues;
}

export { at as valueAt };
