/**
 * rubric.md → Rubric: the criteria an LLM judge grades open-ended work on (docs/learning.md
 * "Rubric-graded evaluation"). Pure: no I/O, no network. Every problem is reported at once, each
 * with its line and the fix, as AutolabError RUBRIC_INVALID.
 *
 * The format:
 *
 *   # Anything before the first `## ` heading: instructions every judge reads first.
 *
 *   ## question                    ← a criterion: its id ([a-z0-9][a-z0-9_-]*)
 *   weight: 2                      ← optional (default 1), a positive number
 *   must_reach: 1                  ← optional hard threshold: below it the whole score is 0
 *   The write-up states the question it answers.     ← what is judged (one line or more)
 *   - 0: no question                ← levels of partial credit: 0, 1, … K (K ≥ 1), in order
 *   - 1: a vague question
 *   - 2: a precise, testable question
 *
 *   ## canary                      ← optional, last: a known-bad answer, verbatim to the end
 *   The results are great and everything works.
 */
import { AutolabError } from "../core/errors.ts";

export interface RubricLevel {
  level: number;
  description: string;
}

export interface RubricCriterion {
  id: string;
  /** The 1-based line of its `## ` heading in rubric.md. */
  line: number;
  weight: number;
  /** What is judged. */
  description: string;
  /** Levels 0..max, in order. */
  levels: RubricLevel[];
  /** The highest level (full credit). */
  max: number;
  /** Hard threshold: the consensus level must reach it or the whole score is 0. */
  mustReach?: number;
}

export interface Rubric {
  /** Text before the first criterion: instructions for every judge. */
  preamble: string;
  criteria: RubricCriterion[];
  /** A known-bad answer (`## canary`): a judge that scores it high is flagged. */
  canary?: string;
}

const CRITERION_ID = /^[a-z0-9][a-z0-9_-]*$/;
const KEY_LINE = /^([a-z_]+):(.*)$/;
const LEVEL_LINE = /^\s*[-*]\s+(\S+?)\s*:\s*(.*)$/;
const KEYS = ["weight", "must_reach"] as const;
const EXAMPLE = [
  "## question",
  "weight: 2",
  "must_reach: 1",
  "The write-up states the question it answers.",
  "- 0: no question",
  "- 1: a vague question",
  "- 2: a precise, testable question",
].join("\n");

interface Problem {
  line: number;
  message: string;
}

/** A rubric's criteria at most (each is one request per judge per trial). */
export const MAX_CRITERIA = 40;

/**
 * Parses the text of a rubric.md; `file` names it in messages. Throws AutolabError
 * RUBRIC_INVALID listing every problem with its line and the fix.
 */
