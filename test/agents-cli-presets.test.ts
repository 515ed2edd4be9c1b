import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createCliAgent, findExecutable } from "../src/agents/cli/cli-agent.ts";
import type { PresetInput } from "../src/agents/cli/preset.ts";
import aider, { parseAiderOutput } from "../src/agents/cli/presets/aider.ts";
import codex, { parseCodexJson } from "../src/agents/cli/presets/codex.ts";
import gemini, { geminiPolicy, parseGeminiJson } from "../src/agents/cli/presets/gemini.ts";
import opencode, { opencodeConfig, parseOpencodeJson } from "../src/agents/cli/presets/opencode.ts";
import qwen, { parseQwenJson } from "../src/agents/cli/presets/qwen.ts";
import { SUMMARY_JSON_SCHEMA } from "../src/agents/cli/prompt.ts";
import { AgentFailure } from "../src/core/agent-failure.ts";
import type { AgentConfig, ProposalContext } from "../src/core/types.ts";
import { parseProgram } from "../src/program/index.ts";
import { probeSandbox } from "../src/runner/sandbox.ts";

/**
 * Unit tests of the Codex, Gemini, OpenCode, Qwen Code and Aider presets: the command lines they
 * build and the parsing of outputs captured from the real CLIs (Aider: from its documented
 * output; it cannot be installed here, so this is all the testing it gets). The real CLIs are
 * run by the contract suites (agents.codex-opencode / agents.gemini-qwen .contract.test.ts).
 */
const S = { hypothesis: "h", mechanism: "m", expected: "e" };

const MD = `---
name: p
objective: { metric: loss, direction: minimize }
run:
  command: python3 train.py
  budget: 5s
files:
  editable: [train.py, model/net.py]
  protected: [evaluate.py]
---
Go.
`;

function input(config: Partial<AgentConfig>, apiKey?: string): PresetInput {
  const logDir = mkdtempSync(join(tmpdir(), "autolab-preset-"));
  const home = join(logDir, "home");
  const ctx: ProposalContext = {
    worktree: "/wt",
    program: parseProgram(MD, "/wt/program.md"),
    best: { n: 0, metric: 1 },
    history: [],
    contextText: "# Lab notebook: p",
    logDir,
  };
  return {
    config: { backend: "x", model: "m1", args: [], env: {}, ...config },
    ctx,
    prompt: "PROMPT",
    promptFile: join(logDir, "prompt.md"),
    home,
    editable: ["/wt/train.py", "/wt/model/net.py"],
    protected: ["/wt/evaluate.py"],
    summarySchema: SUMMARY_JSON_SCHEMA,
    apiKey,
    executablePath: "/bin/x",
  };
}

const jsonl = (lines: unknown[]) => lines.map((l) => JSON.stringify(l)).join("\n");

const failure = (fn: () => unknown): AgentFailure => {
  try {
    fn();
  } catch (err) {
    if (err instanceof AgentFailure) return err;
    throw err;
  }
  throw new Error("expected an AgentFailure");
};

