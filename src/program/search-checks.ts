/**
 * Rules across the knobs of `search:`: a condition (`when: { OPTIMIZER: sgd }`) names another
 * knob of the map, a categorical one, and choices it has; conditions never form a cycle. The
 * raw YAML is read defensively (a knob's own shape is the schema's problem), so these are
 * reported together with every other problem of the file.
 */

import { closest } from "../core/suggest.ts";
import type { ProgramIssue } from "./checks.ts";
import { choiceProblem, describe } from "./schema.ts";

type RawKnob = { choices?: unknown; when?: unknown };

function isMap(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function searchIssues(raw: unknown): ProgramIssue[] {
  const search = isMap(raw) ? raw.search : undefined;
  if (!isMap(search)) return [];
  const knobs = Object.entries(search).filter((e): e is [string, RawKnob] => isMap(e[1]));
  const names = knobs.map(([name]) => name);
  const issues: ProgramIssue[] = [];
  /** Each knob's valid parents, for the cycle check. */
  const parents = new Map<string, string[]>();

  for (const [name, knob] of knobs) {
    if (!isMap(knob.when)) continue;
    const valid: string[] = [];
    for (const [parent, value] of Object.entries(knob.when)) {
      const path = ["search", name, "when", parent];
      const target = search[parent];
      if (parent === name) {
        issues.push({ path, message: `${name} cannot depend on itself: name another, categorical knob` });
        continue;
      }
      if (!isMap(target)) {
        const guess = closest(parent, names);
        issues.push({
          path,
          message: `${parent} is not a knob of search:${guess !== undefined ? ` — did you mean "${guess}"?` : ""}`,
        });
        continue;
      }
      const choices = (target as RawKnob).choices;
      if (!Array.isArray(choices)) {
        issues.push({
          path,
          message: `${parent} is numeric: a condition names a categorical knob (one with choices:) and some of its choices`,
        });
        continue;
      }
      valid.push(parent);
      const values = Array.isArray(value) ? value : [value];
      if (values.length === 0) {
        issues.push({ path, message: `must name at least one choice of ${parent}` });
        continue;
      }
      values.forEach((v, i) => {
        if (choices.includes(v)) return;
        const at = Array.isArray(value) ? [...path, i] : path;
        const problem = choiceProblem(v);
        if (problem) {
          issues.push({ path: at, message: problem });
          return;
        }
        const shown = choices.map(describe);
        const guess =
          typeof v === "string"
            ? closest(
                v,
                choices.filter((c): c is string => typeof c === "string"),
              )
            : undefined;
        issues.push({
          path: at,
          message:
            `${describe(v)} is not a choice of ${parent} (${shown.join(", ")})` +
            (guess !== undefined ? ` — did you mean "${guess}"?` : ""),
        });
      });
    }
    parents.set(name, valid);
  }
  issues.push(...cycleIssues(names, parents));
  return issues;
}

/** One issue per cycle of conditions, at the first knob (in program.md's order) on it. */
function cycleIssues(names: string[], parents: Map<string, string[]>): ProgramIssue[] {
  const issues: ProgramIssue[] = [];
  const done = new Set<string>();
  const reported = new Set<string>();
  const stack: string[] = [];
  const visit = (name: string): void => {
    const at = stack.indexOf(name);
    if (at >= 0) {
      const cycle = stack.slice(at);
      const first = names.find((n) => cycle.includes(n)) as string;
      if (cycle.some((n) => reported.has(n))) return;
      for (const n of cycle) reported.add(n);
      // Start the path at the first knob, in the order the conditions point.
      const i = cycle.indexOf(first);
      const path = [...cycle.slice(i), ...cycle.slice(0, i), first];
      issues.push({
        path: ["search", first, "when"],
        message: `conditions form a cycle: ${path.join(" → ")}: each knob on it waits for the next, so none is ever active; drop one of these conditions`,
      });
      return;
    }
    if (done.has(name)) return;
    stack.push(name);
    for (const p of parents.get(name) ?? []) visit(p);
    stack.pop();
    done.add(name);
  };
  for (const name of names) visit(name);
  return issues;
}
