import type { Agent, AgentConfig, Program } from "../core/types.ts";

/**
 * The table of agent backends other than builtin (CLI presets, llm). It lives apart from
 * index.ts so that a backend's register.ts, which index.ts imports, can call registerAgent
 * without an import cycle (in a cycle the table would not exist yet when register.ts runs).
 */
export type AgentFactory = (config: AgentConfig, program: Program) => Promise<Agent>;
const factories = new Map<string, AgentFactory>();

export function registerAgent(backend: string, factory: AgentFactory): void {
  factories.set(backend, factory);
}

export function agentFactory(backend: string): AgentFactory | undefined {
  return factories.get(backend);
}

export function registeredBackends(): string[] {
  return [...factories.keys()];
}
