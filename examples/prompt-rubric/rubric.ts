// prompt-rubric: the rubric's checks. PROTECTED.
//
// rubric.json lists weighted checks; each `type` is a function here that says whether one
// reply to one ticket passes. A ticket's score is 100 × the weights passed / all weights.
// Deterministic: the same reply always scores the same. (Grading by an LLM judge against
// free-text criteria arrives with autolab's learning issue, #15.)

import type { Ticket } from "./prompt.ts";

export interface Check {
  id: string;
  type: string;
  weight: number;
  field?: "order" | "resolution" | "customer";
  max?: number;
  phrases?: string[];
  team?: string;
}

const words = (s: string) => s.split(/\s+/).filter(Boolean).length;
const norm = (s: string) => s.toLowerCase().replace(/\s+/g, " ");

/** Whether `reply` to `ticket` passes `check`; `others` are the other tickets of the set. */
export function passes(check: Check, reply: string, ticket: Ticket, others: readonly Ticket[]): boolean {
  const text = norm(reply);
  const lines = reply
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
  switch (check.type) {
    case "greets_by_name":
      return (lines[0] ?? "").toLowerCase().includes(ticket.customer.toLowerCase());
    case "mentions_field":
      return text.includes(norm(String(ticket[check.field ?? "order"])).replace(/\.$/, ""));
    case "apology_if_complaint": {
      const sorry = /\b(sorry|apologi[sz]e)/.test(text);
      return ticket.kind === "complaint" ? sorry : !sorry;
    }
    case "steps_as_list":
      return ticket.steps.every((s) =>
        lines.some((l) => /^([-*•]|\d+[.)])\s/.test(l) && norm(l).includes(norm(s))),
      );
    case "max_words":
      return words(reply) <= (check.max ?? Number.POSITIVE_INFINITY);
    case "forbidden":
      return !(check.phrases ?? []).some((p) => text.includes(p.toLowerCase()));
    case "sign_off":
      return (lines.at(-1) ?? "").toLowerCase().includes((check.team ?? "").toLowerCase());
    case "no_foreign_facts": {
      const orders = reply.match(/\b[A-Z]-\d{4}\b/g) ?? [];
      if (orders.some((o) => o !== ticket.order)) return false;
      return !others.some((o) => o.id !== ticket.id && new RegExp(`\\b${o.customer}\\b`).test(reply));
    }
    default:
      throw new Error(`rubric.json: unknown check type "${check.type}"`);
  }
}

/** 0–100 for one reply. */
export function score(
  checks: readonly Check[],
  reply: string,
  ticket: Ticket,
  others: readonly Ticket[],
): number {
  const all = checks.reduce((s, c) => s + c.weight, 0);
  const got = checks.reduce((s, c) => s + (passes(c, reply, ticket, others) ? c.weight : 0), 0);
  return (100 * got) / all;
}
