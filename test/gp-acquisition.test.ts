/**
 * The GP's acquisitions (issue #17's sampler step): expected improvement, the lower confidence
 * bound, Thompson sampling, a portfolio taken in turn, and the EI → Thompson escape from a
 * measured-out basin. docs/optimizer.md has the measurements.
 */
import { describe, expect, it } from "vitest";
import { fromUnit, wells6 } from "../bench/_functions.ts";
import { builtinOptionsFromArgs } from "../src/agents/builtin/builtin-agent.ts";
import {
  type Acquisition,
  acquisitionAt,
  type GpObservation,
  type GpOptions,
  posteriorBest,
  suggestGp,
} from "../src/agents/builtin/gp.ts";
import { createRng, mixSeed } from "../src/agents/builtin/rng.ts";
import type { Knob } from "../src/core/types.ts";
import { logQuadratic, SPACE } from "./helpers/log-quadratic.ts";

const X: Record<string, Knob> = { X: { low: 0, high: 1, log: false, int: false } };

/**
 * A 1-D history with a measured basin around 0.3 (ten trials, floor 0) and three far points
 * whose values leave room for something better between 0.6 and 1: the posterior gives both
 * regions a real chance.
 */
function twoRegions(): GpObservation[] {
  const noise = createRng(5);
  const pts: [number, number][] = [
    [0, 1],
    [0.6, 0.45],
    [1, 0.3],
  ];
  for (let i = 0; i < 10; i++) {
    const x = 0.3 + 0.05 * noise.normal();
    pts.push([x, 20 * (x - 0.3) ** 2]);
  }
  return pts.map(([x, y]) => ({ params: { X: x }, values: [y + 0.05 * noise.normal()] }));
}

const propose = (obs: GpObservation[], seed: number, o: Partial<GpOptions> = {}) =>
  suggestGp(X, obs, createRng(mixSeed(7, seed)), { direction: "minimize", startup: 5, ...o });

/** A sequential noisy search on the 3-knob log-quadratic; the proposals and their acquisitions. */
function run(seed: number, o: Partial<GpOptions>, budget = 14) {
  const noise = createRng(mixSeed(seed, 99));
  const obs: GpObservation[] = [];
  const used: (Acquisition | undefined)[] = [];
  for (let i = 0; i < budget; i++) {
    const s = suggestGp(SPACE, obs, createRng(mixSeed(seed, i)), { direction: "minimize", startup: 5, ...o });
    used.push(s.model?.acquisition);
    obs.push({ params: s.params, values: [logQuadratic(s.params) + 0.1 * noise.normal()] });
  }
  return { params: obs.map((x) => x.params), used };
}

describe("GP acquisitions", () => {
  it("takes a portfolio's entries in turn, counted from the end of the startup", () => {
    expect(acquisitionAt(undefined, 3)).toBe("ei");
    expect(acquisitionAt("thompson", 3)).toBe("thompson");
    const cycle = ["ei", "thompson", "ucb"] as const;
    expect([0, 1, 2, 3, 4, 5].map((k) => acquisitionAt(cycle, k))).toEqual([...cycle, ...cycle]);
    // In a search: startup 5 (random, no model), then EI, Thompson, UCB, EI, ...
    const { used } = run(3, { acquisition: cycle, escape: false }, 11);
    expect(used).toEqual([undefined, undefined, undefined, undefined, undefined, ...cycle, ...cycle]);
  });

  it("is deterministic for a seed, whichever the acquisition", () => {
    for (const o of [
      { acquisition: "thompson" as const },
      { acquisition: "ucb" as const },
      { acquisition: ["ei", "thompson"] as Acquisition[] },
      { escape: { below: 1, to: "thompson" as const } },
    ]) {
      expect(run(4, o)).toEqual(run(4, o));
    }
  });

  it("Thompson sampling picks between the measured basin and the open region at random; EI always the same", () => {
    const obs = twoRegions();
    const ei = Array.from({ length: 20 }, (_, s) => propose(obs, s, { escape: false }).params.X as number);
    const ts = Array.from(
      { length: 20 },
      (_, s) => propose(obs, s, { acquisition: "thompson" }).params.X as number,
    );
    // EI is a deterministic function of the model: the same point whatever the seed.
    expect(new Set(ei).size).toBe(1);
    const far = ts.filter((x) => x > 0.5).length;
    expect(far).toBeGreaterThanOrEqual(2);
    expect(20 - far).toBeGreaterThanOrEqual(2);
    // Each draw's best is a new configuration.
    const tried = new Set(obs.map((o) => o.params.X));
    for (const x of ts) expect(tried.has(x)).toBe(false);
  });

  it("UCB goes where the model knows least: farther from every measured point than EI on average", () => {
    const obs = twoRegions();
    const gap = (x: number) => Math.min(...obs.map((o) => Math.abs((o.params.X as number) - x)));
    const mean = (a: Acquisition) =>
      Array.from({ length: 5 }, (_, s) =>
        gap(propose(obs, s, { acquisition: a, escape: false }).params.X as number),
      ).reduce((p, q) => p + q, 0) / 5;
    expect(mean("ucb")).toBeGreaterThanOrEqual(mean("ei"));
  });

  it("escapes to a Thompson draw only when the best EI is below the bar, and says so", () => {
    const obs = twoRegions();
    const never = propose(obs, 1, { escape: { below: 0, to: "thompson" } });
    expect(never).toEqual(propose(obs, 1, { escape: false }));
    expect(never.model?.acquisition).toBe("ei");
    const always = Array.from({ length: 20 }, (_, s) =>
      propose(obs, s, { escape: { below: 1e6, to: "thompson" } }),
    );
    for (const s of always) expect(s.model?.acquisition).toBe("thompson");
    // Now a draw: proposals differ with the seed, as Thompson's do.
    expect(new Set(always.map((s) => s.params.X)).size).toBeGreaterThan(1);
  });

  it("leaves a measured-out basin that plain EI stays in (a two-basin function, 16 seeds)", () => {
    // A broad basin at (0.3, 0.3), floor −1; a narrower, deeper one at (0.8, 0.8), floor −1.5.
    const space: Record<string, Knob> = {
      X: { low: 0, high: 1, log: false, int: false },
      Y: { low: 0, high: 1, log: false, int: false },
    };
    const f = (x: number, y: number) =>
      -Math.exp(-((x - 0.3) ** 2 + (y - 0.3) ** 2) / (2 * 0.18 ** 2)) -
      1.5 * Math.exp(-((x - 0.8) ** 2 + (y - 0.8) ** 2) / (2 * 0.1 ** 2));
    /** Whether the configuration named best (posterior) lies in the deeper basin; Thompson turns taken. */
    const deeper = (seed: number, o: Partial<GpOptions>) => {
      const noise = createRng(mixSeed(seed, 99));
      const obs: GpObservation[] = [];
      let drawn = 0;
      for (let i = 0; i < 30; i++) {
        const s = suggestGp(space, obs, createRng(mixSeed(seed, i)), {
          direction: "minimize",
          startup: 5,
          ...o,
        });
        if (s.model?.acquisition === "thompson") drawn++;
        const [x, y] = [s.params.X as number, s.params.Y as number];
        obs.push({ params: s.params, values: [f(x, y) + 0.1 * noise.normal()] });
      }
      const best = (obs[posteriorBest(space, obs, "minimize")?.index ?? 0] as GpObservation).params;
      return { found: Math.hypot((best.X as number) - 0.8, (best.Y as number) - 0.8) < 0.15, drawn };
    };
    const seeds = Array.from({ length: 16 }, (_, s) => s);
    const plain = seeds.map((s) => deeper(s, { escape: false }));
    const escaping = seeds.map((s) => deeper(s, {})); // the default
    expect(plain.every((r) => r.drawn === 0)).toBe(true);
    expect(escaping.every((r) => r.drawn > 0)).toBe(true);
    const found = (rs: { found: boolean }[]) => rs.filter((r) => r.found).length;
    expect(found(escaping)).toBeGreaterThan(found(plain));
    // At least one run where EI stayed in the broad basin and the escape left it.
    expect(
      seeds.some((s) => !(plain[s] as { found: boolean }).found && (escaping[s] as { found: boolean }).found),
    ).toBe(true);
  });

  it("never proposes a configuration twice with Thompson or UCB", () => {
    for (const acquisition of ["thompson", "ucb"] as const) {
      const { params } = run(9, { acquisition }, 24);
      const keys = params.map((p) => JSON.stringify(p));
      expect(new Set(keys).size).toBe(keys.length);
    }
  });
});

