import { describe, expect, it } from "vitest";
import type { CellRecord } from "../src/learn/bench.ts";
import { type BenchSummary, renderBenchMarkdown, renderCurves } from "../src/learn/bench-report.ts";

const failed: CellRecord = {
  config: "a",
  program: "p",
  split: "held-out",
  seed: 1,
  status: "failed",
  error: "baseline failed: | injected | row\n<script>alert(1)</script>\u001b]0;title\u0007",
  improvement: 0,
  curve: [[0, 0]],
  experiments: 0,
  trials: 0,
  success: false,
  dir: "cells/a/p/seed-1",
};

function summary(cells: CellRecord[]): BenchSummary {
  return {
    suite: "s",
    hash: "h",
    unit: "experiments",
    budget: { experiments: 2 },
    seeds: [1],
    remeasure: 0,
    order: "grid",
    complete: true,
    intervals: [],
    verdicts: [],
    curves: { tuning: {}, "held-out": { a: [[0, 0]] } },
    curriculum: [],
    cells,
  };
}

describe("bench report", () => {
  it("a failed cell's reason (run output: untrusted) cannot break the table or inject markup", () => {
    const md = renderBenchMarkdown(summary([failed]));
    const row = md.split("\n").find((l) => l.startsWith("| a | p | 1 |"));
    expect(row).toBeDefined();
    expect(row?.split("|").length).toBe(6); // 4 cells: the reason's pipes are escaped
    expect(md).not.toContain("<script>");
    expect(md).not.toContain("\u001b");
    expect(md).toContain("&#60;script&#62;");
  });

  it("one curve per configuration, each a step line to the end of the axis", () => {
    const svg = renderCurves("t", "experiments", {
      good: [
        [0, 0],
        [1, 20],
        [2, 40],
      ],
      bad: [
        [0, 0],
        [1, 0],
      ],
    });
    expect(svg.match(/class="curve"/g)).toHaveLength(2);
    expect(svg).toContain('data-config="good"');
    expect(svg.startsWith("<svg")).toBe(true);
  });
});
