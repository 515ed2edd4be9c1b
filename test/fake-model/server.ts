/**
 * A scripted fake model server for driving real coding-agent CLIs offline (docs: /work/shared/notes/agent-clis.md).
 *
 * It is stateless per request: the reply is chosen from the number of tool results already in
 * the conversation the agent sends.
 *   0 tool results → call the agent's read tool on the target file (skipped if it has none);
 *   1             → call its edit tool, replacing oldText with newText in the target file;
 *   2             → call a submit / structured-output tool with the summary, if one is offered;
 *   otherwise     → final text ending with the summary as a ```json block.
 * A request that offers no tools (title generation, quota probes) gets plain text — or, when the
 * test sets `respond`, the text (or hang, or HTTP error) it scripts: how LLM judges are scripted
 * (test/rubric-grade.test.ts).
 *
 * Argument names come from the tool schemas the agent sent (pi `edit{path, edits:[{oldText,
 * newText}]}`, Claude `Edit{file_path, old_string, new_string}`, …); other required fields are
 * filled with harmless values.
 *
 * Protocols: OpenAI chat completions (streaming or not), OpenAI Responses (streaming SSE or
 * not), Anthropic Messages (streaming SSE or not), Gemini (`:streamGenerateContent?alt=sse`,
 * `:generateContent`). Side requests (model lists, token counts, telemetry) get harmless
 * answers. Every request is recorded.
 *
 * Listens on 127.0.0.1 only.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface FakeSummary {
  hypothesis: string;
  mechanism: string;
  expected: string;
}

export interface FakeScript {
  /** The file to read and edit, as the agent should address it (Claude needs an absolute path). */
  file: string;
  /**
   * Several agents at once (parallel proposers, each in its own worktree): the edit for this
   * request, picked from its text (e.g. the worktree path in the prompt); unset fields (or
   * undefined) fall back to file, oldText and newText.
   */
  targetFor?: (requestText: string) => Partial<Pick<FakeScript, "file" | "oldText" | "newText">> | undefined;
  oldText: string;
  newText: string;
  summary: FakeSummary;
  /** Misbehaviour: edit this file instead of `file` (a string reuses oldText/newText). */
  editFile?: string | { file: string; oldText: string; newText: string };
  /** Misbehaviour: the final answer is prose without any JSON. */
  garbage?: boolean;
  /** Misbehaviour: never answer a request that offers tools (the connection stays open). */
  hang?: boolean;
  /** Misbehaviour: answer requests that offer tools with HTTP 500 (and `retry-after-ms: 0`). */
  error?: boolean;
}

export type Protocol = "chat" | "responses" | "anthropic" | "gemini" | "other";

export interface RecordedRequest {
  method: string;
  path: string;
  protocol: Protocol;
  model: string | undefined;
  stream: boolean;
  /** Names of the tools the request offered. */
  tools: string[];
  /** Tool results already in the conversation. */
  toolResults: number;
  /** What the server answered: read, edit, submit, final, text, error, hang, side. */
  reply: string;
  /** The tool called, when the reply is a tool call. */
  toolCalled?: string;
  body: unknown;
}

export interface FakeModel {
  /** http://127.0.0.1:<port> (no /v1: add it where a client wants it). */
  url: string;
  port: number;
  requests: RecordedRequest[];
  /** The script; may be replaced between proposals. */
  script: FakeScript | undefined;
  /**
   * Scripted answers to requests that offer no tools (LLM judges, src/rubric/): given the model
   * named and the request's text (system + user), the reply text, `{ hang: true }` (the
   * connection stays open), `{ status }` (an HTTP error), or undefined for the default text.
   */
  respond?: (req: {
    model: string | undefined;
    text: string;
  }) => string | { hang: true } | { status: number } | undefined;
  /** Requests that reached a model endpoint (not side requests). */
  modelRequests(): RecordedRequest[];
  close(): Promise<void>;
}

export const DEFAULT_USAGE = { input: 120, output: 30 };

/** A tool as the agent described it, whatever the protocol. */
interface ToolDef {
  name: string;
  schema: JsonSchema;
}

