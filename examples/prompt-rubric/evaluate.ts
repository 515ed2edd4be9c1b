// prompt-rubric: the evaluator. PROTECTED: experiments may not edit this file.
//
// For each ticket of tasks.json (and of holdout/tasks.json, which trials never see), builds
// the prompt with prompt.ts's buildPrompt, gets a reply from a model, and scores the reply
// with the weighted checks of rubric.json (rubric.ts). Prints:
//   score: 72.5            mean rubric score over tasks.json's tickets, 0–100 (the objective)
//   holdout_score: 70.1    the same over holdout/tasks.json (a holdout metric)
//   prompt_words: 160      mean length of the prompt (system + user), in words
//   reply_words: 85        mean length of a reply
//   pass.<check>: 0.83     the share of tickets that passed each check
//
// The model: an OpenAI-compatible chat-completions endpoint when AUTOLAB_EXAMPLE_BASE_URL is
// set (e.g. http://127.0.0.1:8000/v1; AUTOLAB_EXAMPLE_MODEL names the model, default
// "default"; AUTOLAB_EXAMPLE_API_KEY is sent as a bearer token when set; temperature 0, the
// trial's seed), otherwise the deterministic offline stand-in of offline-model.ts.
//
// prompt.ts runs in a child process with none of this environment (no API key): what it
// prints goes to stderr, never into the metrics, and all it can return is the prompts.

import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { offlineReply } from "./offline-model.ts";
import type { Ticket } from "./prompt.ts";
import { type Check, passes, score } from "./rubric.ts";

const RENDER = "--render";
const CALL_TIMEOUT_MS = 60_000;

type Prompt = { system: string; user: string };
type Reply = { ok: true; prompts: Prompt[] } | { ok: false; error: string };

function fail(message: string): never {
  console.error(`evaluate: ${message}`);
  process.exit(1);
}

function readTickets(file: string): Ticket[] {
  return (JSON.parse(readFileSync(file, "utf8")) as { tasks: Ticket[] }).tasks;
}

/** Child mode: import ./prompt.ts, build the prompt of every ticket it is sent. */
function render(): void {
  const send = process.send?.bind(process);
  if (!send) fail(`${RENDER} is for evaluate's own use`);
  process.once("message", async (tickets: Ticket[]) => {
    let reply: Reply;
    try {
      const mod = (await import(pathToFileURL(path.join(process.cwd(), "prompt.ts")).href)) as {
        buildPrompt?: (t: Ticket) => Prompt;
      };
      if (typeof mod.buildPrompt !== "function")
        throw new Error("prompt.ts does not export buildPrompt(ticket)");
      const prompts = tickets.map((t) => {
        const p = mod.buildPrompt?.(structuredClone(t));
        if (typeof p?.system !== "string" || typeof p?.user !== "string") {
          throw new Error(
            `buildPrompt returned ${JSON.stringify(p)?.slice(0, 80)}, not { system, user } strings`,
          );
        }
        return { system: p.system, user: p.user };
      });
      reply = { ok: true, prompts };
    } catch (err) {
      reply = { ok: false, error: err instanceof Error ? err.message : String(err) };
    }
    send(reply, () => process.disconnect());
  });
}

function buildPrompts(tickets: Ticket[]): Promise<Prompt[]> {
  return new Promise((resolve, reject) => {
    const env: Record<string, string> = {};
    for (const k of ["PATH", "HOME", "TMPDIR", "LANG"]) if (process.env[k]) env[k] = process.env[k] as string;
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), RENDER], {
      stdio: ["ignore", "pipe", "inherit", "ipc"],
      env,
    });
    child.stdout?.pipe(process.stderr);
    let answered = false;
    child.on("message", (r: Reply) => {
      answered = true;
      if (r.ok) resolve(r.prompts);
      else reject(new Error(r.error));
    });
    child.on("error", reject);
    child.on("exit", (code, signal) => {
      if (!answered)
        reject(new Error(`prompt.ts's process exited without prompts (${signal ?? `code ${code}`})`));
    });
    child.send(tickets);
  });
}

