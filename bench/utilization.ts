/**
 * Slot utilization: 4 slots, a scripted researcher that thinks for 30% of a trial's length,
 * fixed-length trials. Busy = trial time recorded in the notebook; utilization = busy /
 * (wall × slots) from the first candidate trial to the last trial's end (the steady state),
 * and over the whole session (baseline and start-up included). The serial loop (no `slots:`)
 * runs the same experiments beside it: it thinks, then trains, so it idles ~30/130 of the time.
 *
 *   npm run bench -- utilization [--experiments=40] [--trial-ms=3000]
 */
import { slotRun } from "./_slots.ts";

export async function main(args: string[]): Promise<Record<string, number | string>> {
  const opt = (name: string, def: number) =>
    Number(args.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? def);
  const experiments = opt("experiments", 40);
  const trialMs = opt("trial-ms", 3000);
  const thinkMs = Math.round(0.3 * trialMs);
  const pct = (x: number) => Math.round(x * 1000) / 10;
  const serial = await slotRun({
    slots: "serial",
    experiments: Math.round(experiments / 4),
    trialMs,
    thinkMs,
  });
  console.log(
    `serial loop: ${serial.experiments} experiments, utilization ${pct(serial.utilization)}% (whole session ${pct(serial.sessionUtilization)}%)`,
  );
  const four = await slotRun({ slots: 4, experiments, trialMs, thinkMs });
  console.log(
    `4 slots, pipelined: ${four.experiments} experiments in ${four.wallS.toFixed(1)} s, utilization ${pct(four.utilization)}% (whole session ${pct(four.sessionUtilization)}%) — target ≥ 97%`,
  );
  return {
    benchmark: "utilization",
    trial_ms: trialMs,
    think_ms: thinkMs,
    serial_utilization_pct: pct(serial.utilization),
    serial_session_utilization_pct: pct(serial.sessionUtilization),
    slots4_utilization_pct: pct(four.utilization),
    slots4_session_utilization_pct: pct(four.sessionUtilization),
    slots4_experiments: four.experiments,
    target_pct: 97,
  };
}