type JsonSchema = {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  enum?: unknown[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  description?: string;
  [k: string]: unknown;
};

/** What the model "decided" to do for one request. */
type Action =
  | { kind: "tool"; name: string; args: Record<string, unknown>; reply: string }
  | { kind: "text"; text: string; reply: string };

export async function startFakeModel(script?: FakeScript): Promise<FakeModel> {
  const requests: RecordedRequest[] = [];
  const hanging = new Set<ServerResponse>();
  let seq = 0;
  const fake: FakeModel = {
    url: "",
    port: 0,
    requests,
    script,
    modelRequests: () => requests.filter((r) => r.protocol !== "other"),
    close: async () => {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      try {
        handle(req, res, Buffer.concat(chunks).toString("utf8"));
      } catch (err) {
        res.writeHead(500, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: `fake model: ${(err as Error).message}` } }));
      }
    });
  });

  function handle(req: IncomingMessage, res: ServerResponse, raw: string) {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const path = url.pathname;
    let body: Record<string, unknown> = {};
    try {
      body = raw ? (JSON.parse(raw) as Record<string, unknown>) : {};
    } catch {}
    const protocol = protocolOf(req.method ?? "GET", path);
    const rec: RecordedRequest = {
      method: req.method ?? "GET",
      path: `${path}${url.search}`,
      protocol,
      model: typeof body.model === "string" ? body.model : geminiModel(path),
      stream: body.stream === true || path.includes(":streamGenerateContent"),
      tools: [],
      toolResults: 0,
      reply: "side",
      body,
    };
    requests.push(rec);
    if (protocol === "other") {
      side(path, req.method ?? "GET", res);
      return;
    }

    const tools = toolsOf(protocol, body);
    rec.tools = tools.map((t) => t.name);
    rec.toolResults = countToolResults(protocol, body);
    const scripted =
      tools.length === 0 ? fake.respond?.({ model: rec.model, text: JSON.stringify(body) }) : undefined;
    if (scripted !== undefined && typeof scripted === "object" && "hang" in scripted) {
      rec.reply = "hang";
      hanging.add(res);
      res.on("close", () => hanging.delete(res));
      return;
    }
    if (scripted !== undefined && typeof scripted === "object") {
      rec.reply = "error";
      res.writeHead(scripted.status, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { type: "api_error", message: "fake model: scripted failure" } }));
      return;
    }
    const s = fake.script;
    if (tools.length > 0 && s?.hang) {
      rec.reply = "hang";
      hanging.add(res);
      res.on("close", () => hanging.delete(res));
      return;
    }
    if (tools.length > 0 && s?.error) {
      rec.reply = "error";
      // "Retry at once": clients that honour it (OpenCode's session retry, the AI SDK) use up
      // their retries in a moment instead of backing off for a minute.
      res.writeHead(500, { "content-type": "application/json", "retry-after-ms": "0", "retry-after": "0" });
      res.end(
        JSON.stringify({
          type: "error",
          error: { type: "api_error", message: "fake model: scripted failure" },
        }),
      );
      return;
    }
    const target = s?.targetFor?.(JSON.stringify(body));
    const action: Action =
      typeof scripted === "string"
        ? { kind: "text", text: scripted, reply: "text" }
        : decide(s && target ? { ...s, ...target } : s, tools, rec.toolResults);
    rec.reply = action.reply;
    if (action.kind === "tool") rec.toolCalled = action.name;
    const id = `fake${++seq}`;
    if (protocol === "chat") {
      replyChat(res, rec, action, id);
      return;
    }
    if (protocol === "responses") {
      replyResponses(res, rec, action, id);
      return;
    }
    if (protocol === "anthropic") {
      replyAnthropic(res, rec, action, id);
      return;
    }
    return replyGemini(res, rec, action);
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const port = (server.address() as AddressInfo).port;
  fake.port = port;
  fake.url = `http://127.0.0.1:${port}`;
  return fake;
}

function protocolOf(method: string, path: string): Protocol {
  if (method !== "POST") return "other";
  if (path.endsWith("/chat/completions")) return "chat";
  if (path.endsWith("/responses")) return "responses";
  if (path.endsWith("/messages")) return "anthropic";
  if (path.includes(":generateContent") || path.includes(":streamGenerateContent")) return "gemini";
  return "other";
}

function geminiModel(path: string): string | undefined {
  return /\/models\/([^/:]+):/.exec(path)?.[1];
}

