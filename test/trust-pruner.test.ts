import { describe, expect, it } from "vitest";
import { createRng } from "../src/agents/builtin/rng.ts";
import { curveAgrees, type MeasuredCurve } from "../src/core/reference-curve.ts";
import { type Curve, createPruner, curveNoise, shouldPrune, valueAt } from "../src/trust/pruner.ts";

/** loss(t) = a + (4 − a)·exp(−r t) sampled at `steps` points, plus noise. */
function curve(a: number, r: number, steps = 100, sigma = 0, seed = 1, upTo = 1): [number, number][] {
  const rng = createRng(seed);
  const out: [number, number][] = [];
  for (let k = 1; k <= steps * upTo; k++) {
    const t = k / steps;
    out.push([t, a + (4 - a) * Math.exp(-r * t) + sigma * rng.normal()]);
  }
  return out;
}

describe("valueAt", () => {
  it("interpolates linearly and clamps at both ends", () => {
    const c: Curve = [
      [0.1, 4],
      [0.5, 2],
      [1, 1],
    ];
    expect(valueAt(c, 0.3)).toBeCloseTo(3, 12);
    expect(valueAt(c, 0.75)).toBeCloseTo(1.5, 12);
    expect(valueAt(c, 0)).toBe(4);
    expect(valueAt(c, 2)).toBe(1);
    expect(valueAt([], 0.5)).toBeNaN();
  });
});

describe("curveNoise", () => {
  it("recovers the point noise of a trending curve", () => {
    const s = curveNoise(curve(1, 5, 400, 0.05, 3));
    expect(s).toBeGreaterThan(0.04);
    expect(s).toBeLessThan(0.06);
    expect(curveNoise([[0, 1]])).toBeNaN();
  });
});

describe("shouldPrune", () => {
  const best = curve(1, 5, 100, 0.02, 1);
  const opts = { direction: "minimize" as const };

  it("never prunes during the warm-up, however bad the trial", () => {
    const awful = curve(3.5, 1, 100, 0.02, 2, 0.25);
    const v = shouldPrune(best, awful, opts);
    expect(v.prune).toBe(false);
    expect(v.reason).toMatch(/^warm-up: 25% of the budget < 30%/);
    expect(shouldPrune(best, awful, { ...opts, warmup: 0.2 }).prune).toBe(true);
  });

  it("prunes a trial confidently worse at the same point, reporting the compute saved", () => {
    const bad = curve(2, 5, 100, 0.02, 2, 0.4);
    const v = shouldPrune(best, bad, opts);
    expect(v.prune).toBe(true);
    expect(v.at).toBeCloseTo(0.4, 10);
    expect(v.saved).toBeCloseTo(0.6, 10);
    expect(v.reason).toMatch(
      /^pruned: progress .* vs best .* at 40% of the budget .*saved 60% of the budget$/,
    );
  });

  it("does not prune a trial that is as good, or worse only within the noise", () => {
    expect(shouldPrune(best, curve(1, 5, 100, 0.02, 7, 0.5), opts).prune).toBe(false);
    expect(shouldPrune(best, curve(1.01, 5, 100, 0.02, 8, 0.5), opts).prune).toBe(false);
  });

  it("respects the direction (maximize: lower is worse)", () => {
    const up = best.map(([x, y]) => [x, -y] as [number, number]);
    const worse = curve(2, 5, 100, 0.02, 2, 0.5).map(([x, y]) => [x, -y] as [number, number]);
    expect(shouldPrune(up, worse, { direction: "maximize" }).prune).toBe(true);
    expect(shouldPrune(up, worse, { direction: "minimize" }).prune).toBe(false);
  });

  it("accepts steps instead of fractions through `total`", () => {
    const stepsBest = best.map(([x, y]) => [x * 1000, y] as [number, number]);
    const bad = curve(2, 5, 100, 0.02, 2, 0.2).map(([x, y]) => [x * 1000, y] as [number, number]);
    expect(shouldPrune(stepsBest, bad, { ...opts, total: 1000 }).prune).toBe(false); // 20% < warm-up
    const later = curve(2, 5, 100, 0.02, 2, 0.5).map(([x, y]) => [x * 1000, y] as [number, number]);
    expect(shouldPrune(stepsBest, later, { ...opts, total: 1000 }).prune).toBe(true);
  });

  it("without a best curve, nothing is pruned", () => {
    expect(shouldPrune([], curve(3, 1, 100, 0, 1, 0.8), opts)).toMatchObject({ prune: false });
  });
});

