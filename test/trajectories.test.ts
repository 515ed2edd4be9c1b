/**
 * The trajectory records' arithmetic and pairing without a run (src/app/trajectories.ts): the
 * reward in σ of the run's noise model for both directions, a deterministic objective, the
 * failed-proposal penalty, the cost per trial; DPO pairs by parent (tree nodes and merges left
 * out); and a holdout value that reached a recorded context taken out again.
 * test/export-trajectories.test.ts runs the real thing end to end.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  COST_PER_TRIAL,
  dpoRecords,
  FAILED_UNITS,
  OUTPUT_CAP,
  sftRecords,
  type TrajectoryRecord,
  trajectoryRecords,
  UNITS_CLIP,
} from "../src/app/trajectories.ts";
import type { DecisionAction } from "../src/core/types.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";

interface Spec {
  action: DecisionAction;
  values: number[];
  parent: number;
  status?: "ok" | "crash" | "timeout" | "pruned";
  treeNode?: boolean;
  rebaseOf?: number;
  context?: string;
  wallS?: number;
  rssMb?: number;
}

const sha = (n: number) => n.toString(16).padStart(40, "c");

/** A notebook written as the loop writes it: experiment n has commit sha(n), built on sha(parent). */
function notebook(direction: "minimize" | "maximize", specs: Spec[], holdout: string[] = []) {
  const ledger = new SqliteLedger(":memory:");
  const run = ledger.createRun({
    tag: "t",
    branch: "autolab/t",
    programPath: "/nonexistent/program.md",
    programName: "fixture",
    metric: "m",
    direction,
    baseCommit: sha(0),
    protectedHashes: {},
    seed: 0,
    contract: { "metrics.holdout": holdout },
  });
  specs.forEach((s, n) => {
    const e = ledger.addExperiment(
      {
        runId: run.id,
        n,
        agent: "scripted",
        parentCommit: sha(n === 0 ? 0 : s.parent),
        commit: sha(n),
        ref: `refs/autolab/t/${n}`,
        hypothesis: `h${n}`,
        ...(s.rebaseOf !== undefined ? { rebaseOf: s.rebaseOf } : {}),
        diff: { files: 1, insertions: 1, deletions: 1 },
      },
      s.context ?? `context of #${n}`,
    );
    const status = s.status ?? "ok";
    const values = status === "ok" ? s.values : [Number.NaN];
    values.forEach((v, i) => {
      const t = ledger.startTrial({
        experimentId: e.id,
        attempt: i + 1,
        seed: i,
        command: "x",
        commit: sha(n),
        budgetMs: 1000,
        env: {},
      });
      ledger.finishTrial(
        t,
        {
          status,
          exitCode: status === "ok" ? 0 : 1,
          signal: null,
          wallS: s.wallS ?? 10,
          cpuS: 1,
          peakRssMb: s.rssMb ?? 100,
          metrics: status === "ok" ? { m: v, ...Object.fromEntries(holdout.map((h) => [h, 4242.4242])) } : {},
          selfReported: false,
          seed: i,
          command: "x",
          stdoutPath: "/dev/null",
          stderrPath: "/dev/null",
          logTail: "",
        },
        "/nonexistent",
      );
    });
    const mean = s.values.length ? s.values.reduce((a, b) => a + b, 0) / s.values.length : undefined;
    ledger.decide(e.id, {
      action: s.action,
      reason: s.action,
      ...(mean !== undefined && status === "ok" ? { metric: mean } : {}),
      mechanismConfirmed: s.action === "keep" ? true : s.action === "discard" ? false : null,
      ...(s.treeNode ? { treeNode: true } : {}),
    });
  });
  return { ledger, run };
}

async function records(
  direction: "minimize" | "maximize",
  specs: Spec[],
  holdout: string[] = [],
  stateDir = "/nonexistent",
) {
  const { ledger, run } = notebook(direction, specs, holdout);
  try {
    return await trajectoryRecords({
      run,
      exps: ledger.listExperiments(run.id),
      ledger,
      program: undefined,
      stateDir,
    });
  } finally {
    ledger.close();
  }
}