/** Harmless answers to everything that is not a model turn; recorded all the same. */
function side(path: string, method: string, res: ServerResponse) {
  const json = (status: number, v: unknown) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(v));
  };
  if (path.endsWith("/count_tokens") || path.endsWith(":countTokens")) {
    return json(200, { input_tokens: DEFAULT_USAGE.input, totalTokens: DEFAULT_USAGE.input });
  }
  if (method === "GET" && /\/models\/?$/.test(path)) {
    const ids = ["fake-model"];
    return json(200, {
      object: "list",
      data: ids.map((id) => ({
        id,
        object: "model",
        type: "model",
        display_name: id,
        created: 0,
        owned_by: "fake",
      })),
      models: ids.map((id) => ({
        name: `models/${id}`,
        slug: id,
        supportedGenerationMethods: ["generateContent"],
      })),
      has_more: false,
      first_id: ids[0],
      last_id: ids[0],
    });
  }
  return json(200, {});
}

function toolsOf(protocol: Protocol, body: Record<string, unknown>): ToolDef[] {
  const list = Array.isArray(body.tools) ? (body.tools as Record<string, unknown>[]) : [];
  const out: ToolDef[] = [];
  for (const t of list) {
    if (protocol === "chat") {
      const f = t.function as { name?: string; parameters?: JsonSchema } | undefined;
      if (f?.name) out.push({ name: f.name, schema: f.parameters ?? {} });
    } else if (protocol === "responses") {
      if (typeof t.name === "string") out.push({ name: t.name, schema: (t.parameters as JsonSchema) ?? {} });
    } else if (protocol === "anthropic") {
      if (typeof t.name === "string")
        out.push({ name: t.name, schema: (t.input_schema as JsonSchema) ?? {} });
    } else if (protocol === "gemini") {
      const decls = (t.functionDeclarations ?? t.function_declarations) as
        | Record<string, unknown>[]
        | undefined;
      for (const d of decls ?? []) {
        if (typeof d.name === "string") {
          out.push({
            name: d.name,
            schema: ((d.parametersJsonSchema ?? d.parameters) as JsonSchema) ?? {},
          });
        }
      }
    }
  }
  return out;
}

function countToolResults(protocol: Protocol, body: Record<string, unknown>): number {
  let n = 0;
  if (protocol === "chat") {
    for (const m of (body.messages as Record<string, unknown>[]) ?? []) if (m.role === "tool") n++;
  } else if (protocol === "responses") {
    const input = Array.isArray(body.input) ? (body.input as Record<string, unknown>[]) : [];
    for (const item of input) {
      if (typeof item.type === "string" && item.type.endsWith("_call_output")) n++;
    }
  } else if (protocol === "anthropic") {
    for (const m of (body.messages as Record<string, unknown>[]) ?? []) {
      if (!Array.isArray(m.content)) continue;
      for (const b of m.content as Record<string, unknown>[]) if (b.type === "tool_result") n++;
    }
  } else if (protocol === "gemini") {
    for (const c of (body.contents as Record<string, unknown>[]) ?? []) {
      for (const p of (c.parts as Record<string, unknown>[]) ?? []) if (p.functionResponse) n++;
    }
  }
  return n;
}

const READ_NAMES = /^(read|read_file|readfile|view|cat|open_file)$/i;
const EDIT_NAMES = /^(edit|edit_file|replace|str_replace|str_replace_editor|multiedit|apply_edit)$/i;
const SUBMIT_NAMES = /(submit|structured_?output|final_?answer|summary|finish)/i;
/** Agents without read/edit tools (Codex with an unknown model) get shell commands instead. */
const SHELL_NAMES = /^(exec_command|shell|bash|run_shell_command|local_shell|run_command)$/i;

