import { createRun, type RunOutcome } from "../app/create-run.ts";
import { runDemo } from "../app/demo.ts";
import { predictedBestLine, statusOf } from "../app/status.ts";
import type { LoopEvent } from "../core/events.ts";
import { formatChange, formatCount, formatMetric } from "../core/format.ts";
import { onOutputClosed } from "./closed-output.ts";
import { handleError } from "./errors.ts";
import { frontLines } from "./front-lines.ts";
import { createProgress } from "./progress.ts";
import { safeText } from "./safe-text.ts";

interface RunFlags {
  program?: string;
  tag?: string;
  maxExperiments?: number;
  maxTrials?: number;
  maxTime?: number;
  maxCost?: number;
  budget?: number;
  slots?: number;
  agent?: string;
  seed?: number;
  allowDirty?: boolean;
  /** false: --no-prior-work. */
  priorWork?: boolean;
  fleet?: string;
}

/**
 * Ctrl-C once: the running trial is killed and recorded as interrupted (the next `autolab
 * run` runs it again). Twice: leave at once — still safe, resume reconciles. A closed stdout
 * or stderr (`autolab run | head -3`) stops the run like the first Ctrl-C, quietly.
 */
function interruptible(): { signal: AbortSignal; dispose: () => void } {
  const ac = new AbortController();
  let presses = 0;
  const offClosed = onOutputClosed((stream) => {
    if (ac.signal.aborted) return;
    presses++;
    ac.abort(`${stream} was closed`);
  });
  const onSignal = () => {
    presses++;
    if (presses === 1) {
      process.stderr.write(
        "\nstopping: the running trial is killed and will run again on resume (Ctrl-C again to quit now)\n",
      );
      ac.abort();
    } else {
      process.exit(130);
    }
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  return {
    signal: ac.signal,
    dispose: () => {
      offClosed();
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    },
  };
}

/** Runs a loop with live progress, prints the summary, and maps the outcome to an exit code. */
async function runWithProgress(
  start: (signal: AbortSignal, onEvent: (e: LoopEvent) => void) => Promise<RunOutcome>,
  demo: boolean,
): Promise<void> {
  const { signal, dispose } = interruptible();
  const progress = createProgress({});
  try {
    const outcome = await start(signal, progress.onEvent);
    progress.stop();
    printSummary(outcome, demo);
    outcome.lab.ledger.close();
    if (signal.aborted) process.exitCode = 130;
  } catch (err) {
    progress.stop();
    process.exitCode = handleError(err);
  } finally {
    dispose();
  }
}

export function runCommand(flags: RunFlags): Promise<void> {
  return runWithProgress(
    (signal, onEvent) =>
      createRun({
        ...(flags.program ? { program: flags.program } : {}),
        ...(flags.tag ? { tag: flags.tag } : {}),
        ...(flags.maxExperiments !== undefined ? { maxExperiments: flags.maxExperiments } : {}),
        ...(flags.maxTrials !== undefined ? { maxTrials: flags.maxTrials } : {}),
        ...(flags.maxTime !== undefined ? { maxTimeMs: flags.maxTime } : {}),
        ...(flags.maxCost !== undefined ? { maxCostUsd: flags.maxCost } : {}),
        ...(flags.budget !== undefined ? { budgetMs: flags.budget } : {}),
        ...(flags.slots !== undefined ? { slots: flags.slots } : {}),
        ...(flags.agent ? { agent: flags.agent } : {}),
        ...(flags.seed !== undefined ? { seed: flags.seed } : {}),
        ...(flags.allowDirty ? { allowDirty: true } : {}),
        ...(flags.priorWork === false ? { priorWork: false } : {}),
        ...(flags.fleet ? { fleet: flags.fleet } : {}),
        signal,
        onEvent,
      }),
    false,
  );
}

export function demoCommand(flags: {
  maxExperiments?: number;
  budget?: number;
  slots?: number;
  dir?: string;
}): Promise<void> {
  process.stdout.write(
    `autolab demo: a character-level language model (examples/tiny-lm) trained on Moby Dick, ` +
      `${formatCount(flags.maxExperiments ?? 10, "experiment")} by the built-in optimizer.\n`,
  );
  return runWithProgress(
    (signal, onEvent) =>
      runDemo({
        ...(flags.dir ? { dir: flags.dir } : {}),
        ...(flags.maxExperiments !== undefined ? { maxExperiments: flags.maxExperiments } : {}),
        ...(flags.budget !== undefined ? { budgetMs: flags.budget } : {}),
        ...(flags.slots !== undefined ? { slots: flags.slots } : {}),
        signal,
        onEvent,
      }),
    true,
  );
}

function printSummary(outcome: RunOutcome, demo: boolean): void {
  const { run, experiments, lab } = outcome;
  const s = statusOf(run, experiments, lab.program);
  const out: string[] = [""];
  out.push(`Run ${run.tag} stopped: ${outcome.stoppedBecause}.`);
  const c = s.counts;
  out.push(
    `${c.total} experiment${c.total === 1 ? "" : "s"}: ${c.kept} kept (incl. baseline), ${c.discarded} discarded, ${c.crashed} crashed, ${c.rejected} rejected${c.pending ? `, ${c.pending} to resume` : ""}.`,
  );
  if (s.baseline?.metric != null && s.best?.metric != null) {
    out.push(
      `${run.metric}${s.front ? " (the first objective)" : ""}: baseline ${formatMetric(s.baseline.metric)} → best ${formatMetric(s.best.metric)} (#${s.best.id}, ${formatChange(s.baseline.metric, s.best.metric)})${s.selfReported ? "  [self-reported]" : ""}`,
    );
  }
  const predicted = predictedBestLine(s);
  if (predicted) out.push(predicted);
  const kept = experiments.filter((e) => e.decision?.action === "keep" && e.n > 0);
  if (kept.length) {
    out.push("Kept changes:");
    for (const e of kept)
      out.push(`  #${e.n} ${e.commit.slice(0, 8)} ${e.hypothesis} → ${formatMetric(e.decision?.metric)}`);
  }
  if (s.front) out.push(...frontLines(s.front));
  out.push(`${s.front ? "Last kept" : "Best code"}: branch ${run.branch} in ${lab.dir}`);
  out.push(`Notebook: ${lab.notebook}  (autolab log${demo ? ` -p ${lab.dir}` : ""})`);
  process.stdout.write(`${safeText(out.join("\n"))}\n`);
}
