/**
 * One evidence grade per experiment (issue #36), from what the notebook holds: trials and
 * their seeds, holdout metrics, tamper alarms, holdout alarms, and finalize --verify's verdicts.
 */
import { expect, it } from "vitest";
import { evidenceLabel, evidenceOf } from "../src/core/evidence.ts";
import type { ExperimentRecord, NoteRecord } from "../src/core/ledger.ts";

function exp(
  n: number,
  action: "keep" | "discard",
  trials: { seed: number; metrics?: Record<string, number>; self?: boolean }[],
): ExperimentRecord {
  return {
    id: n + 100,
    runId: 1,
    n,
    agent: "builtin",
    parentCommit: "p".repeat(40),
    commit: "c".repeat(40),
    ref: `refs/autolab/t/${n}`,
    hypothesis: `change ${n}`,
    diff: { files: 1, insertions: 1, deletions: 0 },
    createdAt: "2026-11-28T00:00:00.000Z",
    decision: { action, reason: "", mechanismConfirmed: null, decidedAt: "2026-11-28T00:01:00.000Z" },
    trials: trials.map((t, i) => ({
      id: i + 1,
      attempt: i + 1,
      seed: t.seed,
      command: "x",
      commit: "c",
      budgetMs: 1000,
      env: {},
      startedAt: "2026-11-28T00:00:00.000Z",
      result: {
        status: "ok",
        exitCode: 0,
        signal: null,
        wallS: 1,
        cpuS: 1,
        peakRssMb: 1,
        metrics: { score: 1, ...(t.metrics ?? {}) },
        logTail: "",
        finishedAt: "2026-11-28T00:00:30.000Z",
        ...(t.self ? { selfReported: true } : {}),
      },
    })),
  } as unknown as ExperimentRecord;
}

const none = { holdout: ["test_score"], notes: [] as NoteRecord[], alarms: [] };
const note = (e: ExperimentRecord, text: string): NoteRecord => ({
  experimentId: e.id,
  text,
  createdAt: "x",
});

it("grades by what was measured: unmeasured, exploratory, repeated, holdout-checked", () => {
  expect(evidenceOf(exp(1, "discard", []), none).grade).toBe("unmeasured");
  expect(evidenceOf(exp(1, "discard", [{ seed: 7 }]), none)).toMatchObject({
    grade: "exploratory",
    why: "1 trial on 1 seed",
  });
  // Two trials on one seed are one measurement repeated, not two seeds.
  expect(evidenceOf(exp(1, "discard", [{ seed: 7 }, { seed: 7 }]), none).grade).toBe("exploratory");
  expect(evidenceOf(exp(1, "discard", [{ seed: 7 }, { seed: 9 }]), none).grade).toBe("repeated");
  const kept = exp(2, "keep", [{ seed: 7, metrics: { test_score: 2 } }]);
  expect(evidenceOf(kept, none)).toMatchObject({
    grade: "holdout-checked",
    why: "1 trial on 1 seed; holdout measured",
  });
});

it("verification and alarms: verified-alone, or invalidated", () => {
  const kept = exp(3, "keep", [{ seed: 1 }, { seed: 2 }]);
  const held = {
    ...none,
    notes: [
      note(kept, "finalize --verify: #3 alone on b: gain 0.1 ± 0.01 over base, 3 trials each — holds alone"),
    ],
  };
  expect(evidenceOf(kept, held).grade).toBe("verified-alone");
  const failed = { ...none, notes: [note(kept, "finalize --verify: #3 alone on b: gain 0 — NO GAIN ALONE")] };
  expect(evidenceOf(kept, failed).grade).toBe("invalidated");
  const tampered = { ...none, notes: [note(kept, "ALARM tamper:evaluate.py: rewritten during the trial")] };
  expect(evidenceOf(kept, tampered).grade).toBe("invalidated");
  const alarm = {
    ...none,
    alarms: [{ kind: "overfitting:test_score", reason: "overfitting: … since #2 …" }],
  };
  expect(evidenceOf(kept, alarm).grade).toBe("invalidated");
  expect(evidenceOf(exp(1, "keep", [{ seed: 1 }]), alarm).grade).not.toBe("invalidated");
});

it("a self-reported value says so next to its grade", () => {
  const ev = evidenceOf(
    exp(1, "discard", [
      { seed: 1, self: true },
      { seed: 2, self: true },
    ]),
    none,
  );
  expect(evidenceLabel(ev)).toBe("repeated (self-reported)");
});
