/**
 * Failures that a researcher causes (crash, hang, garbage, nothing changed, out of scope) in a
 * row mean something is wrong with its setup, not with one idea: the loop and the scheduler
 * (per role) count them and stop with `AGENT_FAILING`. Unlike trial-streak.ts this streak lives
 * in memory: a resumed run starts counting afresh.
 */
import { join } from "node:path";
import { AutolabError } from "./errors.ts";

/** Consecutive failed proposals of one researcher before the run stops (LoopOptions.maxAgentFailures). */
export const DEFAULT_MAX_AGENT_FAILURES = 5;

/**
 * The error that stops the run. `failures`: "#<n> <reason>", oldest first. `who`: the agent's
 * name (serial loop) or its role (an org), said in the message; the role names its file.
 */
export function agentFailing(
  failures: readonly string[],
  who: { name?: string; role?: string },
  logDir: string,
): AutolabError {
  const whom = who.role ? ` of role ${who.role}` : who.name ? ` (${who.name})` : "";
  const config = who.role ? `org/${who.role}.md` : "program.md";
  return new AutolabError(
    "AGENT_FAILING",
    `the researcher${whom} failed ${failures.length} times in a row:\n  ${failures.map((f) => f.split("\n")[0]).join("\n  ")}`,
    `Check the agent's configuration (${config} \`agent:\`, docs/agents.md) and its logs in ${join(logDir, "<n>", "agent")}; then \`autolab run\` continues the run.`,
  );
}
