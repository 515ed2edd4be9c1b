/**
 * Knobs of the built-in optimizer: constant lines in editable files.
 *
 *   Python:  LEARNING_RATE = 3e-4          HIDDEN: int = 128  # comment     OPTIMIZER = "adam"
 *   JS/TS:   const LEARNING_RATE = 3e-4;   export const HIDDEN: number = 1_024; // comment
 *
 * A numeric knob's line holds a number; a categorical knob's line holds one of its choices, as a
 * plain literal (literals.ts: a number, a string in either quote, a boolean). Reading finds
 * exactly one such line per knob; writing replaces only the literal, so every other byte of the
 * file (indentation, comments, line endings) stays as it was.
 */
import { AutolabError } from "../../core/errors.ts";
import type { CategoricalKnob, Knob, NumericKnob, ParamValue } from "../../core/types.ts";
import { formatNumber, isLiteral, LITERAL, parseLiteral, showValue } from "./literals.ts";

export { formatNumber, parseNumberLiteral } from "./literals.ts";

export function isCategorical(knob: Knob): knob is CategoricalKnob {
  return "choices" in knob;
}

export interface KnobFile {
  /** Path as shown to the user (relative to the worktree). */
  path: string;
  text: string;
}

export interface KnobLocation {
  file: string;
  /** 1-based line number. */
  line: number;
  value: ParamValue;
  /** The literal as written in the file, e.g. `3e-4`, `1_024` or `'adam'`. */
  literal: string;
}

function expectedForm(name: string, knob?: Knob): string {
  const example = knob && isCategorical(knob) ? showValue(knob.choices[0] ?? "adam", true) : "0.001";
  return `\`${name} = ${example}\` (Python) or \`const ${name} = ${example};\` (JS/TS)`;
}

// `[ \t]` rather than `\s`: files may be decoded as latin1 (byte-exact), where `\s` would
// also match byte 0xA0 of a UTF-8 character.
const PREFIX = String.raw`[ \t]*(?:export[ \t]+)?(?:(?:const|let|var)[ \t]+)?`;
// Type annotations may quote (`Literal["adam", "sgd"]`, `"adam" | "sgd"`).
const ANNOTATION = String.raw`(?:[ \t]*:[ \t]*[A-Za-z_"'][\w.\[\], \t|"']*?)?`;
const TAIL = String.raw`[ \t]*;?[ \t]*(?:(?:#|\/\/).*|\/\*.*\*\/[ \t]*)?`;

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

function knobLineRegExp(name: string): RegExp {
  return new RegExp(`^(${PREFIX}${escapeRegExp(name)}${ANNOTATION}[ \t]*=[ \t]*)(${LITERAL})(${TAIL})$`);
}

/** Any assignment of the name, plain or not: used to explain why a knob was not found. */
function assignmentRegExp(name: string): RegExp {
  return new RegExp(`^${PREFIX}${escapeRegExp(name)}[ \t]*(?::[^=]*)?=(?!=)`);
}

interface Definition {
  line: number;
  /** Offsets of the literal in the whole text. */
  start: number;
  end: number;
  literal: string;
}

interface Scan {
  definitions: Definition[];
  /** Lines that assign the name something other than a plain literal. */
  others: { line: number; text: string }[];
}

function scan(text: string, name: string): Scan {
  const knobLine = knobLineRegExp(name);
  const assignment = assignmentRegExp(name);
  const definitions: Definition[] = [];
  const others: { line: number; text: string }[] = [];
  let offset = 0;
  let lineNo = 0;
  while (offset <= text.length) {
    lineNo++;
    const nl = text.indexOf("\n", offset);
    const lineEnd = nl === -1 ? text.length : nl;
    let line = text.slice(offset, lineEnd);
    if (line.endsWith("\r")) line = line.slice(0, -1);
    // Cheap filter first: most lines do not mention the name at all.
    if (line.includes(name)) {
      const m = knobLine.exec(line);
      if (m) {
        const start = offset + (m[1] ?? "").length;
        const literal = m[2] ?? "";
        definitions.push({ line: lineNo, start, end: start + literal.length, literal });
      } else if (assignment.test(line)) {
        others.push({ line: lineNo, text: line.trim() });
      }
    }
    if (nl === -1) break;
    offset = nl + 1;
  }
  return { definitions, others };
}

/** The literal of `name`'s single constant line in `text`; undefined when it has none or several. */
export function literalIn(text: string, name: string): string | undefined {
  const [only, second] = scan(text, name).definitions;
  return only && !second ? only.literal : undefined;
}

/**
 * Finds each knob's single definition across the files and reads its value. Throws
 * KNOB_NOT_FOUND when a knob has no constant line, KNOB_AMBIGUOUS when it has more than one,
 * KNOB_NOT_A_NUMBER when a numeric knob's line holds text or a boolean, KNOB_NOT_A_CHOICE when a
 * categorical knob's line holds a value that is not one of its choices.
 */
