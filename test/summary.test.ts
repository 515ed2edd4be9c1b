/**
 * `autolab summary` (issue #36): what happened overnight, from the notebook alone — the kept
 * changes with their evidence, what to review first, repeated failures, cost, next ideas.
 */
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { statusOf } from "../src/app/status.ts";
import { summaryMarkdown, summaryOf } from "../src/app/summary.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { cleanupTemp, tempDir } from "./helpers/git-project.ts";
import { buildNotebook, type FixtureExperiment } from "./helpers/notebook-fixture.ts";

afterAll(cleanupTemp);

const LAB: FixtureExperiment[] = [
  { action: "keep", metric: 3.0, usage: { costUsd: 0.5, inputTokens: 1000, outputTokens: 200 } },
  {
    action: "crash",
    hypothesis: "BATCH 4096",
    reason: "crash: exited with code 137 after 12.5 s",
    usage: { costUsd: 0.25 },
  },
  {
    action: "keep",
    metric: 2.8,
    hypothesis: "LR 3e-4 → 0.02",
    reason: "improved: margin 3.1σ ≥ 1.4σ after 6 trials",
    usage: { costUsd: 0.25 },
  },
  {
    action: "crash",
    hypothesis: "BATCH 8192",
    reason: "crash: exited with code 137 after 3.1 s",
    usage: { costUsd: 0.25 },
  },
  { action: "discard", metric: 2.9, hypothesis: "HIDDEN 64" },
  { action: "keep", metric: 2.7, hypothesis: "WARMDOWN 0.3" },
  { action: "pending", hypothesis: "dropout 0.1" },
];

function summarize(since = new Date(0)) {
  const dir = tempDir();
  buildNotebook(dir, [{ experiments: LAB }]);
  const ledger = new SqliteLedger(join(dir, ".autolab", "lab.db"));
  try {
    const run = ledger.latestRun();
    if (!run) throw new Error("no run");
    const exps = ledger.listExperiments(run.id);
    return summaryOf(run, exps, statusOf(run, exps), { since, now: new Date(Date.now() + 60_000) });
  } finally {
    ledger.close();
  }
}

it("lists the kept changes with their evidence, the repeated failures and the cost", () => {
  const s = summarize();
  expect(s.experiments).toBe(7);
  expect(s.kept.map((k) => [k.n, k.value, k.evidence])).toEqual([
    [2, 2.8, "1 trial, margin 3.1σ"],
    [5, 2.7, "1 trial"],
  ]);
  expect(s.failedRepeatedly).toEqual([
    { count: 2, reason: "crash: exited with code 137 after 12.5 s", last: 3 },
  ]);
  expect(s.cost).toMatchObject({ usd: 1.25, tokens: 1200, perKept: 0.625 });
  // Keeps on one trial are the first thing to review; a pending experiment is the next thing to do.
  expect(s.reviewFirst.filter((r) => /was kept on 1 trial/.test(r))).toHaveLength(2);
  expect(s.nextIdeas.join("\n")).toMatch(/1 experiment is still undecided: `autolab run` resumes it/);
  const md = summaryMarkdown(s);
  for (const h of [
    "## Kept",
    "## Review first",
    "## Failed repeatedly",
    "## Cost and utilization",
    "## Next ideas",
  ])
    expect(md).toContain(h);
  expect(md).toContain("- #2 val_bpb 2.8 (-6.67%) — LR 3e-4 → 0.02 [evidence: 1 trial, margin 3.1σ]");
  // The gain of a keep is over the best it replaced (#2), not over the discard before it.
  expect(md).toContain("- #5 val_bpb 2.7 (-3.57%) — WARMDOWN 0.3");
  expect(md).toContain("- 2× (last #3) crash: exited with code 137");
  expect(md).toContain("$1.25 ($0.63 per kept change)");
});

it("a window after the last experiment: nothing happened, and it says so", () => {
  const s = summarize(new Date(Date.now() + 30_000));
  expect(s.experiments).toBe(0);
  const md = summaryMarkdown(s);
  expect(md).toContain("- nothing was kept in this window");
  expect(md).toContain("no priced usage recorded");
});
