import { describe, expect, it } from "vitest";
import { createOrchestrator, type Orchestrator } from "../src/org/orchestrator.ts";

function draw(o: Orchestrator, n: number): string[] {
  return Array.from({ length: n }, () => o.next());
}

/** A simulation: role "good" improves 1 per 1 compute half the time, the others rarely. */
function simulate(o: Orchestrator, n: number): void {
  let state = 12345;
  const u = () => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state / 2147483648;
  };
  const p: Record<string, number> = { good: 0.5, bad: 0.05, worse: 0.02 };
  for (let i = 0; i < n; i++) {
    const role = o.next();
    o.record(role, { improvement: u() < (p[role] ?? 0) ? 1 : 0, compute: 1 });
  }
}

describe("round-robin", () => {
  it("cycles through the roles in order", () => {
    const o = createOrchestrator({ roles: ["a", "b", "c"], policy: "round-robin", seed: 1 });
    expect(draw(o, 7)).toEqual(["a", "b", "c", "a", "b", "c", "a"]);
  });

  it("follows weights, interleaved", () => {
    const o = createOrchestrator({
      roles: [{ name: "a", weight: 2 }, { name: "b" }],
      policy: "round-robin",
      floor: 0,
    });
    const seq = draw(o, 6);
    expect(seq.filter((r) => r === "a")).toHaveLength(4);
    expect(seq).toEqual(["a", "b", "a", "a", "b", "a"]);
  });

  it("ignores outcomes", () => {
    const o = createOrchestrator({ roles: ["a", "b"], policy: "round-robin" });
    o.next();
    o.record("a", { improvement: 100, compute: 1 });
    expect(draw(o, 4)).toEqual(["b", "a", "b", "a"]);
  });
});

describe("bandit", () => {
  it("shifts share toward the better role in a simulation", () => {
    const o = createOrchestrator({ roles: ["good", "bad", "worse"], policy: "bandit", seed: 3, floor: 0.05 });
    simulate(o, 600);
    const credit = o.credit();
    const good = credit.find((c) => c.role === "good");
    expect(good?.share).toBeGreaterThan(0.6);
    expect(good?.estimate).toBeGreaterThan(credit.find((c) => c.role === "bad")?.estimate ?? 1);
    for (const c of credit) expect(c.results).toBe(c.proposals);
  });

  it("values improvement per unit of compute, not per proposal", () => {
    // "cheap" improves 1 per proposal at compute 1; "dear" improves 3 at compute 10.
    const o = createOrchestrator({ roles: ["dear", "cheap"], policy: "bandit", seed: 9, floor: 0.05 });
    for (let i = 0; i < 300; i++) {
      const r = o.next();
      o.record(r, r === "cheap" ? { improvement: 1, compute: 1 } : { improvement: 3, compute: 10 });
    }
    const [dear, cheap] = o.credit();
    expect(cheap?.share).toBeGreaterThan(0.8);
    expect(cheap?.value).toBe(1);
    expect(dear?.value).toBeCloseTo(0.3);
  });

  it("keeps every role at its floor even when one role dominates", () => {
    for (const floor of [0.05, 0.1, 0.2]) {
      const o = createOrchestrator({ roles: ["good", "bad", "worse"], policy: "bandit", seed: 5, floor });
      for (let i = 0; i < 500; i++) {
        const role = o.next();
        o.record(role, { improvement: role === "good" ? 1 : 0, compute: 1 });
        const total = i + 1;
        for (const c of o.credit()) expect(c.proposals).toBeGreaterThanOrEqual(Math.floor(floor * total) - 1);
      }
    }
  });

  it("honours a role's own min_share above the floor", () => {
    const o = createOrchestrator({
      roles: [{ name: "good" }, { name: "bad", minShare: 0.3 }],
      policy: "bandit",
      seed: 2,
      floor: 0.05,
    });
    for (let i = 0; i < 400; i++) {
      const role = o.next();
      o.record(role, { improvement: role === "good" ? 1 : 0, compute: 1 });
    }
    const bad = o.credit().find((c) => c.role === "bad");
    expect(bad?.share).toBeGreaterThanOrEqual(0.3 - 1 / 400);
    expect(bad?.share).toBeLessThan(0.35);
  });

  it("tries every role before comparing, and spreads by weight while nothing has improved", () => {
    const o = createOrchestrator({ roles: ["a", "b", "c"], policy: "bandit", seed: 4, floor: 0 });
    expect(new Set(draw(o, 3))).toEqual(new Set(["a", "b", "c"]));
    for (const r of ["a", "b", "c"]) o.record(r, { improvement: 0, compute: 1 });
    const seq = draw(o, 300);
    for (const r of ["a", "b", "c"]) expect(seq.filter((x) => x === r).length).toBeGreaterThan(60);
  });

  it("is deterministic for a seed, and the seed matters", () => {
    const run = (seed: number) => {
      const o = createOrchestrator({ roles: ["good", "bad", "worse"], policy: "bandit", seed });
      const seq: string[] = [];
      let i = 0;
      for (; i < 200; i++) {
        const r = o.next();
        seq.push(r);
        o.record(r, {
          improvement: (i * 7919) % 13 === 0 ? 1 : 0.1 * (r === "good" ? 1 : 0.5),
          compute: 1 + (i % 3),
        });
      }
      return { seq, credit: o.credit() };
    };
    expect(run(42)).toEqual(run(42));
    expect(run(42).seq).not.toEqual(run(43).seq);
  });
});

describe("credit and input checks", () => {
  it("sums improvement and compute per role", () => {
    const o = createOrchestrator({ roles: ["a", "b"], policy: "round-robin" });
    o.next();
    o.next();
    o.record("a", { improvement: 0.5, compute: 2 });
    o.record("a", { improvement: 0, compute: 2 });
    o.record("b", { improvement: 0, compute: 0 });
    expect(o.credit()).toEqual([
      {
        role: "a",
        proposals: 1,
        results: 2,
        share: 0.5,
        improvement: 0.5,
        compute: 4,
        value: 0.125,
        estimate: 0.125,
      },
      { role: "b", proposals: 1, results: 1, share: 0.5, improvement: 0, compute: 0, value: 0, estimate: 0 },
    ]);
  });

  it("rejects unknown roles, bad outcomes and bad options", () => {
    const o = createOrchestrator({ roles: ["a"], policy: "bandit" });
    expect(() => o.record("z", { improvement: 1, compute: 1 })).toThrow(/unknown role "z"/);
    expect(() => o.record("a", { improvement: Number.NaN, compute: 1 })).toThrow(/finite/);
    expect(() => o.record("a", { improvement: 1, compute: -1 })).toThrow(/compute ≥ 0/);
    expect(() => createOrchestrator({ roles: [], policy: "bandit" })).toThrow(/at least one role/);
    expect(() => createOrchestrator({ roles: ["a", "a"], policy: "bandit" })).toThrow(/distinct/);
    expect(() => createOrchestrator({ roles: ["a"], policy: "bandit", discount: 0 })).toThrow(/discount/);
  });

  it("a single role always proposes", () => {
    const o = createOrchestrator({ roles: ["solo"], policy: "bandit", seed: 1 });
    expect(new Set(draw(o, 20))).toEqual(new Set(["solo"]));
  });
});