describe("builtin agent --acquisition and --escape", () => {
  it("takes one acquisition or a comma-separated portfolio, for the GP only, and names the fix otherwise", () => {
    expect(builtinOptionsFromArgs(["--acquisition=thompson"])).toEqual({ acquisition: ["thompson"] });
    expect(builtinOptionsFromArgs(["--acquisition", "ei,thompson,ucb", "--sampler=gp"])).toEqual({
      acquisition: ["ei", "thompson", "ucb"],
      sampler: "gp",
    });
    expect(() => builtinOptionsFromArgs(["--acquisition=pi"])).toThrowError(/"pi" is not an acquisition/);
    expect(() => builtinOptionsFromArgs(["--acquisition=ei,"])).toThrowError(/not an acquisition/);
    expect(() => builtinOptionsFromArgs(["--acquisition"])).toThrowError(/needs a value/);
    expect(() => builtinOptionsFromArgs(["--sampler=tpe", "--acquisition=ucb"])).toThrowError(
      /applies to the GP sampler/,
    );
    expect(builtinOptionsFromArgs(["--escape=off"])).toEqual({ escape: false });
    expect(builtinOptionsFromArgs(["--escape", "0.5"])).toEqual({ escape: { below: 0.5, to: "thompson" } });
    for (const bad of ["--escape=-1", "--escape=lots", "--escape="]) {
      expect(() => builtinOptionsFromArgs([bad])).toThrowError(/neither off nor a number/);
    }
    expect(() => builtinOptionsFromArgs(["--escape"])).toThrowError(/needs a value/);
    expect(() => builtinOptionsFromArgs(["--escape=off", "--sampler=tpe"])).toThrowError(
      /--escape applies to the GP/,
    );
  });
});

describe("wells-6, the 6-D multi-basin tuning function", () => {
  it("has its stated minimum at the stated point, and no random point below it", () => {
    const at = [0.7581, 0.2419, 0.657, 0.376, 0.8386, 0.1727];
    expect(wells6.f(fromUnit(wells6.space, at))).toBeCloseTo(wells6.optimum, 3);
    const rng = createRng(1);
    for (let i = 0; i < 20_000; i++) {
      const u = Array.from({ length: 6 }, () => rng.next());
      expect(wells6.f(fromUnit(wells6.space, u))).toBeGreaterThan(wells6.optimum);
    }
    // The broad decoy's floor, 0.38 above the optimum (2.5σ at the σ 0.15 bench/tune.ts uses).
    expect(wells6.f(fromUnit(wells6.space, [0.3, 0.7, 0.3, 0.6, 0.25, 0.7]))).toBeGreaterThan(
      wells6.optimum + 0.3,
    );
  });
});
