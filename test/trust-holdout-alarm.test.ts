import { describe, expect, it } from "vitest";
import {
  checkHoldout,
  type HoldoutAlarmInput,
  holdoutNoise,
  type KeptPoint,
} from "../src/trust/holdout-alarm.ts";

const base = (kept: KeptPoint[], holdoutSigma: number | undefined = 0.01): HoldoutAlarmInput => ({
  kept,
  objective: { name: "val_bpb", direction: "minimize" },
  holdout: { name: "test_bpb" },
  holdoutSigma,
});

describe("checkHoldout", () => {
  it("raises the alarm when the objective keeps improving while the holdout worsens beyond noise", () => {
    const r = checkHoldout(
      base([
        { n: 0, objective: 3.0, holdout: 3.1 },
        { n: 4, objective: 2.9, holdout: 3.0 },
        { n: 7, objective: 2.8, holdout: 3.04 },
        { n: 9, objective: 2.7, holdout: 3.08 },
      ]),
    );
    expect(r.alarm).toBe(true);
    expect(r.reason).toMatch(
      /^overfitting: val_bpb improved over 2 kept changes since #4 \(2\.9 → 2\.7\) while holdout test_bpb moved 3 → 3\.08 from its best at #4 \(5\.7σ worse\)/,
    );
  });

  it("stays quiet when the holdout moves within noise, or improves with the objective", () => {
    const within = checkHoldout(
      base([
        { n: 0, objective: 3.0, holdout: 3.1 },
        { n: 1, objective: 2.9, holdout: 3.0 },
        { n: 2, objective: 2.8, holdout: 3.01 },
        { n: 3, objective: 2.7, holdout: 3.02 },
      ]),
    );
    expect(within.alarm).toBe(false);
    expect(within.reason).toMatch(/within noise/);
    const together = checkHoldout(
      base([
        { n: 0, objective: 3.0, holdout: 3.1 },
        { n: 1, objective: 2.9, holdout: 3.0 },
        { n: 2, objective: 2.8, holdout: 2.9 },
      ]),
    );
    expect(together).toEqual({ alarm: false, reason: "holdout test_bpb is at its best (2.9, #2)" });
  });

  it("needs minKeeps kept changes after the holdout's best", () => {
    const kept = [
      { n: 0, objective: 3.0, holdout: 3.0 },
      { n: 1, objective: 2.9, holdout: 3.2 },
    ];
    const r = checkHoldout(base(kept));
    expect(r.alarm).toBe(false);
    expect(r.reason).toMatch(/only 1 kept change since \(alarm after 2\)/);
    expect(checkHoldout(base(kept), { minKeeps: 1 }).alarm).toBe(true);
  });

  it("uses the standard error of means when trial counts are given", () => {
    const kept = [
      { n: 0, objective: 3.0, holdout: 3.0, trials: 1 },
      { n: 1, objective: 2.9, holdout: 3.01, trials: 1 },
      { n: 2, objective: 2.8, holdout: 3.025, trials: 1 },
    ];
    expect(checkHoldout(base(kept, 0.01)).alarm).toBe(false); // 0.025 / (0.01·√2) = 1.8σ
    const many = kept.map((k) => ({ ...k, trials: 4 }));
    expect(checkHoldout(base(many, 0.01)).alarm).toBe(true); // 0.025 / (0.01·√0.5) = 3.5σ
  });

  it("respects a holdout direction different from the objective's", () => {
    const r = checkHoldout({
      kept: [
        { n: 0, objective: 3.0, holdout: 0.8 },
        { n: 1, objective: 2.9, holdout: 0.7 },
        { n: 2, objective: 2.8, holdout: 0.6 },
      ],
      objective: { name: "loss", direction: "minimize" },
      holdout: { name: "test_acc", direction: "maximize" },
      holdoutSigma: 0.01,
    });
    expect(r.alarm).toBe(true);
  });

  it("explains missing holdout values and a missing noise estimate instead of guessing", () => {
    const noNoise = checkHoldout({
      ...base([
        { n: 0, objective: 3.0, holdout: 3.0 },
        { n: 1, objective: 2.9 },
        { n: 2, objective: 2.8, holdout: 3.5 },
        { n: 3, objective: 2.7, holdout: 3.6 },
      ]),
      holdoutSigma: undefined,
    });
    expect(noNoise.alarm).toBe(false);
    expect(noNoise.reason).toMatch(/no noise estimate .*\(1 kept experiment without a test_bpb value\)$/);
    expect(checkHoldout(base([{ n: 0, objective: 3, holdout: 3 }])).reason).toMatch(/fewer than two/);
  });
});

describe("holdoutNoise", () => {
  it("pools repeated holdout values", () => {
    expect(holdoutNoise([1, 3], [5, 7])).toBeCloseTo(Math.SQRT2, 12);
    expect(holdoutNoise([1])).toBeNaN();
  });
});