describe("codex preset", () => {
  it("configures a Responses provider for base_url; the key goes in the environment only", async () => {
    const inv = await codex.invocation(
      input({ baseUrl: "http://127.0.0.1:8000/v1/", args: ["--x"] }, "sk-1"),
    );
    expect(inv.args.slice(0, 6)).toEqual([
      "exec",
      "--skip-git-repo-check",
      "--ephemeral",
      "--json",
      "--sandbox",
      // Codex's own sandbox cannot start where bubblewrap is installed (see the preset).
      probeSandbox().ok ? "danger-full-access" : "workspace-write",
    ]);
    const flags = inv.args.join(" ");
    expect(flags).toContain('model_provider="autolab"');
    expect(flags).toContain('model_providers.autolab.base_url="http://127.0.0.1:8000/v1"');
    expect(flags).toContain('model_providers.autolab.wire_api="responses"');
    expect(flags).toContain('model_providers.autolab.env_key="AUTOLAB_CODEX_API_KEY"');
    expect(flags).toContain("features.plugins=false");
    expect(inv.args.slice(-3)).toEqual(["m1", "--x", "PROMPT"]);
    expect(flags).not.toContain("sk-1");
    expect(inv.env.AUTOLAB_CODEX_API_KEY).toBe("sk-1");
    expect(inv.env.CODEX_HOME).toMatch(/home\/\.codex$/);
    // A local server might enforce a schema on every turn: none unless the endpoint is OpenAI's.
    expect(inv.args).not.toContain("--output-schema");
  });

  it("asks OpenAI for the summary by --output-schema (no base_url, or provider openai)", async () => {
    for (const over of [{}, { baseUrl: "https://proxy/v1", provider: "openai" }]) {
      const inv = await codex.invocation(input(over));
      const schema = inv.args[inv.args.indexOf("--output-schema") + 1] ?? "";
      expect(JSON.parse(readFileSync(schema, "utf8"))).toEqual(SUMMARY_JSON_SCHEMA);
    }
  });

  it("needs a model with base_url, and cannot speak Anthropic", () => {
    const program = { files: { editable: [], protected: [] } } as never;
    const cfg = (over: Partial<AgentConfig>): AgentConfig => ({
      backend: "codex",
      args: [],
      env: {},
      ...over,
    });
    expect(() => createCliAgent(codex, cfg({ baseUrl: "http://x/v1" }), program)).toThrow(
      expect.objectContaining({ code: "AGENT_CONFIG_INVALID" }),
    );
    expect(() => createCliAgent(codex, cfg({ model: "m", provider: "anthropic" }), program)).toThrow(
      expect.objectContaining({ code: "AGENT_CONFIG_INVALID" }),
    );
  });

  it("reads the last agent message and the usage; a JSON final message is the structured summary", () => {
    const out = parseCodexJson({
      stdout: jsonl([
        { type: "thread.started", thread_id: "t" },
        {
          type: "item.completed",
          item: { id: "0", type: "error", message: "Model metadata for `m` not found." },
        },
        { type: "item.completed", item: { id: "1", type: "agent_message", text: "thinking" } },
        { type: "item.completed", item: { id: "2", type: "agent_message", text: JSON.stringify(S) } },
        { type: "turn.completed", usage: { input_tokens: 360, cached_input_tokens: 0, output_tokens: 90 } },
      ]),
      stderr: "",
      exitCode: 0,
    });
    expect(out).toEqual({
      text: JSON.stringify(S),
      structured: S,
      usage: { inputTokens: 360, outputTokens: 90 },
    });
  });

  it("reports a failed turn with the HTTP status Codex logged on stderr", () => {
    // Captured from codex 0.169.0 against an endpoint answering 500.
    const out = parseCodexJson({
      stdout: jsonl([
        { type: "thread.started", thread_id: "t" },
        { type: "turn.started" },
        {
          type: "error",
          message: "We’re currently experiencing high demand, which may cause temporary errors.",
        },
        {
          type: "turn.failed",
          error: { message: "We’re currently experiencing high demand, which may cause temporary errors." },
        },
      ]),
      stderr:
        'Reading additional input from stdin...\n2026-11-22T03:47:12.410759Z DEBUG codex_http_client::client: Request completed method=POST url=http://127.0.0.1:44873/v1/responses status=500 Internal Server Error headers={"content-type": "application/json"} version=HTTP/1.1\n',
      exitCode: 1,
    });
    expect(out.error).toBe(
      "API error (HTTP 500 Internal Server Error): We’re currently experiencing high demand, which may cause temporary errors.",
    );
    expect(failure(() => parseCodexJson({ stdout: "hello", stderr: "", exitCode: 0 })).kind).toBe("garbage");
  });
});

