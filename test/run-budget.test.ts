/**
 * The run's budget in trials and time (--max-trials, --max-time; issue #17): the loop stops when
 * it is spent, never starts a trial past it, decides every experiment it started, and tells the
 * judge the share left of the tightest limit.
 */
import { describe, expect, it } from "vitest";
import { createScriptedAgent } from "../src/agents/scripted-agent.ts";
import { createRun } from "../src/app/create-run.ts";
import { formatWholeSeconds } from "../src/core/format.ts";
import type { ExperimentRecord } from "../src/core/ledger.ts";
import {
  budgetLeft,
  costPreflight,
  costReached,
  experimentsSpent,
  trialsUsed,
} from "../src/core/run-budget.ts";
import { knobProject } from "./helpers/knob-project.ts";
import { runScripted } from "./helpers/scripted-run.ts";
import { git, valueProject } from "./helpers/value-project.ts";

/** A record with `trials` trials of the given statuses (what run-budget reads). */
function record(n: number, statuses: string[]): ExperimentRecord {
  return { n, trials: statuses.map((status) => ({ result: { status } })) } as unknown as ExperimentRecord;
}

const noisy = () =>
  knobProject({
    score: "(X - 3) ** 2 + 0.5 * Math.random()",
    knob: "{ low: 0, high: 10 }",
    acceptance: "noise",
  });

const totalTrials = (exps: ExperimentRecord[]) => trialsUsed(exps);

