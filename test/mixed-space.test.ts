/**
 * The built-in samplers on a mixed space: a categorical knob, a numeric knob that only one of
 * its choices uses (conditional), and log/int numeric knobs.
 */
import { describe, expect, it } from "vitest";
import { type GpObservation, posteriorBest, suggestGp } from "../src/agents/builtin/gp.ts";
import { createRng, mixSeed } from "../src/agents/builtin/rng.ts";
import { keyOf, makeDims, randomParams, unitLayout } from "../src/agents/builtin/space.ts";
import { suggestTpe, type TpeObservation } from "../src/agents/builtin/tpe.ts";
import type { Knob, Params } from "../src/core/types.ts";

const SPACE: Record<string, Knob> = {
  OPTIMIZER: { choices: ["adam", "sgd", "lion", "rmsprop", "adagrad"] },
  MOMENTUM: { low: 0.5, high: 0.99, log: false, int: false, when: { OPTIMIZER: ["sgd"] } },
  LR: { low: 1e-4, high: 1, log: true, int: false },
  BATCH: { low: 8, high: 512, log: true, int: true },
};

/** sgd is best, but only with its momentum near 0.9; minimum 0 at sgd, 0.9, LR 0.01, BATCH 64. */
const BASE: Record<string, number> = { adam: 0.3, sgd: 0, lion: 0.5, rmsprop: 0.4, adagrad: 0.6 };
function loss(p: Params): number {
  const opt = p.OPTIMIZER as string;
  const momentum = opt === "sgd" ? 4 * ((p.MOMENTUM as number) - 0.9) ** 2 : 0;
  return (
    (BASE[opt] as number) +
    momentum +
    0.5 * (Math.log10(p.LR as number) + 2) ** 2 +
    (Math.log2(p.BATCH as number) - 6) ** 2 / 16
  );
}

type Sampler = "gp" | "tpe" | "random";

