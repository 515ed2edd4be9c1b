import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Agent, Proposal, ProposalContext } from "../core/types.ts";

/** One scripted proposal: file edits (null deletes) plus what the agent claims about them. */
export interface ScriptedStep {
  hypothesis: string;
  mechanism?: string;
  expected?: string;
  /** path (relative to the program's directory) → new content, a transform of the old, or null to delete. */
  edits: Record<string, string | ((old: string) => string) | null>;
  /** Simulated thinking time. */
  delayMs?: number;
  /** What the proposal reports having cost (tokens, costUsd), as a model-backed researcher would. */
  usage?: Record<string, number>;
}

/**
 * A researcher that replays a fixed list of edits: for tests, benchmarks and demos of the
 * harness without a model. After the list runs out it repeats the last step.
 */
export function createScriptedAgent(steps: ScriptedStep[], name = "scripted"): Agent & { calls: number } {
  const agent = {
    name,
    calls: 0,
    async propose(ctx: ProposalContext): Promise<Proposal> {
      const step = steps[Math.min(agent.calls, steps.length - 1)];
      agent.calls++;
      if (!step) return { hypothesis: "nothing to try" };
      if (step.delayMs) await new Promise((r) => setTimeout(r, step.delayMs));
      for (const [path, edit] of Object.entries(step.edits)) {
        const abs = join(ctx.worktree, path);
        if (edit === null) await rm(abs, { force: true });
        else if (typeof edit === "string") await writeFile(abs, edit);
        else await writeFile(abs, edit(await readFile(abs, "utf8").catch(() => "")));
      }
      return {
        hypothesis: step.hypothesis,
        ...(step.mechanism ? { mechanism: step.mechanism } : {}),
        ...(step.expected ? { expected: step.expected } : {}),
        ...(step.usage ? { usage: step.usage } : {}),
      };
    },
  };
  return agent;
}
