/**
 * Acceptance rules at equal trials, with known truth (issue #38): greedy (autoresearch's rule),
 * greedy with the final answer re-measured ("greedy-final"), the posterior rule ("posterior",
 * src/trust/posterior-judge.ts) and today's noise-aware rule ("noise"), on the tuning functions
 * only (bench/_functions.ts; seeds below 50 000 — the held-out ones are bench/search.ts's).
 *
 * Per function and arm: true regret (in the function's σ) of two answers — the last kept
 * configuration ("kept") and the configuration the GP posterior predicts best ("predicted",
 * what `autolab status` names) — the share of keeps truly worse than the best they replaced,
 * the reported − true gap of the last kept, and runs that ended with nothing kept although a
 * truly better configuration was measured at least 3 times. Paired differences arm − greedy
 * over seeds (negative: the arm is better), 95% intervals.
 *
 *   npm run bench -- accept [--evals=50] [--seeds=20] [--first-seed=3000] [--proposer=gp|local]
 *                           [--functions=a,b] [--arms=greedy,greedy-final,posterior,noise]
 */
import type { Judge } from "../src/core/judge.ts";
import { greedyJudge } from "../src/trust/greedy-judge.ts";
import { createNoiseJudge } from "../src/trust/noise-judge.ts";
import { createPosteriorJudge, type PosteriorJudgeOptions } from "../src/trust/posterior-judge.ts";
import { type KeepLoopResult, type Proposer, runKeepLoop } from "./_keep-loop.ts";
import { estimate, flags, numberFlag, ratio, round, show } from "./_stats.ts";
import { TUNING } from "./tune.ts";

const ARMS: Record<string, { judge: () => Judge; budgetAware: boolean }> = {
  greedy: { judge: () => greedyJudge, budgetAware: false },
  "greedy-final": { judge: () => createPosteriorJudge({ shrinkage: false }), budgetAware: true },
  posterior: { judge: () => createPosteriorJudge(), budgetAware: true },
  noise: { judge: () => createNoiseJudge(), budgetAware: true },
};

export async function main(args: string[]): Promise<unknown> {
  const f = flags(args);
  const evals = numberFlag(f, "evals", 50);
  const seeds = numberFlag(f, "seeds", 20);
  const first = numberFlag(f, "first-seed", 3000);
  if (first + seeds > 50_000) throw new Error("seeds from 50 000 are held out (bench/search.ts)");
  const proposer = (f.proposer ?? "gp") as Proposer;
  const only = f.functions?.split(",");
  // --variants='{"posterior-r10":{"reserve":0.1}}': more posterior-rule arms with options.
  const variants = JSON.parse(f.variants ?? "{}") as Record<string, PosteriorJudgeOptions>;
  const arms = { ...ARMS };
  for (const [label, options] of Object.entries(variants)) {
    arms[label] = { judge: () => createPosteriorJudge(options), budgetAware: true };
  }
  const names = f.arms ? f.arms.split(",") : Object.keys(arms);
  const rows: Record<string, unknown>[] = [];
  console.log(
    `acceptance rules at ${evals} trials per run, ${proposer} proposals, seeds ${first}–${first + seeds - 1}; regret in σ`,
  );
  for (const { fn, sigma } of TUNING.filter((t) => !only || only.includes(t.fn.name))) {
    const kept: Record<string, number[]> = {};
    const predicted: Record<string, number[]> = {};
    for (const name of names) {
      const arm = arms[name];
      if (!arm) throw new Error(`unknown arm ${name}`);
      const runs: KeepLoopResult[] = [];
      for (let i = 0; i < seeds; i++) {
        runs.push(
          runKeepLoop({
            fn,
            sigma,
            judge: arm.judge(),
            totalTrials: evals,
            seed: first + i,
            proposer,
            budgetAware: arm.budgetAware,
            posterior: true,
          }),
        );
      }
      kept[name] = runs.map((r) => (r.finalTrue - fn.optimum) / sigma);
      predicted[name] = runs.map((r) => ((r.posteriorTrue ?? r.finalTrue) - fn.optimum) / sigma);
      const worse = ratio(
        runs.map((r) => r.falseKeeps),
        runs.map((r) => r.keeps.length),
      );
      const gap = estimate(runs.map((r) => (r.finalReported - r.finalTrue) / sigma));
      const gapPredicted = estimate(
        runs.map((r) =>
          r.posteriorPredicted !== undefined && r.posteriorTrue !== undefined
            ? (r.posteriorPredicted - r.posteriorTrue) / sigma
            : (r.finalReported - r.finalTrue) / sigma,
        ),
      );
      // The answer's value as re-measured: the mean of every trial it has at the end.
      const gapMean = estimate(
        runs.map(
          (r) => (r.finalValues.reduce((a, b) => a + b, 0) / r.finalValues.length - r.finalTrue) / sigma,
        ),
      );
      const stuck = runs.filter(
        (r) => r.keeps.length === 0 && r.candidates.some((c) => c.improvement > 0 && c.trials >= 3),
      ).length;
      const row = {
        function: fn.name,
        arm: name,
        kept: round(estimate(kept[name]).mean),
        kept_ci: round(estimate(kept[name]).ci, 2),
        predicted: round(estimate(predicted[name]).mean),
        predicted_ci: round(estimate(predicted[name]).ci, 2),
        truly_worse_pct: round(100 * worse.mean, 3),
        gap_sigma: round(gap.mean),
        gap_ci: round(gap.ci, 2),
        gap_predicted_sigma: round(gapPredicted.mean),
        gap_predicted_ci: round(gapPredicted.ci, 2),
        gap_mean_sigma: round(gapMean.mean),
        gap_mean_ci: round(gapMean.ci, 2),
        stuck_runs: stuck,
        configurations: round(runs.reduce((a, r) => a + r.experiments, 0) / seeds, 3),
      };
      rows.push(row);
      console.log(
        `${fn.name.padEnd(16)} ${name.padEnd(13)} kept ${show(estimate(kept[name]))}  predicted ${show(estimate(predicted[name]))}  truly worse ${row.truly_worse_pct}%  gap ${show(gap)} (mean of its trials ${show(gapMean)}; predicted's ${show(gapPredicted)})  stuck ${stuck}  configs ${row.configurations}`,
      );
    }
    const ref = (kept.greedy ? "greedy" : names[0]) as string;
    for (const name of names) {
      if (name === ref) continue;
      const dk = estimate((kept[name] as number[]).map((x, i) => x - ((kept[ref] as number[])[i] as number)));
      const dp = estimate(
        (predicted[name] as number[]).map((x, i) => x - ((kept[ref] as number[])[i] as number)),
      );
      console.log(
        `${fn.name.padEnd(16)} ${`${name} − ${ref}`.padEnd(24)} kept ${show(dk)}σ  predicted ${show(dp)}σ`,
      );
      rows.push({
        function: fn.name,
        difference: `${name} − ${ref} (kept answer of ${ref})`,
        kept: round(dk.mean),
        kept_ci: round(dk.ci, 2),
        predicted: round(dp.mean),
        predicted_ci: round(dp.ci, 2),
      });
    }
  }
  return { benchmark: "accept", evals, seeds, first_seed: first, proposer, rows };
}
