import { advisorStopReason, consultAdvisor } from "./advisor.ts";
import { agentFailing, DEFAULT_MAX_AGENT_FAILURES } from "./agent-streak.ts";
import { evaluateExperiment } from "./evaluate.ts";
import type { LoopEvent } from "./events.ts";
import { bestOf } from "./experiments.ts";
import { type LoopDeps, type LoopOptions, type LoopSummary, STOPPED_BY_SIGNAL } from "./loop-deps.ts";
import { runStep } from "./propose.ts";
import { experimentsSpent } from "./run-budget.ts";
import { assertBaselineOk, finishRun, startUp, withBudget } from "./startup.ts";
import { trialsFailing } from "./trial-streak.ts";

/**
 * One run of the research loop, serially: start up (startup.ts: reconcile after a crash, setup,
 * the baseline's row), finish the experiments a previous session left undecided (the baseline
 * first), then propose → commit → record → trial → decide → ratchet (propose.ts, evaluate.ts,
 * decide.ts), until the limit or a stop signal.
 *
 * Order of writes (what makes kill -9 at any point safe): candidate commit + ref, then the
 * experiment row, then a trial start row, then the trial result, then the decision row, then
 * the branch. Resume derives everything from which of these exist.
 */
export async function runLoop(given: LoopDeps, opts: LoopOptions = {}): Promise<LoopSummary> {
  const deps = withBudget(given, opts);
  const { program, ledger, run, workspace: ws, agent } = deps;
  const emit = (e: LoopEvent) => opts.onEvent?.(e);
  const stopped = () => opts.signal?.aborted === true;
  const list = () => ledger.listExperiments(run.id);
  const finish = (reason: string): LoopSummary => finishRun(deps, reason, emit);
  const finishEarly = () => finish(STOPPED_BY_SIGNAL);

  const started = await startUp(deps, [deps], emit, opts.signal);
  if (started === "stopped") return finishEarly();
  // Experiments without a decision: their trial was cut short by a crash or Ctrl-C.
  for (const e of started.exps.filter((x) => !x.decision)) {
    if (stopped()) return finishEarly();
    await evaluateExperiment(deps, e, emit, opts.signal);
  }
  assertBaselineOk(program, list());
  if (stopped()) return finishEarly();

  const failures: string[] = [];
  while (!stopped()) {
    const exps = list();
    const spent = experimentsSpent(deps.budget, exps);
    if (spent) {
      await ws.resetTo(bestOf(exps)?.commit ?? run.baseCommit);
      return finish(spent);
    }
    // A stalled run asks its advisor (advisor.ts): ideas go into the next contexts, a stop ends it.
    const advice = await consultAdvisor(deps, { emit, ...(opts.signal ? { signal: opts.signal } : {}) });
    if (advice?.verdict === "stop") {
      await ws.resetTo(bestOf(list())?.commit ?? run.baseCommit);
      return finish(advisorStopReason(advice));
    }
    if (stopped()) break;
    const step = await runStep(deps, {
      emit,
      ...(opts.signal ? { signal: opts.signal } : {}),
      ...(opts.maxDiffLines !== undefined ? { maxDiffLines: opts.maxDiffLines } : {}),
    });
    if (!step) break;
    const failing = trialsFailing(program, list(), opts.maxTrialFailures);
    if (failing) {
      await ws.resetTo(bestOf(list())?.commit ?? run.baseCommit);
      throw failing;
    }
    if (!step.researcherFailed) {
      failures.length = 0;
      continue;
    }
    // A researcher that fails again and again stops the run (agent-streak.ts).
    failures.push(`#${step.n} ${step.reason}`);
    if (failures.length >= (opts.maxAgentFailures ?? DEFAULT_MAX_AGENT_FAILURES)) {
      throw agentFailing(failures, { name: agent.name }, deps.logDir);
    }
  }
  await ws.resetTo(await ws.bestCommit());
  return finishEarly();
}
