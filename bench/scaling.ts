/**
 * Throughput from 1 to 8 slots on fixed-length trials (a sleep: no CPU, so 2 cores can host 8
 * slots) with an instant researcher: trials per minute at k slots against k times the 1-slot
 * figure (all through the scheduler, `slots: k`). Target ≥ 90% of linear at 8. Measured in the
 * steady state (from every slot busy to the first slot done: busy trial time / trial length per
 * minute), since a fixed number of trials plus the baseline leaves one slot a round longer at
 * the end whatever the scheduler does; the end-to-end figure is printed beside it.
 *
 *   npm run bench -- scaling [--rounds=12] [--trial-ms=2000]
 */
import { slotRun } from "./_slots.ts";

export async function main(args: string[]): Promise<Record<string, number | string>> {
  const opt = (name: string, def: number) =>
    Number(args.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? def);
  const rounds = opt("rounds", 12);
  const trialMs = opt("trial-ms", 2000);
  const figures: Record<string, number | string> = { benchmark: "scaling", trial_ms: trialMs, rounds };
  let one = Number.NaN;
  let oneEnd = Number.NaN;
  for (const k of [1, 2, 4, 8]) {
    const r = await slotRun({ slots: k, experiments: rounds * k, trialMs, thinkMs: 0 });
    if (k === 1) {
      one = r.steadyPerMin;
      oneEnd = r.throughputPerMin;
    }
    const ofLinear = r.steadyPerMin / (k * one);
    const endToEnd = r.throughputPerMin / (k * oneEnd);
    console.log(
      `${k} slot${k > 1 ? "s" : ""}: steady ${r.steadyPerMin.toFixed(1)} trials/min, ${(100 * ofLinear).toFixed(1)}% of linear; end to end ${r.experiments} trials in ${r.wallS.toFixed(1)} s, ${(100 * endToEnd).toFixed(1)}% of linear`,
    );
    figures[`slots${k}_per_min`] = Math.round(r.steadyPerMin * 10) / 10;
    figures[`slots${k}_of_linear_pct`] = Math.round(ofLinear * 1000) / 10;
    figures[`slots${k}_end_to_end_of_linear_pct`] = Math.round(endToEnd * 1000) / 10;
  }
  figures.target_of_linear_pct = 90;
  return figures;
}
