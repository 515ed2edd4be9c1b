/**
 * Parsers of the command line's number and duration flags: each checks its value the way
 * program.md's matching field is checked (a duration through `checkDuration`, `-s` through
 * `slots.count`'s rule) and refuses a bad one with the same problem, plus a fix naming the flag.
 * Every numeric option of src/cli/main.ts is parsed here, so none reaches the run unchecked.
 */
import { AutolabError } from "../core/errors.ts";
import { checkDuration, SLOT_COUNT } from "../program/schema.ts";

/** A bad flag value: the CLI exits 2 (bad command line), with the message and the fix. */
export const BAD_FLAG = "BAD_FLAG";

function bad(flag: string, raw: string, problem: string, fix: string): AutolabError {
  const shown = JSON.stringify(raw);
  // checkDuration's problem may quote the value itself ('"abc" is not a duration').
  const message = problem.startsWith(shown) ? `${flag}: ${problem}.` : `${flag} ${shown}: ${problem}.`;
  return new AutolabError(BAD_FLAG, message, fix);
}

interface DurationFlag {
  /** As shown: "-b/--budget". */
  flag: string;
  /** The program.md field with the same rule, named in the fix. */
  field?: string;
  example: string;
}

/** A duration longer than zero (program.md's rule for budgets and timeouts), in ms. */
export function durationFlag(o: DurationFlag): (raw: string) => number {
  return (raw) => {
    const { ms, problem } = checkDuration(raw, true);
    if (problem === undefined) return ms;
    throw bad(
      o.flag,
      raw,
      problem,
      `Pass ${o.flag} a duration longer than zero${o.field ? `, as program.md's ${o.field} takes it` : ""}: e.g. ${o.example}, or 500ms, 2m, 1h, 1m30s.`,
    );
  };
}

interface IntFlag {
  flag: string;
  min: number;
  max?: number;
  /** What the number is, for the fix: "a TCP port", "experiments besides the baseline". */
  what: string;
  example: string;
  /** A program.md field's own rule for the number (zod), when the flag overrides that field. */
  rule?: { safeParse(n: number): { success: boolean; error?: { issues: { message: string }[] } } };
}

/** A whole number in [min, max], written as digits ("1e3", "0x10", "" and "-1" are refused). */
export function intFlag(o: IntFlag): (raw: string) => number {
  const max = o.max ?? Number.MAX_SAFE_INTEGER;
  const range = o.max === undefined ? `${o.min} or more` : `from ${o.min} to ${o.max}`;
  const fix = `Pass ${o.flag} a whole number ${range} (${o.what}), e.g. ${o.example}.`;
  return (raw) => {
    const s = raw.trim();
    if (!/^\d+$/.test(s)) throw bad(o.flag, raw, "not a whole number", fix);
    const n = Number(s);
    const ruled = o.rule?.safeParse(n);
    if (ruled && !ruled.success)
      throw bad(o.flag, raw, ruled.error?.issues[0]?.message ?? "out of range", fix);
    if (!Number.isSafeInteger(n) || n > max) throw bad(o.flag, raw, `must be at most ${max}`, fix);
    if (n < o.min) throw bad(o.flag, raw, `must be at least ${o.min}`, fix);
    return n;
  };
}

/** `-s, --slots`: program.md's `slots.count` rule. */
export function slotsFlag(flag: string): (raw: string) => number {
  return intFlag({
    flag,
    min: 1,
    max: 256,
    what: "trials at once, as program.md's slots: count",
    example: `${flag.split("/")[0]} 2`,
    rule: SLOT_COUNT,
  });
}

/** An amount of US dollars above zero, as digits with an optional decimal part ("5", "0.50", "$2"). */
export function usdFlag(flag: string): (raw: string) => number {
  return (raw) => {
    const s = raw.trim().replace(/^\$/, "");
    const v = Number(s);
    if (!/^\d+(\.\d+)?$/.test(s) || !(v > 0)) {
      throw bad(
        flag,
        raw,
        "not an amount of dollars above zero",
        `Pass ${flag} dollars, e.g. ${flag} 5 or ${flag} 0.50.`,
      );
    }
    return v;
  };
}
