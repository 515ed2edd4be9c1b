/**
 * Shared by bench/utilization.ts and bench/scaling.ts: a project whose trial sleeps a fixed
 * time (no CPU: this machine has 2 cores, the slots measure scheduling, not arithmetic), a
 * scripted researcher that "thinks" for a set time, and slot figures read from the notebook.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createScriptedAgent } from "../src/agents/scripted-agent.ts";
import { createRun } from "../src/app/create-run.ts";
import type { ExperimentRecord } from "../src/core/ledger.ts";
import { git } from "../src/workspace/git.ts";

export interface SlotRun {
  slots: number | "serial";
  experiments: number;
  /** Seconds from the first candidate trial's start to the last trial's end. */
  wallS: number;
  /**
   * Steady state: busy trial time / (window × slots), the window running from the moment every
   * slot has started its first trial to the moment the first slot has finished its last one
   * (ramp-up and the last partial round left out).
   */
  utilization: number;
  /** The same over the whole session, baseline and start-up included. */
  sessionUtilization: number;
  /** Candidate trials finished per minute from the first candidate trial to the end. */
  throughputPerMin: number;
  /** Trials per minute in the steady-state window: busy trial time there / trial length. */
  steadyPerMin: number;
}

export async function slotRun(opts: {
  slots: number | "serial";
  experiments: number;
  trialMs: number;
  thinkMs: number;
}): Promise<SlotRun> {
  const dir = mkdtempSync(join(tmpdir(), "autolab-bench-slots-"));
  writeFileSync(join(dir, "knob.txt"), "0\n");
  writeFileSync(
    join(dir, "trial.sh"),
    `sleep ${(opts.trialMs / 1000).toFixed(3)}\necho "score: $(cat knob.txt)"\n`,
  );
  writeFileSync(
    join(dir, "program.md"),
    `---
name: slots
objective: { metric: score, direction: minimize }
run:
  command: sh trial.sh
  budget: ${Math.ceil((opts.trialMs * 3) / 1000)}s
files:
  editable: [knob.txt]
  protected: [trial.sh]
acceptance: greedy
${opts.slots === "serial" ? "" : `slots: ${opts.slots}\n`}---
`,
  );
  await git(dir, ["init", "-q", "-b", "main"]);
  await git(dir, ["add", "-A"]);
  await git(dir, ["-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-qm", "init"]);
  // Every proposal a different value, mostly worse: discards dominate as in a real night.
  let i = 0;
  const agent = createScriptedAgent(
    Array.from({ length: opts.experiments + 8 }, () => {
      i++;
      return {
        hypothesis: `knob ${i}`,
        edits: { "knob.txt": `${(i * 7919) % 101}\n` },
        delayMs: opts.thinkMs,
      };
    }),
  );
  const outcome = await createRun({ program: dir, tag: "bench", maxExperiments: opts.experiments, agent });
  const sessions = outcome.lab.ledger.listSessions(outcome.run.id);
  outcome.lab.ledger.close();
  const exps = outcome.experiments;
  const slotCount = opts.slots === "serial" ? 1 : opts.slots;
  const windowStart = Math.min(...candidateTrials(exps).map((t) => t.start));
  const perSlot = [...Array(slotCount).keys()].map((j) =>
    slotTrials(exps, opts.slots === "serial" ? undefined : j),
  );
  const steadyFrom = Math.max(...perSlot.map((ts) => Math.min(...ts.map((t) => t.start))));
  const steadyTo = Math.min(...perSlot.map((ts) => Math.max(...ts.map((t) => t.end))));
  const sessionStart = sessions[0]
    ? Date.parse(sessions[0].startedAt)
    : Math.min(...allTrials(exps).map((t) => t.start));
  const end = Math.max(...allTrials(exps).map((t) => t.end));
  const busy = (from: number, to = Number.POSITIVE_INFINITY) =>
    allTrials(exps).reduce((a, t) => a + Math.max(0, Math.min(t.end, to) - Math.max(t.start, from)), 0);
  const wallMs = end - windowStart;
  return {
    slots: opts.slots,
    experiments: candidateTrials(exps).length,
    wallS: wallMs / 1000,
    utilization: busy(steadyFrom, steadyTo) / ((steadyTo - steadyFrom) * slotCount),
    sessionUtilization: busy(sessionStart) / ((end - sessionStart) * slotCount),
    throughputPerMin: (candidateTrials(exps).length / wallMs) * 60_000,
    steadyPerMin: (busy(steadyFrom, steadyTo) / opts.trialMs / (steadyTo - steadyFrom)) * 60_000,
  };
}

function allTrials(exps: ExperimentRecord[]): Array<{ start: number; end: number }> {
  return exps.flatMap((e) =>
    e.trials
      .filter((t) => t.result?.finishedAt)
      .map((t) => ({ start: Date.parse(t.startedAt), end: Date.parse(t.result?.finishedAt ?? "") })),
  );
}

function slotTrials(
  exps: ExperimentRecord[],
  slot: number | undefined,
): Array<{ start: number; end: number }> {
  return exps.flatMap((e) =>
    e.trials
      .filter((t) => t.result?.finishedAt && t.slot === slot)
      .map((t) => ({ start: Date.parse(t.startedAt), end: Date.parse(t.result?.finishedAt ?? "") })),
  );
}

function candidateTrials(exps: ExperimentRecord[]): Array<{ start: number; end: number }> {
  return allTrials(exps.filter((e) => e.n > 0));
}