describe("the run's budget", () => {
  it("counts every trial started, interrupted ones excepted", () => {
    const exps = [record(0, ["ok", "ok", "ok"]), record(1, ["ok", "interrupted", "crash"]), record(2, [])];
    expect(trialsUsed(exps)).toBe(5);
  });

  it("tells the judge the share left of the limit that binds", () => {
    const exps = [record(0, ["ok", "ok", "ok"]), record(1, ["ok"]), record(2, ["ok", "ok"])];
    // 2 of 10 experiments started (80% left) but 6 of 10 trials used (40% left): trials bind.
    expect(budgetLeft({ experiments: 10, trials: 10 }, exps, 2)).toEqual({ left: 4, total: 10 });
    expect(budgetLeft({ experiments: 4, trials: 100 }, exps, 2)).toEqual({ left: 2, total: 4 });
    const time = { start: 0, end: 100_000 };
    expect(budgetLeft({ time, trials: 100 }, exps, 2, 90_000)).toEqual({ left: 10, total: 100 });
    expect(budgetLeft(undefined, exps)).toBeUndefined();
    expect(budgetLeft({}, exps)).toBeUndefined();
  });

  it("names the limit that was reached", () => {
    const exps = [record(0, ["ok", "ok", "ok"]), record(1, ["ok"])];
    expect(experimentsSpent({ experiments: 1 }, exps)).toBe("reached --max-experiments 1");
    expect(experimentsSpent({ trials: 4 }, exps)).toBe("reached --max-trials 4");
    expect(experimentsSpent({ trials: 5 }, exps)).toBeUndefined();
    expect(experimentsSpent({ time: { start: 0, end: 5_400_000 } }, exps, 1, 5_400_000)).toBe(
      "reached --max-time 1h30m",
    );
    expect(formatWholeSeconds(8 * 3600_000)).toBe("8h");
    expect(formatWholeSeconds(400)).toBe("0s");
  });

  it("--max-cost: spent plus in-flight proposals at the mean cost stop the next proposal (issue #36)", () => {
    const priced = (n: number, costUsd?: number) =>
      ({
        n,
        trials: [],
        ...(costUsd !== undefined ? { usage: { costUsd } } : {}),
      }) as unknown as ExperimentRecord;
    const exps = [priced(0), priced(1, 0.4), priced(2, 0.6), priced(3)];
    // $1 spent, $0.50 a proposal: a $2 cap allows the next one, not with two more in flight.
    expect(costReached({ cost: 2 }, exps)).toBeUndefined();
    expect(costReached({ cost: 2 }, exps, 2)).toBe(
      "reached --max-cost $2.00 ($1.00 spent, 2 in flight at ~$0.50 each; the next proposal would cost ~$0.50)",
    );
    expect(costReached({ cost: 1 }, exps)).toMatch(/^reached --max-cost \$1\.00 \(\$1\.00 spent/);
    // The parallel scheduler's issued count: proposals recorded beyond the ones decided are in flight.
    expect(experimentsSpent({ cost: 1.4 }, exps, 3)).toMatch(/^reached --max-cost/);
    // Before any proposal reported a cost, only what was spent counts.
    expect(costReached({ cost: 0.1 }, [priced(0), priced(1)])).toBeUndefined();
    expect(budgetLeft({ cost: 2 }, exps)).toEqual({ left: 100, total: 200 });
    expect(costPreflight({ cost: 2 }, exps, "claude")).toBe(
      "cost cap $2.00 for the researchers ($1.00 spent so far): ~$0.50 per proposal so far, so about 2 more proposals",
    );
    expect(costPreflight({ cost: 2 }, exps, "builtin")).toMatch(/will not stop this run/);
    expect(costPreflight({ cost: 2 }, [priced(0)], "llm")).toMatch(/the first one sets the estimate/);
  });

  it("stops a run at --max-cost with the proposals' reported cost, saying so at the start", async () => {
    const dir = valueProject();
    const agent = createScriptedAgent(
      [2, 3, 4, 1, 6, 7, 8, 9].map((x) => ({
        hypothesis: `X to ${x}`,
        edits: { "value.mjs": `export const X = ${x};\n` },
        usage: { costUsd: 0.3, inputTokens: 1000, outputTokens: 100 },
      })),
    );
    const warnings: string[] = [];
    const outcome = await createRun({
      program: dir,
      tag: "t",
      agent,
      maxCostUsd: 1,
      onEvent: (e) => {
        if (e.type === "warning") warnings.push(e.message);
      },
    });
    try {
      // $0.30 each: after three ($0.90) a fourth would pass $1.
      expect(outcome.stoppedBecause).toBe(
        "reached --max-cost $1.00 ($0.90 spent; the next proposal would cost ~$0.30)",
      );
      expect(agent.calls).toBe(3);
      expect(warnings[0]).toMatch(
        /^cost cap \$1\.00 for the researchers \(\$0\.00 spent so far\): no proposal has reported a cost yet/,
      );
    } finally {
      outcome.lab.ledger.close();
    }
  }, 120_000);

  it("stops a serial run at --max-trials with every experiment decided", async () => {
    const dir = noisy();
    const outcome = await createRun({ program: dir, tag: "t", maxTrials: 14 });
    try {
      expect(outcome.stoppedBecause).toBe("reached --max-trials 14");
      const exps = outcome.lab.ledger.listExperiments(outcome.run.id);
      // Exactly the budget: no trial starts once it is spent (the baseline's 3 included).
      expect(totalTrials(exps)).toBe(14);
      expect(exps.every((e) => e.decision)).toBe(true);
      // More trials than experiments: the judge asked for repeats (or re-measured the incumbent).
      expect(exps.length).toBeLessThan(14);
    } finally {
      outcome.lab.ledger.close();
    }
  }, 120_000);

  it("stops a run of 2 slots at --max-trials, at most one trial over (the other slot's)", async () => {
    const dir = noisy();
    const { writeFileSync, readFileSync } = await import("node:fs");
    const program = `${dir}/program.md`;
    writeFileSync(
      program,
      readFileSync(program, "utf8").replace("agent: builtin", "agent: builtin\nslots: 2"),
    );
    git(dir, "commit", "-qam", "two slots"); // a new run starts from the committed program.md
    const outcome = await createRun({ program: dir, tag: "t", maxTrials: 14 });
    try {
      expect(outcome.stoppedBecause).toBe("reached --max-trials 14");
      const exps = outcome.lab.ledger.listExperiments(outcome.run.id);
      expect(totalTrials(exps)).toBeGreaterThanOrEqual(14);
      expect(totalTrials(exps)).toBeLessThanOrEqual(15);
      expect(exps.every((e) => e.decision)).toBe(true);
    } finally {
      outcome.lab.ledger.close();
    }
  }, 120_000);

  it("tells the judge the share of --max-trials left: exploring early, the full test at the end", async () => {
    const dir = valueProject({ acceptance: "noise", noise: 0.05 });
    const inside = (x: number) => ({
      hypothesis: `X 5 → ${x}`,
      edits: { "value.mjs": `export const X = ${x};\n` },
    });
    // The baseline's 3 trials and this candidate's first: 16 of 20 trials left when it is judged.
    const { experiments, stoppedBecause } = await runScripted(
      dir,
      [inside(4.99), inside(4.995), inside(4.98), inside(4.985), inside(4.97)],
      100,
      { maxTrials: 20 },
    );
    const [, first] = experiments;
    expect(first?.trials).toHaveLength(1);
    expect(first?.decision?.reason).toMatch(/^not promising: .* while exploring \(80% of the budget left/);
    // The last one, in the final 20% of the trials, got the full test (and the incumbent its
    // re-measurements) until the budget ran out: discarded, saying so, with what it measured.
    const last = experiments.at(-1);
    expect(last?.trials.length).toBeGreaterThan(1);
    expect(last?.decision?.reason).toMatch(/; reached --max-trials 20 before it was decided$/);
    expect(last?.decision?.metric).toBeCloseTo(4.97, 1);
    expect(totalTrials(experiments)).toBe(20);
    expect(stoppedBecause).toBe("reached --max-trials 20");
  }, 120_000);

  it("refuses a trial budget the baseline alone would spend", async () => {
    const dir = noisy();
    await expect(createRun({ program: dir, tag: "t", maxTrials: 0 })).rejects.toMatchObject({
      code: "INVALID_BUDGET",
    });
    await expect(createRun({ program: dir, tag: "t", maxTrials: 3 })).rejects.toMatchObject({
      code: "INVALID_BUDGET",
      message: expect.stringMatching(
        /--max-trials 3 leaves no trial for a candidate: the baseline alone runs 3/,
      ),
      hint: expect.stringMatching(/at least 4/),
    });
  }, 60_000);

  it("starts no experiment after --max-time", async () => {
    const dir = noisy();
    const outcome = await createRun({ program: dir, tag: "t", maxTimeMs: 1 });
    try {
      expect(outcome.stoppedBecause).toBe("reached --max-time 0s");
      const exps = outcome.lab.ledger.listExperiments(outcome.run.id);
      // The baseline is measured whatever the clock says (without it nothing can be judged).
      expect(exps.map((e) => e.n)).toEqual([0]);
    } finally {
      outcome.lab.ledger.close();
    }
  }, 60_000);
});
