// prompt-rubric: the prompt. THE ONLY EDITABLE FILE.
//
// buildPrompt(ticket) returns the messages a model gets to answer one support ticket:
// { system, user }. evaluate.ts (protected) sends them to a model — an OpenAI-compatible
// endpoint when AUTOLAB_EXAMPLE_BASE_URL is set, otherwise the deterministic stand-in in
// offline-model.ts — and scores each reply with rubric.json.
//
// An LLM researcher may rewrite anything here (wording, sections, examples). The knobs below
// are for the built-in optimizer, which only switches sections and sets numbers.

export interface Ticket {
  id: string;
  customer: string;
  order: string;
  kind: "complaint" | "question";
  message: string;
  resolution: string;
  steps: string[];
}

// ---------------------------------------------------------------------------------------
// Knobs: one per line, `const NAME = value;` (the built-in optimizer rewrites these lines;
// the choices and ranges are in program.md's `search:`).
// INCLUDE_ROLE: open with who the assistant is. INCLUDE_RULES: the house rules for a reply.
// TONE: the voice asked for. STEP_FORMAT: how to lay out steps the customer must take.
// MAX_WORDS: the length asked for. N_EXAMPLES: worked examples shown before the ticket.
const INCLUDE_ROLE = false;
const INCLUDE_RULES = false;
const TONE = "friendly";
const STEP_FORMAT = "prose";
const MAX_WORDS = 300;
const N_EXAMPLES = 0;
// ---------------------------------------------------------------------------------------

const ROLE = `You are a customer support agent for Acme, an online shop. You write the reply
the customer will read, in your own voice as a person on the support team. Never mention
being an AI or a language model.`;

const RULES = `Rules for every reply:
- Address the customer by name in the first line.
- Include the order number.
- State the resolution: what happens next, in the words of the case notes.
- Apologize only when the customer complains.
- Sign off as "Acme Support".`;

const TONES: Record<string, string> = {
  neutral: "Tone: neutral and clear.",
  friendly: "Tone: friendly and warm.",
  formal: "Tone: formal and polite.",
  terse: "Tone: terse. No pleasantries.",
};

const EXAMPLES: { ticket: Ticket; reply: string }[] = [
  {
    ticket: {
      id: "example-1",
      customer: "Sam",
      order: "X-0001",
      kind: "question",
      message: "Where is my order X-0001?",
      resolution: "it ships tomorrow",
      steps: [],
    },
    reply: "Hello Sam,\n\nAbout order X-0001: it ships tomorrow.\n\n— Acme Support",
  },
  {
    ticket: {
      id: "example-2",
      customer: "Ada",
      order: "X-0002",
      kind: "complaint",
      message: "Order X-0002 is missing a cable.",
      resolution: "a cable ships today",
      steps: ["keep the parcel", "watch for the tracking email"],
    },
    reply:
      "Hello Ada,\n\nWe are sorry for the trouble. About order X-0002: a cable ships today.\n- keep the parcel\n- watch for the tracking email\n\n— Acme Support",
  },
  {
    ticket: {
      id: "example-3",
      customer: "Ravi",
      order: "X-0003",
      kind: "question",
      message: "Can I pay order X-0003 by invoice?",
      resolution: "invoice payment is enabled for your account",
      steps: [],
    },
    reply:
      "Hello Ravi,\n\nAbout order X-0003: invoice payment is enabled for your account.\n\n— Acme Support",
  },
  {
    ticket: {
      id: "example-4",
      customer: "Eva",
      order: "X-0004",
      kind: "complaint",
      message: "The mug in order X-0004 is chipped.",
      resolution: "a new mug ships today",
      steps: [],
    },
    reply:
      "Hello Eva,\n\nWe are sorry for the trouble. About order X-0004: a new mug ships today.\n\n— Acme Support",
  },
];

function caseNotes(t: Ticket): string {
  const steps = t.steps.length ? `\nSteps for the customer: ${t.steps.join("; ")}.` : "";
  return `Customer: ${t.customer}\nOrder: ${t.order}\nMessage: ${t.message}\nResolution: ${t.resolution}.${steps}`;
}

export function buildPrompt(ticket: Ticket): { system: string; user: string } {
  const system: string[] = [];
  if (INCLUDE_ROLE) system.push(ROLE);
  if (INCLUDE_RULES) system.push(RULES);
  system.push(TONES[TONE] ?? "");
  if (ticket.steps.length) {
    system.push(
      (STEP_FORMAT as string) === "bullets"
        ? "Give the customer's steps as a bulleted list, one step a line."
        : "Mention the customer's steps in a sentence.",
    );
  }
  system.push(`Keep the reply under ${MAX_WORDS} words.`);
  const user: string[] = [];
  for (const ex of EXAMPLES.slice(0, N_EXAMPLES)) {
    user.push(`Example case:\n${caseNotes(ex.ticket)}\nExample reply:\n${ex.reply}`);
  }
  user.push(`Case:\n${caseNotes(ticket)}\nWrite the reply.`);
  return { system: system.join("\n\n"), user: user.join("\n\n---\n\n") };
}
