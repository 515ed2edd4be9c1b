import { describe, expect, it } from "vitest";
import { simProgram, simTrial } from "../bench/_keep-loop.ts";
import type { JudgeInput } from "../src/core/judge.ts";
import { createNoiseJudge, describeNoise } from "../src/trust/noise-judge.ts";
import { constantMetric, fitNoise, sigmaOf } from "../src/trust/noise-model.ts";
import { fCdf } from "../src/trust/stats.ts";

const program = simProgram("score", "maximize");
const trials = (values: number[]) => values.map((v, k) => simTrial(v, k, "score"));

describe("the run's noise model", () => {
  it("pools every repeated configuration around its own mean, and says from how many", () => {
    const m = fitNoise(
      [
        { n: 0, values: [1, 1.2, 1.4] },
        { n: 3, values: [2, 2.2] },
        { n: 5, values: [7] }, // one trial: no information about spread
      ],
      1,
    );
    // SS = 0.08 + 0.02 over 2 + 1 degrees of freedom.
    expect(m.sigma).toBeCloseTo(Math.sqrt(0.1 / 3), 12);
    expect(m.df).toBe(3);
    expect(m.source).toBe("pooled");
    expect(m.explain).toBe("σ 0.183 pooled from 2 configurations and 5 trials");
  });

  it("a configuration with identical repeats while others vary is exact: left out of the pool, and said", () => {
    const m = fitNoise(
      [
        { n: 0, values: [0.5, 0.5, 0.5] },
        { n: 1, values: [0.6, 0.62, 0.58] },
        { n: 2, values: [0.55, 0.57] },
      ],
      0.5,
    );
    expect(m.source).toBe("pooled");
    expect(m.exact).toEqual([0]);
    // Its zeros do not pull σ down for everyone else: SS 0.0008 + 0.0002 over 2 + 1 df.
    expect(m.sigma).toBeCloseTo(Math.sqrt(0.001 / 3), 12);
    expect(m.df).toBe(3);
    expect(sigmaOf(m, 0)).toEqual({ sigma: 0, df: 0, own: true, exact: true });
    expect(sigmaOf(m, 1).exact).toBe(false);
    expect(m.explain).toBe(
      "σ 0.0183 pooled from 2 configurations and 5 trials; #0 repeated its value exactly, so it is taken as exact",
    );
  });

  it("two identical repeats are not enough to be exact: the pooled σ, never less", () => {
    const m = fitNoise(
      [
        { n: 0, values: [0.5, 0.5] },
        { n: 1, values: [0.6, 0.62, 0.58] },
      ],
      0.5,
    );
    expect(m.exact).toEqual([]);
    expect(sigmaOf(m, 0).sigma).toBe(m.sigma);
    expect(m.sigma).toBeGreaterThan(0.01);
  });

  it("says when one configuration is clearly noisier, and judges it with its own σ", () => {
    const calm = [0, 1, 2, 3, 4, 5].map((n) => ({ n, values: [10 + n, 10.01 + n, 9.99 + n, 10.005 + n] }));
    const wild = { n: 9, values: [10, 14, 6, 12, 8] };
    const m = fitNoise([...calm, wild], 10);
    expect(m.noisier.map((c) => c.n)).toEqual([9]);
    expect(sigmaOf(m, 9).own).toBe(true);
    expect(sigmaOf(m, 9).sigma).toBeGreaterThan(2);
    expect(sigmaOf(m, 0).sigma).toBeLessThan(0.02);
    expect(m.explain).toMatch(/#9 is clearly noisier \(σ 3\.16\) and is judged with its own/);
  });

  it("identical repeats of two configurations make the objective deterministic; of one, σ is unknown", () => {
    expect(fitNoise([{ n: 0, values: [3, 3, 3] }], 3).source).toBe("unknown");
    const det = fitNoise(
      [
        { n: 0, values: [3, 3, 3] },
        { n: 1, values: [2, 2] },
      ],
      3,
    );
    expect(det.source).toBe("deterministic");
    expect(det.sigma).toBe(0);
    expect(det.explain).toMatch(/^deterministic: repeats of 2 configurations and 5 trials were identical/);
  });

  it("nearly identical repeats use the floor and say why", () => {
    const m = fitNoise(
      [
        { n: 0, values: [1000, 1000.000001, 1000] },
        { n: 1, values: [999, 999] },
      ],
      1000,
    );
    expect(m.source).toBe("floor");
    expect(m.sigma).toBeCloseTo(0.001, 12);
    expect(m.explain).toMatch(/is the floor \(1e-6 of the best.*nearly identical/);
  });

  it("NaN, infinite and missing values are left out, never a σ of 0 from them", () => {
    const m = fitNoise(
      [
        { n: 0, values: [1, Number.NaN, 1.2] },
        { n: 1, values: [Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY] },
        { n: 2, values: [] },
      ],
      1,
    );
    expect(m.source).toBe("pooled");
    expect(m.sigma).toBeCloseTo(Math.sqrt(0.02), 12);
    expect(m.trials).toBe(2);
    expect(fitNoise([{ n: 0, values: [Number.NaN, Number.NaN] }], 1).source).toBe("unknown");
  });

  it("a prior carries σ while nothing is repeated, and weighs in as its degrees of freedom", () => {
    const prior = { sigma: 0.5, df: 4 };
    expect(fitNoise([{ n: 0, values: [1] }], 1, { prior }).source).toBe("prior");
    const m = fitNoise([{ n: 0, values: [1, 1.2] }], 1, { prior });
    expect(m.sigma).toBeCloseTo(Math.sqrt((4 * 0.25 + 0.02) / 5), 12);
    expect(m.explain).toMatch(/and the prior σ 0\.5 \(4 degrees of freedom\)/);
  });

  it("constantMetric: every value of the run identical", () => {
    expect(
      constantMetric([
        { n: 0, values: [2, 2] },
        { n: 1, values: [2] },
      ]),
    ).toBe(true);
    expect(
      constantMetric([
        { n: 0, values: [2, 2] },
        { n: 1, values: [2.1] },
      ]),
    ).toBe(false);
  });

  it("fCdf agrees with known F quantiles", () => {
    // F(0.95; 2, 10) = 4.10, F(0.99; 5, 20) = 4.10
    expect(fCdf(4.1028, 2, 10)).toBeCloseTo(0.95, 3);
    expect(fCdf(4.1027, 5, 20)).toBeCloseTo(0.99, 3);
  });
});

describe("the noise judge with the run's noise model", () => {
  const judge = createNoiseJudge();
  const baseline = [0.689, 0.6, 0.75];
  const input = (cand: number[], run: JudgeInput["run"], base = baseline): JudgeInput => ({
    program,
    trials: trials(cand),
    best: { n: 0, metric: base.reduce((a, b) => a + b, 0) / base.length, values: base, trials: trials(base) },
    baseline: base,
    run,
  });

  it("σ too large from the baseline's few repeats: the run's pool decides, and the margin grows", () => {
    // The baseline's three repeats spread twice as much as a dozen other configurations'.
    const others = Array.from({ length: 12 }, (_, i) => ({
      n: i + 1,
      values: [0.68 + 0.001 * i, 0.69 + 0.001 * i, 0.7 + 0.001 * i],
    }));
    const base = [0.689, 0.67, 0.71];
    const cand = [0.7, 0.705, 0.69];
    const margin = (r: string) => Number(/margin (-?[\d.]+)σ/.exec(r)?.[1]);
    const old = createNoiseJudge({ pooling: "judged" }).decide(input(cand, others, base));
    const now = createNoiseJudge({ remeasure: false }).decide(input(cand, others, base));
    expect(now.reason).toMatch(/σ 0\.0\d+ pooled from 14 configurations and 42 trials/);
    expect(now.reason).not.toMatch(/clearly noisier/);
    expect(margin(now.reason)).toBeGreaterThan(margin(old.reason));
  });

  it("a deterministic incumbent among noisy configurations: no false certainty after one trial", () => {
    const same = [1, 1, 1];
    const noisy = [
      { n: 1, values: [0.99, 1.005, 0.995] },
      { n: 2, values: [0.98, 0.995] },
    ];
    const d = judge.decide(input([0.999], noisy, same));
    // The old rule: "clear loss … margin −2159.9σ (σ is the floor)". Now σ is the spread seen
    // elsewhere, and a first draw this close is measured again.
    expect(d.action).toBe("more");
    expect(d.reason).not.toMatch(/σ is the floor/);
    expect(d.reason).toMatch(/margin -0\.\dσ/);
    expect(d.reason).toMatch(
      /σ 0\.00\d+ pooled from 2 configurations and 5 trials; #0 repeated its value exactly/,
    );
    // An exact incumbent is never re-measured: its next trial would say nothing new.
    expect(d.action === "more" && d.incumbent).toBeFalsy();
    expect(d.reason).not.toMatch(/first the incumbent/);
  });

  it("against an exact incumbent only the challenger's noise counts", () => {
    const same = [0.7, 0.7, 0.7];
    const others = [{ n: 1, values: [0.6, 0.62, 0.58, 0.61, 0.59] }];
    // σ 0.0158 from #1 and the challenger; margin = 0.012 / (σ/√2) with no incumbent term.
    const d = judge.decide(input([0.71, 0.714], others, same));
    expect(d.action).toBe("more");
    const z = Number(/margin (-?[\d.]+)σ/.exec(d.reason)?.[1]);
    const sigma = Math.sqrt((0.001 + 0.000008) / 5);
    expect(z).toBeCloseTo(0.012 / (sigma / Math.sqrt(2)), 1);
  });

  it("asks for the incumbent's next seed before the challenger gets more trials than it has", () => {
    const others = [{ n: 1, values: [0.7, 0.71, 0.69] }];
    const d = judge.decide(input([0.72, 0.73, 0.72], others));
    expect(d.action).toBe("more");
    if (d.action !== "more") return;
    expect(d.incumbent).toBe(true);
    expect(d.reason).toMatch(/first the incumbent #0 runs its trial 4/);
    const old = createNoiseJudge({ pooling: "judged" }).decide(input([0.72, 0.73, 0.72], others));
    expect(old.action === "more" && old.incumbent).toBeFalsy();
  });

  it("status explains σ from the whole run", () => {
    const r = describeNoise({
      metricName: "score",
      baseline: [1, 1, 1],
      run: [{ n: 4, values: [1, 1.01, 1.02] }],
    });
    expect(r.source).toBe("pooled");
    expect(r.reason).toMatch(
      /^noise: score — σ 0\.01 pooled from 1 configuration and 3 trials; #0 repeated its value exactly, so it is taken as exact; the smallest improvement the rule can accept is 0\.00431 \(0\.43% of 1\) with 10 trials$/,
    );
  });
});
