/**
 * Throughput from 1 to 8 slots on fixed-length trials (a sleep: no CPU, so 2 cores can host 8
 * slots) with an instant researcher: candidate trials per minute at k slots against k times
 * the 1-slot figure (both through the scheduler, `slots: k`). Target ≥ 90% of linear at 8.
 *
 *   npm run bench -- scaling [--rounds=6] [--trial-ms=2000]
 */
import { slotRun } from "./_slots.ts";

export async function main(args: string[]): Promise<Record<string, number | string>> {
  const opt = (name: string, def: number) =>
    Number(args.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? def);
  const rounds = opt("rounds", 6);
  const trialMs = opt("trial-ms", 2000);
  const figures: Record<string, number | string> = { benchmark: "scaling", trial_ms: trialMs, rounds };
  let one = Number.NaN;
  for (const k of [1, 2, 4, 8]) {
    const r = await slotRun({ slots: k, experiments: rounds * k, trialMs, thinkMs: 0 });
    if (k === 1) one = r.throughputPerMin;
    const ofLinear = r.throughputPerMin / (k * one);
    console.log(
      `${k} slot${k > 1 ? "s" : ""}: ${r.experiments} trials in ${r.wallS.toFixed(1)} s, ${r.throughputPerMin.toFixed(1)}/min, ${(100 * ofLinear).toFixed(1)}% of linear, utilization ${(100 * r.utilization).toFixed(1)}%`,
    );
    figures[`slots${k}_per_min`] = Math.round(r.throughputPerMin * 10) / 10;
    figures[`slots${k}_of_linear_pct`] = Math.round(ofLinear * 1000) / 10;
  }
  figures.target_of_linear_pct = 90;
  return figures;
}
