import { AutolabError } from "../core/errors.ts";
import type { Agent, AgentConfig, Program } from "../core/types.ts";
import { AGENT_BACKENDS } from "../program/schema.ts";
import { createBuiltinAgent } from "./builtin/builtin-agent.ts";

/**
 * Backends other than builtin register here (CLI presets, llm). Kept as a table so a backend's
 * module is only loaded when it is used.
 */
export type AgentFactory = (config: AgentConfig, program: Program) => Promise<Agent>;
const factories = new Map<string, AgentFactory>();

export function registerAgent(backend: string, factory: AgentFactory): void {
  factories.set(backend, factory);
}

/** The agent config for this invocation: program.md's, or a different backend named by --agent. */
export function agentConfigFor(program: Program, flag: string | undefined): AgentConfig {
  if (!flag || flag === program.agent.backend) return program.agent;
  return { backend: flag, args: [], env: {} };
}

export async function createAgent(config: AgentConfig, program: Program, seed: number): Promise<Agent> {
  if (config.backend === "builtin") return createBuiltinAgent({ seed });
  const factory = factories.get(config.backend);
  if (factory) return factory(config, program);
  const known = (AGENT_BACKENDS as readonly string[]).includes(config.backend);
  throw new AutolabError(
    known ? "AGENT_UNAVAILABLE" : "AGENT_UNKNOWN",
    known
      ? `the agent backend "${config.backend}" is not available in this version of autolab.`
      : `unknown agent "${config.backend}".`,
    `Available: ${["builtin", ...factories.keys()].join(", ")}. Set \`agent:\` in program.md or pass --agent.`,
  );
}