describe("gemini preset", () => {
  it("writes settings (API key auth, no telemetry, only file tools, max turns) and the policy", async () => {
    const i = input({ baseUrl: "http://127.0.0.1:4000/v1beta/", maxTurns: 7 }, "k");
    const inv = await gemini.invocation(i);
    expect(inv.args.slice(0, 2)).toEqual(["-p", "PROMPT"]);
    expect(inv.args).toEqual(expect.arrayContaining(["--skip-trust", "auto_edit", "--model", "m1"]));
    expect(inv.env).toEqual({ GOOGLE_GEMINI_BASE_URL: "http://127.0.0.1:4000", GEMINI_API_KEY: "k" });
    const settings = JSON.parse(readFileSync(join(i.home, ".gemini", "settings.json"), "utf8"));
    expect(settings.security.auth.selectedType).toBe("gemini-api-key");
    expect(settings.model.maxSessionTurns).toBe(7);
    expect(settings.privacy.usageStatisticsEnabled).toBe(false);
    expect(settings.tools.core).not.toContain("run_shell_command");
    const policy = inv.args[inv.args.indexOf("--policy") + 1] ?? "";
    expect(readFileSync(policy, "utf8")).toBe(geminiPolicy("/wt", i.editable));
  });

  it("allows replace/write_file exactly on the editable files, by the argument string Gemini matches", () => {
    const toml = geminiPolicy("/wt", ["/wt/train.py"]);
    const patterns = [...toml.matchAll(/^argsPattern = (".*")$/gm)].map(
      (m) => new RegExp(JSON.parse(m[1] ?? "")),
    );
    expect(patterns).toHaveLength(3); // absolute, relative, ./relative
    // Gemini's stable stringify wraps each top-level "key":value in NUL characters.
    const args = (file: string) =>
      `{\u0000"file_path":${JSON.stringify(file)}\u0000,\u0000"new_string":"x"\u0000}`;
    expect(patterns.some((p) => p.test(args("/wt/train.py")))).toBe(true);
    expect(patterns.some((p) => p.test(args("train.py")))).toBe(true);
    expect(patterns.some((p) => p.test(args("/wt/train.pyc")))).toBe(false);
    expect(patterns.some((p) => p.test(args("/wt/evaluate.py")))).toBe(false);
    expect(toml).toMatch(/decision = "deny"\npriority = 500/);
  });

  it("reads the result object, and an error printed on stderr", () => {
    const ok = parseGeminiJson({
      stdout: JSON.stringify({
        session_id: "s",
        response: "done",
        stats: { models: { m1: { tokens: { input: 360, prompt: 360, candidates: 90 } } } },
      }),
      stderr: "",
      exitCode: 0,
    });
    expect(ok).toEqual({ text: "done", usage: { inputTokens: 360, outputTokens: 90 } });
    // Captured from gemini 0.61.0 against an endpoint answering 500 (exit code 244 = 500 & 0xff).
    const err = parseGeminiJson({
      stdout: "",
      stderr:
        'Attempt 1 failed: {"type":"error"}. Max attempts reached\n    at Turn.run (chunk.js:1:1) {\n  status: 500\n}\n{\n  "session_id": "s",\n  "error": {\n    "type": "Error",\n    "message": "{\\"type\\":\\"error\\",\\"error\\":{\\"message\\":\\"fake model: scripted failure\\"}}",\n    "code": 500\n  }\n}\n',
      exitCode: 244,
    });
    expect(err.error).toMatch(/^API error \(HTTP 500\): .*scripted failure/);
  });
});

