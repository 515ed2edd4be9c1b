/**
 * src/core/format.ts: the one module that shows numbers, durations and lines. Each way of
 * showing a duration is its own function because callers' outputs differ on purpose; these
 * cases pin the differences so merging two of them by accident fails here (formatDuration's
 * round trip: test/program.test.ts).
 */
import { describe, expect, it } from "vitest";
import {
  firstLine,
  formatChange,
  formatComputeTime,
  formatDuration,
  formatLimitSeconds,
  formatMetric,
  formatMetricTo,
  formatRungBudget,
  formatSeconds,
  formatShare,
  formatSpokenSeconds,
  formatSpokenTimeout,
  formatWholePercent,
  formatWholeSeconds,
  shortLine,
} from "../src/core/format.ts";

describe("durations: one function per way of showing them", () => {
  it("the same milliseconds, shown each way", () => {
    const rows: [number, string, string, string, string][] = [
      // ms, formatDuration, formatWholeSeconds, formatRungBudget, formatLimitSeconds
      [250, "250ms", "0s", "250ms", "0.25s"],
      [400, "400ms", "0s", "400ms", "0.4s"],
      [1500, "1.5s", "2s", "1.5s", "1.5s"],
      [90_000, "1m30s", "1m30s", "1m30s", "90s"],
      [90_500, "1m31s", "1m31s", "90.5s", "90.5s"],
      [3_600_000, "1h", "1h", "1h", "3600s"],
    ];
    for (const [ms, duration, whole, rung, limit] of rows) {
      expect(formatDuration(ms), `formatDuration(${ms})`).toBe(duration);
      expect(formatWholeSeconds(ms), `formatWholeSeconds(${ms})`).toBe(whole);
      expect(formatRungBudget(ms), `formatRungBudget(${ms})`).toBe(rung);
      expect(formatLimitSeconds(ms), `formatLimitSeconds(${ms})`).toBe(limit);
    }
  });

  it("spoken to researchers: a space before the unit, minutes for a whole-minute timeout", () => {
    expect(formatSpokenSeconds(300_000)).toBe("300 s");
    expect(formatSpokenSeconds(1500)).toBe("1.5 s");
    expect(formatSpokenTimeout(600_000)).toBe("10 min");
    expect(formatSpokenTimeout(90_000)).toBe("90 s");
  });

  it("measured seconds to a tenth", () => {
    expect(formatSeconds(12.345)).toBe("12.3s");
    expect(formatSeconds(0)).toBe("0.0s");
  });

  it("compute time in the report (clocks in tables: test/org-view.test.ts)", () => {
    expect(formatComputeTime(12.34)).toBe("12.3 s");
    expect(formatComputeTime(270)).toBe("4.5 min");
    expect(formatComputeTime(8100)).toBe("2.25 h");
  });
});

describe("metrics", () => {
  it("formatMetricTo rounds to significant digits before showing", () => {
    expect(formatMetric(0.123456789)).toBe("0.123457");
    expect(formatMetricTo(0.123456789, 3)).toBe("0.123");
    expect(formatMetricTo(1234.5678, 4)).toBe("1235");
    expect(formatMetricTo(0.0000123456, 3)).toBe("1.2300e-5");
  });
});

describe("shares", () => {
  it("a judge's share has the digits its size needs; the pruner's is whole percent", () => {
    expect(formatShare(0.123)).toBe("12%");
    expect(formatShare(0.035)).toBe("3.5%");
    expect(formatShare(0.0025)).toBe("0.25%");
    expect(formatShare(Number.POSITIVE_INFINITY)).toBe("∞");
    expect(formatWholePercent(0.0025)).toBe("0%");
    expect(formatWholePercent(0.255)).toBe("26%");
  });
});

describe("firstLine", () => {
  const long = "x".repeat(200);

  it("the first line, uncut without a cap", () => {
    expect(firstLine("one\ntwo")).toBe("one");
    expect(firstLine(long)).toBe(long);
  });

  it("cut to exactly max characters by default, or to `keep` and the ellipsis", () => {
    expect(firstLine(long, 100)).toBe(`${"x".repeat(99)}…`);
    expect(firstLine("x".repeat(100), 100)).toBe("x".repeat(100));
    expect(firstLine(long, 160, 157)).toBe(`${"x".repeat(157)}…`);
  });

  it("shortLine: at most 160 characters, cut to 157 and the ellipsis", () => {
    expect(shortLine("x".repeat(160))).toBe("x".repeat(160));
    expect(shortLine(`${"x".repeat(161)}\nmore`)).toBe(`${"x".repeat(157)}…`);
  });
});

describe("formatChange", () => {
  it("is the signed relative change", () => {
    expect(formatChange(2, 1.5)).toBe("-25.00%");
    expect(formatChange(-2, -1)).toBe("+50.00%");
  });

  it("from a baseline of 0 (no relative change exists) is the signed absolute change, never empty (#36)", () => {
    expect(formatChange(0, 78.13)).toBe("+78.13");
    expect(formatChange(0, -0.5)).toBe("-0.5");
    expect(formatChange(0, 0)).toBe("+0");
  });
});
