import { z } from "zod";
import { AgentFailure } from "../../core/agent-failure.ts";

/** What a researcher says about its change. Only the hypothesis is required: a lost proposal costs more than a terse one. */
export const summarySchema = z.object({
  hypothesis: z.string().trim().min(1, "hypothesis is empty"),
  mechanism: z.string().trim().optional(),
  expected: z.string().trim().optional(),
});

export interface Summary {
  hypothesis: string;
  mechanism?: string;
  expected?: string;
}

/**
 * The summary from a CLI's structured output, else from its final text: the last ```json block
 * that parses, else the last JSON object in the text. No JSON at all → AgentFailure
 * "no_summary"; JSON that is not a summary → "garbage".
 */
export function extractSummary(out: { structured?: unknown; text?: string }, detail = ""): Summary {
  let invalid: string | undefined;
  if (out.structured !== undefined && out.structured !== null) {
    const structured = typeof out.structured === "string" ? tryParse(out.structured) : out.structured;
    const s = validate(structured);
    if (s.ok) return s.summary;
    invalid = s.error;
  }
  const text = out.text ?? "";
  const candidates = [...jsonBlocks(text).reverse(), ...jsonObjects(text).reverse()];
  for (const c of candidates) {
    const s = validate(c);
    if (s.ok) return s.summary;
    invalid ??= s.error;
  }
  if (invalid !== undefined) {
    throw new AgentFailure("garbage", `the agent's summary is not valid: ${invalid}`, detail || tail(text));
  }
  throw new AgentFailure(
    "no_summary",
    'the agent ended without the summary JSON block ({"hypothesis": …, "mechanism": …, "expected": …})',
    detail || tail(text),
  );
}

function validate(v: unknown): { ok: true; summary: Summary } | { ok: false; error: string } {
  const r = summarySchema.safeParse(v);
  if (!r.success) {
    return {
      ok: false,
      error: r.error.issues.map((i) => `${i.path.join(".") || "summary"}: ${i.message}`).join("; "),
    };
  }
  const { hypothesis, mechanism, expected } = r.data;
  return {
    ok: true,
    summary: { hypothesis, ...(mechanism ? { mechanism } : {}), ...(expected ? { expected } : {}) },
  };
}

/** Parsed contents of the fenced code blocks tagged json (or untagged) that hold valid JSON. */
function jsonBlocks(text: string): unknown[] {
  const out: unknown[] = [];
  for (const m of text.matchAll(/```[ \t]*(json|JSON)?[ \t]*\r?\n([\s\S]*?)```/g)) {
    const v = tryParse(m[2] ?? "");
    if (v !== undefined) out.push(v);
  }
  return out;
}

/** Every top-level balanced {...} in the text that parses as a JSON object, in order. */
function jsonObjects(text: string): unknown[] {
  const out: unknown[] = [];
  let i = text.indexOf("{");
  while (i !== -1) {
    const end = matchingBrace(text, i);
    if (end === -1) break;
    const v = tryParse(text.slice(i, end + 1));
    if (v !== undefined && typeof v === "object") {
      out.push(v);
      i = text.indexOf("{", end + 1);
    } else {
      i = text.indexOf("{", i + 1);
    }
  }
  return out;
}

/** Index of the brace closing the one at `start`, skipping strings; -1 if unbalanced. */
function matchingBrace(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{") depth++;
    else if (c === "}") {
      depth--;
      if (depth === 0) return i;
    }
  }
  return -1;
}

function tryParse(s: string): unknown {
  try {
    return JSON.parse(s.trim());
  } catch {
    return undefined;
  }
}

function tail(text: string, lines = 12, chars = 2000): string {
  const t = text.trim().split("\n").slice(-lines).join("\n");
  return t.length > chars ? t.slice(-chars) : t;
}