/** One chat completion from the configured endpoint. */
async function modelReply(base: string, p: Prompt): Promise<string> {
  const url = `${base.replace(/\/+$/, "")}/chat/completions`;
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (process.env.AUTOLAB_EXAMPLE_API_KEY)
    headers.authorization = `Bearer ${process.env.AUTOLAB_EXAMPLE_API_KEY}`;
  let res: Response;
  try {
    res = await fetch(url, {
      method: "POST",
      headers,
      signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
      body: JSON.stringify({
        model: process.env.AUTOLAB_EXAMPLE_MODEL || "default",
        temperature: 0,
        seed: Number(process.env.AUTOLAB_SEED ?? 0),
        messages: [
          { role: "system", content: p.system },
          { role: "user", content: p.user },
        ],
      }),
    });
  } catch (err) {
    fail(
      `cannot reach the model at ${url}: ${err instanceof Error ? ((err.cause as Error | undefined)?.message ?? err.message) : err}.` +
        " In autolab's sandbox trials have no network: add `network: true` under program.md's `sandbox:`, or unset AUTOLAB_EXAMPLE_BASE_URL to use the offline stand-in.",
    );
  }
  if (!res.ok) fail(`the model at ${url} answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
  const body = (await res.json()) as { choices?: { message?: { content?: unknown } }[] };
  const content = body.choices?.[0]?.message?.content;
  if (typeof content !== "string")
    fail(`the model at ${url} sent no message content: ${JSON.stringify(body).slice(0, 300)}`);
  return content;
}

async function main(): Promise<void> {
  if (!existsSync("prompt.ts")) fail("no prompt.ts here: run evaluate from the example directory");
  const checks = (JSON.parse(readFileSync("rubric.json", "utf8")) as { checks: Check[] }).checks;
  const dev = readTickets("tasks.json");
  const holdoutFile = path.join("holdout", "tasks.json");
  const holdout =
    existsSync(holdoutFile) && readFileSync(holdoutFile, "utf8").trim() ? readTickets(holdoutFile) : [];
  const base = process.env.AUTOLAB_EXAMPLE_BASE_URL?.trim();
  console.error(
    base
      ? `evaluate: replies from ${process.env.AUTOLAB_EXAMPLE_MODEL || "default"} at ${base}`
      : "evaluate: replies from the offline stand-in (offline-model.ts); set AUTOLAB_EXAMPLE_BASE_URL for a real model",
  );
  let prompts: Prompt[];
  try {
    prompts = await buildPrompts([...dev, ...holdout]);
  } catch (err) {
    fail(err instanceof Error ? err.message : String(err));
  }
  const words = (s: string) => s.split(/\s+/).filter(Boolean).length;
  const results: { ticket: Ticket; reply: string; prompt: Prompt }[] = [];
  for (const [i, ticket] of [...dev, ...holdout].entries()) {
    const prompt = prompts[i] as Prompt;
    const reply = base ? await modelReply(base, prompt) : offlineReply(prompt.system, prompt.user);
    results.push({ ticket, reply, prompt });
  }
  const devResults = results.slice(0, dev.length);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(xs.length, 1);
  const scoreOf = (set: typeof results, tickets: Ticket[]) =>
    mean(set.map((r) => score(checks, r.reply, r.ticket, tickets)));
  console.error(`evaluate: the reply to ${dev[0]?.id}:\n${devResults[0]?.reply}\n`);
  console.log(`score: ${scoreOf(devResults, dev).toFixed(3)}`);
  if (holdout.length) console.log(`holdout_score: ${scoreOf(results.slice(dev.length), holdout).toFixed(3)}`);
  console.log(
    `prompt_words: ${mean(devResults.map((r) => words(r.prompt.system) + words(r.prompt.user))).toFixed(1)}`,
  );
  console.log(`reply_words: ${mean(devResults.map((r) => words(r.reply))).toFixed(1)}`);
  for (const c of checks) {
    const rate = mean(devResults.map((r) => (passes(c, r.reply, r.ticket, dev) ? 1 : 0)));
    console.log(`pass.${c.id}: ${rate.toFixed(3)}`);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv[2] === RENDER) render();
  else await main();
}
