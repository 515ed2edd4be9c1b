/** viewedHooks (src/app/experiment-json.ts): what `autolab show` and the dashboard show of hook runs. */
import { describe, expect, it } from "vitest";
import { viewedHooks } from "../src/app/experiment-json.ts";
import type { HookRunRecord } from "../src/core/ledger.ts";

const hook = {
  id: 1,
  runId: 1,
  n: 2,
  phase: "after",
  command: "node plot.mjs",
  status: "failed",
  reason: "exit 1 after printing test_loss=0.42",
  exitCode: 1,
  wallS: 0.1,
  output: "test_loss: 0.42\nok",
  logDir: "/l",
  finishedAt: "2026-11-25",
} as HookRunRecord;

describe("viewedHooks", () => {
  it("redacts holdout values in output and reason unless the viewer asked for them", () => {
    const [h] = viewedHooks([hook], ["test_loss"], false);
    expect(h?.output).not.toContain("0.42");
    expect(h?.reason).not.toContain("0.42");
    expect(h?.output).toContain("ok");
    expect(viewedHooks([hook], ["test_loss"], true)).toEqual([hook]);
  });
});
