/**
 * Batches for parallel slots on the tuning functions (bench/_functions.ts, seeds below 50 000:
 * where the constant liar's choices were made; the held-out comparison is `search --slots=4`).
 * The autolab arm (GP proposals, noise rule with the budget, predicted best) at equal total
 * trials:
 *
 *   - serial: bench/_keep-loop.ts;
 *   - k slots: the scheduler simulated (bench/_slots-loop.ts), pending experiments as the
 *     constant liar (the default);
 *   - k slots, pending as failed: how the built-in agent counted them before (the worst value);
 *   - k slots, a trial ahead: up to k candidates waiting beside the running ones, as the
 *     scheduler proposes for agents that think (and did for the built-in one before
 *     Agent.instant; the default now proposes only for a free slot).
 *
 *   npm run bench -- batch [--seeds=30] [--budget=60] [--slots=4] [--first-seed=1000]
 */

import { createNoiseJudge } from "../src/trust/noise-judge.ts";
import { branin, hartmann3, logQuadratic, logRosenbrock, type TestFunction } from "./_functions.ts";
import { runKeepLoop } from "./_keep-loop.ts";
import { runSlotsLoop, type SlotsLoopOptions } from "./_slots-loop.ts";
import { estimate, flags, numberFlag, round, show } from "./_stats.ts";

/** The noise levels of bench/noise.ts's scenarios. */
const SCENARIOS: { fn: TestFunction; sigma: number }[] = [
  { fn: branin, sigma: 1 },
  { fn: hartmann3, sigma: 0.3 },
  { fn: logRosenbrock, sigma: 0.3 },
  { fn: logQuadratic, sigma: 0.3 },
];

export async function main(args: string[]): Promise<Record<string, unknown>> {
  const f = flags(args);
  const seedCount = numberFlag(f, "seeds", 30);
  const budget = numberFlag(f, "budget", 60);
  const slots = numberFlag(f, "slots", 4);
  const first = numberFlag(f, "first-seed", 1000);
  if (first + seedCount > 50_000)
    throw new Error("--first-seed: the tuning seeds end below 50 000 (held out above)");
  const seeds = Array.from({ length: seedCount }, (_, i) => first + i);
  const t0 = performance.now();
  console.log(
    `true regret of the predicted best at ${budget} trials, mean ± 95% CI over seeds ${first}–${first + seedCount - 1}; differences paired`,
  );
  const figures: Record<string, unknown> = {
    benchmark: "batch",
    seeds: seedCount,
    first_seed: first,
    budget,
    slots,
  };
  const rebased = { count: 0, runs: 0 };
  for (const { fn, sigma } of SCENARIOS) {
    const atSlots = (extra: Partial<SlotsLoopOptions>) =>
      seeds.map((seed) => {
        const r = runSlotsLoop({
          fn,
          sigma,
          judge: createNoiseJudge(),
          totalTrials: budget,
          seed,
          slots,
          proposer: "gp",
          ...extra,
        });
        if (!extra.pending && extra.queue === undefined) {
          rebased.count += r.rebased;
          rebased.runs++;
        }
        return r.posteriorTrue - fn.optimum;
      });
    const arms: Record<string, number[]> = {
      serial: seeds.map((seed) => {
        const r = runKeepLoop({
          fn,
          sigma,
          judge: createNoiseJudge(),
          totalTrials: budget,
          seed,
          proposer: "gp",
          budgetAware: true,
          posterior: true,
        });
        return (r.posteriorTrue ?? r.finalTrue) - fn.optimum;
      }),
      [`${slots} slots`]: atSlots({}),
      [`${slots} slots, pending as failed`]: atSlots({ pending: "failed" }),
      [`${slots} slots, a trial ahead`]: atSlots({ queue: slots }),
    };
    const minus = (a: number[], b: number[]) => estimate(a.map((x, i) => x - (b[i] as number)));
    const serial = arms.serial as number[];
    const liar = arms[`${slots} slots`] as number[];
    console.log(`${fn.name} (σ ${sigma})`);
    const entry: Record<string, unknown> = {};
    for (const [name, values] of Object.entries(arms)) {
      const e = estimate(values);
      const vsSerial = values === serial ? undefined : minus(values, serial);
      const vsLiar = values === serial || values === liar ? undefined : minus(liar, values);
      console.log(
        `  ${name.padEnd(30)} ${show(e)}${vsSerial ? `   this − serial ${show(vsSerial)}` : ""}${vsLiar ? `   ${slots} slots − this ${show(vsLiar)}` : ""}`,
      );
      entry[name] = {
        regret: round(e.mean),
        ci: round(e.ci, 2),
        ...(vsSerial ? { minus_serial: round(vsSerial.mean), minus_serial_ci: round(vsSerial.ci, 2) } : {}),
        ...(vsLiar ? { liar_minus: round(vsLiar.mean), liar_minus_ci: round(vsLiar.ci, 2) } : {}),
      };
    }
    figures[fn.name] = entry;
  }
  figures.rebased_per_run = round(rebased.count / Math.max(1, rebased.runs), 3);
  console.log(
    `winners rebased onto a newer best and evaluated again (${slots} slots): ${figures.rebased_per_run} per run`,
  );
  figures.seconds = round((performance.now() - t0) / 1000, 3);
  return figures;
}
