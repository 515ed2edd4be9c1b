import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeModel, startFakeModel } from "./fake-model/server.ts";

/**
 * The fake model server speaks each protocol well enough for the real CLIs (their own tests
 * drive pi, Claude Code and a mini agent through it); these checks pin the shapes and the
 * stateless plan: read → edit → submit → final, by the number of tool results.
 */
let fake: FakeModel;
beforeAll(async () => {
  fake = await startFakeModel({
    file: "/wt/train.py",
    oldText: "LR = 0.01",
    newText: "LR = 0.1",
    summary: { hypothesis: "h", mechanism: "m", expected: "e" },
  });
});
afterAll(() => fake.close());

const post = async (path: string, body: unknown) => {
  const res = await fetch(`${fake.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, type: res.headers.get("content-type") ?? "", text: await res.text() };
};
const sseData = (text: string) =>
  text
    .split("\n")
    .filter((l) => l.startsWith("data: ") && l !== "data: [DONE]")
    .map((l) => JSON.parse(l.slice(6)));

const claudeEdit = {
  name: "Edit",
  input_schema: {
    type: "object",
    properties: {
      file_path: { type: "string" },
      old_string: { type: "string" },
      new_string: { type: "string" },
      replace_all: { type: "boolean" },
    },
    required: ["file_path", "old_string", "new_string"],
  },
};
const claudeRead = {
  name: "Read",
  input_schema: { type: "object", properties: { file_path: { type: "string" } }, required: ["file_path"] },
};

describe("fake model server", () => {
  it("Anthropic Messages: reads, then edits with the tool's own argument names (non-streaming)", async () => {
    const tools = [claudeRead, claudeEdit];
    const r0 = JSON.parse((await post("/v1/messages", { model: "m", tools, messages: [] })).text);
    expect(r0.content[0]).toMatchObject({
      type: "tool_use",
      name: "Read",
      input: { file_path: "/wt/train.py" },
    });
    const messages = [{ role: "user", content: [{ type: "tool_result", tool_use_id: "x", content: "..." }] }];
    const r1 = JSON.parse((await post("/v1/messages", { model: "m", tools, messages })).text);
    expect(r1.content[0].input).toEqual({
      file_path: "/wt/train.py",
      old_string: "LR = 0.01",
      new_string: "LR = 0.1",
    });
    expect(r1.stop_reason).toBe("tool_use");
  });

  it("Anthropic Messages: streams the final answer with the summary block", async () => {
    const messages = [
      { role: "user", content: [{ type: "tool_result", tool_use_id: "a", content: "" }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "b", content: "" }] },
    ];
    const r = await post("/v1/messages?beta=true", {
      model: "m",
      stream: true,
      tools: [claudeEdit],
      messages,
    });
    expect(r.type).toContain("text/event-stream");
    const events = sseData(r.text);
    expect(events.map((e) => e.type)).toEqual([
      "message_start",
      "content_block_start",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    expect(events[2].delta.text).toContain('"hypothesis": "h"');
  });

  it("OpenAI chat completions: streamed tool call with nested edits (pi's edit schema), usage and [DONE]", async () => {
    const edit = {
      type: "function",
      function: {
        name: "edit",
        parameters: {
          type: "object",
          properties: {
            path: { type: "string" },
            edits: {
              type: "array",
              items: {
                type: "object",
                properties: { oldText: { type: "string" }, newText: { type: "string" } },
              },
            },
          },
          required: ["path", "edits"],
        },
      },
    };
    const r = await post("/v1/chat/completions", {
      model: "m",
      stream: true,
      tools: [edit],
      messages: [{ role: "user", content: "go" }],
    });
    expect(r.text.trimEnd().endsWith("data: [DONE]")).toBe(true);
    const chunks = sseData(r.text);
    const call = chunks.find((c) => c.choices[0]?.delta?.tool_calls)?.choices[0].delta.tool_calls[0];
    expect(JSON.parse(call.function.arguments)).toEqual({
      path: "/wt/train.py",
      edits: [{ oldText: "LR = 0.01", newText: "LR = 0.1" }],
    });
    expect(chunks.some((c) => c.choices[0]?.finish_reason === "tool_calls")).toBe(true);
    expect(chunks.at(-1).usage.prompt_tokens).toBeGreaterThan(0);
  });

  it("OpenAI Responses: function_call items, and shell commands for an agent with only a shell tool", async () => {
    const shell = {
      type: "function",
      name: "exec_command",
      parameters: { type: "object", properties: { cmd: { type: "string" } }, required: ["cmd"] },
    };
    const r = await post("/v1/responses", { model: "m", stream: true, tools: [shell], input: [] });
    const events = sseData(r.text);
    expect(events[0].type).toBe("response.created");
    expect(events.at(-1).type).toBe("response.completed");
    const item = events.find((e) => e.type === "response.output_item.done").item;
    expect(item).toMatchObject({ type: "function_call", name: "exec_command" });
    expect(JSON.parse(item.arguments).cmd).toBe("cat '/wt/train.py'");
    const input = [{ type: "function_call_output", call_id: "c", output: "" }];
    const r1 = JSON.parse((await post("/v1/responses", { model: "m", tools: [shell], input })).text);
    expect(JSON.parse(r1.output[0].arguments).cmd).toMatch(
      /^node -e .* '\/wt\/train.py' 'LR = 0.01' 'LR = 0.1'$/,
    );
  });

  it("Gemini: functionCall parts, streamed over SSE or not", async () => {
    const tools = [
      {
        functionDeclarations: [
          {
            name: "replace",
            parametersJsonSchema: {
              type: "object",
              properties: {
                file_path: { type: "string" },
                old_string: { type: "string" },
                new_string: { type: "string" },
                instruction: { type: "string" },
              },
              required: ["file_path", "old_string", "new_string", "instruction"],
            },
          },
        ],
      },
    ];
    const r = await post("/v1beta/models/fake-model:streamGenerateContent?alt=sse", { contents: [], tools });
    const [chunk] = sseData(r.text);
    expect(chunk.candidates[0].content.parts[0].functionCall.args).toMatchObject({
      file_path: "/wt/train.py",
      old_string: "LR = 0.01",
    });
    const plain = JSON.parse(
      (await post("/v1beta/models/fake-model:generateContent", { contents: [] })).text,
    );
    expect(plain.candidates[0].content.parts[0].text).toBeTruthy();
    expect(fake.requests.at(-1)?.model).toBe("fake-model");
  });

  it("answers side requests harmlessly and records everything", async () => {
    expect((await fetch(`${fake.url}/v1/models`)).status).toBe(200);
    const count = JSON.parse((await post("/v1/messages/count_tokens", { messages: [] })).text);
    expect(count.input_tokens).toBeGreaterThan(0);
    expect(fake.requests.filter((r) => r.protocol === "other").map((r) => r.path)).toEqual([
      "/v1/models",
      "/v1/messages/count_tokens",
    ]);
  });

  it("misbehaves on request: HTTP 500", async () => {
    const saved = fake.script;
    fake.script = saved && { ...saved, error: true };
    try {
      expect((await post("/v1/messages", { model: "m", tools: [claudeEdit], messages: [] })).status).toBe(
        500,
      );
    } finally {
      fake.script = saved;
    }
  });
});