/** The model's move for one request. */
function decide(s: FakeScript | undefined, tools: ToolDef[], results: number): Action {
  if (tools.length === 0 || !s) return { kind: "text", text: "Fake model: plain text.", reply: "text" };
  const read = tools.find((t) => READ_NAMES.test(t.name));
  const edit = tools.find((t) => EDIT_NAMES.test(t.name));
  const submit = tools.find((t) => SUBMIT_NAMES.test(t.name));
  const target =
    typeof s.editFile === "string"
      ? { file: s.editFile, oldText: s.oldText, newText: s.newText }
      : (s.editFile ?? { file: s.file, oldText: s.oldText, newText: s.newText });
  // The plan, in order; the number of results tells how far along it the conversation is.
  const plan: Action[] = [];
  const shell = tools.find((t) => SHELL_NAMES.test(t.name));
  if (read) plan.push({ kind: "tool", name: read.name, args: fill(read.schema, target), reply: "read" });
  else if (shell && !edit) {
    plan.push({
      kind: "tool",
      name: shell.name,
      args: shellArgs(shell.schema, `cat ${q(target.file)}`),
      reply: "read",
    });
  }
  if (edit) plan.push({ kind: "tool", name: edit.name, args: fill(edit.schema, target), reply: "edit" });
  else if (shell) {
    plan.push({
      kind: "tool",
      name: shell.name,
      args: shellArgs(shell.schema, replaceCommand(target)),
      reply: "edit",
    });
  }
  if (submit && !s.garbage) {
    plan.push({
      kind: "tool",
      name: submit.name,
      args: fillSummary(submit.schema, s.summary),
      reply: "submit",
    });
  }
  const step = plan[results];
  if (step) return step;
  if (s.garbage)
    return { kind: "text", text: "I changed a few things; it should be better now.", reply: "final" };
  return {
    kind: "text",
    text: `I made one change.\n\n\`\`\`json\n${JSON.stringify(s.summary, null, 2)}\n\`\`\`\n`,
    reply: "final",
  };
}

/** Arguments for a read or edit tool, by the names its schema uses. */
function fill(
  schema: JsonSchema,
  t: { file: string; oldText: string; newText: string },
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const props = schema.properties ?? {};
  const required = new Set(schema.required ?? []);
  for (const [name, prop] of Object.entries(props)) {
    const v = valueFor(name, prop, t);
    if (v !== undefined) out[name] = v;
    else if (required.has(name)) out[name] = filler(prop);
  }
  return out;
}

function valueFor(
  name: string,
  prop: JsonSchema,
  t: { file: string; oldText: string; newText: string },
): unknown {
  const n = name.toLowerCase().replace(/[_-]/g, "");
  const type = typeOf(prop);
  if (type === "array" && prop.items && typeOf(prop.items) === "object") return [fill(prop.items, t)];
  if (type !== "string" && type !== undefined) return undefined;
  if (/^(path|filepath|filename|file|absolutepath|target|targetfile)$/.test(n)) return t.file;
  if (/^(old|oldtext|oldstring|oldstr|search|find)$/.test(n)) return t.oldText;
  if (/^(new|newtext|newstring|newstr|replace|replacement|content)$/.test(n)) return t.newText;
  if (n === "instruction" || n === "description") return "Apply the scripted change.";
  return undefined;
}

/** A shell command that replaces the first occurrence of oldText with newText (Node is on every agent's PATH). */
function replaceCommand(t: { file: string; oldText: string; newText: string }): string {
  const js =
    'const f=require("fs"),[p,a,b]=process.argv.slice(1),s=f.readFileSync(p,"utf8");' +
    'if(!s.includes(a)){console.error("old text not found");process.exit(1)}f.writeFileSync(p,s.replace(a,()=>b))';
  return `node -e ${q(js)} ${q(t.file)} ${q(t.oldText)} ${q(t.newText)}`;
}

