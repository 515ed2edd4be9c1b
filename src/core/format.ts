/**
 * How numbers, durations and texts are shown to people and researchers: the one module for it.
 * Where two places show a thing differently on purpose (a duration parseDuration reads back, a
 * limit in an agent's instructions, a clock in a table) each way is its own named function
 * here, so a caller's output never changes by accident. Not here: src/chart/progress-chart.ts
 * and src/server/assets/app.js, which run in the browser and import nothing of the server's.
 */

// ── Metrics ──────────────────────────────────────────────────────────────────────────────

/** Metric values as people read them: 6 significant digits, no exponent for ordinary sizes. */
export function formatMetric(x: number | undefined): string {
  if (x === undefined) return "—";
  if (!Number.isFinite(x)) return String(x);
  const abs = Math.abs(x);
  if (abs !== 0 && (abs < 1e-4 || abs >= 1e7)) return x.toExponential(4);
  return Number(x.toPrecision(6)).toString();
}

/** A statistic (σ, an expected improvement) rounded to `digits` significant digits first, then shown as a metric. */
export function formatMetricTo(x: number, digits: number): string {
  return formatMetric(Number(x.toPrecision(digits)));
}

/**
 * Signed relative change, e.g. "-3.12%". From 0 no relative change exists: the signed absolute
 * change instead ("+78.13"), never an empty string (a "(#5, )" in a summary line).
 */
export function formatChange(from: number, to: number): string {
  if (from === 0) return `${to - from >= 0 ? "+" : "-"}${formatMetric(Math.abs(to - from))}`;
  const pct = ((to - from) / Math.abs(from)) * 100;
  return `${pct >= 0 ? "+" : ""}${pct.toFixed(2)}%`;
}

/** An ISO time to the minute, as the views show a moment: "2026-11-28 14:05" (UTC). */
export function formatUtcMinute(iso: string): string {
  return iso.slice(0, 16).replace("T", " ");
}

/** A count with its noun, singular for one: "1 experiment", "3 experiments". */
export function formatCount(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}

/** A share in a judge's reason, with the digits its size needs: "12%", "3.5%", "0.25%"; ∞ as "∞". */
export function formatShare(x: number): string {
  if (!Number.isFinite(x)) return "∞";
  const p = x * 100;
  return `${p >= 10 ? p.toFixed(0) : p >= 1 ? p.toFixed(1) : p.toPrecision(2)}%`;
}

/** A share of the budget in the pruner's reasons, in whole percent: "25%". */
export function formatWholePercent(x: number): string {
  return `${Math.round(x * 100)}%`;
}

// ── Durations ────────────────────────────────────────────────────────────────────────────

/**
 * Formats milliseconds for people: "500ms", "1.5s", "30s", "2m30s", "1h5m". Below a minute
 * it keeps one decimal of seconds; from a minute up it rounds to whole seconds. The output
 * is accepted by parseDuration (program.md's and the flags' spelling).
 */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  if (ms < 0) return `-${formatDuration(-ms)}`;
  if (Math.round(ms) < 1000) return `${Math.round(ms)}ms`;
  if (ms < 59_950) return `${Number((ms / 1000).toFixed(1))}s`;
  const total = Math.round(ms / 1000);
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  return [h ? `${h}h` : "", m ? `${m}m` : "", s ? `${s}s` : ""].join("");
}

/** Whole seconds, for the run's `--max-time`: 90 000 ms → "1m30s"; 8 h → "8h"; 400 ms → "0s". */
export function formatWholeSeconds(ms: number): string {
  let s = Math.round(ms / 1000);
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  const parts = [h ? `${h}h` : "", m ? `${m}m` : "", s || (!h && !m) ? `${s}s` : ""];
  return parts.join("");
}

/**
 * A proxy-ladder rung's name in reasons and alarms: "30s", "2m", "1m30s", "500ms". Unlike
 * formatDuration a budget that is not whole seconds stays in seconds ("90.5s"), so two rungs
 * never share a name.
 */
export function formatRungBudget(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const s = ms / 1000;
  if (s < 60 || !Number.isInteger(s)) return `${Number(s.toFixed(1))}s`;
  const parts: string[] = [];
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (h) parts.push(`${h}h`);
  if (m) parts.push(`${m}m`);
  if (s % 60) parts.push(`${s % 60}s`);
  return parts.join("");
}

/** A limit a process was killed at, in seconds to the millisecond: "10s", "0.25s", "90s" (trial reasons). */
export function formatLimitSeconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(3))}s`;
}

/** The time budget in the llm researcher's instructions: "300 s", "1.5 s". */
export function formatSpokenSeconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${(ms / 1000).toFixed(1)} s`;
}

/** A researcher's timeout in its failure reason: "10 min" for whole minutes, else "90 s". */
export function formatSpokenTimeout(ms: number): string {
  return ms >= 60_000 && ms % 60_000 === 0 ? `${ms / 60_000} min` : `${ms / 1000} s`;
}

/** Seconds measured by the harness (trial wall time, setup), to a tenth: "12.3s". */
export function formatSeconds(seconds: number): string {
  return `${seconds.toFixed(1)}s`;
}

/** Compute time in the markdown report, by its size: "12.3 s", "4.5 min", "2.25 h". */
export function formatComputeTime(seconds: number): string {
  if (seconds < 120) return `${seconds.toFixed(1)} s`;
  if (seconds < 7200) return `${(seconds / 60).toFixed(1)} min`;
  return `${(seconds / 3600).toFixed(2)} h`;
}

/** Seconds as a clock in a table: `45s`, `16m05s`, `1h02m`. */
export function formatClock(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

// ── Text ─────────────────────────────────────────────────────────────────────────────────

/**
 * The first line of a text. One longer than `max` characters is cut to its first `keep`
 * characters and "…" (by default exactly `max` in all). Callers pick the cap for where the line
 * is shown; shortLine is the one agents' contexts and most views use.
 */
export function firstLine(s: string, max = Number.POSITIVE_INFINITY, keep = max - 1): string {
  const line = s.split("\n")[0] ?? "";
  return line.length > max ? `${line.slice(0, keep)}…` : line;
}

/** A hypothesis or reason in one line, as agents' contexts and the views show it: at most 160 characters (cut to 157 and "…"). */
export function shortLine(s: string): string {
  return firstLine(s, 160, 157);
}
