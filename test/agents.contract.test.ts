import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { createCliAgent } from "../src/agents/cli/cli-agent.ts";
import { CLI_BACKENDS, loadPreset } from "../src/agents/cli/register.ts";
import { createAgent } from "../src/agents/index.ts";
import { createScriptedAgent } from "../src/agents/scripted-agent.ts";
import type { Agent, AgentConfig } from "../src/core/types.ts";
import { agentContract } from "./contracts/agent-contract.ts";

const MINI_AGENT = join(dirname(fileURLToPath(import.meta.url)), "fake-model", "mini-agent.mjs");

/**
 * The scripted researcher follows the fake server's script directly (it has no model): it edits
 * whatever file the script names, so the loop's scope check is what stops a protected edit.
 */
agentContract(
  "scripted",
  ({ fake }): Agent => ({
    name: "scripted",
    async propose(ctx) {
      const s = fake.script;
      if (!s) throw new Error("no script");
      const target =
        typeof s.editFile === "string"
          ? { file: s.editFile, oldText: s.oldText, newText: s.newText }
          : (s.editFile ?? s);
      return createScriptedAgent([
        {
          ...s.summary,
          edits: {
            [relative(ctx.worktree, target.file)]: (old) => old.replace(target.oldText, target.newText),
          },
        },
      ]).propose(ctx);
    },
  }),
  {
    protectedEdit: "scope-check",
    skip: {
      garbage: "the scripted agent replays edits: it has no model output that could be garbage",
      hang: "the scripted agent has no process and no clock of its own",
      error: "the scripted agent calls no model",
    },
  },
);

const cliConfig = (backend: string, over: Partial<AgentConfig>): AgentConfig => ({
  backend,
  model: "fake-model",
  args: [],
  env: {},
  ...over,
});

/** pi blocks edits outside the editable files, and reads outside the worktree, with its tool_call extension. */
agentContract(
  "pi",
  async ({ fake, program, timeoutMs, env }) =>
    createCliAgent(
      await loadPreset("pi"),
      cliConfig("pi", { baseUrl: `${fake.url}/v1`, timeoutMs, env }),
      program,
    ),
  {
    protectedEdit: "blocked",
    readsOutside: "blocked",
    reportsUsage: true,
    usesModel: true,
    skip: {
      error:
        "pi retries a failing API 3 times over ~14 s before giving up (exit 0, stopReason error): parsePiJson's unit test covers the outcome",
    },
  },
);

/**
 * Claude Code denies edits outside its `--allowedTools Edit(//path)` rules (permission mode
 * dontAsk), and reads outside its working directory.
 */
agentContract(
  "claude",
  async ({ fake, program, timeoutMs, env }) =>
    createCliAgent(
      await loadPreset("claude"),
      // Claude Code retries a failing API for minutes by default.
      cliConfig("claude", { baseUrl: fake.url, timeoutMs, env: { ...env, CLAUDE_CODE_MAX_RETRIES: "0" } }),
      program,
    ),
  { protectedEdit: "blocked", readsOutside: "blocked", reportsUsage: true, usesModel: true },
);

/**
 * A generic command cannot be limited (the mini agent reads and edits anything): the loop's
 * scope check rejects what it touched outside the editable files.
 */
agentContract(
  "command",
  async ({ fake, program, timeoutMs, env }) =>
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
  { protectedEdit: "scope-check", readsOutside: "allowed", usesModel: true },
);

describe("CLI agent backends", () => {
  it("are registered by their preset file names", async () => {
    expect(CLI_BACKENDS).toEqual(
      expect.arrayContaining(["aider", "claude", "codex", "command", "gemini", "opencode", "pi", "qwen"]),
    );
    for (const b of CLI_BACKENDS) expect((await loadPreset(b)).backend).toBe(b);
  });

  it("refuse a missing executable before anything runs, with the install command", async () => {
    const preset = { ...(await loadPreset("claude")), executable: "autolab-no-such-cli" };
    const program = { files: { editable: [], protected: [] } } as never;
    expect(() => createCliAgent(preset, cliConfig("claude", {}), program)).toThrow(
      expect.objectContaining({
        code: "AGENT_NOT_INSTALLED",
        hint: expect.stringContaining("npm install -g @anthropic-ai/claude-code"),
      }),
    );
  });

  it("refuse a command backend without a command, and one whose program is missing", async () => {
    const program = { files: { editable: [], protected: [] } } as never;
    await expect(createAgent(cliConfig("command", { model: undefined }), program, 0)).rejects.toMatchObject({
      code: "AGENT_CONFIG_INVALID",
    });
    await expect(
      createAgent(cliConfig("command", { command: "autolab-no-such-tool {prompt_file}" }), program, 0),
    ).rejects.toMatchObject({ code: "AGENT_NOT_INSTALLED" });
  });

  it("refuse an api_key_env that is not set", async () => {
    const program = { files: { editable: [], protected: [] } } as never;
    await expect(
      createAgent(
        cliConfig("pi", { baseUrl: "http://127.0.0.1:9/v1", apiKeyEnv: "AUTOLAB_TEST_UNSET_KEY" }),
        program,
        0,
      ),
    ).rejects.toMatchObject({ code: "AGENT_API_KEY_MISSING" });
  });
});
