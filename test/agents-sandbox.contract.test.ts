import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, it } from "vitest";
import { createCliAgent } from "../src/agents/cli/cli-agent.ts";
import { loadPreset } from "../src/agents/cli/register.ts";
import { createConfinement } from "../src/app/confinement.ts";
import type { Agent, AgentConfig } from "../src/core/types.ts";
import type { Workspace } from "../src/core/workspace.ts";
import { probeSandbox } from "../src/runner/sandbox.ts";
import { type AgentSetup, agentContract } from "./contracts/agent-contract.ts";
import { cliContractAgent } from "./helpers/cli-contract.ts";

/**
 * The agent contract again, with each CLI in the researcher sandbox the loop gives it
 * (createConfinement's `researcher`, docs/agents.md "Sandbox"): only the editable file is
 * writable (its directory too, for CLIs that edit by rename), nothing outside the worktree but
 * the proposal's log directory. Every CLI must still make its edit, report its summary, fail
 * cleanly, time out and stop on abort with no process left. The protected file is now kept by
 * the sandbox for every backend, also those that cannot limit themselves (command, codex).
 * Gemini, Qwen Code and OpenCode: agents-sandbox.gemini-qwen-opencode.contract.test.ts.
 */
const MINI_AGENT = join(dirname(fileURLToPath(import.meta.url)), "fake-model", "mini-agent.mjs");
const SANDBOX = probeSandbox();

/** `make`'s agent, proposing in the sandbox that createConfinement builds for the contract's worktree. */
function sandboxed(make: (s: AgentSetup) => Agent | Promise<Agent>): (s: AgentSetup) => Promise<Agent> {
  return async (s) => {
    const inner = await make(s);
    return {
      name: inner.name,
      propose(ctx) {
        const confinement = createConfinement(ctx.program, {
          repoRoot: ctx.worktree,
          programDir: ctx.worktree,
          stateDir: join(ctx.worktree, ".autolab"),
          gitCommonDir: join(ctx.worktree, ".git"),
        });
        const ws = { worktree: ctx.worktree, projectDir: ctx.worktree } as Workspace;
        const sandbox = confinement.researcher(ws, [], [ctx.logDir]);
        if (!sandbox) throw new Error(`no sandbox: ${confinement.description}`);
        return inner.propose({ ...ctx, sandbox });
      },
    };
  };
}

const cliConfig = (backend: string, over: Partial<AgentConfig>): AgentConfig => ({
  backend,
  model: "fake-model",
  args: [],
  env: {},
  ...over,
});

if (!SANDBOX.ok) {
  describe.skip(`sandboxed agent contracts (${SANDBOX.reason})`, () => {
    it("needs bubblewrap", () => {});
  });
} else {
  agentContract(
    "pi (sandboxed)",
    sandboxed(async ({ fake, program, timeoutMs, env }) =>
      createCliAgent(
        await loadPreset("pi"),
        cliConfig("pi", { baseUrl: `${fake.url}/v1`, timeoutMs, env }),
        program,
      ),
    ),
    {
      protectedEdit: "blocked",
      readsOutside: "blocked",
      reportsUsage: true,
      usesModel: true,
      skip: { error: "pi retries a failing API 3 times over ~14 s (see agents.contract.test.ts)" },
    },
  );

  /** Claude Code writes a temporary file next to the file and renames it: its directory takes new files. */
  agentContract(
    "claude (sandboxed)",
    sandboxed(async ({ fake, program, timeoutMs, env }) =>
      createCliAgent(
        await loadPreset("claude"),
        cliConfig("claude", { baseUrl: fake.url, timeoutMs, env: { ...env, CLAUDE_CODE_MAX_RETRIES: "0" } }),
        program,
      ),
    ),
    { protectedEdit: "blocked", readsOutside: "blocked", reportsUsage: true, usesModel: true },
  );

  /**
   * The mini agent edits whatever it is told to: in the sandbox the protected file stays
   * read-only. (Reads outside the worktree: the contract's secret lies in the host's /tmp, which
   * is private in the sandbox; agents-sandbox.test.ts reads the notebook and holdouts instead.)
   */
  agentContract(
    "command (sandboxed)",
    sandboxed(async ({ fake, program, timeoutMs, env }) =>
      createCliAgent(
        await loadPreset("command"),
        cliConfig("command", {
          command: `node ${MINI_AGENT} --prompt-file {prompt_file} --workdir {workdir}`,
          baseUrl: `${fake.url}/v1`,
          timeoutMs,
          env,
        }),
        program,
      ),
    ),
    { protectedEdit: "blocked", usesModel: true },
  );

  /** Codex's own sandbox is off inside autolab's, which keeps its shell commands off the protected file. */
  agentContract(
    "codex (sandboxed)",
    sandboxed(
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
    ),
    { protectedEdit: "blocked", reportsUsage: true, usesModel: true },
  );
}
