// A minimal "coding-agent CLI" for the `command` backend's tests: it reads the prompt file,
// talks OpenAI chat completions to AUTOLAB_BASE_URL (the fake model server), executes the
// read/edit tool calls it gets back on the files they name, and prints the model's final text.
// Usage: node mini-agent.mjs --prompt-file <file> --workdir <dir>
import { readFileSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";

const arg = (name) => {
  const i = process.argv.indexOf(name);
  return i === -1 ? undefined : process.argv[i + 1];
};
const promptFile = arg("--prompt-file") ?? process.env.AUTOLAB_PROMPT_FILE;
const workdir = arg("--workdir") ?? process.env.AUTOLAB_WORKDIR ?? process.cwd();
const base = (process.env.AUTOLAB_BASE_URL ?? "").replace(/\/+$/, "");
if (!promptFile || !base) {
  console.error("mini-agent: needs --prompt-file and AUTOLAB_BASE_URL");
  process.exit(2);
}

const tools = [
  {
    type: "function",
    function: {
      name: "read",
      description: "Read a file",
      parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
    },
  },
  {
    type: "function",
    function: {
      name: "edit",
      description: "Replace old_string with new_string in a file",
      parameters: {
        type: "object",
        properties: {
          path: { type: "string" },
          old_string: { type: "string" },
          new_string: { type: "string" },
        },
        required: ["path", "old_string", "new_string"],
      },
    },
  },
];
const messages = [{ role: "user", content: readFileSync(promptFile, "utf8") }];

for (let turn = 0; turn < 8; turn++) {
  const res = await fetch(`${base}/chat/completions`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      authorization: `Bearer ${process.env.AUTOLAB_API_KEY ?? "none"}`,
    },
    body: JSON.stringify({
      model: process.env.AUTOLAB_MODEL ?? "fake-model",
      messages,
      tools,
      stream: false,
    }),
  });
  if (!res.ok) {
    console.error(`mini-agent: HTTP ${res.status}: ${await res.text()}`);
    process.exit(1);
  }
  const msg = (await res.json()).choices[0].message;
  messages.push(msg);
  if (!msg.tool_calls?.length) {
    console.log(msg.content ?? "");
    process.exit(0);
  }
  for (const call of msg.tool_calls) {
    const args = JSON.parse(call.function.arguments);
    const file = resolve(workdir, args.path);
    let content;
    try {
      if (call.function.name === "read") content = readFileSync(file, "utf8");
      else {
        const old = readFileSync(file, "utf8");
        if (!old.includes(args.old_string)) throw new Error(`old_string not found in ${args.path}`);
        writeFileSync(file, old.replace(args.old_string, args.new_string));
        content = "edited";
      }
    } catch (err) {
      content = `error: ${err.message}`;
    }
    messages.push({ role: "tool", tool_call_id: call.id, content });
  }
}
console.error("mini-agent: too many turns");
process.exit(1);
