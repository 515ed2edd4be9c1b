/**
 * Harness overhead per experiment: everything except the trial process's own run time —
 * proposal (built-in optimizer), file edit, scope check, git commit and ref, ledger writes,
 * hash checks, spawning and reaping, metric parsing, decision, ratchet or reset.
 *
 * Measured on a real run with a trivial experiment command (awk over the knob file), as
 * (decision time − proposal start) − the trials' own wall time as the runner measured it (all
 * of an experiment's trials: the noise-aware rule runs several for some candidates). Also
 * printed per trial, since each extra trial brings its own spawn, hash checks and rows.
 *
 * The sandbox (docs/security.md) starts inside the trial's measured wall time (bwrap is the
 * process the runner times), so the run is made twice: with `sandbox: off`, which gives the
 * bare command's wall time, and sandboxed (the default), whose overhead counts everything
 * but that bare time: `sandboxed_*` figures are the harness's overhead with the sandbox.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRun } from "../src/app/create-run.ts";
import { git } from "../src/workspace/git.ts";

export async function main(args: string[]): Promise<Record<string, number | string>> {
  const experiments = Number(args[0] ?? 60);
  const bare = await measure(experiments, false);
  const boxed = await measure(experiments, true, bare.trialMedianMs);
  const figures = {
    benchmark: "overhead",
    ...bare.figures,
    sandboxed_median_ms: boxed.figures.median_ms,
    sandboxed_p90_ms: boxed.figures.p90_ms,
    sandboxed_one_trial_median_ms: boxed.figures.one_trial_median_ms,
    sandboxed_per_trial_median_ms: boxed.figures.per_trial_median_ms,
    sandboxed_trials_per_experiment: boxed.figures.trials_per_experiment,
    sandbox_start_ms: round(boxed.trialMedianMs - bare.trialMedianMs),
    target_median_ms: 100,
  };
  console.log(
    `with the sandbox: median ${figures.sandboxed_median_ms} ms, p90 ${figures.sandboxed_p90_ms} ms per experiment (${figures.sandboxed_trials_per_experiment} trials each, ${figures.sandboxed_one_trial_median_ms} ms for one-trial experiments); a sandboxed trial takes ${figures.sandbox_start_ms} ms longer than the bare command (target median ≤ 100 ms)`,
  );
  return figures;
}

/**
 * One run of `experiments` experiments. `bareTrialMs`: the command's own wall time, measured
 * unsandboxed; given, every trial is charged only that much (the sandbox's start counts as overhead).
 */
async function measure(experiments: number, sandboxed: boolean, bareTrialMs?: number) {
  const dir = mkdtempSync(join(tmpdir(), "autolab-bench-overhead-"));
  writeFileSync(join(dir, "knobs.py"), "X = 0.9\nY = 3\n");
  writeFileSync(
    join(dir, "score.awk"),
    '/^X =/ { x = $3 }\n/^Y =/ { y = $3 }\nEND { print "score: " (x - 0.3) ^ 2 + (y - 7) ^ 2 / 100 }\n',
  );
  writeFileSync(
    join(dir, "program.md"),
    `---
name: overhead
objective: { metric: score, direction: minimize }
run:
  command: awk -f score.awk knobs.py
  budget: 10s
files:
  editable: [knobs.py]
  protected: [score.awk]
${sandboxed ? "" : "sandbox: off\n"}search:
  X: { low: 0.01, high: 1 }
  Y: { low: 1, high: 20, int: true }
---
`,
  );
  await git(dir, ["init", "-q", "-b", "main"]);
  await git(dir, ["add", "-A"]);
  await git(dir, ["-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-qm", "init"]);

  const overheads: number[] = [];
  const trialWall: number[] = [];
  let start = 0;
  let wall = 0;
  let trials = 0;
  const perTrial: number[] = [];
  const trialCounts: number[] = [];
  const rawWall: number[] = [];
  const t0 = performance.now();
  const outcome = await createRun({
    program: dir,
    tag: sandboxed ? "bench-sandboxed" : "bench",
    maxExperiments: experiments,
    onEvent: (e) => {
      if (e.type === "proposal_started") start = performance.now();
      if (e.type === "trial_finished") {
        wall += bareTrialMs ?? e.wallS * 1000;
        rawWall.push(e.wallS * 1000);
        trials++;
      }
      if (e.type === "decision" && e.n > 0) {
        overheads.push(performance.now() - start - wall);
        trialWall.push(wall);
        perTrial.push((performance.now() - start - wall) / Math.max(1, trials));
        trialCounts.push(trials);
        wall = 0;
        trials = 0;
      }
    },
  });
  const total = performance.now() - t0;
  outcome.lab.ledger.close();
  const sorted = [...overheads].sort((a, b) => a - b);
  const q = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Number.NaN;
  const figures = {
    experiments: overheads.length,
    median_ms: round(q(0.5)),
    p90_ms: round(q(0.9)),
    max_ms: round(sorted[sorted.length - 1] ?? Number.NaN),
    mean_ms: round(overheads.reduce((a, b) => a + b, 0) / overheads.length),
    trial_median_ms: round(
      [...trialWall].sort((a, b) => a - b)[Math.floor(trialWall.length / 2)] ?? Number.NaN,
    ),
    per_trial_median_ms: round(median(perTrial)),
    one_trial_median_ms: round(median(overheads.filter((_, i) => trialCounts[i] === 1))),
    trials_per_experiment: round(trialCounts.reduce((a, b) => a + b, 0) / trialCounts.length),
    total_s: round(total / 1000),
  };
  console.log(
    `${sandboxed ? "sandboxed" : "sandbox: off"} — harness overhead over ${figures.experiments} experiments: median ${figures.median_ms} ms, p90 ${figures.p90_ms} ms, max ${figures.max_ms} ms (target median ≤ 100 ms); ${figures.trials_per_experiment} trials per experiment on average, ${figures.per_trial_median_ms} ms per trial, ${figures.one_trial_median_ms} ms for one-trial experiments; trials themselves median ${figures.trial_median_ms} ms`,
  );
  return { figures, trialMedianMs: median(rawWall) };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
}

function round(x: number): number {
  return Math.round(x * 10) / 10;
}
