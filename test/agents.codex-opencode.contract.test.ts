import { agentContract } from "./contracts/agent-contract.ts";
import { cliContractAgent } from "./helpers/cli-contract.ts";

/**
 * The agent contract against the real Codex and OpenCode CLIs (pinned devDependencies), driven
 * by the fake model server on 127.0.0.1. (Gemini and Qwen Code: agents.gemini-qwen.contract.test.ts;
 * two files so that vitest runs them side by side.)
 */

/**
 * Codex with a model it does not know edits through shell commands; its sandbox keeps writes
 * in the worktree but cannot single out files, so the protected file is the loop's scope
 * check's to protect. Reads are not limited. Its retries of a failing API (5 × ~5 s) are
 * switched off here. `provider: openai` makes it pass --output-schema, as it does with OpenAI
 * (the e2e test runs the default, without it).
 */
agentContract(
  "codex",
  cliContractAgent("codex", ({ fake }) => ({
    baseUrl: `${fake.url}/v1`,
    provider: "openai",
    args: [
      "-c",
      "model_providers.autolab.stream_max_retries=0",
      "-c",
      "model_providers.autolab.request_max_retries=0",
    ],
  })),
  { protectedEdit: "scope-check", readsOutside: "allowed", reportsUsage: true, usesModel: true },
);

/**
 * OpenCode's permission config allows edit on the editable files only, and no external
 * directory. It takes ~3 s to start: the timeout case would kill it before it reaches the
 * model, so only the abort case (which waits for its request) runs.
 */
agentContract(
  "opencode",
  cliContractAgent("opencode", ({ fake }) => ({ baseUrl: `${fake.url}/v1` })),
  {
    protectedEdit: "blocked",
    readsOutside: "blocked",
    reportsUsage: true,
    usesModel: true,
    skip: {
      timeout:
        "OpenCode starts in ~3 s, longer than the case's timeout; the abort case kills it mid-request instead",
    },
  },
);
