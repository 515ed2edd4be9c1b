/**
 * Turns zod issues into ProgramIssues a person can act on: what is wrong in plain words,
 * a "did you mean" for misspelt keys and values, and a valid example of the field. Zod's own
 * messages are used only for checks whose message we wrote ourselves (custom, too_small,
 * invalid_format): a raw zod dump never reaches the user.
 */
import type { z } from "zod";
import { closest } from "../core/suggest.ts";
import { type ProgramIssue, valueAt } from "./checks.ts";
import type { FieldPath } from "./locate.ts";
import { describe, EXAMPLES, KNOWN_KEYS, type Vocabulary } from "./schema.ts";

const PROGRAM_VOCABULARY: Vocabulary = { knownKeys: KNOWN_KEYS, examples: EXAMPLES };

const EXPECTED: Record<string, string> = {
  string: "text",
  number: "a number",
  int: "a whole number",
  boolean: "true or false",
  array: "a list",
  object: "a map",
  record: "a map",
};

/** "search.LEARNING_RATE.low" → "search.*.low"; list indexes are dropped. */
function generalize(path: FieldPath): string[] {
  const out: string[] = [];
  for (const [i, seg] of path.entries()) {
    if (typeof seg === "number") continue;
    out.push(i === 1 && path[0] === "search" ? "*" : seg);
  }
  return out;
}

/** The example of the longest prefix of `path` that has one. */
export function exampleFor(path: FieldPath, examples: Record<string, string> = EXAMPLES): string | undefined {
  const segs = generalize(path);
  for (let n = segs.length; n >= 0; n--) {
    const ex = examples[segs.slice(0, n).join(".")];
    if (ex !== undefined && (n > 0 || segs.length === 0)) return ex;
  }
  return undefined;
}

/** Displays a field path as users write it: files.editable[1]. */
export function showPath(path: FieldPath): string {
  if (path.length === 0) return "(frontmatter)";
  return path.map((s, i) => (typeof s === "number" ? `[${s}]` : i === 0 ? s : `.${s}`)).join("");
}

function fold(s: string): string {
  return s.toLowerCase().replace(/[_-]/g, "");
}

function unknownKey(section: FieldPath, key: string, vocab: Vocabulary): ProgramIssue {
  const path = [...section, key];
  const pattern = generalize(section).join(".");
  const known = vocab.knownKeys[pattern] ?? [];
  const here = closest(key, known);
  if (here !== undefined) {
    return {
      path,
      message: `unknown key "${key}" — did you mean "${here}"?`,
      example: exampleFor([...section, here], vocab.examples),
    };
  }
  // A known key in the wrong section: `budget:` at the top instead of under `run:`.
  for (const [other, keys] of Object.entries(vocab.knownKeys)) {
    if (other === pattern || other.includes("*")) continue;
    const match = keys.find((k) => fold(k) === fold(key));
    if (match === undefined) continue;
    const where = other === "" ? "at the top level" : `under ${other}:`;
    const full = other === "" ? match : `${other}.${match}`;
    const ex = exampleFor(full.split("."), vocab.examples);
    return {
      path,
      message: `unknown key "${key}" here — it belongs ${where} (${full})`,
      example: other === "" || ex === undefined ? ex : `${other}:\n${ex.replace(/^/gm, "  ")}`,
    };
  }
  // A misspelt key of another section (`budgt:` at the top for run.budget).
  for (const [other, keys] of Object.entries(vocab.knownKeys)) {
    if (other === pattern || other.includes("*")) continue;
    const match = closest(key, keys);
    if (match === undefined) continue;
    const where = other === "" ? "at the top level" : `under ${other}:`;
    const full = other === "" ? match : `${other}.${match}`;
    const ex = exampleFor(full.split("."), vocab.examples);
    return {
      path,
      message: `unknown key "${key}" here — did you mean "${match}"? It belongs ${where} (${full})`,
      example: other === "" || ex === undefined ? ex : `${other}:\n${ex.replace(/^/gm, "  ")}`,
    };
  }
  return {
    path,
    message: `unknown key "${key}"; the keys here are: ${known.join(", ")}`,
  };
}

function invalidType(issue: z.core.$ZodIssueInvalidType, path: FieldPath, raw: unknown): ProgramIssue {
  const value = valueAt(raw, path);
  if (value === undefined) return { path, message: "is required" };
  if (path.length === 0) {
    return { path, message: `the frontmatter must be a YAML map of fields, got ${describe(value)}` };
  }
  let expected = EXPECTED[issue.expected] ?? issue.expected;
  let example: string | undefined;
  if (path.length === 1 && path[0] === "objective") {
    expected = "a map with metric and direction";
    // The one-word form people try first, `objective: val_bpb`: show it the right way.
    if (typeof value === "string" && value.trim() !== "") {
      example = `objective: { metric: ${value.trim()}, direction: minimize }   # or maximize`;
    }
  }
  const message =
    value === null ? `is empty: expected ${expected}` : `expected ${expected}, got ${describe(value)}`;
  return example === undefined ? { path, message } : { path, message, example };
}

/** `vocab` names the keys and examples of the kind of file being checked (program.md by default). */
export function fromZod(
  issues: readonly z.core.$ZodIssue[],
  raw: unknown,
  vocab: Vocabulary = PROGRAM_VOCABULARY,
): ProgramIssue[] {
  const out: ProgramIssue[] = [];
  for (const issue of issues) {
    const path = issue.path.filter((s) => typeof s !== "symbol") as (string | number)[];
    switch (issue.code) {
      case "unrecognized_keys":
        for (const key of issue.keys) out.push(unknownKey(path, key, vocab));
        break;
      case "invalid_type":
        out.push(invalidType(issue, path, raw));
        break;
      case "invalid_value": {
        const value = valueAt(raw, path);
        const options = issue.values.map(String);
        const guess = typeof value === "string" ? closest(value, options) : undefined;
        out.push({
          path,
          message:
            `${describe(value)} is not one of ${options.join(", ")}` +
            (guess !== undefined ? ` — did you mean "${guess}"?` : ""),
        });
        break;
      }
      case "invalid_union": {
        // A branch that got past the type check (a map for `run.evaluate: { rubric: … }`) holds
        // the real problems; otherwise the value has none of the accepted types.
        const branches = (issue as { errors?: z.core.$ZodIssue[][] }).errors ?? [];
        const typed = branches.find(
          (b) => b.length > 0 && b.every((i) => i.code !== "invalid_type" || i.path.length > 0),
        );
        if (typed) {
          out.push(
            ...fromZod(
              typed.map((i) => ({ ...i, path: [...issue.path, ...i.path] })),
              raw,
              vocab,
            ),
          );
          break;
        }
        const expected = [
          ...new Set(
            branches.flatMap((b) =>
              b.flatMap((i) => (i.code === "invalid_type" ? [EXPECTED[i.expected] ?? i.expected] : [])),
            ),
          ),
        ].join(" or ");
        if (!expected) {
          out.push({ path, message: issue.message });
          break;
        }
        const value = valueAt(raw, path);
        out.push({
          path,
          message:
            value === null
              ? `is empty: expected ${expected}`
              : `expected ${expected}, got ${describe(value)}`,
        });
        break;
      }
      case "invalid_key":
        out.push({ path, message: issue.issues[0]?.message ?? `invalid key ${JSON.stringify(path.at(-1))}` });
        break;
      default:
        out.push({ path, message: issue.message });
    }
  }
  return out;
}
