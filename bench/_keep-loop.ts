/**
 * A simulated keep-or-revert loop on a noisy objective whose noise-free value is known. The
 * judge is consulted exactly as src/core/loop.ts does: the baseline runs judge.baselineTrials
 * trials, every candidate runs one trial, then another each time the judge answers "more"
 * (at maxTrials a "more" becomes a discard), and a keep moves the best to the candidate with
 * the metric the judge reported. The run stops when the next trial would exceed the budget of
 * total trials (baseline included), so judges are compared at equal compute.
 */
import { createRng, mixSeed, type Rng } from "../src/agents/builtin/rng.ts";
import { suggestTpe, type TpeObservation } from "../src/agents/builtin/tpe.ts";
import type { Judge } from "../src/core/judge.ts";
import type { Decision, Program, TrialResult } from "../src/core/types.ts";
import { fromUnit, type TestFunction } from "./_functions.ts";

export function simProgram(metric = "value", direction: "minimize" | "maximize" = "minimize"): Program {
  return {
    path: "/sim/program.md",
    name: "sim",
    objective: { metric, direction },
    run: { command: "sim", budgetMs: 1000, graceMs: 0, setupTimeoutMs: 0, evaluateTimeoutMs: 0 },
    files: { editable: [], protected: [], holdout: [] },
    outputs: [],
    sandbox: { enabled: false, required: false, network: false, caches: [], env: [], limits: {} },
    metrics: { holdout: [] },
    constraints: [],
    acceptance: "greedy",
    agent: { backend: "builtin", args: [], env: {} },
    search: {},
    directions: "",
  };
}

export function simTrial(value: number, seed: number, metric = "value"): TrialResult {
  return {
    status: "ok",
    exitCode: 0,
    signal: null,
    wallS: 1,
    cpuS: 1,
    peakRssMb: 10,
    metrics: { [metric]: value },
    selfReported: false,
    seed,
    command: "sim",
    stdoutPath: "",
    stderrPath: "",
    logTail: "",
  };
}

export type Proposer = "local" | "tpe";

export interface KeepLoopOptions {
  fn: TestFunction;
  /** Standard deviation of the Gaussian trial noise. */
  sigma: number;
  judge: Judge;
  /** Total trials, baseline included. */
  totalTrials: number;
  seed: number;
  proposer?: Proposer;
  /**
   * Share of the noise variance that depends only on the trial's seed index (the loop gives
   * trial k of every experiment the same seed): 0 = independent noise.
   */
  seedShare?: number;
  /** Leave the best's trials (with their seeds) out of the judge's input: the unpaired rule. */
  unpaired?: boolean;
}

export interface KeepRecord {
  n: number;
  /** True value of the candidate kept and of the best it replaced. */
  trueNew: number;
  trueOld: number;
  reported: number;
  trials: number;
}

export interface KeepLoopResult {
  keeps: KeepRecord[];
  /** Kept changes whose true value is worse than the best they replaced. */
  falseKeeps: number;
  finalReported: number;
  finalTrue: number;
  trialsUsed: number;
  experiments: number;
  /** Every decided candidate: true improvement over the best's true value (positive = better), trials, kept. */
  candidates: { improvement: number; trials: number; kept: boolean }[];
}

/** Local search around the best: a Gaussian step in the unit cube, now and then a random point. */
function proposeLocal(rng: Rng, best: number[]): number[] {
  if (rng.next() < 0.1) return best.map(() => rng.next());
  return best.map((x) => Math.min(1, Math.max(0, x + 0.1 * rng.normal())));
}

export function runKeepLoop(o: KeepLoopOptions): KeepLoopResult {
  const { fn, judge } = o;
  const program = simProgram();
  const dims = Object.keys(fn.space).length;
  // Separate streams: the start point and proposals are shared across judges for a seed.
  const startRng = createRng(mixSeed(o.seed, 1));
  const proposeRng = createRng(mixSeed(o.seed, 2));
  const noiseRng = createRng(mixSeed(o.seed, 3));
  const seedRng = createRng(mixSeed(o.seed, 4));
  const share = o.seedShare ?? 0;
  const seedNoise: number[] = [];
  const noise = (k: number) => {
    while (seedNoise.length <= k) seedNoise.push(seedRng.normal());
    return o.sigma * (Math.sqrt(share) * (seedNoise[k] as number) + Math.sqrt(1 - share) * noiseRng.normal());
  };
  const truth = (u: number[]) => fn.f(fromUnit(fn.space, u));

  let used = 0;
  const start = Array.from({ length: dims }, () => startRng.next());
  // Trial k of every experiment gets seed o.seed + k, as the loop gives it run.seed + k.
  const baseTrials: TrialResult[] = [];
  for (let k = 0; k < judge.baselineTrials; k++) {
    baseTrials.push(simTrial(truth(start) + noise(k), o.seed + k));
    used++;
  }
  const baseValues = baseTrials.map((t) => t.metrics.value as number);
  const baseMean = baseValues.reduce((a, b) => a + b, 0) / baseValues.length;
  let best = { n: 0, u: start, metric: baseMean, values: baseValues, trials: baseTrials, true: truth(start) };
  const keeps: KeepRecord[] = [];
  const history: TpeObservation[] = [{ params: fromUnit(fn.space, start), value: baseMean }];
  let n = 0;
  const candidates: KeepLoopResult["candidates"] = [];

  outer: while (used < o.totalTrials) {
    n++;
    let u: number[];
    if (o.proposer === "tpe") {
      const s = suggestTpe(fn.space, history, createRng(mixSeed(o.seed, 5, n)), {
        direction: "minimize",
        current: fromUnit(fn.space, best.u),
      });
      u = Object.entries(fn.space).map(([name, k]) => {
        const v = s.params[name] as number;
        return k.log ? Math.log(v / k.low) / Math.log(k.high / k.low) : (v - k.low) / (k.high - k.low);
      });
    } else {
      u = proposeLocal(proposeRng, best.u);
    }
    const trueValue = truth(u);
    const trials: TrialResult[] = [];
    let decision: Decision | undefined;
    while (!decision) {
      if (used >= o.totalTrials) break outer;
      const k = trials.length;
      trials.push(simTrial(trueValue + noise(k), o.seed + k));
      used++;
      const verdict = judge.decide({
        program,
        trials,
        best: {
          n: best.n,
          metric: best.metric,
          values: best.values,
          ...(o.unpaired ? {} : { trials: best.trials }),
        },
        baseline: baseValues,
      });
      if (verdict.action !== "more") decision = verdict;
      else if (trials.length >= judge.maxTrials) decision = { action: "discard", reason: verdict.reason };
    }
    const values = trials.map((t) => t.metrics.value as number);
    candidates.push({
      improvement: best.true - trueValue,
      trials: trials.length,
      kept: decision.action === "keep",
    });
    const measured = decision.metric ?? values.reduce((a, b) => a + b, 0) / values.length;
    history.push({ params: fromUnit(fn.space, u), value: measured });
    if (decision.action === "keep") {
      const reported = decision.metric as number;
      keeps.push({ n, trueNew: trueValue, trueOld: best.true, reported, trials: trials.length });
      best = { n, u, metric: reported, values, trials, true: trueValue };
    }
  }
  return {
    keeps,
    falseKeeps: keeps.filter((k) => k.trueNew > k.trueOld).length,
    finalReported: best.metric,
    finalTrue: best.true,
    trialsUsed: used,
    experiments: n,
    candidates,
  };
}
