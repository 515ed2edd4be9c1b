/**
 * What a failed baseline tells the user to fix (src/core/startup.ts): a command that ran and
 * failed is the program's to fix; a trial that never started (a corrupted bundle on a fleet
 * worker, no sandbox on this machine) is not, and must not be called "the program" (issue #35).
 */
import { describe, expect, it } from "vitest";
import type { ExperimentRecord } from "../src/core/ledger.ts";
import { assertBaselineOk } from "../src/core/startup.ts";
import { notRunResult } from "../src/core/trial-values.ts";
import type { TrialResult } from "../src/core/types.ts";
import { parseProgram } from "../src/program/index.ts";

const program = parseProgram(
  "---\nname: t\nobjective: { metric: score, direction: minimize }\nrun:\n  command: node train.mjs\n  budget: 5s\nfiles:\n  editable: [train.mjs]\n---\n",
  "/p/program.md",
);

function failedBaseline(result: TrialResult): ExperimentRecord {
  return {
    n: 0,
    decision: { action: "crash", reason: `${result.status}: ${result.reason}` },
    trials: [{ result }],
  } as unknown as ExperimentRecord;
}

function thrown(f: () => void): { message: string; hint?: string } {
  try {
    f();
  } catch (err) {
    return err as { message: string; hint?: string };
  }
  throw new Error("did not throw");
}

describe("a failed baseline's advice", () => {
  it("a bundle a worker found corrupted is named as corrupted; the program is not blamed", () => {
    const result = notRunResult(
      { seed: 0, command: "node train.mjs" },
      "crash",
      `bundle ${"a".repeat(64)} is corrupted: its content hashes to ${"b".repeat(64)}; the trial was not run (on worker w1)`,
    );
    const err = thrown(() => assertBaselineOk(program, [failedBaseline(result)]));
    expect(err.message).toContain("is corrupted");
    expect(err.message).toContain("never started");
    expect(err.hint).not.toMatch(/fix the program/i);
    expect(err.hint).toMatch(/nothing in the program/i);
  });

  it("a command that ran and failed is still the program's to fix", () => {
    const result: TrialResult = {
      ...notRunResult({ seed: 0, command: "node train.mjs" }, "crash", "exit code 1"),
      exitCode: 1,
      wallS: 0.2,
    };
    const err = thrown(() => assertBaselineOk(program, [failedBaseline(result)]));
    expect(err.hint).toMatch(/Fix the program/);
  });
});
