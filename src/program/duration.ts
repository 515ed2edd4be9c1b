/**
 * Durations as program.md writes them: "500ms", "30s", "2m", "1h", compounds like "1m30s",
 * or a bare number of seconds (YAML `budget: 30` or `budget: "30"`). Internally always ms.
 */
import { AutolabError } from "../core/errors.ts";

const UNIT_MS: Record<string, number> = {
  ms: 1,
  s: 1000,
  sec: 1000,
  secs: 1000,
  m: 60_000,
  min: 60_000,
  mins: 60_000,
  h: 3_600_000,
  hr: 3_600_000,
  hrs: 3_600_000,
};
const BARE_SECONDS = /^(?:\d+(?:\.\d*)?|\.\d+)$/;
const COMPOUND = /^(?:(?:\d+(?:\.\d*)?|\.\d+)\s*[a-z]+\s*)+$/;
const PART = /(\d+(?:\.\d*)?|\.\d+)\s*([a-z]+)/g;

function invalid(x: unknown): AutolabError {
  const shown = typeof x === "string" ? `"${x}"` : String(x);
  return new AutolabError(
    "DURATION_INVALID",
    `${shown} is not a duration: write a number with a unit, like 500ms, 30s, 2m, 1h or 1m30s (a bare number means seconds)`,
  );
}

/** Parses a duration into milliseconds (rounded to whole ms). Negative or non-finite → DURATION_INVALID. */
export function parseDuration(x: string | number): number {
  if (typeof x === "number") {
    if (!Number.isFinite(x) || x < 0) throw invalid(x);
    return Math.round(x * 1000);
  }
  if (typeof x !== "string") throw invalid(x);
  const s = x.trim();
  if (BARE_SECONDS.test(s)) return Math.round(Number(s) * 1000);
  if (!COMPOUND.test(s)) throw invalid(x);
  let ms = 0;
  for (const [, amount = "", unit = ""] of s.matchAll(PART)) {
    const scale = UNIT_MS[unit];
    if (scale === undefined) throw invalid(x);
    ms += Number(amount) * scale;
  }
  if (!Number.isFinite(ms)) throw invalid(x);
  return Math.round(ms);
}