describe("opencode preset", () => {
  it("puts the endpoint and the permissions in OPENCODE_CONFIG_CONTENT; edit only on the editable files", async () => {
    const i = input({ baseUrl: "http://127.0.0.1:8000/v1", maxTurns: 12 }, "sk-2");
    const inv = await opencode.invocation(i);
    expect(inv.args).toEqual(["run", "--pure", "--format", "json", "--model", "autolab/m1", "PROMPT"]);
    expect(inv.env.AUTOLAB_OPENCODE_API_KEY).toBe("sk-2");
    expect(inv.env.OPENCODE_DISABLE_PROJECT_CONFIG).toBe("1");
    expect(inv.env.OPENCODE_CONFIG_CONTENT).not.toContain("sk-2");
    const cfg = JSON.parse(inv.env.OPENCODE_CONFIG_CONTENT ?? "{}");
    expect(cfg).toEqual(opencodeConfig(i));
    expect(cfg.provider.autolab).toMatchObject({
      npm: "@ai-sdk/openai-compatible",
      options: { baseURL: "http://127.0.0.1:8000/v1", apiKey: "{env:AUTOLAB_OPENCODE_API_KEY}" },
    });
    expect(cfg.permission).toMatchObject({ "*": "deny", read: "allow", external_directory: "deny" });
    expect(cfg.permission.edit).toEqual({
      "*": "deny",
      "train.py": "allow",
      "wt/train.py": "allow",
      "model/net.py": "allow",
      "wt/model/net.py": "allow",
    });
    expect(cfg.agent.build.steps).toBe(12);
    // The config dir looks as if OpenCode's plugin package were installed: no npm install at start.
    const lock = JSON.parse(readFileSync(join(i.home, ".config", "opencode", "package-lock.json"), "utf8"));
    expect(lock.packages[""].dependencies).toHaveProperty("@opencode-ai/plugin");
  });

  it("needs a model", () => {
    const program = { files: { editable: [], protected: [] } } as never;
    expect(() => createCliAgent(opencode, { backend: "opencode", args: [], env: {} }, program)).toThrow(
      expect.objectContaining({ code: "AGENT_CONFIG_INVALID" }),
    );
  });

  it("reads the last step's text, usage and cost, and an API error event", () => {
    const out = parseOpencodeJson({
      stdout: jsonl([
        { type: "step_start", part: { type: "step-start" } },
        { type: "text", part: { type: "text", text: "first" } },
        {
          type: "step_finish",
          part: {
            tokens: { input: 120, output: 30, reasoning: 0, cache: { read: 5, write: 0 } },
            cost: 0.25,
          },
        },
        { type: "step_start", part: { type: "step-start" } },
        { type: "text", part: { type: "text", text: "final" } },
        { type: "step_finish", part: { tokens: { input: 120, output: 30 }, cost: 0 } },
      ]),
      stderr: "",
      exitCode: 0,
    });
    expect(out).toEqual({ text: "final", usage: { inputTokens: 245, outputTokens: 60, costUsd: 0.25 } });
    // Captured from opencode 1.18.33 after its retries of an endpoint answering 500.
    const err = parseOpencodeJson({
      stdout: jsonl([
        {
          type: "error",
          error: {
            name: "APIError",
            data: { message: "fake model: scripted failure", statusCode: 500, isRetryable: true },
          },
        },
      ]),
      stderr: "",
      exitCode: 1,
    });
    expect(err.error).toBe("API error (HTTP 500): fake model: scripted failure");
  });
});

describe("qwen preset", () => {
  it("allows Edit on the editable files only, declines the rest headless; the key stays off the command line", async () => {
    const i = input({ baseUrl: "http://127.0.0.1:8000/v1", maxTurns: 9 }, "sk-3");
    const inv = await qwen.invocation(i);
    expect(inv.args[0]).toBe("PROMPT");
    expect(inv.args).toEqual(
      expect.arrayContaining([
        "--approval-mode",
        "default",
        "--auth-type",
        "openai",
        "--max-session-turns",
        "9",
      ]),
    );
    expect(inv.args[inv.args.indexOf("--openai-base-url") + 1]).toBe("http://127.0.0.1:8000/v1");
    expect(inv.args[inv.args.indexOf("--exclude-tools") + 1]).toContain("run_shell_command");
    expect(inv.args.join(" ")).not.toContain("sk-3");
    expect(inv.env).toEqual({ OPENAI_API_KEY: "sk-3" });
    const settings = JSON.parse(readFileSync(join(i.home, ".qwen", "settings.json"), "utf8"));
    expect(settings.permissions.allow).toEqual(["Edit(//wt/train.py)", "Edit(//wt/model/net.py)"]);
    expect(settings.privacy.usageStatisticsEnabled).toBe(false);
  });

  it("reads the result; an API failure after Qwen's retries is an error", () => {
    const ok = parseQwenJson({
      stdout: JSON.stringify([
        { type: "system", subtype: "init" },
        { type: "assistant", message: { content: [{ type: "text", text: "done" }] } },
        {
          type: "result",
          subtype: "success",
          is_error: false,
          result: "done",
          usage: { input_tokens: 360, output_tokens: 90, cache_read_input_tokens: 10 },
        },
      ]),
      stderr: "",
      exitCode: 0,
    });
    expect(ok).toEqual({ text: "done", usage: { inputTokens: 370, outputTokens: 90 } });
    // Captured from qwen 0.24.4 after its retries of an endpoint answering 500.
    const err = parseQwenJson({
      stdout: JSON.stringify([
        {
          type: "assistant",
          message: { content: [{ type: "text", text: "[API Error: 500 fake model: scripted failure]" }] },
        },
        {
          type: "result",
          subtype: "error_during_execution",
          is_error: true,
          usage: { input_tokens: 0, output_tokens: 0 },
          error: { message: "[API Error: 500 fake model: scripted failure]" },
        },
      ]),
      stderr: "",
      exitCode: 1,
    });
    expect(err.error).toBe("error_during_execution: [API Error: 500 fake model: scripted failure]");
    expect(failure(() => parseQwenJson({ stdout: "hi", stderr: "", exitCode: 0 })).kind).toBe("garbage");
  });
});