describe("trajectory rewards", () => {
  it("is the improvement over the parent in σ of the run's pooled noise, better positive, minus 0.1 per trial", async () => {
    const [keep, loss] = await records("minimize", [
      { action: "keep", values: [10, 10.2, 9.8], parent: 0 },
      { action: "keep", values: [9, 9.2, 8.8], parent: 0 },
      { action: "discard", values: [10.4, 10.6, 10.5], parent: 1 },
    ]);
    expect(keep?.reward.sigmaSource).toBe("pooled");
    expect(keep?.reward.sigma).toBeCloseTo(0.1732, 3); // pooled over three configurations
    expect(keep?.reward.improvement).toBeCloseTo(1, 9);
    expect(keep?.reward.noiseUnits).toBeCloseTo(1 / 0.17321, 3);
    expect(keep?.reward.cost).toBeCloseTo(3 * COST_PER_TRIAL, 9);
    expect(keep?.reward.value).toBeCloseTo(1 / 0.17321 - 0.3, 3);
    expect(loss?.reward.improvement).toBeCloseTo(-1.5, 9);
    expect(loss?.reward.noiseUnits).toBeCloseTo(-1.5 / 0.17321, 3);
    expect(loss?.parent).toBe(1);
  });

  it("flips the sign for a maximized objective", async () => {
    const [up, down] = await records("maximize", [
      { action: "keep", values: [10, 10.2, 9.8], parent: 0 },
      { action: "keep", values: [10.5, 10.7, 10.3], parent: 0 },
      { action: "discard", values: [10.2, 10.4, 10], parent: 1 },
    ]);
    expect(up?.reward.improvement).toBeCloseTo(0.5, 9);
    expect(up?.reward.value).toBeGreaterThan(0);
    expect(down?.reward.improvement).toBeCloseTo(-0.3, 9);
    expect(down?.reward.value).toBeLessThan(0);
  });

  it("gives ±clip for any change of a deterministic objective, and a failed proposal the penalty", async () => {
    const [keep, same, crash] = await records("minimize", [
      { action: "keep", values: [5, 5], parent: 0 },
      { action: "keep", values: [4.99, 4.99], parent: 0 },
      { action: "discard", values: [4.99, 4.99], parent: 1 },
      { action: "crash", values: [], parent: 1, status: "crash" },
    ]);
    expect(keep?.reward).toMatchObject({ sigmaSource: "deterministic", noiseUnits: UNITS_CLIP });
    expect(same?.reward.noiseUnits).toBe(0);
    expect(same?.reward.value).toBeCloseTo(-2 * COST_PER_TRIAL, 9);
    expect(crash?.reward).toMatchObject({ improvement: null, noiseUnits: FAILED_UNITS, trials: 1 });
    expect(crash?.labels.ranClean).toBe(false);
    // A crash's short wall time says nothing about speed: only ok trials are compared.
    expect(crash?.labels).toMatchObject({ faster: null, lessMemory: null, wallS: null });
  });

  it("gives a discard left without a value no reward beyond its cost, a reject the penalty", async () => {
    const [, unmeasured, reject] = await records("minimize", [
      { action: "keep", values: [10], parent: 0 },
      { action: "keep", values: [9], parent: 0 },
      { action: "discard", values: [], parent: 1 },
      { action: "reject", values: [], parent: 1 },
    ]);
    expect(unmeasured?.reward).toMatchObject({ improvement: null, noiseUnits: 0, trials: 0, value: 0 });
    expect(unmeasured?.labels.ranClean).toBeNull();
    expect(reject?.reward).toMatchObject({
      improvement: null,
      noiseUnits: FAILED_UNITS,
      value: FAILED_UNITS,
    });
  });

  it("labels a timeout as not clean, a trial the pruner stopped as clean", async () => {
    const [, timeout, pruned] = await records("minimize", [
      { action: "keep", values: [10], parent: 0 },
      { action: "keep", values: [9], parent: 0 },
      { action: "crash", values: [], parent: 1, status: "timeout" },
      { action: "discard", values: [], parent: 1, status: "pruned" },
    ]);
    expect(timeout?.labels.ranClean).toBe(false);
    expect(pruned?.labels.ranClean).toBe(true);
    expect(pruned?.reward).toMatchObject({ noiseUnits: 0, trials: 1 });
  });

  it("labels faster and less memory against the parent with a 5% margin", async () => {
    const [, a, b] = await records("minimize", [
      { action: "keep", values: [10], parent: 0, wallS: 10, rssMb: 100 },
      { action: "keep", values: [9], parent: 0, wallS: 10, rssMb: 100 },
      { action: "discard", values: [9.5], parent: 1, wallS: 9.6, rssMb: 90 },
      { action: "discard", values: [9.5], parent: 1, wallS: 8, rssMb: 96 },
    ]);
    expect(a?.labels).toMatchObject({ faster: false, lessMemory: true, ranClean: true });
    expect(b?.labels).toMatchObject({ faster: true, lessMemory: false });
  });
});

