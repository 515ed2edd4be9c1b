/** The researcher's context (src/core/views.ts buildContext): what a long notebook may push out. */
import { describe, expect, it } from "vitest";
import type { ExperimentRecord, RunRecord } from "../src/core/ledger.ts";
import { buildContext } from "../src/core/views.ts";
import { parseProgram } from "../src/program/index.ts";

const PROGRAM = `---
name: ctx
objective: { metric: loss, direction: minimize }
run: { command: "true", budget: 5s }
files: { editable: [a.py] }
agent: builtin
---
Try smaller learning rates first. NEVER touch the data loader.
`;

const RUN = { id: 1, tag: "t", branch: "autolab/t" } as RunRecord;

function experiment(n: number, hypothesis: string): ExperimentRecord {
  return {
    id: n + 1,
    n,
    commit: `c${n}`.padEnd(40, "0"),
    parentCommit: "p".padEnd(40, "0"),
    hypothesis,
    trials: [],
    decision: { action: n === 0 ? "keep" : "discard", reason: "r", metric: 1 + n, mechanismConfirmed: null },
  } as unknown as ExperimentRecord;
}

describe("buildContext", () => {
  const program = parseProgram(PROGRAM, "/p/program.md");

  it("a notebook too long for the limit is cut, the research directions never", () => {
    const exps = Array.from({ length: 40 }, (_, n) => experiment(n, `idea ${n} ${"x".repeat(150)}`));
    const text = buildContext(program, RUN, exps, { maxChars: 2000 });
    expect(text.length).toBeLessThanOrEqual(2000);
    expect(text).toContain("… (notebook truncated to fit 2000 chars)");
    expect(text).toMatch(
      /## Research directions\nTry smaller learning rates first\. NEVER touch the data loader\.$/,
    );
    expect(text.startsWith("# Lab notebook: ctx")).toBe(true);
  });

  it("a notebook within the limit is whole, directions last", () => {
    const text = buildContext(program, RUN, [experiment(0, "baseline")]);
    expect(text).not.toContain("truncated");
    expect(text).toMatch(/Best: #0[\s\S]*## Research directions\nTry smaller/);
  });
});
