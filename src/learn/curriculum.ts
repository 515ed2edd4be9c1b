/**
 * The curriculum of issue #15 (item 3): over a portfolio of programs, which one to run next.
 * The rule aims at the learnability frontier — the programs where the configuration being
 * benched succeeds about half the time (a success: a run that ends with a kept improvement the
 * acceptance rule believes) — because a program it always solves, or never does, teaches little
 * about the configuration. Pure and deterministic: the bench calls it with the record so far
 * and writes its `reason` into the report, so the rule and its effect are visible.
 *
 * For each program, p̂ = (successes + 1) / (runs + 2) (Laplace), its standard error
 * s = √(p̂(1 − p̂) / (runs + 2)), and the optimistic distance to the target
 * d = max(0, |p̂ − target| − explore·s). The next program has the smallest d; ties go to the
 * program with fewer runs, then the first in the portfolio. A program never run has d = 0 and
 * runs 0: every program is tried once before any is tried twice. Programs at their `maxRuns`
 * are left out; none left → undefined.
 */

export interface ProgramRecord {
  /** The program's name in the suite. */
  name: string;
  runs: number;
  successes: number;
}

export interface CurriculumOptions {
  /** Success rate aimed at. Default 0.5. */
  target?: number;
  /** Standard errors of optimism (0: the estimate alone). Default 1. */
  explore?: number;
  /** Runs at most per program (the bench's budget per program). Default unlimited. */
  maxRuns?: number;
}

export interface CurriculumChoice {
  name: string;
  /** The success rate estimate and its distance to the target, as the rule saw them. */
  rate: number;
  distance: number;
  /** One line for the report: why this program. */
  reason: string;
}

export function nextProgram(
  records: readonly ProgramRecord[],
  options: CurriculumOptions = {},
): CurriculumChoice | undefined {
  const target = options.target ?? 0.5;
  const explore = options.explore ?? 1;
  if (!(target > 0 && target < 1)) throw new RangeError(`curriculum target ${target}: between 0 and 1`);
  if (!(explore >= 0)) throw new RangeError(`curriculum explore ${explore}: 0 or more`);
  let best: (CurriculumChoice & { runs: number; index: number }) | undefined;
  records.forEach((r, index) => {
    if (!Number.isInteger(r.runs) || r.runs < 0 || !Number.isInteger(r.successes) || r.successes < 0)
      throw new RangeError(`${r.name}: runs and successes are whole numbers of 0 or more`);
    if (r.successes > r.runs) throw new RangeError(`${r.name}: ${r.successes} successes in ${r.runs} runs`);
    if (options.maxRuns !== undefined && r.runs >= options.maxRuns) return;
    const rate = (r.successes + 1) / (r.runs + 2);
    const se = Math.sqrt((rate * (1 - rate)) / (r.runs + 2));
    const distance = r.runs === 0 ? 0 : Math.max(0, Math.abs(rate - target) - explore * se);
    const better =
      !best ||
      distance < best.distance - 1e-12 ||
      (Math.abs(distance - best.distance) <= 1e-12 && r.runs < best.runs);
    if (better) {
      const reason =
        r.runs === 0
          ? `${r.name}: not run yet (every program is tried once first)`
          : `${r.name}: succeeded ${r.successes} of ${r.runs} (rate ${rate.toFixed(2)} ± ${se.toFixed(2)}), closest to the learnability target ${target}`;
      best = { name: r.name, rate, distance, reason, runs: r.runs, index };
    }
  });
  if (!best) return undefined;
  const { runs: _r, index: _i, ...choice } = best;
  return choice;
}
