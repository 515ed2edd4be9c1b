// rubric-writeup: a stand-in for LLM judges, so the example runs with no model and no
// network beyond 127.0.0.1. PROTECTED.
//
// Plain JavaScript (not TypeScript) so that it starts on any Node the README allows (20 too).
//   node judge-server.mjs           # listens on 127.0.0.1:8766 (--port N to change)
//
// It answers OpenAI-compatible chat completions (POST /v1/chat/completions) the way autolab's
// rubric step asks them: one criterion of rubric.md per request, the note between
// <answer-…> tags, a JSON reply {"level": n, "reason": "…"}. It is not a model: each
// "judge" is a few deterministic rules per criterion.
//   careful   reads numbers and where they came from.
//   quick     counts any number as evidence and is looser on length: it disagrees with careful
//             on notes that give numbers without their source.
//   gullible  gives every criterion its top level: the canary (a known-bad answer in
//             rubric.md) catches it, and autolab flags it and leaves its grades out.
//   garbage   answers prose instead of JSON: recorded as a judge failure.
import { createServer } from "node:http";

const HYPE = /\b(amazing|great|huge|revolutionary|incredible|trust me)\b/gi;

function words(note) {
  return note.split(/\s+/).filter(Boolean).length;
}

const careful = (criterion, note) => {
  switch (criterion) {
    case "question": {
      const q = note.split(/(?<=[.?!])\s+/).find((s) => s.trim().endsWith("?"));
      if (q && /\b(loss|accuracy|time|speed|budget|measur)/i.test(q))
        return { level: 2, reason: "a measurable question" };
      if (q) return { level: 1, reason: "a question without a measure" };
      return { level: 0, reason: "no question" };
    }
    case "evidence": {
      const numbers = /\d+\.\d+|\d+%/.test(note);
      const cited = /experiment #\d+|exp(eriment)? #\d+/i.test(note);
      if (numbers && cited) return { level: 2, reason: "numbers with their experiments" };
      if (numbers) return { level: 1, reason: "numbers without their source" };
      return { level: 0, reason: "no numbers" };
    }
    case "limitations":
      return /\b(limitation|caveat|not tested|only one)\b/i.test(note)
        ? { level: 1, reason: "names a limitation" }
        : { level: 0, reason: "no limitation" };
    case "tone": {
      const hype = note.match(HYPE)?.length ?? 0;
      return { level: hype === 0 ? 2 : hype === 1 ? 1 : 0, reason: `${hype} words of hype` };
    }
    case "concise": {
      const n = words(note);
      return { level: n <= 60 ? 2 : n <= 120 ? 1 : 0, reason: `${n} words` };
    }
    default:
      return { level: 0, reason: "unknown criterion" };
  }
};

const quick = (criterion, note) => {
  if (criterion === "evidence") {
    return /\d+\.\d+|\d+%/.test(note)
      ? { level: 2, reason: "has numbers" }
      : { level: 0, reason: "no numbers" };
  }
  if (criterion === "concise") {
    const n = words(note);
    return { level: n <= 90 ? 2 : n <= 150 ? 1 : 0, reason: `${n} words` };
  }
  return careful(criterion, note);
};

function levelsMax(prompt) {
  return Number(/an integer from 0 to (\d+)/.exec(prompt)?.[1] ?? 1);
}

function answer(model, prompt) {
  const criterion = /Criterion "([a-z0-9_-]+)"/.exec(prompt)?.[1] ?? "";
  const note = /<answer-([0-9a-f]+)>\n([\s\S]*)\n<\/answer-\1>/.exec(prompt)?.[2] ?? "";
  if (model === "garbage") return "This note reads well overall, I would give it a good grade.";
  if (model === "gullible") return JSON.stringify({ level: levelsMax(prompt), reason: "looks excellent" });
  const grader = model === "quick" ? quick : careful;
  return JSON.stringify(grader(criterion, note));
}

const portArg = process.argv.indexOf("--port");
const port = portArg > 0 ? Number(process.argv[portArg + 1]) : 8766;

const server = createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: "only POST /v1/chat/completions" } }));
      return;
    }
    let body = {};
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch {}
    const prompt = (body.messages ?? [])
      .map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content)))
      .join("\n");
    const model = body.model ?? "careful";
    res.writeHead(200, { "content-type": "application/json" });
    res.end(
      JSON.stringify({
        id: "judge",
        object: "chat.completion",
        created: Math.floor(Date.now() / 1000),
        model,
        choices: [
          { index: 0, message: { role: "assistant", content: answer(model, prompt) }, finish_reason: "stop" },
        ],
        usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
      }),
    );
  });
});
server.listen(port, "127.0.0.1", () => {
  const addr = server.address();
  console.log(
    `judges listening on http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : port}/v1`,
  );
});
