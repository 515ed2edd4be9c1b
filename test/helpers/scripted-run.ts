import { createScriptedAgent, type ScriptedStep } from "../../src/agents/scripted-agent.ts";
import { createRun, type RunOptions } from "../../src/app/create-run.ts";
import type { LoopEvent } from "../../src/core/events.ts";

/**
 * `createRun` on `dir` (tag "t") with a scripted researcher, collecting the loop's events; the
 * notebook is closed afterwards. `max` defaults to one experiment per step.
 */
export async function runScripted(
  dir: string,
  steps: ScriptedStep[],
  max = steps.length,
  extra: Omit<RunOptions, "program" | "agent"> = {},
) {
  const events: LoopEvent[] = [];
  const outcome = await createRun({
    program: dir,
    tag: "t",
    maxExperiments: max,
    agent: createScriptedAgent(steps),
    // A fixed secret: the trial seeds (and so a seeded project's noise) are the same every time.
    seedKey: "scripted-run",
    ...extra,
    onEvent: (e) => {
      events.push(e);
      extra.onEvent?.(e);
    },
  });
  outcome.lab.ledger.close();
  return { ...outcome, events };
}
