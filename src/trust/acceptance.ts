/**
 * program.md `acceptance:` → a Judge. "noise" (the default) is the noise-aware rule;
 * "greedy" reproduces autoresearch's keep-if-better for comparison.
 */

import { AutolabError } from "../core/errors.ts";
import type { Judge } from "../core/judge.ts";
import type { Program } from "../core/types.ts";
import { greedyJudge } from "./greedy-judge.ts";
import { createNoiseJudge, type NoiseJudgeOptions } from "./noise-judge.ts";
import { createObjectivesJudge } from "./objectives-judge.ts";

export const ACCEPTANCE_RULES = ["noise", "greedy"] as const;
export type AcceptanceRule = (typeof ACCEPTANCE_RULES)[number];
export const DEFAULT_ACCEPTANCE: AcceptanceRule = "noise";

export function createJudge(rule: string = DEFAULT_ACCEPTANCE, options: NoiseJudgeOptions = {}): Judge {
  if (rule === "greedy") return greedyJudge;
  if (rule === "noise") return createNoiseJudge(options);
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
