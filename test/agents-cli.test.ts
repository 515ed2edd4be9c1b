import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { shellQuote } from "../src/agents/cli/cli-agent.ts";
import { agentEnv, PLACEHOLDER_KEY, resolveApiKey } from "../src/agents/cli/env.ts";
import type { CliPreset } from "../src/agents/cli/preset.ts";
import { parseClaudeJson } from "../src/agents/cli/presets/claude.ts";
import { parsePiJson } from "../src/agents/cli/presets/pi.ts";
import { buildPrompt, SUMMARY_JSON_SCHEMA } from "../src/agents/cli/prompt.ts";
import { extractSummary } from "../src/agents/cli/summary.ts";
import { AgentFailure } from "../src/core/agent-failure.ts";
import type { AgentConfig, ProposalContext } from "../src/core/types.ts";
import { parseProgram } from "../src/program/index.ts";

const S = { hypothesis: "h", mechanism: "m", expected: "e" };

const failure = (fn: () => unknown): AgentFailure => {
  try {
    fn();
  } catch (err) {
    if (err instanceof AgentFailure) return err;
    throw err;
  }
  throw new Error("expected an AgentFailure");
};

describe("extractSummary", () => {
  it("prefers structured output, then the last json block, then the last JSON object", () => {
    expect(extractSummary({ structured: S, text: "junk" })).toEqual(S);
    expect(extractSummary({ structured: JSON.stringify(S) })).toEqual(S);
    const text = `First idea:\n\`\`\`json\n{"hypothesis": "old"}\n\`\`\`\nFinal:\n\`\`\`json\n${JSON.stringify(S)}\n\`\`\`\n`;
    expect(extractSummary({ text })).toEqual(S);
    expect(extractSummary({ text: `Done. {"hypothesis": "x {y}", "mechanism": "z"} bye` })).toEqual({
      hypothesis: "x {y}",
      mechanism: "z",
    });
  });

  it("falls back to the text when the structured output is not a summary", () => {
    expect(extractSummary({ structured: { foo: 1 }, text: JSON.stringify(S) })).toEqual(S);
  });

  it("says no_summary without JSON and garbage for JSON that is not a summary", () => {
    expect(failure(() => extractSummary({ text: "I improved it." })).kind).toBe("no_summary");
    expect(failure(() => extractSummary({ text: "" })).kind).toBe("no_summary");
    const bad = failure(() => extractSummary({ text: '```json\n{"hypothesis": ""}\n```' }));
    expect(bad.kind).toBe("garbage");
    expect(bad.message).toMatch(/hypothesis/);
    expect(failure(() => extractSummary({ text: '{"idea": 3}' })).kind).toBe("garbage");
  });
});

describe("buildPrompt", () => {
  const md = `---
name: p
objective: { metric: val_bpb, direction: minimize }
run:
  command: python3 train.py
  budget: 5s
files:
  editable: [train.py, model/net.py]
  protected: [prepare.py]
---
Go.
`;
  const ctx: ProposalContext = {
    worktree: "/wt",
    program: parseProgram(md, "/wt/program.md"),
    best: { n: 0, metric: 1 },
    history: [],
    contextText: "# Lab notebook: p\nBest: #0 val_bpb = 1",
    logDir: "/logs",
  };

  it("names the editable files by absolute path, the protected ones, the notebook and the summary", () => {
    const p = buildPrompt(ctx);
    expect(p).toContain("- /wt/train.py\n- /wt/model/net.py");
    expect(p).toContain("/wt/prepare.py");
    expect(p).toContain("ONE focused change");
    expect(p).toContain("# Lab notebook: p");
    expect(p).toMatch(
      /```json\n\{"hypothesis": .*"mechanism": .*"expected": "expected effect on val_bpb"\}\n```/,
    );
    expect(buildPrompt(ctx, { summaryTool: "submit_summary" })).toContain("`submit_summary`");
  });

  it("has a JSON schema of the summary", () => {
    expect(SUMMARY_JSON_SCHEMA.required).toEqual(["hypothesis", "mechanism", "expected"]);
  });
});