export function parseRubric(text: string, file: string): Rubric {
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  const problems: Problem[] = [];
  const preamble: string[] = [];
  const criteria: RubricCriterion[] = [];
  let canary: string | undefined;
  let current: (RubricCriterion & { text: string[]; levelLines: number[] }) | undefined;
  let inFence = false;

  const close = () => {
    if (!current) return;
    const c = current;
    c.description = c.text.join("\n").trim();
    if (!c.description) {
      problems.push({
        line: c.line,
        message: `criterion "${c.id}" says nothing about what is judged: add a line of text under its heading`,
      });
    }
    if (c.levels.length < 2) {
      problems.push({
        line: c.line,
        message: `criterion "${c.id}" has ${c.levels.length === 0 ? "no levels" : "one level"}: list at least "- 0: …" and "- 1: …" under it`,
      });
    }
    c.levels.forEach((l, i) => {
      if (l.level !== i) {
        problems.push({
          line: c.levelLines[i] ?? c.line,
          message: `criterion "${c.id}": level ${l.level} where level ${i} was expected: levels are 0, 1, 2, … in order, each once`,
        });
      }
    });
    c.max = c.levels.length - 1;
    if (c.mustReach !== undefined && c.levels.length >= 2 && c.mustReach > c.max) {
      problems.push({
        line: c.line,
        message: `criterion "${c.id}": must_reach ${c.mustReach} is above its highest level ${c.max}`,
      });
    }
    const { text: _t, levelLines: _l, ...criterion } = c;
    criteria.push(criterion);
    current = undefined;
  };

  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i] as string;
    const lineNo = i + 1;
    if (canary !== undefined) {
      canary += `${raw}\n`;
      continue;
    }
    if (/^\s*(```|~~~)/.test(raw)) inFence = !inFence;
    const heading = inFence ? undefined : /^##(?!#)\s*(.*)$/.exec(raw);
    if (heading) {
      close();
      const id = (heading[1] ?? "").trim();
      if (id === "canary") {
        canary = "";
        continue;
      }
      if (!CRITERION_ID.test(id)) {
        problems.push({
          line: lineNo,
          message: `"## ${id}" is not a criterion id: use lowercase letters, digits, - and _ (e.g. "## clear-question"), or "## canary" for the known-bad answer`,
        });
      } else if (criteria.some((c) => c.id === id)) {
        problems.push({ line: lineNo, message: `criterion "${id}" appears twice: give each its own id` });
      }
      current = {
        id,
        line: lineNo,
        weight: 1,
        description: "",
        levels: [],
        max: 0,
        text: [],
        levelLines: [],
      };
      continue;
    }
    if (!current) {
      preamble.push(raw);
      continue;
    }
    const level = inFence ? undefined : LEVEL_LINE.exec(raw);
    if (level && /^-?\d+(\.\d+)?$/.test(level[1] ?? "")) {
      const n = Number(level[1]);
      const description = (level[2] ?? "").trim();
      if (!Number.isInteger(n) || n < 0) {
        problems.push({
          line: lineNo,
          message: `level "${level[1]}" is not a whole number ≥ 0 (write "- 0: …", "- 1: …")`,
        });
        continue;
      }
      if (!description) {
        problems.push({
          line: lineNo,
          message: `level ${n} of "${current.id}" has no description: say what earns it after the colon`,
        });
      }
      current.levels.push({ level: n, description });
      current.levelLines.push(lineNo);
      continue;
    }
    const key = inFence ? undefined : KEY_LINE.exec(raw);
    if (key) {
      const name = key[1] as string;
      const value = (key[2] ?? "").trim();
      if (!(KEYS as readonly string[]).includes(name)) {
        const near = KEYS.find((k) => editDistance(k, name) <= 2);
        problems.push({
          line: lineNo,
          message: `unknown key "${name}"${near ? ` — did you mean "${near}"?` : ""}: a criterion takes ${KEYS.join(" and ")} (start a line of description with a capital letter or other text)`,
        });
        continue;
      }
      const num = Number(value);
      if (name === "weight") {
        if (value === "" || !Number.isFinite(num) || num <= 0) {
          problems.push({
            line: lineNo,
            message: `weight "${value}" must be a positive number (e.g. "weight: 2")`,
          });
        } else current.weight = num;
      } else if (value === "" || !Number.isInteger(num) || num < 1) {
        problems.push({
          line: lineNo,
          message: `must_reach "${value}" must be a level ≥ 1 (e.g. "must_reach: 1"; leave it out for no threshold)`,
        });
      } else current.mustReach = num;
      continue;
    }
    if (current.levels.length > 0 && raw.trim() !== "") {
      // Text after the levels continues the last level's description (a wrapped line).
      const last = current.levels[current.levels.length - 1] as RubricLevel;
      last.description = `${last.description} ${raw.trim()}`.trim();
      continue;
    }
    current.text.push(raw);
  }
  close();

  if (criteria.length === 0 && problems.length === 0) {
    problems.push({ line: 1, message: "no criteria: add at least one `## <id>` section with its levels" });
  }
  if (criteria.length > MAX_CRITERIA) {
    problems.push({
      line: criteria[MAX_CRITERIA]?.line ?? 1,
      message: `${criteria.length} criteria: at most ${MAX_CRITERIA} (each is a request per judge per trial); merge some`,
    });
  }
  if (canary !== undefined && canary.trim() === "") {
    problems.push({
      line: lines.findIndex((l) => /^##\s*canary\s*$/.test(l)) + 1,
      message: `"## canary" is empty: put the known-bad answer under it, or remove the heading`,
    });
  }
  if (problems.length > 0) {
    problems.sort((a, b) => a.line - b.line);
    const count = problems.length === 1 ? "1 problem" : `${problems.length} problems`;
    throw new AutolabError(
      "RUBRIC_INVALID",
      `${file}: invalid rubric (${count}):\n${problems.map((p) => `  ${file}:${p.line}  ${p.message}`).join("\n")}`,
      `A criterion looks like this (docs/learning.md "Rubric-graded evaluation"):\n${EXAMPLE}`,
    );
  }
  const trimmedCanary = canary?.trim();
  return {
    preamble: preamble.join("\n").trim(),
    criteria,
    ...(trimmedCanary ? { canary: trimmedCanary } : {}),
  };
}

function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) (d[0] as number[])[j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = d[i] as number[];
      const prev = d[i - 1] as number[];
      row[j] = Math.min(
        (prev[j] as number) + 1,
        (row[j - 1] as number) + 1,
        (prev[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
  }
  return (d[a.length] as number[])[b.length] as number;
}
