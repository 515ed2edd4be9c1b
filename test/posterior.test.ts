import { describe, expect, it } from "vitest";
import { simProgram } from "../bench/_keep-loop.ts";
import { createRng } from "../src/agents/builtin/rng.ts";
import { predictedBestLine } from "../src/app/status.ts";
import type { ExperimentRecord } from "../src/core/ledger.ts";
import type { Program } from "../src/core/types.ts";
import { predictedBest } from "../src/trust/posterior.ts";

const program: Program = {
  ...simProgram("loss"),
  search: { X: { low: 0, high: 1, log: false, int: false } },
};

/** A notebook record with the fields the model reads (params, decision, full-budget trials). */
function exp(n: number, x: number | undefined, values: number[], action = "discard"): ExperimentRecord {
  return {
    n,
    commit: `c0ffee${n}`.padEnd(40, "0"),
    ...(x === undefined ? {} : { params: { X: x } }),
    decision: { action },
    trials: values.map((v, i) => ({
      budgetMs: 1000,
      seed: i,
      result: { status: "ok", metrics: { loss: v } },
    })),
  } as unknown as ExperimentRecord;
}

describe("predictedBest", () => {
  const rng = createRng(3);
  const f = (x: number) => (x - 0.4) ** 2;
  const exps = Array.from({ length: 15 }, (_, i) => exp(i, i / 14, [f(i / 14) + 0.01 * rng.normal()]));
  // A lucky single draw far from the optimum: the last one kept, but not the best bet.
  exps.push(exp(15, 0.95, [-0.05], "keep"));

  it("names the configuration a model of all of them predicts best, not the luckiest draw", () => {
    const p = predictedBest(program, exps);
    expect(p).toBeDefined();
    expect(Math.abs((exps[p?.id ?? 0]?.params?.X as number) - 0.4)).toBeLessThanOrEqual(0.1);
    expect(p?.configurations).toBe(16);
    const line = predictedBestLine({
      predictedBest: p ?? null,
      best: { id: 15, metric: -0.05, commit: "x", hypothesis: "" },
    });
    expect(line).toMatch(
      /^Predicted best: #\d+ c0ffee\d+ \(.* by a model of all 16 measured configurations\), not the last kept #15: .*git checkout/,
    );
  });

  it("fits once for the same notebook records, again when one changes", () => {
    const a = predictedBest(program, exps);
    expect(predictedBest(program, [...exps])).toBe(a);
    const more = [...exps, exp(16, 0.41, [0.001])];
    const b = predictedBest(program, more);
    expect(b).not.toBe(a);
    expect(b?.configurations).toBe(17);
  });

  it("leaves out an experiment a parallel slot is still evaluating: not a failure, no data yet", () => {
    const running = { ...exp(16, 0.4, []), decision: undefined } as unknown as ExperimentRecord;
    const crashed = exp(16, 0.4, [], "crash");
    const p = predictedBest(program, exps);
    expect(predictedBest(program, [...exps, running])).toEqual(p);
    // A crash there is the worst value: it pulls the prediction around 0.4 up.
    expect(predictedBest(program, [...exps, crashed])?.predicted).not.toBe(p?.predicted);
  });

  it("says nothing without knobs, or with too few measured configurations", () => {
    expect(predictedBest({ ...program, search: {} }, exps)).toBeUndefined();
    expect(predictedBest(program, exps.slice(0, 2))).toBeUndefined();
    // Experiments without knob values (an agent's code change) are left out.
    expect(
      predictedBest(program, [exp(0, undefined, [1]), exp(1, undefined, [2]), exp(2, 0.5, [3])]),
    ).toBeUndefined();
  });
});

describe("predictedBest over categorical and conditional knobs", () => {
  const mixed: Program = {
    ...program,
    search: {
      OPT: { choices: ["a", "b"] },
      X: { low: 0, high: 1, log: false, int: false, when: { OPT: ["b"] } },
    },
  };
  const at = (n: number, params: Record<string, unknown>, values: number[]) =>
    ({ ...exp(n, undefined, values), params }) as ExperimentRecord;

  it("places configurations by their active knobs and names the best one", () => {
    const rng = createRng(8);
    const exps: ExperimentRecord[] = [];
    // "a" is flat at 0.3; "b" is (X - 0.4)², better near 0.4. X under "a" is whatever the
    // files said (here even text): inactive, it must not matter.
    for (let i = 0; i < 6; i++)
      exps.push(at(exps.length, { OPT: "a", X: i % 2 ? "junk" : i / 5 }, [0.3 + 0.01 * rng.normal()]));
    for (let i = 0; i <= 10; i++) {
      const x = i / 10;
      exps.push(at(exps.length, { OPT: "b", X: x }, [(x - 0.4) ** 2 + 0.01 * rng.normal()]));
    }
    // A choice program.md no longer lists cannot be placed.
    exps.push(at(exps.length, { OPT: "c", X: 0.4 }, [-5]));
    const p = predictedBest(mixed, exps);
    expect(p?.configurations).toBe(17);
    const named = exps[p?.id ?? 0]?.params;
    expect(named?.OPT).toBe("b");
    expect(Math.abs((named?.X as number) - 0.4)).toBeLessThanOrEqual(0.1);
  });
});
