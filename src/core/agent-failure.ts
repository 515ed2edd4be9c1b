/**
 * A proposal that did not happen: the researcher crashed, hung past its timeout, returned
 * garbage or changed nothing it was asked to. Agents throw this; the loop records it as an
 * experiment with decision `crash` (or `reject` for no change) and goes on — up to a streak
 * of failures, after which it stops with a diagnosis instead of spinning.
 *
 * Configuration problems (a CLI that is not installed, a missing API key) are AutolabErrors
 * instead: no amount of retrying fixes them.
 */
export type AgentFailureKind = "crashed" | "timeout" | "garbage" | "no_summary" | "refused";

export class AgentFailure extends Error {
  readonly kind: AgentFailureKind;
  /** Last lines of the agent's output, for the notebook (never shown to another agent verbatim). */
  readonly detail: string;
  readonly usage: Record<string, number> | undefined;
  constructor(kind: AgentFailureKind, message: string, detail = "", usage?: Record<string, number>) {
    super(message);
    this.name = "AgentFailure";
    this.kind = kind;
    this.detail = detail;
    this.usage = usage;
  }
}

export function isAgentFailure(err: unknown): err is AgentFailure {
  return err instanceof AgentFailure;
}

/** Lines of a failed researcher's output the terminal shows under its crash line. */
const SHOWN_LINES = 5;

/**
 * What the person at the terminal sees of a failed researcher: the last lines of its output,
 * and a hint when they name a path the researcher's sandbox hides (the host's /tmp, the home
 * directory: docs/security.md), the usual cause of "cannot open /tmp/x/r.sh".
 */
export function failureForTerminal(f: AgentFailure): { lines: string[]; hint?: string } | undefined {
  const lines = f.detail
    .split(/\r?\n/)
    .map((l) => l.trimEnd())
    .filter((l) => l.trim() !== "")
    .slice(-SHOWN_LINES);
  if (lines.length === 0) return undefined;
  const hidden = /(?:^|[\s'"`:(])((?:\/tmp|\/var\/tmp|\/home|\/root|\/run\/user|~)\/[^\s'"`:)]*)/;
  const missing = /no such file|cannot open|can't open|not found|ENOENT|permission denied|EACCES/i;
  const path = lines.map((l) => (missing.test(l) ? hidden.exec(l)?.[1] : undefined)).find(Boolean);
  return {
    lines,
    ...(path
      ? {
          hint: `${path} is outside what the researcher's sandbox shows (the host's /tmp and home are hidden: docs/security.md); put what it needs inside the project`,
        }
      : {}),
  };
}
