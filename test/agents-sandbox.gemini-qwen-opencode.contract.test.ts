import { statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, it } from "vitest";
import { createConfinement } from "../src/app/confinement.ts";
import type { Agent } from "../src/core/types.ts";
import type { Workspace } from "../src/core/workspace.ts";
import { probeSandbox } from "../src/runner/sandbox.ts";
import { type AgentSetup, agentContract } from "./contracts/agent-contract.ts";
import { cliContractAgent } from "./helpers/cli-contract.ts";

/**
 * The agent contract with Gemini CLI, Qwen Code and OpenCode in the researcher sandbox (see
 * agents-sandbox.contract.test.ts; the unsandboxed runs and the reasons for each skip are in
 * agents.gemini-qwen.contract.test.ts and agents.codex-opencode.contract.test.ts).
 */
const SANDBOX = probeSandbox();
const SLOW_START =
  "starts in seconds, longer than the case's timeout; the abort case kills it mid-request instead";
const GEMINI_NO_RETRIES = join(
  dirname(fileURLToPath(import.meta.url)),
  "fake-model",
  "gemini-no-retries.json",
);

function underOtherWritableDir(file: string): boolean {
  for (let d = dirname(file); ; d = dirname(d)) {
    if ((statSync(d).mode & 0o002) !== 0) return true;
    if (dirname(d) === d) return false;
  }
}

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

if (!SANDBOX.ok) {
  describe.skip(`sandboxed agent contracts (${SANDBOX.reason})`, () => {
    it("needs bubblewrap", () => {});
  });
} else {
  /** Gemini CLI writes in place: only the editable file is writable. */
  agentContract(
    "gemini (sandboxed)",
    sandboxed(
      cliContractAgent("gemini", ({ fake, env }) => ({
        baseUrl: fake.url,
        env: { ...env, GEMINI_CLI_SYSTEM_SETTINGS_PATH: GEMINI_NO_RETRIES },
      })),
    ),
    {
      protectedEdit: "blocked",
      readsOutside: "blocked",
      reportsUsage: true,
      usesModel: true,
      skip: {
        timeout: `Gemini CLI ${SLOW_START}`,
        ...(underOtherWritableDir(GEMINI_NO_RETRIES)
          ? { error: "Gemini ignores the no-retries settings file under a directory others can write to" }
          : {}),
      },
    },
  );

  /** Qwen Code writes through a temporary file renamed over the file: its directory takes new files. */
  agentContract(
    "qwen (sandboxed)",
    sandboxed(cliContractAgent("qwen", ({ fake }) => ({ baseUrl: `${fake.url}/v1` }))),
    {
      protectedEdit: "blocked",
      readsOutside: "blocked",
      reportsUsage: true,
      usesModel: true,
      skip: {
        timeout: `Qwen Code ${SLOW_START}`,
        error: "Qwen Code retries a failing API 7 times over ~75 s, not configurable",
      },
    },
  );

  /** OpenCode writes in place: only the editable file is writable. */
  agentContract(
    "opencode (sandboxed)",
    sandboxed(cliContractAgent("opencode", ({ fake }) => ({ baseUrl: `${fake.url}/v1` }))),
    {
      protectedEdit: "blocked",
      readsOutside: "blocked",
      reportsUsage: true,
      usesModel: true,
      skip: { timeout: `OpenCode ${SLOW_START}` },
    },
  );
}
