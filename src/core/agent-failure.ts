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
