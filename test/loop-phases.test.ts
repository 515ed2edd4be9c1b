/**
 * The seams between the loop's phases (src/core/): the Coordination the phases ask instead of
 * branching on the kind of run, and the researcher-failure stop both loops share.
 */
import { describe, expect, it } from "vitest";
import { agentFailing } from "../src/core/agent-streak.ts";
import type { ExperimentRecord } from "../src/core/ledger.ts";
import { coordinationOf, type LoopDeps, type ParallelHooks } from "../src/core/loop-deps.ts";

/** Just what coordinationOf reads: the notebook's experiment numbers and the branch's best. */
function serialDeps(ns: number[], branchAt: string): LoopDeps {
  return {
    ledger: { listExperiments: () => ns.map((n) => ({ n })) },
    run: { id: 1 },
    workspace: { bestCommit: async () => branchAt },
  } as unknown as LoopDeps;
}

const candidate = { n: 7, parentCommit: "parent" } as ExperimentRecord;

describe("coordinationOf", () => {
  it("serially: the next number after the notebook's last, no lock, judged on the branch", async () => {
    const c = coordinationOf(serialDeps([0, 1, 4], "best"));
    expect(c.allocate()).toBe(5);
    expect(await c.lock(async () => "ran")).toBe("ran");
    expect(await c.judgedOn(candidate)).toBe("best");
  });

  it("in a parallel run: the hooks' numbers and lock, judged on the candidate's parent", async () => {
    const locked: string[] = [];
    const hooks = {
      allocate: () => 42,
      lock: async <T>(fn: () => Promise<T>) => {
        locked.push("in");
        return fn();
      },
    } as unknown as ParallelHooks;
    const c = coordinationOf({ ...serialDeps([0], "best"), parallel: hooks });
    expect(c.allocate()).toBe(42);
    expect(await c.lock(async () => "ran")).toBe("ran");
    expect(locked).toEqual(["in"]);
    expect(await c.judgedOn(candidate)).toBe("parent");
  });
});

describe("agentFailing", () => {
  const failures = [
    "#3 agent crash: exit 1\nmore",
    "#4 no change: the researcher left the files as they were",
  ];

  it("names the agent serially, and its first lines", () => {
    const e = agentFailing(failures, { name: "claude" }, "/logs");
    expect(e.code).toBe("AGENT_FAILING");
    expect(e.message).toBe(
      "the researcher (claude) failed 2 times in a row:\n  #3 agent crash: exit 1\n  #4 no change: the researcher left the files as they were",
    );
    expect(e.hint).toContain("program.md `agent:`");
    expect(e.hint).toContain("/logs/<n>/agent");
  });

  it("names a role and its file in an org", () => {
    const e = agentFailing(failures, { role: "tuner" }, "/logs");
    expect(e.message).toMatch(/^the researcher of role tuner failed 2 times in a row/);
    expect(e.hint).toContain("org/tuner.md `agent:`");
  });
});