function q(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** Arguments of a shell tool: `cmd`/`command` as a string, or as an argv array. */
function shellArgs(schema: JsonSchema, cmd: string): Record<string, unknown> {
  const props = schema.properties ?? {};
  const key = ["cmd", "command", "script"].find((k) => k in props) ?? "command";
  const prop = props[key] ?? { type: "string" };
  const out: Record<string, unknown> = {
    [key]: typeOf(prop) === "array" ? ["bash", "-lc", cmd] : cmd,
  };
  for (const r of schema.required ?? []) if (!(r in out)) out[r] = filler(props[r] ?? {});
  return out;
}

function fillSummary(schema: JsonSchema, summary: FakeSummary): Record<string, unknown> {
  const props = schema.properties ?? {};
  const out: Record<string, unknown> = {};
  const required = new Set(schema.required ?? []);
  for (const [name, prop] of Object.entries(props)) {
    if (name in summary) out[name] = summary[name as keyof FakeSummary];
    else if (required.has(name)) out[name] = filler(prop);
  }
  // A schema-less submit tool gets the summary as it is.
  return Object.keys(props).length ? out : { ...summary };
}

function typeOf(s: JsonSchema): string | undefined {
  if (Array.isArray(s.type)) return s.type.find((t) => t !== "null");
  if (typeof s.type === "string") return s.type;
  const alt = s.anyOf ?? s.oneOf;
  if (alt?.[0]) {
    typeOf(alt[0]);
    return;
  }
  return undefined;
}

function filler(s: JsonSchema): unknown {
  if (s.enum?.length) return s.enum[0];
  switch (typeOf(s)) {
    case "number":
    case "integer":
      return 1;
    case "boolean":
      return false;
    case "array":
      return [];
    case "object":
      return {};
    default:
      return "fake";
  }
}

// ——— replies, one per protocol ———

function sse(res: ServerResponse, events: { event?: string; data: unknown }[], done = false): void {
  res.writeHead(200, {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    connection: "keep-alive",
  });
  for (const e of events) {
    res.write(
      `${e.event ? `event: ${e.event}\n` : ""}data: ${typeof e.data === "string" ? e.data : JSON.stringify(e.data)}\n\n`,
    );
  }
  if (done) res.write("data: [DONE]\n\n");
  res.end();
}

function json(res: ServerResponse, v: unknown): void {
  res.writeHead(200, { "content-type": "application/json" });
  res.end(JSON.stringify(v));
}

function replyChat(res: ServerResponse, rec: RecordedRequest, a: Action, id: string) {
  const model = rec.model ?? "fake-model";
  const usage = {
    prompt_tokens: DEFAULT_USAGE.input,
    completion_tokens: DEFAULT_USAGE.output,
    total_tokens: DEFAULT_USAGE.input + DEFAULT_USAGE.output,
  };
  const created = Math.floor(Date.now() / 1000);
  const finish = a.kind === "tool" ? "tool_calls" : "stop";
  const toolCall =
    a.kind === "tool"
      ? { id: `call_${id}`, type: "function", function: { name: a.name, arguments: JSON.stringify(a.args) } }
      : undefined;
  if (!rec.stream) {
    return json(res, {
      id,
      object: "chat.completion",
      created,
      model,
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            content: a.kind === "text" ? a.text : null,
            ...(toolCall ? { tool_calls: [toolCall] } : {}),
          },
          finish_reason: finish,
        },
      ],
      usage,
    });
  }
  const chunk = (delta: unknown, finish_reason: string | null, extra: Record<string, unknown> = {}) => ({
    data: {
      id,
      object: "chat.completion.chunk",
      created,
      model,
      choices: [{ index: 0, delta, finish_reason }],
      ...extra,
    },
  });
  const events: { data: unknown }[] = [chunk({ role: "assistant", content: "" }, null)];
  if (toolCall) events.push(chunk({ tool_calls: [{ index: 0, ...toolCall }] }, null));
  else if (a.kind === "text") events.push(chunk({ content: a.text }, null));
  events.push(chunk({}, finish));
  events.push({ data: { id, object: "chat.completion.chunk", created, model, choices: [], usage } });
  sse(res, events, true);
}

