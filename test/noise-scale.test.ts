/**
 * Issue #38: noise that scales with the value (timings) is modelled on the scale where it is
 * constant, chosen from the run's repeated groups. The speedup example's σ was pooled in
 * absolute milliseconds over configurations ten times apart, so at 22 ms the rule said
 * "practically nothing can be kept"; on the log scale σ is a share of the value at every level.
 */
import { describe, expect, it } from "vitest";
import { simProgram, simTrial } from "../bench/_keep-loop.ts";
import { mulberry32 } from "../src/core/random.ts";
import { createNoiseJudge, describeNoise } from "../src/trust/noise-judge.ts";
import { chooseScale, fitNoise, sigmaOf } from "../src/trust/noise-model.ts";

const rand = mulberry32(38);
const gauss = () => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
/** k trials of a timing whose noise is 5% of its value (multiplicative). */
const timed = (ms: number, k: number) => Array.from({ length: k }, () => ms * Math.exp(0.05 * gauss()));
/** k trials with additive noise of σ. */
const additive = (v: number, sigma: number, k: number) =>
  Array.from({ length: k }, () => v + sigma * gauss());

describe("the noise model's scale", () => {
  it("timings ten times apart with 5% noise: pooled on the log scale, σ a share of each value", () => {
    const groups = [
      { n: 0, values: timed(220, 6) },
      { n: 3, values: timed(120, 4) },
      { n: 7, values: timed(22, 6) },
    ];
    expect(chooseScale(groups).scale).toBe("log");
    const model = fitNoise(groups, 22);
    expect(model.scale).toBe("log");
    // σ at the reference (the best, 22 ms) is about 5% of it, not the 220 ms group's ~11 ms.
    expect(model.sigma).toBeGreaterThan(22 * 0.03);
    expect(model.sigma).toBeLessThan(22 * 0.08);
    // The same σ, as a share, at another level: each configuration at its own value.
    expect(sigmaOf(model, 0, 220).sigma / sigmaOf(model, 7, 22).sigma).toBeCloseTo(10, 6);
    // The 220 ms group is not "clearly noisier": on the log scale it is as noisy as the rest.
    expect(model.noisier).toEqual([]);
    expect(model.explain).toMatch(/log scale/);
    expect(model.explain).toMatch(/% of the value/);
  });

  it("additive noise at levels ten times apart stays on the metric's own scale", () => {
    const groups = [
      { n: 0, values: additive(220, 2, 6) },
      { n: 3, values: additive(120, 2, 4) },
      { n: 7, values: additive(22, 2, 6) },
    ];
    expect(chooseScale(groups).scale).toBe("raw");
    const model = fitNoise(groups, 22);
    expect(model.scale).toBe("raw");
    expect(sigmaOf(model, 0, 220).sigma).toBe(sigmaOf(model, 7, 22).sigma);
    expect(model.explain).not.toMatch(/log scale/);
  });

  it("levels close together give no evidence either way: the metric's own scale", () => {
    const groups = [
      { n: 0, values: timed(100, 6) },
      { n: 1, values: timed(104, 6) },
    ];
    expect(chooseScale(groups).scale).toBe("raw");
  });

  it("values at or below zero, or a single repeated group, never go to the log scale", () => {
    expect(
      chooseScale([
        { n: 0, values: [-1, -2, -1.5] },
        { n: 1, values: [-10, -20, -15] },
      ]).scale,
    ).toBe("raw");
    expect(chooseScale([{ n: 0, values: timed(220, 8) }]).scale).toBe("raw");
    expect(
      fitNoise(
        [
          { n: 0, values: [0, 1, 2] },
          { n: 1, values: [10, 20, 30] },
        ],
        1,
      ).scale,
    ).toBe("raw");
  });

  it("how often the choice errs (seeded counts): additive noise rarely goes to logs, multiplicative usually does", () => {
    // Two configurations 10× apart, 3 repeats each: the fewest a run compares. Additive noise
    // (σ 4.4 at both levels) taken as multiplicative would shrink σ at the fast end.
    const r = mulberry32(7);
    const g = () => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
    const runs = 1000;
    let additiveToLog = 0;
    let multiplicativeToLog = 0;
    for (let i = 0; i < runs; i++) {
      const add = [220, 22].map((m, n) => ({ n, values: [g(), g(), g()].map((z) => m + 4.4 * z) }));
      const mul = [220, 22].map((m, n) => ({
        n,
        values: [g(), g(), g()].map((z) => m * Math.exp(0.05 * z)),
      }));
      if (chooseScale(add).scale === "log") additiveToLog++;
      if (chooseScale(mul).scale === "log") multiplicativeToLog++;
    }
    expect(additiveToLog / runs).toBeLessThanOrEqual(0.05);
    expect(multiplicativeToLog / runs).toBeGreaterThanOrEqual(0.75);
  });

  it("a pinned scale is honoured", () => {
    const groups = [
      { n: 0, values: additive(220, 2, 6) },
      { n: 7, values: additive(22, 2, 6) },
    ];
    expect(fitNoise(groups, 22, { scale: "log" }).scale).toBe("log");
    expect(
      fitNoise(
        [
          { n: 0, values: timed(220, 6) },
          { n: 7, values: timed(22, 6) },
        ],
        22,
        { scale: "raw" },
      ).scale,
    ).toBe("raw");
  });

  it("the speedup case: at 22 ms after a 220 ms baseline the rule can still keep a 10% gain, and says which scale", () => {
    const baseline = timed(220, 5);
    const run = [
      { n: 1, values: timed(180, 3) },
      { n: 2, values: timed(60, 3) },
    ];
    const best = { n: 3, metric: 22, values: timed(22, 5) };
    const report = describeNoise({ metricName: "time_ms", baseline, best, run: [...run, best] });
    expect(report.tooNoisy).toBe(false);
    // What the rule can accept at 22 ms is a share of 22 ms, reported in the metric's units.
    expect(report.minDetectableRelative).toBeLessThan(0.1);
    expect(report.reason).toMatch(/log scale/);
    expect(report.reason).toMatch(/time_ms/);
  });

  it("the judge compares a 22 ms best with a 10% faster candidate at σ a share of each, and keeps it", () => {
    // The noise is 5% of the value everywhere; the 220 ms baseline's spread (about 11 ms) is
    // not the 22 ms best's (about 1.1 ms). Seeds do not line up (no pairing): the scale alone decides.
    const program = simProgram("time_ms", "minimize");
    const trials = (values: number[], from: number) => values.map((v, k) => simTrial(v, from + k, "time_ms"));
    const baseline = timed(220, 6);
    const bestValues = timed(22, 6);
    const cand = timed(19.8, 10);
    const input = {
      program,
      trials: trials(cand, 100),
      best: { n: 4, metric: 22, values: bestValues, trials: trials(bestValues, 50) },
      baseline,
      run: [
        { n: 1, values: timed(180, 3) },
        { n: 2, values: timed(90, 3) },
        { n: 4, values: bestValues },
      ],
    };
    const now = createNoiseJudge({ remeasure: false }).decide(input);
    expect(now.action).toBe("keep");
    expect(now.reason).toMatch(/log scale/);
  });
});
