import { describe, expect, it } from "vitest";
import { mulberry32 } from "../src/core/random.ts";
import { nextProgram, type ProgramRecord } from "../src/learn/curriculum.ts";

describe("the curriculum (nextProgram)", () => {
  it("tries every program once, in portfolio order, before any twice", () => {
    const recs: ProgramRecord[] = [
      { name: "lm", runs: 1, successes: 1 },
      { name: "tabular", runs: 0, successes: 0 },
      { name: "solver", runs: 0, successes: 0 },
    ];
    expect(nextProgram(recs)?.name).toBe("tabular");
    expect(nextProgram(recs)?.reason).toMatch(/not run yet/);
  });

  it("prefers the program succeeding about half the time over one always or never solved", () => {
    const recs: ProgramRecord[] = [
      { name: "easy", runs: 10, successes: 10 },
      { name: "frontier", runs: 10, successes: 5 },
      { name: "hard", runs: 10, successes: 0 },
    ];
    const c = nextProgram(recs);
    expect(c?.name).toBe("frontier");
    expect(c?.reason).toMatch(/succeeded 5 of 10/);
  });

  it("leaves out programs at maxRuns, and says nothing is left", () => {
    const recs: ProgramRecord[] = [
      { name: "a", runs: 3, successes: 1 },
      { name: "b", runs: 2, successes: 2 },
    ];
    expect(nextProgram(recs, { maxRuns: 3 })?.name).toBe("b");
    expect(nextProgram(recs, { maxRuns: 2 })).toBeUndefined();
  });

  it("refuses impossible records and options with a reason", () => {
    expect(() => nextProgram([{ name: "x", runs: 1, successes: 2 }])).toThrow(/2 successes in 1 runs/);
    expect(() => nextProgram([{ name: "x", runs: -1, successes: 0 }])).toThrow(/whole numbers/);
    expect(() => nextProgram([], { target: 1 })).toThrow(/between 0 and 1/);
  });

  it("spends most runs at the learnability frontier over a simulated bench", () => {
    // Three programs whose true success rates are 0.95, 0.5 and 0.05; 60 runs chosen by the rule.
    const truth: Record<string, number> = { easy: 0.95, frontier: 0.5, hard: 0.05 };
    const recs: ProgramRecord[] = Object.keys(truth).map((name) => ({ name, runs: 0, successes: 0 }));
    const u = mulberry32(7);
    for (let i = 0; i < 60; i++) {
      const c = nextProgram(recs);
      const r = recs.find((x) => x.name === c?.name) as ProgramRecord;
      r.runs++;
      if (u() < (truth[r.name] as number)) r.successes++;
    }
    const runs = Object.fromEntries(recs.map((r) => [r.name, r.runs]));
    expect(runs.frontier).toBeGreaterThan((runs.easy as number) + (runs.hard as number));
    // Exploration keeps the others measured, not abandoned.
    expect(runs.easy).toBeGreaterThanOrEqual(2);
    expect(runs.hard).toBeGreaterThanOrEqual(2);
  });
});
