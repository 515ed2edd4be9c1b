/**
 * The plain value literals a knob line may hold, as Python and JS/TS write them:
 *
 *   numbers   3e-4   1_024   .5   -2.5e-3
 *   strings   "adam"   'adam'   (escapes: \\ \" \' \n \t \r \xNN \uNNNN)
 *   booleans  True / False (Python)   true / false (JS/TS)
 *
 * Knob files are handled as latin1 (one char per byte, so writing back is byte-exact); the text
 * of a string literal is UTF-8 in the file, so it is decoded on reading and encoded on writing.
 */
import type { ParamValue } from "../../core/types.ts";

// Decimal literal with optional sign, fraction, exponent and `_` digit separators (Python and JS).
const DIGITS = String.raw`\d(?:_?\d)*`;
export const NUMBER = String.raw`[-+]?(?:${DIGITS}(?:\.(?:${DIGITS})?)?|\.${DIGITS})(?:[eE][-+]?${DIGITS})?`;
const STRING = String.raw`"(?:[^"\\\r\n]|\\.)*"|'(?:[^'\\\r\n]|\\.)*'`;
const BOOLEAN = "True|False|true|false";
/** Any plain literal; a regular-expression source without anchors. */
export const LITERAL = `(?:${NUMBER}|${STRING}|${BOOLEAN})`;

const NUMBER_ONLY = new RegExp(`^${NUMBER}$`);
const LITERAL_ONLY = new RegExp(`^${LITERAL}$`);

export function isLiteral(literal: string): boolean {
  return LITERAL_ONLY.test(literal);
}

/** Parses a number literal as written in Python or JS source (`1_000`, `3e-4`, `.5`, `2.`). */
export function parseNumberLiteral(literal: string): number {
  if (!NUMBER_ONLY.test(literal)) throw new Error(`not a number literal: ${JSON.stringify(literal)}`);
  return Number(literal.replaceAll("_", ""));
}

const ESCAPES: Record<string, string> = { "\\": "\\", '"': '"', "'": "'", n: "\n", t: "\t", r: "\r" };

/**
 * The value of a plain literal, or undefined when it is not one (or is a string with an escape
 * that Python and JS read differently, such as `\q`).
 */
export function parseLiteral(literal: string): ParamValue | undefined {
  if (!LITERAL_ONLY.test(literal)) return undefined;
  if (literal === "True" || literal === "true") return true;
  if (literal === "False" || literal === "false") return false;
  if (NUMBER_ONLY.test(literal)) return parseNumberLiteral(literal);
  // A string: bytes (latin1 chars) → UTF-8 text first; escapes are ASCII, so they survive.
  const body = Buffer.from(literal.slice(1, -1), "latin1").toString("utf8");
  let out = "";
  for (let i = 0; i < body.length; i++) {
    const c = body[i] as string;
    if (c !== "\\") {
      out += c;
      continue;
    }
    const e = body[++i] ?? "";
    const hex =
      e === "x"
        ? /^[0-9a-fA-F]{2}/.exec(body.slice(i + 1))
        : e === "u"
          ? /^[0-9a-fA-F]{4}/.exec(body.slice(i + 1))
          : null;
    if (hex) {
      out += String.fromCharCode(Number.parseInt(hex[0], 16));
      i += hex[0].length;
    } else if (e in ESCAPES) out += ESCAPES[e];
    else return undefined;
  }
  return out;
}

/** How the existing literal of a knob line is written, for writing a new value the same way. */
export interface LiteralStyle {
  /** The literal in the file now. */
  literal: string;
  /** The file's path: a boolean in a `.py` file is written the Python way. */
  file: string;
}

/**
 * The literal for `value`, in the style of the line it replaces: a string keeps the quote the
 * file uses (double quotes when the line holds no string); a number is written as an integer
 * only when the line's number is one (`2` stays `2`, a float line gets `2.0`: a float stays a
 * float in Python); a boolean is `True`/`False` when the line uses them or the file is Python,
 * else `true`/`false`. Parsing the result gives back exactly `value`.
 */
export function formatLiteral(value: ParamValue, style: LiteralStyle): string {
  const old = style.literal;
  if (typeof value === "string") {
    const q = old.startsWith("'") ? "'" : '"';
    const escaped = value.replaceAll("\\", "\\\\").replaceAll(q, `\\${q}`);
    // Choices have no control characters (program.md validation); other text is UTF-8 bytes.
    return q + Buffer.from(escaped, "utf8").toString("latin1") + q;
  }
  if (typeof value === "boolean") {
    const python =
      /^(?:True|False)$/.test(old) || (!/^(?:true|false)$/.test(old) && /\.pyi?$/.test(style.file));
    return python ? (value ? "True" : "False") : String(value);
  }
  const intStyle = !NUMBER_ONLY.test(old) || !/[.eE]/.test(old);
  return formatNumber(value, intStyle && Number.isInteger(value));
}

/** Shortest exact literal of a number, in the style of formatKnobValue (no rounding). */
export function formatNumber(value: number, int: boolean): string {
  if (!Number.isFinite(value)) throw new Error(`formatNumber: not a finite number: ${value}`);
  if (int && Number.isInteger(value)) return BigInt(value).toString();
  if (value === 0) return "0.0";
  const abs = Math.abs(value);
  if (abs >= 1e-3 && abs < 1e6) {
    // String() gives the shortest round-trip digits and no exponent in this range.
    const s = String(value);
    return s.includes(".") ? s : `${s}.0`;
  }
  // toExponential() without an argument also gives the shortest round-trip digits.
  return value.toExponential().replace("e+", "e");
}

/**
 * A value as people read it: numbers in their shortest form, booleans as true/false, text
 * quoted when `quoted` (error messages, where `"1"` and `1` must differ) or when it needs it.
 */
export function showValue(value: ParamValue, quoted = false): string {
  if (typeof value === "number") return formatNumber(value, Number.isInteger(value));
  if (typeof value === "boolean") return String(value);
  return !quoted && /^[\w.+-]+$/.test(value) ? value : JSON.stringify(value);
}