export function readKnobs(files: KnobFile[], space: Record<string, Knob>): Map<string, KnobLocation> {
  const found = new Map<string, KnobLocation>();
  for (const [name, knob] of Object.entries(space)) {
    const hits: { file: string; line: number; literal: string }[] = [];
    const others: string[] = [];
    for (const file of files) {
      const s = scan(file.text, name);
      for (const d of s.definitions) hits.push({ file: file.path, line: d.line, literal: d.literal });
      for (const o of s.others) others.push(`${file.path}:${o.line}: ${o.text}`);
    }
    const [first, second] = hits;
    if (!first) {
      const searched = files.length > 0 ? files.map((f) => f.path).join(", ") : "none";
      const what = isCategorical(knob) ? "one of its choices" : "a plain number";
      const seen = others.length > 0 ? ` It is assigned, but not to ${what}: ${others.join("; ")}.` : "";
      throw new AutolabError(
        "KNOB_NOT_FOUND",
        `knob ${name} (search: in program.md) has no constant line in the editable files (searched: ${searched}).${seen} Expected a line like ${expectedForm(name, knob)}.`,
        `add such a line to an editable file, or remove ${name} from search: in program.md`,
      );
    }
    if (second) {
      throw new AutolabError(
        "KNOB_AMBIGUOUS",
        `knob ${name} is defined more than once: ${hits.map((h) => `${h.file}:${h.line}`).join(", ")}`,
        `keep one \`${name} = value\` line in the editable files, so the optimizer knows which one to change`,
      );
    }
    found.set(name, { ...first, value: knobValue(name, knob, first) });
  }
  return found;
}

/** The value of a knob's line, which must be of the knob's kind: a number, or one of the choices. */
function knobValue(
  name: string,
  knob: Knob,
  at: { file: string; line: number; literal: string },
): ParamValue {
  const parsed = parseLiteral(at.literal);
  const where = `${at.file}:${at.line}`;
  if (parsed === undefined) {
    throw new AutolabError(
      "KNOB_NOT_FOUND",
      `knob ${name}: ${where} holds ${at.literal}, a string with an escape Python and JS read differently`,
      `write the value without that escape, e.g. ${expectedForm(name, knob)}`,
    );
  }
  if (isCategorical(knob)) {
    if (knob.choices.includes(parsed)) return parsed;
    const choices = knob.choices.map((c) => showValue(c, true)).join(", ");
    throw new AutolabError(
      "KNOB_NOT_A_CHOICE",
      `knob ${name}: ${where} sets it to ${showValue(parsed, true)}, which is not one of its choices in program.md (${choices})`,
      `set the line to one of the choices, or add ${showValue(parsed, true)} to ${name}'s choices: in program.md (text and numbers differ: "1" is not 1)`,
    );
  }
  if (typeof parsed !== "number") {
    throw new AutolabError(
      "KNOB_NOT_A_NUMBER",
      `knob ${name} is numeric (low/high in program.md), but ${where} sets it to ${showValue(parsed, true)}`,
      `write a plain number there, or make ${name} categorical in program.md: ${name}: { choices: [...] }`,
    );
  }
  return parsed;
}

/**
 * Replaces the literal of the knob's single definition in `text`. A number value is written in
 * its shortest exact form; a string is written verbatim and must be a plain literal (use
 * formatKnobValue or literals.ts formatLiteral to make one). Every other byte is kept.
 */
export function writeKnob(text: string, name: string, value: number | string): string {
  const literal = typeof value === "number" ? formatNumber(value, Number.isInteger(value)) : value;
  if (!isLiteral(literal)) throw new Error(`writeKnob: not a plain literal: ${JSON.stringify(literal)}`);
  const { definitions } = scan(text, name);
  const [d, second] = definitions;
  if (!d) {
    throw new AutolabError(
      "KNOB_NOT_FOUND",
      `knob ${name} has no constant line to rewrite; expected ${expectedForm(name)}`,
    );
  }
  if (second) {
    throw new AutolabError(
      "KNOB_AMBIGUOUS",
      `knob ${name} is defined more than once (lines ${definitions.map((x) => x.line).join(", ")})`,
    );
  }
  return text.slice(0, d.start) + literal + text.slice(d.end);
}

/**
 * The value the optimizer records for a knob: integers rounded to integers; log-scale floats to
 * 3 significant digits; linear floats to a decimal grid of 100 to 1000 steps across
 * the range. Always
 * within [low, high]. formatKnobValue writes exactly this value.
 */
export function roundKnobValue(value: number, knob: NumericKnob): number {
  if (!Number.isFinite(value)) throw new Error(`roundKnobValue: not a finite number: ${value}`);
  const low = knob.int ? Math.ceil(knob.low) : knob.low;
  const high = knob.int ? Math.floor(knob.high) : knob.high;
  let v: number;
  if (knob.int) v = Math.round(value);
  else if (knob.log || high <= low) v = Number(value.toPrecision(3));
  else v = roundToStep(value, Math.floor(Math.log10(high - low)) - 2);
  if (Object.is(v, -0)) v = 0;
  return Math.min(Math.max(v, low), high);
}

/** Rounds to a multiple of 10^exponent, landing on the double nearest to the decimal. */
function roundToStep(value: number, exponent: number): number {
  // Division by an exact power of ten is correctly rounded, unlike multiplication by 10^-d.
  return exponent >= 0
    ? Math.round(value / 10 ** exponent) * 10 ** exponent
    : Math.round(value * 10 ** -exponent) / 10 ** -exponent;
}

/**
 * The literal written into the file for a knob value: `roundKnobValue(value)` formatted so
 * that parsing it gives back exactly that number. Integers as integers (`128`); floats readable
 * (`0.0012`, `3e-5`, `12.5`, `2.0` — a float stays a float in Python).
 */
export function formatKnobValue(value: number, knob: NumericKnob): string {
  return formatNumber(roundKnobValue(value, knob), knob.int);
}