/** A sequential noisy search; the configuration it would name and what it proposed. */
function search(sampler: Sampler, seed: number, budget: number, sigma = 0.05) {
  const noise = createRng(mixSeed(seed, 99));
  const obs: (GpObservation & TpeObservation)[] = [];
  const proposed: Params[] = [];
  for (let i = 0; i < budget; i++) {
    const rng = createRng(mixSeed(seed, i));
    const options = { direction: "minimize" as const, startup: 5 };
    const s =
      sampler === "gp"
        ? suggestGp(SPACE, obs, rng, options)
        : suggestTpe(SPACE, obs, rng, sampler === "tpe" ? options : { ...options, startup: Infinity });
    const v = loss(s.params) + sigma * noise.normal();
    obs.push({ params: s.params, value: v, values: [v] });
    proposed.push(s.params);
  }
  // The GP names its posterior best; the others their best observed value.
  const best =
    sampler === "gp"
      ? (obs[posteriorBest(SPACE, obs, "minimize")?.index ?? 0] as GpObservation)
      : obs.reduce((a, b) => ((b.value as number) < (a.value as number) ? b : a));
  const afterStartup = proposed.slice(5);
  return {
    proposed,
    named: best.params,
    trueBest: loss(best.params),
    sgdShare: afterStartup.filter((p) => p.OPTIMIZER === "sgd").length / afterStartup.length,
  };
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

describe("a mixed space: categorical, conditional, log and int knobs", () => {
  const dims = makeDims(SPACE);

  it("a configuration's identity and the GP's coordinates ignore an inactive knob", () => {
    const a = { OPTIMIZER: "adam", MOMENTUM: 0.6, LR: 0.01, BATCH: 64 };
    const b = { ...a, MOMENTUM: 0.95 };
    expect(keyOf(dims, a)).toBe(keyOf(dims, b));
    expect(keyOf(dims, { ...a, OPTIMIZER: "sgd" })).not.toBe(keyOf(dims, { ...b, OPTIMIZER: "sgd" }));
    const layout = unitLayout(dims);
    expect(layout.width).toBe(5 + 1 + 1 + 1);
    expect(layout.toUnit(a)).toEqual(layout.toUnit(b));
    // One-hot choice, the inactive momentum at its constant.
    expect(layout.toUnit(a).slice(0, 6)).toEqual([1, 0, 0, 0, 0, 0.5]);
    expect(layout.fromUnit(layout.toUnit({ ...a, OPTIMIZER: "sgd", MOMENTUM: 0.9 }))).toEqual({
      OPTIMIZER: "sgd",
      MOMENTUM: 0.9,
      LR: 0.01,
      BATCH: 64,
    });
    // The condition's knob comes first, whatever program.md's order.
    expect(
      makeDims({ M: SPACE.MOMENTUM as Knob, OPTIMIZER: SPACE.OPTIMIZER as Knob }).map((d) => d.name),
    ).toEqual(["OPTIMIZER", "M"]);
  });

  it("random configurations: every choice about equally often, the conditional knob only when active", () => {
    const rng = createRng(1);
    const counts = new Map<unknown, number>();
    for (let i = 0; i < 1000; i++) {
      const p = randomParams(dims, rng);
      counts.set(p.OPTIMIZER, (counts.get(p.OPTIMIZER) ?? 0) + 1);
      expect("MOMENTUM" in p).toBe(p.OPTIMIZER === "sgd");
      expect(Number.isInteger(p.BATCH)).toBe(true);
    }
    expect([...counts.keys()].sort()).toEqual(["adagrad", "adam", "lion", "rmsprop", "sgd"]);
    for (const n of counts.values()) expect(n).toBeGreaterThan(150);
  });

  it("GP and TPE sample the best category more and end better than random search (10 seeds, 30 evaluations)", () => {
    const seeds = Array.from({ length: 10 }, (_, i) => i);
    const runs = (s: Sampler) => seeds.map((seed) => search(s, seed, 30));
    const [gp, tpe, random] = [runs("gp"), runs("tpe"), runs("random")];
    const regret = (rs: ReturnType<typeof search>[]) => mean(rs.map((r) => r.trueBest));
    const share = (rs: ReturnType<typeof search>[]) => mean(rs.map((r) => r.sgdShare));
    // Measured on 20 other seeds (1000–1019): regret GP 0.056, TPE 0.148, random 0.268; share of
    // sgd after startup GP 0.46, TPE 0.59, random 0.20 (one choice in five).
    expect(share(random)).toBeLessThan(0.3);
    expect(share(gp)).toBeGreaterThan(0.35);
    expect(share(tpe)).toBeGreaterThan(0.35);
    expect(regret(gp)).toBeLessThan(0.6 * regret(random));
    expect(regret(tpe)).toBeLessThan(0.8 * regret(random));
    // The GP names a configuration of the best category in most runs (18 of the 20 other seeds;
    // TPE's and random search's best draws were sgd in 15 and 17 of them: no claim for those).
    expect(gp.filter((r) => r.named.OPTIMIZER === "sgd").length).toBeGreaterThanOrEqual(7);
  });

  it("never proposes a configuration twice, and never one with an inactive knob set", () => {
    for (const sampler of ["gp", "tpe"] as const) {
      const { proposed } = search(sampler, 7, 30);
      const keys = proposed.map((p) => keyOf(dims, p));
      expect(new Set(keys).size, sampler).toBe(keys.length);
      for (const p of proposed) expect("MOMENTUM" in p, sampler).toBe(p.OPTIMIZER === "sgd");
    }
  });

  it("tries every configuration of a small space before re-measuring one, and never the current one", () => {
    const small: Record<string, Knob> = {
      A: { choices: ["x", "y"] },
      B: { choices: [true, false], when: { A: ["y"] } },
      C: { choices: [1, 2] },
    };
    // Six configurations: (x,1) (x,2) (y,true,1) (y,true,2) (y,false,1) (y,false,2); B is
    // inactive under x, so the current (x, B=false, 1) is (x, 1).
    const current = { A: "x", B: false, C: 1 };
    for (const sampler of ["gp", "tpe"] as const) {
      const obs: (GpObservation & TpeObservation)[] = [{ params: current, value: 1, values: [1] }];
      const seen = new Set([keyOf(makeDims(small), current)]);
      for (let i = 0; i < 5; i++) {
        const rng = createRng(mixSeed(3, i));
        const options = { direction: "minimize" as const, startup: 3, current };
        const s =
          sampler === "gp" ? suggestGp(small, obs, rng, options) : suggestTpe(small, obs, rng, options);
        const key = keyOf(makeDims(small), s.params);
        expect(s.repeat, `${sampler} ${i}`).toBe(false);
        expect(seen.has(key), `${sampler} ${i}`).toBe(false);
        seen.add(key);
        obs.push({ params: s.params, value: 2 + i, values: [2 + i] });
      }
      expect(seen.size).toBe(6);
      const rng = createRng(9);
      const options = { direction: "minimize" as const, startup: 3, current };
      const last =
        sampler === "gp" ? suggestGp(small, obs, rng, options) : suggestTpe(small, obs, rng, options);
      expect(last.repeat, sampler).toBe(true);
      expect(keyOf(makeDims(small), last.params)).not.toBe(keyOf(makeDims(small), current));
    }
  });
});
