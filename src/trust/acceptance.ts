/**
 * program.md `acceptance:` → a Judge. "noise" (the default) is the noise-aware rule;
 * "greedy" reproduces autoresearch's keep-if-better for comparison; "greedy-final" is greedy
 * with the run's answer re-measured in the budget's reserve, and "posterior" builds on the best
 * posterior mean (src/trust/posterior-judge.ts, issue #38; docs/trust.md has the verdict).
 */

import { AutolabError } from "../core/errors.ts";
import type { Judge } from "../core/judge.ts";
import type { Program } from "../core/types.ts";
import { greedyJudge } from "./greedy-judge.ts";
import { createNoiseJudge, type NoiseJudgeOptions } from "./noise-judge.ts";
import { createObjectivesJudge } from "./objectives-judge.ts";
import { createPosteriorJudge } from "./posterior-judge.ts";

export const ACCEPTANCE_RULES = ["noise", "greedy", "greedy-final", "posterior"] as const;
export type AcceptanceRule = (typeof ACCEPTANCE_RULES)[number];
export const DEFAULT_ACCEPTANCE: AcceptanceRule = "noise";

/** `options` are the noise rule's (the other rules take their defaults). */
export function createJudge(rule: string = DEFAULT_ACCEPTANCE, options: NoiseJudgeOptions = {}): Judge {
  if (rule === "greedy") return greedyJudge;
  if (rule === "noise") return createNoiseJudge(options);
  if (rule === "greedy-final") return createPosteriorJudge({ shrinkage: false });
  if (rule === "posterior") return createPosteriorJudge();
  throw new AutolabError(
    "ACCEPTANCE_INVALID",
    `unknown acceptance rule "${rule}"`,
    `use one of ${ACCEPTANCE_RULES.join(", ")} (default ${DEFAULT_ACCEPTANCE})`,
  );
}

/** The program's judge: its acceptance rule, wrapped for several objectives when it has them. */
export function judgeFor(
  program: Pick<Program, "acceptance" | "objectives">,
  options: NoiseJudgeOptions = {},
): Judge {
  const rule = createJudge(program.acceptance, options);
  return program.objectives ? createObjectivesJudge(rule, program.objectives) : rule;
}
