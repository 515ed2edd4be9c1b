import { describe, expect, it } from "vitest";
import { builtinOptionsFromArgs } from "../src/agents/builtin/builtin-agent.ts";
import { type GpObservation, nelderMead, posteriorBest, suggestGp } from "../src/agents/builtin/gp.ts";
import { createRng, mixSeed } from "../src/agents/builtin/rng.ts";
import type { Params } from "../src/agents/builtin/space.ts";
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
