import { describe, expect, it } from "vitest";
import {
  type CellOutcome,
  clusterBootstrap,
  improvementPct,
  layerVerdict,
  meanCurve,
} from "../src/learn/bench-stats.ts";

const cell = (
  config: string,
  program: string,
  seed: number,
  improvement: number,
  split: CellOutcome["split"] = "held-out",
): CellOutcome => ({
  config,
  program,
  split,
  seed,
  improvement,
  curve: [
    [0, 0],
    [2, improvement],
  ],
});

describe("bench statistics", () => {
  it("improvement is positive when better, in either direction", () => {
    expect(improvementPct(10, 8, "minimize")).toBeCloseTo(20);
    expect(improvementPct(10, 12, "minimize")).toBeCloseTo(-20);
    expect(improvementPct(-10, -12, "minimize")).toBeCloseTo(20);
    expect(improvementPct(0.5, 0.6, "maximize")).toBeCloseTo(20);
    expect(improvementPct(0, 0.25, "maximize")).toBeCloseTo(25); // no relative scale: the difference
  });

  it("the bootstrap is seeded, percentile, and widens when programs disagree", () => {
    const agree = new Map([
      ["a", [5, 5.2, 4.8]],
      ["b", [5.1, 4.9, 5]],
    ]);
    const disagree = new Map([
      ["a", [15, 15.2, 14.8]],
      ["b", [-5.1, -4.9, -5]],
    ]);
    const x = clusterBootstrap(agree, 2000, 7);
    expect(clusterBootstrap(agree, 2000, 7)).toEqual(x);
    expect(x.lo).toBeLessThanOrEqual(x.mean);
    expect(x.hi).toBeGreaterThanOrEqual(x.mean);
    expect(x.lo).toBeGreaterThan(4.5);
    const y = clusterBootstrap(disagree, 2000, 7);
    expect(y.mean).toBeCloseTo(5, 5);
    expect(y.lo).toBeLessThan(0); // two programs pulling apart: no credible gain on programs
    expect(y.programs).toBe(2);
    expect(y.cells).toBe(6);
  });

  it("a better configuration ships on held-out programs; an equal one does not", () => {
    const cells: CellOutcome[] = [];
    for (const p of ["p1", "p2", "p3"])
      for (const seed of [1, 2, 3]) {
        cells.push(
          cell("good", p, seed, 20 + seed),
          cell("bad", p, seed, 2 + seed),
          cell("same", p, seed, 2 + seed),
        );
        cells.push(cell("good", `t-${p}`, seed, -50, "tuning"), cell("bad", `t-${p}`, seed, 50, "tuning"));
      }
    const ships = layerVerdict({ label: "good vs bad", candidate: "good", baseline: "bad" }, cells, 2000, 1);
    expect(ships.ships).toBe(true);
    expect(ships.interval.mean).toBeCloseTo(18); // tuning programs (−100 there) are left out
    expect(ships.line).toMatch(/^good vs bad on held-out programs: \+18\.00% ± 0\.00 .*ships$/);
    const equal = layerVerdict({ label: "same vs bad", candidate: "same", baseline: "bad" }, cells, 2000, 1);
    expect(equal.ships).toBe(false);
    expect(equal.line).toMatch(/\+0\.00% ± 0\.00 .*does not ship$/);
    const worse = layerVerdict({ label: "bad vs good", candidate: "bad", baseline: "good" }, cells, 2000, 1);
    expect(worse.ships).toBe(false);
    expect(worse.interval.hi).toBeLessThan(0);
  });

  it("no held-out pairs: no verdict, does not ship", () => {
    const v = layerVerdict(
      { label: "a vs b", candidate: "a", baseline: "b" },
      [cell("a", "p", 1, 10, "tuning")],
      500,
      1,
    );
    expect(v.ships).toBe(false);
    expect(v.line).toMatch(/no paired held-out cells/);
  });

  it("the mean curve carries each cell's last value forward", () => {
    const a: CellOutcome = {
      ...cell("c", "p", 1, 10),
      curve: [
        [0, 0],
        [1, 10],
      ],
    };
    const b: CellOutcome = {
      ...cell("c", "p", 2, 30),
      curve: [
        [0, 0],
        [3, 30],
      ],
    };
    expect(meanCurve([a, b])).toEqual([
      [0, 0],
      [1, 5],
      [3, 20],
    ]);
  });
});
