/**
 * Directives: what the person running a lab tells its researchers while it runs (`autolab
 * direct "<text>"`, issue #36), without a restart and without touching program.md. Each is a
 * note in the notebook (its text and time recorded, append-only); a withdrawal is a later note
 * naming it. The active ones reach every next researcher's context, fenced (views.ts).
 */
import { formatUtcMinute } from "./format.ts";
import type { NoteRecord } from "./ledger.ts";

const GIVEN = "DIRECTIVE: ";
const WITHDRAWN = "DIRECTIVE WITHDRAWN: ";

export interface Directive {
  /** 1, 2, …: the order they were given in (what `--withdraw` names). */
  id: number;
  text: string;
  at: string;
  withdrawnAt?: string;
}

export const directiveNote = (text: string): string => `${GIVEN}${text}`;
export const withdrawalNote = (id: number): string => `${WITHDRAWN}${id}`;

/** Every directive of a run's notes, oldest first, withdrawn ones marked. */
export function directivesOf(notes: readonly NoteRecord[]): Directive[] {
  const out: Directive[] = [];
  for (const n of notes) {
    if (n.experimentId !== null) continue;
    if (n.text.startsWith(GIVEN))
      out.push({ id: out.length + 1, text: n.text.slice(GIVEN.length), at: n.createdAt });
    else if (n.text.startsWith(WITHDRAWN)) {
      const d = out[Number(n.text.slice(WITHDRAWN.length)) - 1];
      if (d && d.withdrawnAt === undefined) d.withdrawnAt = n.createdAt;
    }
  }
  return out;
}

export function activeDirectives(notes: readonly NoteRecord[]): Directive[] {
  return directivesOf(notes).filter((d) => d.withdrawnAt === undefined);
}

/** "2. 2026-11-28 14:05 UTC (withdrawn 14:30 …): text" — one line each (--list, the report). */
export function directiveLine(d: Directive): string {
  const withdrawn = d.withdrawnAt ? ` (withdrawn ${formatUtcMinute(d.withdrawnAt)} UTC)` : "";
  return `${d.id}. ${formatUtcMinute(d.at)} UTC${withdrawn}: ${d.text.replace(/\s*\n\s*/g, " / ")}`;
}
