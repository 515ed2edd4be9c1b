/**
 * RFC 8785, the JSON Canonicalization Scheme (JCS): one byte string per JSON value, so that a
 * signature over it survives any re-serialization on the way (key order, whitespace, `1.0`
 * vs `1`, `1e2` vs `100`). The hub signs and checks claims over these bytes (claim.ts).
 *
 * - §3.2.1: no whitespace between tokens.
 * - §3.2.2.1: the literals `null`, `true`, `false`.
 * - §3.2.2.2: strings as ECMAScript's JSON.stringify writes them (`\b \t \n \f \r \" \\`, other
 *   controls as `\u00xx` lower-case hex, everything else literally, `/` unescaped). Lone
 *   surrogates are not Unicode (I-JSON, RFC 7493 §2.1, which §3.1 requires) and MUST end
 *   canonicalization with an error (the note of §3.2.2.2): refused here.
 * - §3.2.2.3: numbers as ECMAScript's Number.prototype.toString (what JSON.stringify writes for
 *   a finite number); NaN and ±Infinity MUST be an error; -0 is written `0`.
 * - §3.2.3: object members sorted by their names as arrays of UTF-16 code units (JavaScript's
 *   default string comparison, not locale-aware, not by code point); arrays keep their order.
 * - §3.1 (I-JSON) also rules out duplicate names; a JavaScript object cannot hold any.
 *
 * Values JSON cannot carry are refused rather than dropped the way JSON.stringify drops them
 * (undefined, functions, symbols, BigInt, a Date, a Map, a class instance, a cycle): silently
 * signing something other than what the caller holds is how signatures get confused.
 */
import { AutolabError } from "../core/errors.ts";

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** `value`'s canonical JSON text (RFC 8785). Throws `CANONICAL_JSON_INVALID` naming the path. */
export function canonicalize(value: unknown): string {
  return write(value, "$", new Set());
}

/** The canonical text as UTF-8 bytes: what a hash or a signature covers. */
export function canonicalBytes(value: unknown): Buffer {
  return Buffer.from(canonicalize(value), "utf8");
}

function refuse(path: string, what: string): never {
  throw new AutolabError(
    "CANONICAL_JSON_INVALID",
    `${path} is ${what}, which canonical JSON (RFC 8785) cannot represent`,
    "use null, booleans, finite numbers, well-formed strings, arrays and plain objects only",
  );
}

// A lone surrogate: a high one not followed by a low one, or a low one not preceded by a high one.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function writeString(s: string, path: string): string {
  if (LONE_SURROGATE.test(s)) refuse(path, "a string with a lone surrogate");
  // JSON.stringify of a well-formed string is exactly §3.2.2.2's escaping (ES2019's
  // well-formed JSON.stringify only differs on lone surrogates, refused above).
  return JSON.stringify(s);
}

function write(value: unknown, path: string, open: Set<object>): string {
  if (value === null) return "null";
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "number":
      if (!Number.isFinite(value)) refuse(path, String(value));
      // Number.prototype.toString: "-0" would be "0" already; §3.2.2.3 says so explicitly.
      return Object.is(value, -0) ? "0" : String(value);
    case "string":
      return writeString(value, path);
    case "object":
      break;
    default:
      refuse(path, typeof value === "bigint" ? "a BigInt" : `a ${typeof value}`);
  }
  const obj = value as object;
  if (open.has(obj)) refuse(path, "a cycle");
  open.add(obj);
  try {
    if (Array.isArray(obj)) {
      const items: string[] = [];
      for (let i = 0; i < obj.length; i++) {
        if (!(i in obj)) refuse(`${path}[${i}]`, "a hole in an array");
        items.push(write(obj[i], `${path}[${i}]`, open));
      }
      return `[${items.join(",")}]`;
    }
    const proto = Object.getPrototypeOf(obj);
    if (proto !== Object.prototype && proto !== null)
      refuse(path, `a ${proto?.constructor?.name ?? "non-plain"} object`);
    if (Object.getOwnPropertySymbols(obj).length > 0) refuse(path, "an object with symbol keys");
    // The default sort compares UTF-16 code units (§3.2.3), not locales, not code points.
    const keys = Object.keys(obj).sort();
    const record = obj as Record<string, unknown>;
    const members = keys.map(
      (k) => `${writeString(k, `${path} (a key)`)}:${write(record[k], `${path}.${k}`, open)}`,
    );
    return `{${members.join(",")}}`;
  } finally {
    open.delete(obj);
  }
}