describe("trajectory outputs", () => {
  it("takes a coding-agent CLI's stdout log, its last 64,000 characters, and nothing for a backend that keeps none", async () => {
    const state = mkdtempSync(join(tmpdir(), "traj-state-"));
    try {
      const agentDir = join(state, "logs", "t", "1", "agent");
      mkdirSync(agentDir, { recursive: true });
      writeFileSync(join(agentDir, "agent.stdout.log"), `${"x".repeat(OUTPUT_CAP)}THE END\n`);
      writeFileSync(join(agentDir, "prompt.md"), "not a transcript");
      const [one, two] = await records(
        "minimize",
        [
          { action: "keep", values: [10], parent: 0 },
          { action: "keep", values: [9], parent: 0 },
          { action: "discard", values: [9.5], parent: 1 },
        ],
        [],
        state,
      );
      expect(one?.output?.file).toBe("agent.stdout.log");
      expect(one?.output?.truncated).toBe(true);
      expect(one?.output?.text).toHaveLength(OUTPUT_CAP);
      expect(one?.output?.text.endsWith("THE END\n")).toBe(true);
      expect(two?.output).toBeNull();
    } finally {
      rmSync(state, { recursive: true, force: true });
    }
  });
});

describe("trajectory pairs and chats", () => {
  const withDiff = (rs: TrajectoryRecord[]) =>
    rs.map((r) => ({ ...r, diff: { ...r.diff, text: `diff of #${r.n}` } }));

  it("pairs each loss with a keep of the same parent; tree nodes, merges and keepless groups give none", async () => {
    const recs = withDiff(
      await records("minimize", [
        { action: "keep", values: [10], parent: 0 },
        { action: "keep", values: [9], parent: 0 }, // #1
        { action: "discard", values: [9.5], parent: 1 }, // #2: loss
        { action: "discard", values: [8.9], parent: 1, treeNode: true }, // #3: a tree node, no loss
        { action: "keep", values: [8], parent: 1 }, // #4
        { action: "crash", values: [], parent: 1, status: "crash" }, // #5: loss
        { action: "reject", values: [], parent: 4 }, // #6: no keep on #4
        { action: "discard", values: [8.5], parent: 1, rebaseOf: 2 }, // #7: a merge, not a proposal
      ]),
    );
    expect(recs.map((r) => r.n)).toEqual([1, 2, 3, 4, 5, 6]);
    const pairs = dpoRecords(recs);
    expect(
      pairs.map((p) => [p.chosen[0]?.content.split("\n")[0], p.rejected[0]?.content.split("\n")[0]]),
    ).toEqual([
      ["Hypothesis: h4", "Hypothesis: h2"],
      ["Hypothesis: h4", "Hypothesis: h5"],
    ]);
  });

  it("SFT has one chat per kept proposal with a context and a diff", async () => {
    const recs = await records("minimize", [
      { action: "keep", values: [10], parent: 0 },
      { action: "keep", values: [9], parent: 0 },
      { action: "discard", values: [9.5], parent: 1 },
    ]);
    expect(sftRecords(recs)).toEqual([]); // no repository: no diff, no chat
    const chats = sftRecords(withDiff(recs));
    expect(chats).toHaveLength(1);
    expect(chats[0]?.messages.map((m) => m.role)).toEqual(["system", "user", "assistant"]);
    expect(chats[0]?.messages[1]?.content).toBe("context of #1");
    expect(chats[0]?.messages[2]?.content).toBe("Hypothesis: h1\n\n```diff\ndiff of #1\n```");
  });

  it("takes a holdout value out of a recorded context and every metrics object", async () => {
    const recs = await records(
      "minimize",
      [
        { action: "keep", values: [10], parent: 0 },
        { action: "keep", values: [9], parent: 0, context: "best so far\nsecret_holdout: 4242.4242\nend" },
      ],
      ["secret_holdout"],
    );
    const bytes = JSON.stringify(recs);
    expect(bytes).not.toContain("4242");
    expect(recs[0]?.context.text).toBe("best so far\n[holdout redacted]\nend");
    expect(Object.keys(recs[0]?.outcome.trials[0]?.metrics ?? {})).toEqual(["m"]);
  });
});
