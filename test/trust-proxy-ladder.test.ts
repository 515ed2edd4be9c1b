import { describe, expect, it } from "vitest";
import { createRng } from "../src/agents/builtin/rng.ts";
import {
  checkProxy,
  createProxyLadder,
  type Pair,
  promote,
  rankCorrelation,
} from "../src/trust/proxy-ladder.ts";
import { spearman } from "../src/trust/stats.ts";

describe("rankCorrelation", () => {
  it("is 1 for any monotone relation, −1 reversed, and handles ties with average ranks", () => {
    const mono: Pair[] = [1, 2, 3, 4, 5].map((x) => ({ low: x, high: Math.exp(x) }));
    expect(rankCorrelation(mono)).toBeCloseTo(1, 12);
    expect(rankCorrelation(mono.map((p) => ({ low: p.low, high: -p.high })))).toBeCloseTo(-1, 12);
    // Textbook value with a tie: x = [1,2,2,3], y = [1,3,2,4] → ranks [1,2.5,2.5,4] vs [1,3,2,4].
    expect(spearman([1, 2, 2, 3], [1, 3, 2, 4])).toBeCloseTo(0.9486833, 6);
    expect(rankCorrelation([{ low: 1, high: 2 }])).toBeNaN();
    expect(rankCorrelation([...mono, { low: Number.NaN, high: 1 }])).toBeCloseTo(1, 12);
  });
});

describe("checkProxy", () => {
  const rng = createRng(3);
  const good: Pair[] = Array.from({ length: 20 }, (_, i) => ({ low: i + 0.5 * rng.normal(), high: i }));
  const bad: Pair[] = Array.from({ length: 20 }, () => ({ low: rng.next(), high: rng.next() }));

  it("waits for enough pairs", () => {
    const r = checkProxy(bad.slice(0, 5), { lowName: "30s", highName: "2m" });
    expect(r.alarm).toBe(false);
    expect(r.reason).toBe("proxy 30s → 2m: 5 of 8 paired results needed before judging");
  });

  it("holds when the cheap rung ranks like the expensive one, alarms when it does not", () => {
    const ok = checkProxy(good);
    expect(ok.alarm).toBe(false);
    expect(ok.rho).toBeGreaterThan(0.9);
    const r = checkProxy(bad, { lowName: "30s", highName: "2m" });
    expect(r.alarm).toBe(true);
    expect(r.reason).toMatch(
      /^proxy 30s → 2m stopped predicting: rank correlation -?0\.\d\d over 20 candidates < 0\.5/,
    );
  });

  it("with a window, detects a proxy that stopped predicting recently", () => {
    const pairs = [...good, ...bad.slice(0, 10)];
    expect(checkProxy(pairs).alarm).toBe(false);
    expect(checkProxy(pairs, { window: 10 }).alarm).toBe(true);
  });

  it("a constant side cannot rank anything", () => {
    const flat = Array.from({ length: 10 }, (_, i) => ({ low: 1, high: i }));
    expect(checkProxy(flat).alarm).toBe(true);
  });
});

describe("promote", () => {
  it("takes the best fraction (at least one) in the direction, never a failed one", () => {
    const xs = [{ v: 3 }, { v: 1 }, { v: Number.NaN }, { v: 2 }, { v: 5 }, { v: 4 }];
    expect(promote(xs, (x) => x.v, 1 / 3, "minimize").map((x) => x.v)).toEqual([1, 2]);
    expect(promote(xs, (x) => x.v, 1 / 3, "maximize").map((x) => x.v)).toEqual([5, 4]);
    expect(promote(xs, (x) => x.v, 0, "minimize").map((x) => x.v)).toEqual([1]);
    expect(promote([{ v: Number.NaN }], (x) => x.v, 0.5, "minimize")).toEqual([]);
  });
});

describe("createProxyLadder", () => {
  it("promotes the best third of a rung once, pairs rungs by candidate, checks each step", () => {
    const ladder = createProxyLadder({ rungs: ["30s", "2m", "10m"], direction: "minimize", minPairs: 3 });
    ["a", "b", "c", "d", "e", "f"].forEach((id, i) => {
      ladder.record(id, 0, i);
    });
    expect(ladder.promotions(0)).toEqual(["a", "b"]);
    ladder.record("a", 1, 10);
    expect(ladder.promotions(0)).toEqual(["b"]);
    ladder.record("b", 1, 11);
    ladder.record("c", 1, 12);
    expect(ladder.pairs(0, 1)).toEqual([
      { low: 0, high: 10 },
      { low: 1, high: 11 },
      { low: 2, high: 12 },
    ]);
    expect(ladder.promotions(2)).toEqual([]);
    const [first, second] = ladder.check();
    expect(first?.alarm).toBe(false);
    expect(first?.rho).toBeCloseTo(1, 12);
    expect(second?.reason).toMatch(/^proxy 2m → 10m: 0 of 3/);
    expect(() => ladder.record("x", 5, 1)).toThrow(/no rung 5/);
  });
});