function replyResponses(res: ServerResponse, rec: RecordedRequest, a: Action, id: string) {
  const model = rec.model ?? "fake-model";
  const item =
    a.kind === "tool"
      ? {
          type: "function_call",
          id: `fc_${id}`,
          call_id: `call_${id}`,
          name: a.name,
          arguments: JSON.stringify(a.args),
          status: "completed",
        }
      : {
          type: "message",
          id: `msg_${id}`,
          role: "assistant",
          status: "completed",
          content: [{ type: "output_text", text: a.text, annotations: [] }],
        };
  const usage = {
    input_tokens: DEFAULT_USAGE.input,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: DEFAULT_USAGE.output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: DEFAULT_USAGE.input + DEFAULT_USAGE.output,
  };
  const response = (status: string, output: unknown[]) => ({
    id: `resp_${id}`,
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    status,
    model,
    output,
    ...(status === "completed" ? { usage } : {}),
  });
  if (!rec.stream) {
    json(res, response("completed", [item]));
    return;
  }
  const events: { event?: string; data: unknown }[] = [];
  let seq = 0;
  const ev = (type: string, data: Record<string, unknown>) =>
    events.push({ event: type, data: { type, sequence_number: seq++, ...data } });
  ev("response.created", { response: response("in_progress", []) });
  ev("response.in_progress", { response: response("in_progress", []) });
  if (a.kind === "tool") {
    ev("response.output_item.added", {
      output_index: 0,
      item: { ...item, arguments: "", status: "in_progress" },
    });
    ev("response.function_call_arguments.delta", {
      output_index: 0,
      item_id: item.id,
      delta: (item as { arguments: string }).arguments,
    });
    ev("response.function_call_arguments.done", {
      output_index: 0,
      item_id: item.id,
      arguments: (item as { arguments: string }).arguments,
    });
  } else {
    ev("response.output_item.added", {
      output_index: 0,
      item: { ...item, content: [], status: "in_progress" },
    });
    ev("response.content_part.added", {
      output_index: 0,
      item_id: item.id,
      content_index: 0,
      part: { type: "output_text", text: "", annotations: [] },
    });
    ev("response.output_text.delta", { output_index: 0, item_id: item.id, content_index: 0, delta: a.text });
    ev("response.output_text.done", { output_index: 0, item_id: item.id, content_index: 0, text: a.text });
    ev("response.content_part.done", {
      output_index: 0,
      item_id: item.id,
      content_index: 0,
      part: { type: "output_text", text: a.text, annotations: [] },
    });
  }
  ev("response.output_item.done", { output_index: 0, item });
  ev("response.completed", { response: response("completed", [item]) });
  sse(res, events);
}

function replyAnthropic(res: ServerResponse, rec: RecordedRequest, a: Action, id: string) {
  const model = rec.model ?? "fake-model";
  const block =
    a.kind === "tool"
      ? { type: "tool_use", id: `toolu_${id}`, name: a.name, input: a.args }
      : { type: "text", text: a.text };
  const stop = a.kind === "tool" ? "tool_use" : "end_turn";
  const usage = {
    input_tokens: DEFAULT_USAGE.input,
    output_tokens: DEFAULT_USAGE.output,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
  };
  if (!rec.stream) {
    return json(res, {
      id: `msg_${id}`,
      type: "message",
      role: "assistant",
      model,
      content: [block],
      stop_reason: stop,
      stop_sequence: null,
      usage,
    });
  }
  const events: { event?: string; data: unknown }[] = [];
  const ev = (type: string, data: Record<string, unknown>) =>
    events.push({ event: type, data: { type, ...data } });
  ev("message_start", {
    message: {
      id: `msg_${id}`,
      type: "message",
      role: "assistant",
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { ...usage, output_tokens: 1 },
    },
  });
  if (block.type === "tool_use") {
    ev("content_block_start", {
      index: 0,
      content_block: { type: "tool_use", id: block.id, name: block.name, input: {} },
    });
    ev("content_block_delta", {
      index: 0,
      delta: { type: "input_json_delta", partial_json: JSON.stringify(block.input) },
    });
  } else {
    ev("content_block_start", { index: 0, content_block: { type: "text", text: "" } });
    ev("content_block_delta", {
      index: 0,
      delta: { type: "text_delta", text: (block as { text: string }).text },
    });
  }
  ev("content_block_stop", { index: 0 });
  ev("message_delta", {
    delta: { stop_reason: stop, stop_sequence: null },
    usage: { output_tokens: DEFAULT_USAGE.output },
  });
  ev("message_stop", {});
  sse(res, events);
}

function replyGemini(res: ServerResponse, rec: RecordedRequest, a: Action) {
  const part = a.kind === "tool" ? { functionCall: { name: a.name, args: a.args } } : { text: a.text };
  const payload = {
    candidates: [{ content: { role: "model", parts: [part] }, finishReason: "STOP", index: 0 }],
    usageMetadata: {
      promptTokenCount: DEFAULT_USAGE.input,
      candidatesTokenCount: DEFAULT_USAGE.output,
      totalTokenCount: DEFAULT_USAGE.input + DEFAULT_USAGE.output,
    },
    modelVersion: rec.model ?? "fake-model",
  };
  if (!rec.stream) {
    json(res, payload);
    return;
  }
  sse(res, [{ data: payload }]);
}
