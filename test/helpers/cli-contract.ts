import { createCliAgent } from "../../src/agents/cli/cli-agent.ts";
import { loadPreset } from "../../src/agents/cli/register.ts";
import type { Agent, AgentConfig } from "../../src/core/types.ts";
import type { AgentSetup } from "../contracts/agent-contract.ts";

/** An agent of the CLI preset `backend` for the agent contract, talking to the contract's fake model. */
export function cliContractAgent(
  backend: string,
  over: (s: AgentSetup) => Partial<AgentConfig>,
): (s: AgentSetup) => Promise<Agent> {
  return async (s) =>
    createCliAgent(
      await loadPreset(backend),
      { backend, model: "fake-model", args: [], env: s.env, timeoutMs: s.timeoutMs, ...over(s) },
      s.program,
    );
}
