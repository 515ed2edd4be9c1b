import { registerAgent } from "../registry.ts";

// The AI SDK is large: load it only when a program actually uses the llm backend.
registerAgent("llm", async (config, program) => {
  const { createLlmAgent } = await import("./llm-agent.ts");
  return createLlmAgent(config, program);
});
