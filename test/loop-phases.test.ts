/**
 * The seams between the loop's phases (src/core/): the Coordination the phases ask instead of
 * branching on the kind of run, and the researcher-failure stop both loops share.
 */
import { describe, expect, it } from "vitest";
import { agentFailing } from "../src/core/agent-streak.ts";
import type { ExperimentRecord } from "../src/core/ledger.ts";
import { coordinationOf, type LoopDeps } from "../src/core/loop-deps.ts";
import { type ParallelHooks, parallelCoordination } from "../src/core/parallel-coordination.ts";

/** Just what coordinationOf reads: the notebook's experiment numbers and the branch's best. */
function serialDeps(ns: number[], branchAt: string): LoopDeps {
  return {
    program: { objective: { metric: "loss", direction: "minimize" } },
    ledger: { listExperiments: () => ns.map((n) => ({ n })) },
    run: { id: 1 },
    workspace: { bestCommit: async () => branchAt },
  } as unknown as LoopDeps;
}

/** An experiment as bestOf reads it: kept with `loss`, or still undecided. */
function exp(n: number, loss?: number): ExperimentRecord {
  return {
    n,
    commit: `c${n}`,
    ...(loss === undefined ? {} : { decision: { action: "keep", reason: "", metric: loss } }),
    trials: [],
  } as unknown as ExperimentRecord;
}

const candidate = { n: 7, parentCommit: "parent" } as ExperimentRecord;

describe("coordinationOf", () => {
  it("serially: the next number after the notebook's last, no lock, judged on the branch", async () => {
    const c = coordinationOf(serialDeps([0, 1, 4], "best"));
    expect(c.allocate()).toBe(5);
    expect(await c.lock(async () => "ran")).toBe("ran");
    expect(await c.judgedOn(candidate)).toBe("best");
  });

  it("serially: builds on the measured best; nothing before the baseline; no parallel cases", () => {
    const deps = serialDeps([0, 1], "best");
    const c = coordinationOf(deps);
    expect(c.buildsOn(deps, [exp(0, 2), exp(1, 1.5)])).toMatchObject({ exp: { n: 1 }, metric: 1.5 });
    expect(c.buildsOn(deps, [exp(0)])).toBeUndefined();
    expect(c.beforeBaseline).toBeUndefined();
    expect(c.keepOnMovedBest).toBeUndefined();
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
    const deps = { ...serialDeps([0], "best"), coordination: parallelCoordination(hooks) };
    const c = coordinationOf(deps);
    expect(c.allocate()).toBe(42);
    expect(await c.lock(async () => "ran")).toBe("ran");
    expect(locked).toEqual(["in"]);
    expect(await c.judgedOn(candidate)).toBe("parent");
    expect(c.keepOnMovedBest).toBeTypeOf("function");
  });

  it("in a parallel run: builds on the baseline while it is measured, and only then", async () => {
    const hooks = { allocate: () => 1, lock: async <T>(fn: () => Promise<T>) => fn() } as ParallelHooks;
    const deps = { ...serialDeps([0], "best"), coordination: parallelCoordination(hooks) };
    const c = coordinationOf(deps);
    // The baseline is decided (no promise set) but failed: nothing to build on, and a candidate
    // before a best is the harness's bug, not something to run.
    expect(c.buildsOn(deps, [exp(0)])).toBeUndefined();
    await expect(
      c.beforeBaseline?.(
        deps,
        exp(1),
        { finished: () => [], another: async () => true },
        () => {},
        undefined,
      ),
    ).rejects.toMatchObject({ code: "NO_BEST" });
    hooks.baselineDecided = new Promise(() => {});
    const base = c.buildsOn(deps, [exp(0)]);
    expect(base?.exp.n).toBe(0);
    expect(base?.metric).toBeNaN();
    expect(c.buildsOn(deps, [exp(0, 3)])).toMatchObject({ exp: { n: 0 }, metric: 3 });
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
