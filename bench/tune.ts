/**
 * Tuning the budget-aware acceptance rule on the tuning functions (bench/_functions.ts; never
 * the held-out ones of bench/search.ts): the GP sampler proposing, the noise rule deciding with
 * the budget in view, the configuration predicted best as the answer — autolab's arm of the
 * search benchmark — for each variant of the rule's options, with where the budget went.
 *
 *   npm run bench -- tune [--evals=50] [--seeds=20] [--first-seed=900] [--functions=a,b]
 *                         [--variants='{"default":{},"other":{"promoteZ":2.5}}']
 *                         [--variants='{"ei":{},"portfolio":{"acquisition":["ei","thompson","ucb"]}}']
 *
 * The first variant is the reference: every other is also shown as a paired difference to it
 * (true regret in units of the function's σ; negative = better). `{"greedy":true}` as a variant
 * is autoresearch's rule (one draw, kept when it looks better) with the same sampler.
 */
import type { GpOptions } from "../src/agents/builtin/gp.ts";
import { greedyJudge } from "../src/trust/greedy-judge.ts";
import { createNoiseJudge, type NoiseJudgeOptions } from "../src/trust/noise-judge.ts";
import {
  branin,
  hartmann3,
  logQuadratic,
  logRosenbrock,
  styblinskiTang6,
  type TestFunction,
  wells6,
} from "./_functions.ts";
import { runKeepLoop } from "./_keep-loop.ts";
import { estimate, flags, numberFlag, round, show } from "./_stats.ts";

/** The tuning functions with the trial noise they are run at. */
export const TUNING: { fn: TestFunction; sigma: number }[] = [
  { fn: styblinskiTang6, sigma: 2 },
  { fn: wells6, sigma: 0.15 },
  { fn: hartmann3, sigma: 0.3 },
  { fn: branin, sigma: 1 },
  { fn: logRosenbrock, sigma: 0.3 },
  { fn: logQuadratic, sigma: 0.3 },
];

type Variant = NoiseJudgeOptions & {
  greedy?: boolean;
  acquisition?: GpOptions["acquisition"];
  escape?: GpOptions["escape"];
};

export async function main(args: string[]): Promise<unknown> {
  const f = flags(args);
  const evals = numberFlag(f, "evals", 50);
  const seeds = numberFlag(f, "seeds", 20);
  const first = numberFlag(f, "first-seed", 900);
  const variants = JSON.parse(f.variants ?? '{"default":{}}') as Record<string, Variant>;
  const only = f.functions?.split(",");
  const out: Record<string, unknown>[] = [];
  console.log(`tuning the rule: ${evals} trials per run, seeds ${first}–${first + seeds - 1}`);
  for (const { fn, sigma } of TUNING.filter((t) => !only || only.includes(t.fn.name))) {
    const regrets: Record<string, number[]> = {};
    for (const [label, { greedy, acquisition, escape: basinEscape, ...options }] of Object.entries(
      variants,
    )) {
      let keeps = 0;
      let worse = 0;
      let configs = 0;
      let incumbent = 0;
      const regret: number[] = [];
      for (let i = 0; i < seeds; i++) {
        const r = runKeepLoop({
          fn,
          sigma,
          judge: greedy ? greedyJudge : createNoiseJudge(options),
          totalTrials: evals,
          seed: first + i,
          proposer: "gp",
          budgetAware: !greedy,
          ...(acquisition ? { acquisition } : {}),
          ...(basinEscape !== undefined ? { escape: basinEscape } : {}),
          posterior: !greedy,
        });
        keeps += r.keeps.length;
        worse += r.falseKeeps;
        configs += r.candidates.length;
        incumbent += r.incumbentTrials;
        regret.push(((r.posteriorTrue ?? r.finalTrue) - fn.optimum) / sigma);
      }
      regrets[label] = regret;
      const e = estimate(regret);
      const row = {
        function: fn.name,
        variant: label,
        regret_sigma: round(e.mean),
        regret_ci: round(e.ci),
        truly_worse_pct: round((100 * worse) / Math.max(1, keeps), 3),
        configurations: round(configs / seeds, 3),
        incumbent_trials: round(incumbent / seeds, 3),
        // Runs that end more than 2σ from the optimum: left in a basin, or never near one.
        off_2sigma_pct: round((100 * regret.filter((x) => x > 2).length) / seeds, 3),
      };
      out.push(row);
      console.log(
        `${fn.name.padEnd(18)} ${label.padEnd(10)} regret ${show(e)}σ  truly worse ${row.truly_worse_pct}% of keeps  configurations ${row.configurations}  incumbent trials ${row.incumbent_trials}  over 2σ off ${row.off_2sigma_pct}%`,
      );
    }
    const [ref, ...others] = Object.keys(regrets);
    const base = regrets[ref as string] as number[];
    for (const label of others) {
      const d = estimate((regrets[label] as number[]).map((x, i) => x - (base[i] as number)));
      console.log(`${fn.name.padEnd(18)} ${`${label} − ${ref}`.padEnd(22)} ${show(d)}σ`);
      out.push({
        function: fn.name,
        difference: `${label} − ${ref}`,
        mean: round(d.mean),
        ci: round(d.ci),
      });
    }
  }
  return { benchmark: "tune", evals, seeds, first_seed: first, rows: out };
}
