// rubric-writeup: the write-up. THE ONLY EDITABLE FILE.
//
// Writes out/writeup.md, a short research note about one experiment. LLM judges grade it
// against rubric.md (protected) — the question, the evidence, the limits, the tone, the
// length — and autolab records rubric_score (0–100) and the judges' agreement.
//
// An LLM researcher may rewrite the whole text. The knobs below are for the built-in
// optimizer, which only switches sections and sets numbers.
import { mkdirSync, writeFileSync } from "node:fs";

// ---------------------------------------------------------------------------------------
// Knobs: one per line, `const NAME = value;` (program.md's `search:` has the choices).
// STATE_QUESTION: open with the question the experiment answers. EVIDENCE: none, the
// numbers, or the numbers with the experiment they came from. LIMITATIONS: say what was not
// tested. HYPE: sell instead of report. PADDING: sentences of background nobody asked for.
const STATE_QUESTION = false;
const EVIDENCE = "none";
const LIMITATIONS = false;
const HYPE = true;
const PADDING = 6;
// ---------------------------------------------------------------------------------------

const parts: string[] = ["# Learning-rate warmup on tiny-lm", ""];
if (STATE_QUESTION) {
  parts.push(
    "Does a 200-step linear warmup lower the validation loss of tiny-lm at a fixed 5-minute budget?",
    "",
  );
}
for (let i = 0; i < PADDING; i++) {
  parts.push(
    "Language models have become an important topic, and many people are interested in how they are trained.",
  );
}
parts.push("");
if (HYPE) parts.push("Warmup is an amazing trick and the results are great, trust me.");
else parts.push("Warmup helped a little.");
const SENTENCES: Record<string, string> = {
  none: "",
  numbers: "Validation loss went from 3.12 to 3.05.",
  cited: "Validation loss went from 3.12 (experiment #3, 8 seeds) to 3.05 (experiment #7, 8 seeds).",
};
if (SENTENCES[EVIDENCE]) parts.push(SENTENCES[EVIDENCE]);
if (LIMITATIONS) parts.push("", "Limitation: only one model size and one budget were tested.");

mkdirSync("out", { recursive: true });
const text = `${parts.join("\n")}\n`;
writeFileSync("out/writeup.md", text);
console.log(`words: ${text.split(/\s+/).filter(Boolean).length}`);