describe("agentEnv", () => {
  const host = {
    PATH: "/bin",
    HOME: "/root",
    ANTHROPIC_API_KEY: "sk-ant",
    OPENAI_API_KEY: "sk-oai",
    GITHUB_TOKEN: "gh",
    ANTHROPIC_BASE_URL: "https://proxy",
  };
  const preset = (hostKeys: CliPreset["hostKeys"]) => ({ hostKeys }) as CliPreset;
  const config = (over: Partial<AgentConfig> = {}): AgentConfig => ({
    backend: "x",
    args: [],
    env: {},
    ...over,
  });

  it("never gives a base_url endpoint the host's keys", () => {
    const env = agentEnv(preset("all"), config({ baseUrl: "http://127.0.0.1:1" }), undefined, {}, host);
    expect(env.ANTHROPIC_API_KEY).toBeUndefined();
    expect(env.OPENAI_API_KEY).toBeUndefined();
    expect(env.GITHUB_TOKEN).toBeUndefined();
    expect(env.PATH).toBe("/bin");
  });

  it("without base_url passes the keys the preset names, and agent.env wins", () => {
    const env = agentEnv(
      preset(["ANTHROPIC_API_KEY"]),
      config({ env: { X: "1" } }),
      undefined,
      { X: "0" },
      host,
    );
    expect(env.ANTHROPIC_API_KEY).toBe("sk-ant");
    expect(env.OPENAI_API_KEY).toBeUndefined();
    expect(env.ANTHROPIC_BASE_URL).toBe("https://proxy");
    expect(env.X).toBe("1");
  });

  it("points HOME and the XDG dirs at the isolated home", () => {
    const home = mkdtempSync(join(tmpdir(), "autolab-home-"));
    const env = agentEnv(preset("none"), config(), home, {}, host);
    expect(env.HOME).toBe(home);
    expect(env.XDG_CONFIG_HOME).toBe(join(home, ".config"));
  });

  it("resolves the key from api_key_env, a placeholder for a bare base_url, else none", () => {
    expect(resolveApiKey(config({ apiKeyEnv: "K" }), { K: "secret" })).toBe("secret");
    expect(resolveApiKey(config({ baseUrl: "http://x" }), {})).toBe(PLACEHOLDER_KEY);
    expect(resolveApiKey(config(), {})).toBeUndefined();
    expect(() => resolveApiKey(config({ apiKeyEnv: "K" }), {})).toThrow(
      expect.objectContaining({ code: "AGENT_API_KEY_MISSING" }),
    );
  });
});

describe("machine output of the CLIs", () => {
  it("pi: an API failure is an error even with exit code 0", () => {
    const lines = [
      { type: "session", id: "s" },
      {
        type: "message_end",
        message: {
          role: "assistant",
          content: [],
          stopReason: "error",
          errorMessage: "500: boom",
          usage: { input: 0, output: 0 },
        },
      },
      { type: "auto_retry_end", success: false, finalError: "500: boom" },
    ];
    const out = parsePiJson({
      stdout: lines.map((l) => JSON.stringify(l)).join("\n"),
      stderr: "",
      exitCode: 0,
    });
    expect(out.error).toBe("500: boom");
  });

  it("pi: usage is summed over assistant messages; submit_summary is the structured summary", () => {
    const lines = [
      {
        type: "message_end",
        message: { role: "assistant", content: [], usage: { input: 10, output: 2, cost: { total: 0.5 } } },
      },
      { type: "tool_execution_start", toolName: "submit_summary", args: S },
      {
        type: "message_end",
        message: {
          role: "assistant",
          content: [{ type: "text", text: "done" }],
          usage: { input: 5, output: 1, cacheRead: 3 },
        },
      },
    ];
    const out = parsePiJson({
      stdout: lines.map((l) => JSON.stringify(l)).join("\n"),
      stderr: "",
      exitCode: 0,
    });
    expect(out).toEqual({
      text: "done",
      structured: S,
      usage: { inputTokens: 18, outputTokens: 3, costUsd: 0.5 },
    });
  });

  it("pi and claude: output that is not their JSON is garbage", () => {
    expect(failure(() => parsePiJson({ stdout: "hello", stderr: "", exitCode: 0 })).kind).toBe("garbage");
    expect(failure(() => parseClaudeJson({ stdout: "hello", stderr: "", exitCode: 0 })).kind).toBe("garbage");
  });

  it("claude: is_error carries the reason; structured_output and usage are read", () => {
    const err = parseClaudeJson({
      stdout: JSON.stringify({ type: "result", is_error: true, subtype: "error_max_turns", result: "" }),
      stderr: "",
      exitCode: 1,
    });
    expect(err.error).toMatch(/error_max_turns/);
    const ok = parseClaudeJson({
      stdout: JSON.stringify({
        type: "result",
        is_error: false,
        result: "{}",
        structured_output: S,
        total_cost_usd: 0.01,
        usage: { input_tokens: 3, cache_read_input_tokens: 4, output_tokens: 5 },
      }),
      stderr: "",
      exitCode: 0,
    });
    expect(ok).toEqual({
      text: "{}",
      structured: S,
      usage: { inputTokens: 7, outputTokens: 5, costUsd: 0.01 },
    });
  });
});

describe("shellQuote", () => {
  it("quotes what the shell would interpret", () => {
    expect(shellQuote("/a/b.txt")).toBe("/a/b.txt");
    expect(shellQuote("it's $HOME")).toBe(`'it'\\''s $HOME'`);
  });
});
