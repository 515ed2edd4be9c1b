import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Agent, ProposalContext } from "../../src/core/types.ts";

/**
 * A researcher that does what the instructions say: each "Try X = n" line of program.md's body
 * is one proposal, in order; with none, it tries X = 6 (worse: the value project minimizes X,
 * baseline 5). Its skill is the instructions' quality, so a tournament's ranking can be checked.
 */
export function follower(): Agent {
  let calls = 0;
  return {
    name: "follower",
    async propose(ctx: ProposalContext) {
      const tries = [...ctx.program.directions.matchAll(/Try X = (\d+)/g)].map((m) => Number(m[1]));
      const x = tries.length ? (tries[Math.min(calls, tries.length - 1)] as number) : 6;
      calls++;
      writeFileSync(join(ctx.worktree, "value.mjs"), `export const X = ${x};\n`);
      return { hypothesis: `X = ${x}`, mechanism: "a smaller X scores lower" };
    },
  };
}
