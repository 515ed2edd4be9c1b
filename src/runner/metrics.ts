/**
 * Metric lines on a trial's stdout. Three dialects are recognised, one per line:
 *
 *   val_bpb:          0.997900          autoresearch's summary block (the whole line is `name: number`)
 *   METRIC val_bpb=0.9979 step=300      pi-autoresearch (several pairs per line allowed)
 *   {"val_bpb": 0.9979, "step": 300}    a JSON object line (top-level numeric fields only)
 *
 * Values may be non-finite (`nan`, `inf`, `-inf`, `NaN`, `Infinity`, in any case): they are parsed
 * to NaN / ±Infinity so a diverged run is reported as such instead of as a missing metric.
 * Prose that merely contains a colon ("Loading data: done", "step 10 | loss: 3.2 | lr: 0.1") yields
 * nothing: the `name: value` form must be the entire line.
 */

export type MetricPair = [name: string, value: number];

/** Letters include non-ASCII ones: pi-autoresearch programs print names like `total_µs`. */
const NAME = String.raw`[\p{L}_][\p{L}\p{N}_.\-/]*`;
const NUMBER = String.raw`[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf(?:inity)?|nan)`;
const COLON_LINE = new RegExp(String.raw`^\s*(${NAME})\s*:\s*(${NUMBER})\s*$`, "iu");
const METRIC_PREFIX = /^\s*METRIC\s+/;
const METRIC_PAIR = new RegExp(`^(${NAME})=(${NUMBER})$`, "iu");
/** Python's json.dumps writes bare NaN / Infinity, which JSON.parse rejects. */
const BARE_NONFINITE = /:\s*(-?Infinity|NaN)\s*(?=[,}])/g;
const NONFINITE_MARK = "__autolab_nonfinite__:";

/** Parses a numeric token as printed by Python, C or JS, including nan/inf spellings. */
export function parseNumber(token: string): number | undefined {
  const t = token.trim().toLowerCase();
  if (t === "") return undefined;
  const sign = t.startsWith("-") ? -1 : 1;
  const bare = t.replace(/^[-+]/, "");
  if (bare === "nan") return Number.NaN;
  if (bare === "inf" || bare === "infinity") return sign * Number.POSITIVE_INFINITY;
  const n = Number(t);
  return Number.isNaN(n) ? undefined : n;
}

/** Returns every metric a single stdout line carries, in order (a later pair of the same name wins). */
export function parseMetricLine(line: string): MetricPair[] {
  // Cheap rejections first: this runs on every line a trial prints, including 20 MB of noise.
  if (line.length === 0 || line.length > 100_000) return [];
  const first = line.trimStart()[0];
  if (first === "{") return parseJsonLine(line);
  if (first === "M" && METRIC_PREFIX.test(line)) return parseMetricPairs(line.replace(METRIC_PREFIX, ""));
  if (line.indexOf(":") === -1) return [];
  const m = COLON_LINE.exec(line);
  if (!m) return [];
  const value = parseNumber(m[2] as string);
  return value === undefined ? [] : [[m[1] as string, value]];
}

function parseMetricPairs(rest: string): MetricPair[] {
  const out: MetricPair[] = [];
  for (const token of rest.trim().split(/\s+/)) {
    const m = METRIC_PAIR.exec(token);
    if (!m) continue;
    const value = parseNumber(m[2] as string);
    if (value !== undefined) out.push([m[1] as string, value]);
  }
  return out;
}

function parseJsonLine(line: string): MetricPair[] {
  const text = line.trim();
  if (!text.endsWith("}")) return [];
  let obj: unknown;
  try {
    obj = JSON.parse(text);
  } catch {
    try {
      obj = JSON.parse(text.replace(BARE_NONFINITE, (_m, v: string) => `: "${NONFINITE_MARK}${v}"`));
    } catch {
      return [];
    }
  }
  if (obj === null || typeof obj !== "object" || Array.isArray(obj)) return [];
  const out: MetricPair[] = [];
  for (const [name, v] of Object.entries(obj)) {
    if (typeof v === "number") out.push([name, v]);
    else if (typeof v === "string" && v.startsWith(NONFINITE_MARK)) {
      const n = parseNumber(v.slice(NONFINITE_MARK.length));
      if (n !== undefined) out.push([name, n]);
    }
  }
  return out;
}

/**
 * Splits a byte stream into lines and hands each to `onLine`. A line ends at `\n` (or `\r\n`). A lone
 * `\r` (a progress bar redrawing itself) also ends a segment; it is passed on with `redrawn = true` so
 * a log tail can let the next segment replace it, as a terminal would. An unterminated line is capped
 * so a process that never prints a newline cannot grow it without bound.
 */
export class LineSplitter {
  #pending = "";
  #afterCr = false;
  readonly #onLine: (line: string, redrawn: boolean) => void;
  readonly #maxPending: number;
  readonly #decoder = new TextDecoder("utf-8");

  constructor(onLine: (line: string, redrawn: boolean) => void, maxPending = 64 * 1024) {
    this.#onLine = onLine;
    this.#maxPending = maxPending;
  }

  push(chunk: Uint8Array): void {
    this.#feed(this.#decoder.decode(chunk, { stream: true }));
  }

  /** Flushes the last unterminated line. */
  end(): void {
    this.#feed(this.#decoder.decode());
    if (this.#pending !== "") this.#onLine(this.#pending, false);
    this.#pending = "";
  }

  #feed(text: string): void {
    if (text === "") return;
    let start = 0;
    // "\r\n" split across two chunks: the "\n" only confirms the break the "\r" already made.
    if (this.#afterCr && text.charCodeAt(0) === 10) start = 1;
    this.#afterCr = false;
    const n = text.length;
    for (let i = start; i < n; i++) {
      const c = text.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      const piece = text.slice(start, i);
      const line = this.#pending === "" ? piece : this.#pending + piece;
      this.#pending = "";
      if (c === 13) {
        if (i + 1 === n) this.#afterCr = true;
        else if (text.charCodeAt(i + 1) === 10) {
          this.#onLine(line, false);
          i++;
          start = i + 1;
          continue;
        }
        // A lone "\r" at the very end of a chunk may still be followed by "\n": treat it as a line end.
        this.#onLine(line, !this.#afterCr);
      } else {
        this.#onLine(line, false);
      }
      start = i + 1;
    }
    if (start < n) {
      this.#pending += text.slice(start);
      if (this.#pending.length > this.#maxPending) this.#pending = this.#pending.slice(-this.#maxPending);
    }
  }
}