/** Aider cannot be installed here (Python): these tests are all it gets. */
describe("aider preset (untested against the real aider)", () => {
  it("names the editable files on the command line, takes the prompt from its file, keeps its files out of the worktree", async () => {
    const i = input({ baseUrl: "http://127.0.0.1:8000/v1/" }, "sk-4");
    const inv = await aider.invocation(i);
    const a = inv.args;
    const flagValue = (flag: string) => a[a.indexOf(flag) + 1];
    expect(flagValue("--message-file")).toBe(i.promptFile);
    expect(a).toEqual(
      expect.arrayContaining([
        "--yes-always",
        "--no-auto-commits",
        "--no-git",
        "--no-suggest-shell-commands",
        "--no-pretty",
      ]),
    );
    expect(flagValue("--model")).toBe("openai/m1");
    expect(flagValue("--weak-model")).toBe("openai/m1");
    expect(flagValue("--openai-api-base")).toBe("http://127.0.0.1:8000/v1");
    expect(flagValue("--chat-history-file")).toBe(join(i.ctx.logDir, "aider.chat.history.md"));
    expect(flagValue("--input-history-file")).toBe(join(i.ctx.logDir, "aider.input.history"));
    expect(a.slice(-2)).toEqual(["/wt/train.py", "/wt/model/net.py"]);
    expect(a).not.toContain("/wt/evaluate.py");
    expect(a.join(" ")).not.toContain("sk-4");
    expect(inv.env).toEqual({ OPENAI_API_KEY: "sk-4", LITELLM_LOCAL_MODEL_COST_MAP: "True" });
  });

  it("passes a model as is without base_url, and needs one", async () => {
    const inv = await aider.invocation(input({ model: "sonnet", args: ["--edit-format", "diff"] }));
    expect(inv.args[inv.args.indexOf("--model") + 1]).toBe("sonnet");
    expect(inv.args).not.toContain("--openai-api-base");
    expect(inv.args.slice(-4)).toEqual(["--edit-format", "diff", "/wt/train.py", "/wt/model/net.py"]);
    const program = { files: { editable: [], protected: [] } } as never;
    expect(() =>
      createCliAgent({ ...aider, executable: "sh" }, { backend: "aider", args: [], env: {} }, program),
    ).toThrow(expect.objectContaining({ code: "AGENT_CONFIG_INVALID" }));
  });

  it.skipIf(findExecutable("aider"))("stops the run before it starts when aider is not installed", () => {
    const program = { files: { editable: [], protected: [] } } as never;
    expect(() => createCliAgent(aider, { backend: "aider", model: "m", args: [], env: {} }, program)).toThrow(
      expect.objectContaining({
        code: "AGENT_NOT_INSTALLED",
        hint: expect.stringContaining("aider-install"),
      }),
    );
  });

  it("reads the answer as text, token and cost lines as usage, and a litellm exception as an API failure", () => {
    const stdout = [
      "Aider v0.86.1",
      "Model: openai/m1 with diff edit format",
      "",
      "train.py",
      "```python",
      "<<<<<<< SEARCH",
      "LEARNING_RATE = 0.01",
      "=======",
      "LEARNING_RATE = 0.1",
      ">>>>>>> REPLACE",
      "```",
      "",
      "```json",
      JSON.stringify(S),
      "```",
      "",
      "Tokens: 2.3k sent, 172 received. Cost: $0.0094 message, $0.0094 session.",
      "Applied edit to train.py",
    ].join("\n");
    const out = parseAiderOutput({ stdout, stderr: "", exitCode: 0 });
    expect(out.text).toBe(stdout);
    expect(out.usage).toEqual({ inputTokens: 2300, outputTokens: 172, costUsd: 0.0094 });
    const err = parseAiderOutput({
      stdout: "litellm.APIConnectionError: OpenAIException - Connection error.\nRetrying in 0.2 seconds...\n",
      stderr: "",
      exitCode: 0,
    });
    expect(err.error).toBe("litellm.APIConnectionError: OpenAIException - Connection error.");
  });
});
