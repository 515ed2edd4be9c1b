/**
 * The built-in optimizer on parallel slots, end to end: it proposes instantly, so the scheduler
 * proposes one candidate at a time and only for a free slot — each proposal sees every
 * experiment still running (the constant liar's pending configurations), and none is made a
 * trial ahead, blind to the others.
 */
import { describe, expect, it } from "vitest";
import { createScriptedAgent } from "../src/agents/scripted-agent.ts";
import { createRun } from "../src/app/create-run.ts";
import type { LoopEvent } from "../src/core/events.ts";
import { knobProject } from "./helpers/knob-project.ts";

/**
 * The most proposals that were created and not yet decided at once (the baseline and the
 * scheduler's own rebased winners aside).
 */
function maxUndecided(events: LoopEvent[], proposals: ReadonlySet<number>): number {
  const open = new Set<number>();
  let most = 0;
  for (const e of events) {
    if (e.type === "experiment_created" && proposals.has(e.n)) open.add(e.n);
    if (e.type === "decision") open.delete(e.n);
    most = Math.max(most, open.size);
  }
  return most;
}

describe("the built-in optimizer on parallel slots", () => {
  it("proposes only for a free slot, seeing every running experiment as pending", async () => {
    const dir = knobProject({ score: "(X - 30) ** 2", knob: "{ low: 1, high: 100 }" });
    const events: LoopEvent[] = [];
    const outcome = await createRun({
      program: dir,
      tag: "t",
      maxExperiments: 12,
      slots: 3,
      onEvent: (e) => events.push(e),
    });
    // Proposals (a winner rebased onto a newer best is an experiment of the scheduler's).
    const exps = outcome.experiments.filter((e) => e.n > 0 && e.rebaseOf === undefined);
    outcome.lab.ledger.close();
    expect(exps).toHaveLength(12);
    // Never more candidates in flight than slots: nothing waits in a queue, proposed ahead.
    expect(maxUndecided(events, new Set(exps.map((e) => e.n)))).toBeLessThanOrEqual(3);
    // Proposals saw the running ones: the constant liar named them.
    const pendingSeen = exps.map((e) => /(\d+) pending configurations? fantasized/.exec(e.mechanism ?? ""));
    expect(pendingSeen.some((m) => m !== null)).toBe(true);
    for (const m of pendingSeen) if (m) expect(Number(m[1])).toBeLessThanOrEqual(2);
    // And never proposed one of them again.
    expect(new Set(exps.map((e) => JSON.stringify(e.params))).size).toBe(12);
  }, 120_000);

  it("a researcher that thinks (not instant) still proposes a trial ahead", async () => {
    const dir = knobProject({ score: "X", knob: "{ low: 1, high: 100 }" });
    const steps = Array.from({ length: 12 }, (_, i) => ({
      hypothesis: `X → ${i + 6}`,
      edits: { "value.mjs": `export const X = ${i + 6};\n` },
    }));
    const events: LoopEvent[] = [];
    const outcome = await createRun({
      program: dir,
      tag: "t",
      maxExperiments: 12,
      slots: 3,
      agent: createScriptedAgent(steps),
      onEvent: (e) => events.push(e),
    });
    const proposals = outcome.experiments.filter((e) => e.n > 0 && e.rebaseOf === undefined);
    outcome.lab.ledger.close();
    // Up to a slot's worth waits beside the running trials.
    expect(maxUndecided(events, new Set(proposals.map((e) => e.n)))).toBeGreaterThan(3);
  }, 120_000);
});
