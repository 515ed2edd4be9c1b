import { describe, expect, it } from "vitest";
import { builtinOptionsFromArgs } from "../src/agents/builtin/builtin-agent.ts";
import { type GpObservation, nelderMead, posteriorBest, suggestGp } from "../src/agents/builtin/gp.ts";
import { createRng, mixSeed } from "../src/agents/builtin/rng.ts";
import { makeDims, type Params, unitLayout } from "../src/agents/builtin/space.ts";
import { suggestTpe, type TpeObservation } from "../src/agents/builtin/tpe.ts";
import { AutolabError } from "../src/core/errors.ts";
import type { Direction, Knob } from "../src/core/types.ts";
import { logQuadratic, SPACE } from "./helpers/log-quadratic.ts";

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** A sequential noisy search; returns the true value of the posterior-best configuration. */
function search(
  seed: number,
  budget: number,
  sigma: number,
  sampler: "gp" | "tpe",
  direction: Direction = "minimize",
): { trueBest: number; params: Params[] } {
  const noise = createRng(mixSeed(seed, 99));
  const sign = direction === "minimize" ? 1 : -1;
  const obs: (GpObservation & TpeObservation)[] = [];
  for (let i = 0; i < budget; i++) {
    const rng = createRng(mixSeed(seed, i));
    const s =
      sampler === "gp"
        ? suggestGp(SPACE, obs, rng, { direction, startup: 5 })
        : suggestTpe(SPACE, obs, rng, { direction, startup: 5 });
    const v = sign * (logQuadratic(s.params) + sigma * noise.normal());
    obs.push({ params: s.params, value: v, values: [v] });
  }
  const pick = posteriorBest(SPACE, obs, direction);
  return {
    trueBest: logQuadratic((obs[pick?.index ?? 0] as GpObservation).params),
    params: obs.map((o) => o.params),
  };
}

