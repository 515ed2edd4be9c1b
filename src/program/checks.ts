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

  const objective = at(raw, ["objective", "metric"]);
  for (const [i, h] of strings(raw, ["metrics", "holdout"])) {
    if (h !== objective) continue;
    issues.push({
      path: ["metrics", "holdout", i],
      message: `${JSON.stringify(h)} is the objective metric: it cannot also be a holdout (holdouts are never shown to agents)`,
    });
  }
  issues.push(...ladderIssues(raw));
  issues.push(...searchIssues(raw));
  issues.push(...frontierIssues(raw));
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

/**
 * A frontier other than `best` branches the serial loop only: parallel slots pipeline their
 * proposals on the best and merge winners onto it (docs/loop.md "The tree frontier").
 */
function frontierIssues(raw: unknown): ProgramIssue[] {
  const f = at(raw, ["frontier"]);
  const strategy = typeof f === "string" ? f : at(raw, ["frontier", "strategy"]);
  if (typeof strategy !== "string" || strategy === "best") return [];
  const parallel =
    at(raw, ["slots"]) !== undefined ? "slots" : at(raw, ["org"]) !== undefined ? "org" : undefined;
  if (!parallel) return [];
  return [
    {
      path: typeof f === "string" ? ["frontier"] : ["frontier", "strategy"],
      message: `frontier ${JSON.stringify(strategy)} branches the serial loop only; with ${parallel}: every candidate builds on the best (remove ${parallel}: or use frontier: best)`,
      example: "frontier: top_k   # without slots: or org:",
    },
  ];
}
