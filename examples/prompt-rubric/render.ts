// prompt-rubric: each trial's command. PROTECTED.
//
// Builds the prompt for the first ticket of tasks.json with prompt.ts and prints it (to the
// trial's log: what the model will read), then its length:
//   prompt_words: 160
// It scores nothing: evaluate.ts does, on a pristine copy of the committed files.
import { readFileSync } from "node:fs";
import { buildPrompt, type Ticket } from "./prompt.ts";

const [first] = (JSON.parse(readFileSync("tasks.json", "utf8")) as { tasks: Ticket[] }).tasks;
if (!first) throw new Error("tasks.json has no tasks");
const { system, user } = buildPrompt(first);
console.error(`--- system\n${system}\n--- user\n${user}\n---`);
console.log(`prompt_words: ${`${system} ${user}`.split(/\s+/).filter(Boolean).length}`);