describe("suggestGp", () => {
  it("is deterministic for a seed", () => {
    expect(search(3, 12, 0.1, "gp")).toEqual(search(3, 12, 0.1, "gp"));
  });

  it("finds better configurations than TPE on a noisy 3-knob problem (10 seeds, 30 evaluations)", () => {
    const gp = Array.from({ length: 10 }, (_, s) => search(100 + s, 30, 0.1, "gp").trueBest);
    const tpe = Array.from({ length: 10 }, (_, s) => search(100 + s, 30, 0.1, "tpe").trueBest);
    expect(mean(gp)).toBeLessThan(mean(tpe));
    expect(mean(gp)).toBeLessThan(0.3);
  });

  it("maximizes when asked", () => {
    const up = Array.from({ length: 5 }, (_, s) => search(200 + s, 25, 0.05, "gp", "maximize").trueBest);
    expect(mean(up)).toBeLessThan(0.5);
  });

  it("rounds integer and log knobs, never repeats a configuration nor proposes the current one", () => {
    const { params } = search(7, 30, 0.1, "gp");
    const keys = params.map((p) => JSON.stringify(p));
    expect(new Set(keys).size).toBe(keys.length);
    for (const p of params) {
      expect(Number.isInteger(p.HIDDEN)).toBe(true);
      expect(p.LR).toBeGreaterThanOrEqual(1e-5);
      expect(p.LR).toBeLessThanOrEqual(1);
    }
    const current = params[params.length - 1] as Params;
    const obs = params.slice(0, 10).map((p) => ({ params: p, values: [logQuadratic(p)] }));
    const s = suggestGp(SPACE, obs, createRng(1), { direction: "minimize", startup: 5, current });
    expect(s.params).not.toEqual(current);
  });

  it("counts failed configurations as the worst and steers away from them", () => {
    const space: Record<string, Knob> = { X: { low: 0, high: 1, log: false, int: false } };
    // Values improve toward X = 1, but everything above 0.7 crashes.
    const obs: GpObservation[] = [];
    for (const x of [0.05, 0.2, 0.35, 0.5, 0.6, 0.75, 0.85, 0.95]) {
      obs.push({ params: { X: x }, values: x > 0.7 ? [] : [1 - x] });
    }
    const picks = Array.from(
      { length: 8 },
      (_, i) => suggestGp(space, obs, createRng(i), { direction: "minimize", startup: 3 }).params.X as number,
    );
    expect(picks.filter((x) => x > 0.7).length).toBeLessThanOrEqual(1);
  });

  describe("pending configurations (parallel slots): the constant liar", () => {
    const options = { direction: "minimize" as const, startup: 5 };
    const layout = unitLayout(makeDims(SPACE));
    /** Euclidean distance in the model's unit cube (log knobs in log space). */
    const unit = (p: Params) => layout.toUnit(p);
    const dist = (a: Params, b: Params) => {
      const [ua, ub] = [unit(a), unit(b)];
      return Math.hypot(...ua.map((x, i) => x - (ub[i] as number)));
    };
    /** Ten noisy evaluations of a sequential search: a model with one clear peak of EI. */
    const history = (seed: number): GpObservation[] => {
      const noise = createRng(mixSeed(seed, 99));
      const obs: GpObservation[] = [];
      for (let i = 0; i < 10; i++) {
        const s = suggestGp(SPACE, obs, createRng(mixSeed(seed, i)), options);
        obs.push({ params: s.params, values: [logQuadratic(s.params) + 0.1 * noise.normal()] });
      }
      return obs;
    };
    const asPending = (ps: Params[]) => ps.map((params) => ({ params, pending: true }));

    it("moves the next proposal away from pending ones, at an unchanged bar", () => {
      for (let seed = 1; seed <= 8; seed++) {
        const obs = history(seed);
        // Three proposals made without knowing of each other land on the same peak.
        const pending = [50, 51, 52].map(
          (k) => suggestGp(SPACE, obs, createRng(mixSeed(seed, k)), options).params,
        );
        const without = suggestGp(SPACE, obs, createRng(mixSeed(seed, 53)), options);
        const withLies = suggestGp(
          SPACE,
          [...obs, ...asPending(pending)],
          createRng(mixSeed(seed, 53)),
          options,
        );
        const nearest = (p: Params) => Math.min(...pending.map((q) => dist(p, q)));
        // Measured: 3.9–125 times farther (0.05–0.95 of the cube's side against 0.003–0.02).
        expect(nearest(withLies.params)).toBeGreaterThan(2 * nearest(without.params));
        expect(nearest(withLies.params)).toBeGreaterThan(0.04);
        // The lie is the incumbent of the real data: fantasies neither move the bar nor enter the fit.
        expect(withLies.pending).toBe(3);
        expect(withLies.model?.bestPredicted).toBe(without.model?.bestPredicted);
        expect(withLies.model?.noiseSigma).toBe(without.model?.noiseSigma);
      }
    });

    it("spreads a batch of four proposed while the others are pending", () => {
      const spread = (seed: number, lies: boolean) => {
        const obs = history(seed);
        const batch: Params[] = [];
        for (let k = 0; k < 4; k++) {
          const others = lies ? asPending(batch) : [];
          batch.push(suggestGp(SPACE, [...obs, ...others], createRng(mixSeed(seed, 50, k)), options).params);
        }
        return Math.min(...batch.flatMap((a, i) => batch.slice(0, i).map((b) => dist(a, b))));
      };
      const seeds = [1, 2, 3, 4, 5, 6, 7, 8];
      const withLies = mean(seeds.map((s) => spread(s, true)));
      const blind = mean(seeds.map((s) => spread(s, false)));
      // Measured: closest pair 0.11 apart on average, against 0.007 for proposals blind to each other.
      expect(withLies).toBeGreaterThan(10 * blind);
      expect(withLies).toBeGreaterThan(0.05);
    });

    it("is deterministic, and never proposes a pending configuration while another exists", () => {
      const obs = [...history(3), ...asPending([{ LR: 3e-3, HIDDEN: 96, DROPOUT: 0.1 }])];
      const a = suggestGp(SPACE, obs, createRng(4), options);
      expect(suggestGp(SPACE, obs, createRng(4), options)).toEqual(a);

      const space: Record<string, Knob> = { N: { low: 1, high: 8, log: false, int: true } };
      const current = { N: 3 };
      const measured = [3, 7].map((n) => ({ params: { N: n }, values: [Math.abs(n - 5)] }));
      const small = [...measured, ...asPending([1, 2, 4, 5, 6].map((n) => ({ N: n })))];
      for (let seed = 0; seed < 10; seed++) {
        const s = suggestGp(space, small, createRng(seed), { ...options, startup: 2, current });
        expect(s).toMatchObject({ params: { N: 8 }, repeat: false, pending: 5 });
      }
      // Nothing new left: an evaluated configuration is repeated, not a pending one.
      const full = [...small, { params: { N: 8 }, values: [3] }];
      for (let seed = 0; seed < 10; seed++) {
        const s = suggestGp(space, full, createRng(seed), { ...options, startup: 2, current });
        expect(s.repeat).toBe(true);
        expect([7, 8]).toContain(s.params.N);
      }
    });

    it("leaves pending configurations out of the posterior best, neither failed nor measured", () => {
      const space: Record<string, Knob> = { X: { low: 0, high: 1, log: false, int: false } };
      const obs: GpObservation[] = [0.1, 0.3, 0.5, 0.7, 0.9].map((x) => ({
        params: { X: x },
        values: [(x - 0.5) ** 2],
      }));
      const pick = posteriorBest(space, obs, "minimize");
      expect(posteriorBest(space, [...obs, { params: { X: 0.45 }, pending: true }], "minimize")).toEqual(
        pick,
      );
    });
  });

  it("names the configuration with the best posterior, not the luckiest single draw", () => {
    const space: Record<string, Knob> = { X: { low: 0, high: 1, log: false, int: false } };
    const f = (x: number) => (x - 0.5) ** 2;
    const rng = createRng(5);
    const obs: GpObservation[] = [];
    for (let i = 0; i <= 20; i++) {
      const x = i / 20;
      obs.push({ params: { X: x }, values: [f(x) + 0.02 * rng.normal()] });
    }
    // A far-off configuration with one very lucky draw.
    obs.push({ params: { X: 0.975 }, values: [-0.2] });
    const pick = posteriorBest(space, obs, "minimize");
    const x = (obs[pick?.index ?? 0] as GpObservation).params.X as number;
    expect(Math.abs(x - 0.5)).toBeLessThanOrEqual(0.15);
    expect(pick?.predicted).toBeGreaterThan(-0.05);
  });

  it("measures the trial noise from repeats", () => {
    const space: Record<string, Knob> = { X: { low: 0, high: 1, log: false, int: false } };
    const rng = createRng(11);
    const obs: GpObservation[] = Array.from({ length: 12 }, (_, i) => {
      const x = i / 11;
      return {
        params: { X: x },
        values: Array.from({ length: 4 }, () => Math.sin(3 * x) + 0.1 * rng.normal()),
      };
    });
    const s = suggestGp(space, obs, createRng(1), { direction: "minimize", startup: 3 });
    expect(s.model?.noiseSigma).toBeGreaterThan(0.06);
    expect(s.model?.noiseSigma).toBeLessThan(0.15);
  });

  it("copes with a constant metric and with one measured configuration", () => {
    const obs: GpObservation[] = Array.from({ length: 8 }, (_, i) => ({
      params: { LR: 10 ** -(i % 5) / 2, HIDDEN: 16 + i, DROPOUT: 0.1 },
      values: [0.5, 0.5],
    }));
    const s = suggestGp(SPACE, obs, createRng(2), { direction: "minimize", startup: 5 });
    expect(Number.isFinite(s.params.LR)).toBe(true);
    const one = suggestGp(SPACE, [{ params: obs[0]?.params as Params, values: [1] }], createRng(2), {
      direction: "minimize",
      startup: 1,
    });
    // One measured configuration is no model: a random proposal, said as exploration.
    expect(one.mode).toBe("startup");
    expect(one.params).not.toEqual(obs[0]?.params);
  });

  it("fails clearly when there is nothing to change", () => {
    const space: Record<string, Knob> = { X: { low: 2, high: 2, log: false, int: true } };
    expect(() =>
      suggestGp(space, [], createRng(1), { direction: "minimize", startup: 1, current: { X: 2 } }),
    ).toThrowError(AutolabError);
  });

  it("proposes with 300 observations and 6 knobs (the model keeps the best and the newest 200)", () => {
    const space: Record<string, Knob> = Object.fromEntries(
      Array.from({ length: 6 }, (_, i) => [`K${i}`, { low: 0, high: 1, log: false, int: false }]),
    );
    const rng = createRng(4);
    const obs: GpObservation[] = Array.from({ length: 300 }, () => {
      const params = Object.fromEntries(Object.keys(space).map((k) => [k, rng.next()]));
      return { params, values: [Object.values(params).reduce((a, v) => a + (v - 0.3) ** 2, 0)] };
    });
    const s = suggestGp(space, obs, createRng(9), { direction: "minimize", startup: 5 });
    expect(s.mode).toBe("gp");
    expect(s.observed).toBe(300);
  });
});

describe("nelderMead", () => {
  it("minimises the Rosenbrock function", () => {
    const r = nelderMead(
      (x) => 100 * ((x[1] as number) - (x[0] as number) ** 2) ** 2 + (1 - (x[0] as number)) ** 2,
      [-1, 1],
      0.5,
      2000,
    );
    expect(r.f).toBeLessThan(1e-4);
  });
});

describe("builtin agent arguments", () => {
  it("takes --sampler and rejects anything else with the fix", () => {
    expect(builtinOptionsFromArgs([])).toEqual({});
    expect(builtinOptionsFromArgs(["--sampler=tpe"])).toEqual({ sampler: "tpe" });
    expect(builtinOptionsFromArgs(["--sampler", "gp"])).toEqual({ sampler: "gp" });
    expect(() => builtinOptionsFromArgs(["--sampler=cmaes"])).toThrowError(/not a sampler/);
    expect(() => builtinOptionsFromArgs(["--fast"])).toThrowError(/unknown argument/);
    expect(() => builtinOptionsFromArgs(["--sampler"])).toThrowError(/needs a value/);
  });
});
