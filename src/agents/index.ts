import { AutolabError } from "../core/errors.ts";
import type { Agent, Program } from "../core/types.ts";
import { createBuiltinAgent } from "./builtin/builtin-agent.ts";

/** Researchers this version can run, by the name used in program.md `agent:` and `--agent`. */
export const AGENTS = ["builtin"] as const;

export function createAgent(name: string, program: Program, seed: number): Agent {
  switch (name) {
    case "builtin":
      return createBuiltinAgent({ seed });
    default:
      throw new AutolabError(
        "AGENT_UNKNOWN",
        `unknown agent "${name}" (from ${program.agent === name ? "program.md `agent:`" : "--agent"}).`,
        `Available agents: ${AGENTS.join(", ")}. Set \`agent: builtin\` in program.md or pass --agent builtin.`,
      );
  }
}
