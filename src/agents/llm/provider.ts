import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import type { LanguageModel } from "ai";
import { AutolabError } from "../../core/errors.ts";
import { registerSecretName } from "../../core/secrets.ts";
import type { AgentConfig } from "../../core/types.ts";

export const PROVIDERS = ["openai-compatible", "anthropic", "openai"] as const;
export type ProviderName = (typeof PROVIDERS)[number];

export interface ResolvedModel {
  model: LanguageModel;
  provider: ProviderName;
  modelId: string;
  /** The endpoint, when program.md names one (for the transcript and error messages). */
  baseUrl?: string;
}

const DEFAULT_KEY_ENV: Record<ProviderName, string | undefined> = {
  // Local servers (vLLM, Ollama, llama.cpp) need no key; a hosted one names its variable.
  "openai-compatible": undefined,
  anthropic: "ANTHROPIC_API_KEY",
  openai: "OPENAI_API_KEY",
};

/** Sent when an OpenAI-compatible server needs no key: some clients and proxies insist on a header. */
const NO_KEY = "autolab-no-key";

/**
 * The language model program.md's `agent:` names. Everything a user can get wrong here is an
 * AutolabError raised before the run starts, with the line to write in program.md.
 */
export function resolveModel(config: AgentConfig, env: NodeJS.ProcessEnv = process.env): ResolvedModel {
  const provider = (config.provider ?? "openai-compatible") as ProviderName;
  if (!PROVIDERS.includes(provider)) {
    throw new AutolabError(
      "AGENT_CONFIG_INVALID",
      `unknown provider "${config.provider}" for the llm agent.`,
      `Set agent.provider in program.md to one of ${PROVIDERS.join(", ")}.`,
    );
  }
  const modelId = config.model?.trim();
  if (!modelId) {
    throw new AutolabError(
      "AGENT_CONFIG_INVALID",
      "the llm agent needs a model.",
      provider === "openai-compatible"
        ? "Set agent.model in program.md, e.g. agent: { backend: llm, base_url: http://127.0.0.1:8000/v1, model: Qwen/Qwen2.5-Coder-32B-Instruct }"
        : `Set agent.model in program.md, e.g. agent: { backend: llm, provider: ${provider}, model: ${provider === "anthropic" ? "claude-sonnet-4-5" : "gpt-5"} }`,
    );
  }
  const baseUrl = config.baseUrl?.replace(/\/+$/, "");
  const keyEnv = config.apiKeyEnv ?? DEFAULT_KEY_ENV[provider];
  // The key is a secret whatever its variable's name: never recorded (src/core/secrets.ts).
  if (keyEnv) registerSecretName(keyEnv);
  const key = keyEnv ? env[keyEnv]?.trim() : undefined;
  if (keyEnv && !key && (config.apiKeyEnv || provider !== "openai-compatible")) {
    throw new AutolabError(
      "AGENT_CONFIG_INVALID",
      `the llm agent (provider ${provider}) needs an API key in the environment variable ${keyEnv}, which is not set.`,
      `export ${keyEnv}=…${config.apiKeyEnv ? "" : ", or name another variable with agent.api_key_env in program.md"}.`,
    );
  }
  const base = { provider, modelId, ...(baseUrl ? { baseUrl } : {}) };
  switch (provider) {
    case "openai-compatible": {
      if (!baseUrl) {
        throw new AutolabError(
          "AGENT_CONFIG_INVALID",
          "the llm agent with provider openai-compatible needs the server's URL.",
          "Set agent.base_url in program.md, e.g. base_url: http://127.0.0.1:8000/v1 (vLLM), http://127.0.0.1:11434/v1 (Ollama), http://127.0.0.1:8080/v1 (llama.cpp), https://openrouter.ai/api/v1",
        );
      }
      const compatible = createOpenAICompatible({
        name: "autolab",
        baseURL: baseUrl,
        apiKey: key ?? NO_KEY,
        includeUsage: true,
      });
      return { ...base, model: compatible.chatModel(modelId) };
    }
    case "anthropic": {
      const anthropic = createAnthropic({ apiKey: key, ...(baseUrl ? { baseURL: baseUrl } : {}) });
      return { ...base, model: anthropic(modelId) };
    }
    case "openai": {
      const openai = createOpenAI({ apiKey: key, ...(baseUrl ? { baseURL: baseUrl } : {}) });
      return { ...base, model: openai(modelId) };
    }
  }
}