describe("createPruner", () => {
  it("waits for `patience` agreeing checks, then stays pruned", () => {
    const best = curve(1, 5, 100, 0.02, 1);
    const p = createPruner(best, { direction: "minimize", patience: 3 });
    const bad = curve(2, 5, 100, 0.02, 2);
    const verdicts = bad.map(([x, y]) => p.observe(x, y));
    const first = verdicts.findIndex((v) => v.prune);
    expect(first).toBeGreaterThan(29);
    expect(verdicts[first - 1]?.reason).toMatch(/check 2 of 3 before pruning/);
    expect(verdicts[first - 3]?.prune).toBe(false);
    expect(verdicts.slice(first).every((v) => v.prune)).toBe(true);
    expect(p.curve().length).toBe(first + 1);
    expect(p.last()?.prune).toBe(true);
  });

  it("lets a slow starter that overtakes later run to the end", () => {
    // Fast but worse asymptote as the best; a slow starter with a better one crosses it at ~40%.
    const best = curve(1.5, 9, 100, 0.03, 1);
    const p = createPruner(best, { direction: "minimize" });
    const slow = curve(1, 4.6, 100, 0.03, 5);
    expect(slow.some(([x, y]) => p.observe(x, y).prune)).toBe(false);
  });
});

describe("curves are claims (issue #34 class 4)", () => {
  it("never prunes with a point noise of 0 or an infinite margin: a printed constant is no evidence", () => {
    const fake: Curve = Array.from({ length: 50 }, (_, k) => [(k + 1) / 50, 0.01] as [number, number]);
    const honest = curve(2, 3, 100, 0, 1, 0.6);
    const v = shouldPrune(fake, honest.slice(0, 40), { direction: "minimize", sigma: 0 });
    expect(v.prune).toBe(false);
    expect(v.reason).toMatch(/no noise estimate/);
    // Estimated from two noiseless curves (second differences of a line are 0): no prune either.
    const line = (b: number): Curve =>
      Array.from({ length: 50 }, (_, k) => [(k + 1) / 50, b] as [number, number]);
    expect(shouldPrune(line(0.01), line(3).slice(0, 40), { direction: "minimize" }).prune).toBe(false);
    const p = createPruner(fake, { direction: "minimize", sigma: 0 });
    for (const [x, y] of honest) expect(p.observe(x, y).prune).toBe(false);
  });

  it("a curve is a reference only when it agrees with the evaluated value of the same trial", () => {
    const base = { curve: curve(3, 3) as Curve, value: 3.1 };
    // Honest: the curve ends 30% lower, the evaluator measured 25% lower.
    const honest = { curve: curve(2, 3).map(([x, y]) => [x, y - 0.09] as [number, number]), value: 2.3 };
    expect(curveAgrees(honest, base, "minimize")).toBe(true);
    // Fake: the curve says 99.7% lower, the evaluator 3%.
    const fake = { curve: [[0.5, 0.01] as [number, number], [1, 0.01] as [number, number]], value: 3.0 };
    expect(curveAgrees(fake, base, "minimize")).toBe(false);
    // Worse by the evaluator, better by its curve: contradicted.
    expect(curveAgrees({ curve: honest.curve, value: 3.5 }, base, "minimize")).toBe(false);
    // Maximize: the same, mirrored.
    const up = (c: MeasuredCurve): MeasuredCurve => ({
      curve: c.curve.map(([x, y]) => [x, -y] as [number, number]),
      value: -c.value,
    });
    expect(curveAgrees(up(honest), up(base), "maximize")).toBe(true);
    expect(curveAgrees(up(fake), up(base), "maximize")).toBe(false);
    // No finite curve or value: never a reference.
    expect(curveAgrees({ curve: [], value: 2 }, base, "minimize")).toBe(false);
    expect(curveAgrees({ ...honest, value: Number.NaN }, base, "minimize")).toBe(false);
  });
});
