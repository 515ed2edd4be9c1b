import { AutolabError } from "../core/errors.ts";
import { closest } from "../core/suggest.ts";
import type { Agent, AgentConfig, Program } from "../core/types.ts";
import { AGENT_BACKENDS } from "../program/schema.ts";
import { builtinOptionsFromArgs, createBuiltinAgent } from "./builtin/builtin-agent.ts";
import "./cli/register.ts";
import "./llm/register.ts";
import { agentFactory, registeredBackends } from "./registry.ts";

/**
 * Backends other than builtin register themselves in registry.ts (CLI presets, llm); each
 * register.ts is imported above and loads its backend's module only when it is used.
 */
export { type AgentFactory, registerAgent } from "./registry.ts";

/** The agent config for this invocation: program.md's, or a different backend named by --agent. */
export function agentConfigFor(program: Program, flag: string | undefined): AgentConfig {
  if (!flag || flag === program.agent.backend) return program.agent;
  return { backend: flag, args: [], env: {} };
}

export async function createAgent(config: AgentConfig, program: Program, seed: number): Promise<Agent> {
  if (config.backend === "builtin")
    return createBuiltinAgent({ seed, ...builtinOptionsFromArgs(config.args) });
  const factory = agentFactory(config.backend);
  if (factory) return factory(config, program);
  const known = (AGENT_BACKENDS as readonly string[]).includes(config.backend);
  throw new AutolabError(
    known ? "AGENT_UNAVAILABLE" : "AGENT_UNKNOWN",
    known
      ? `the agent backend "${config.backend}" is not available in this version of autolab.`
      : `unknown agent "${config.backend}"${didYouMean(config.backend)}.`,
    `Available: ${["builtin", ...registeredBackends()].join(", ")}. Set \`agent:\` in program.md or pass --agent.`,
  );
}

/** " — did you mean "claude"?" for a misspelt or miscased backend (`--agent Claude`), else "". */
function didYouMean(backend: string): string {
  const guess = closest(backend, ["builtin", ...AGENT_BACKENDS]);
  return guess !== undefined && guess !== backend ? ` — did you mean "${guess}"?` : "";
}
