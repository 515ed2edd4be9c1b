/**
 * A simulated keep-or-revert loop on a noisy objective whose noise-free value is known. The
 * judge is consulted exactly as src/core/loop.ts does: the baseline runs judge.baselineTrials
 * trials, every candidate runs one trial, then another each time the judge answers "more"
 * (at maxTrials a "more" becomes a discard), and a keep moves the best to the candidate with
 * the metric the judge reported. The run stops when the next trial would exceed the budget of
 * total trials (baseline included), so judges are compared at equal compute.
 */

import { type GpObservation, type GpOptions, posteriorBest, suggestGp } from "../src/agents/builtin/gp.ts";
import { createRng, mixSeed, type Rng } from "../src/agents/builtin/rng.ts";
import { defaultStartup, suggestTpe, type TpeObservation } from "../src/agents/builtin/tpe.ts";
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

export type Proposer = "local" | "tpe" | "gp";

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
  /** The baseline configuration's own noise σ (default `sigma`): 0 is a deterministic incumbent. */
  baselineSigma?: number;
  /**
   * Keeps the run only when the baseline's trials pass (values, true value): a condition on
   * the baseline's luck (redrawn until it holds), e.g. a sample σ far too large.
   */
  baselineIf?: (values: number[], trueValue: number) => boolean;
  /**
   * Synthetic proposals: the candidate's true value from the best's (instead of a point of
   * `fn`). With it, fn only gives the start point's true value.
   */
  proposeTrue?: (rng: Rng, bestTrue: number) => number;
  /** Most trials an incumbent is re-measured to, whatever the judge asks. Default 24. */
  incumbentCap?: number;
  /** Also name the best configuration by the GP posterior (KeepLoopResult.posteriorTrue). */
  posterior?: boolean;
  /** Tell the judge how many trials are left (JudgeInput.budget). Default false. */
  budgetAware?: boolean;
  /** Hand the judge every configuration of the run (JudgeInput.run). Default true. */
  runGroups?: boolean;
  /** The GP's acquisition (GpOptions.acquisition; default the sampler's own). */
  acquisition?: GpOptions["acquisition"];
  /** GpOptions.escape. */
  escape?: GpOptions["escape"];
}

export interface KeepRecord {
  n: number;
  /** True value of the candidate kept and of the best it replaced. */
  trueNew: number;
  trueOld: number;
  reported: number;
  trials: number;
  /** The judge's reason for keeping it. */
  reason: string;
}

export interface KeepLoopResult {
  keeps: KeepRecord[];
  /** Kept changes whose true value is worse than the best they replaced. */
  falseKeeps: number;
  finalReported: number;
  finalTrue: number;
  /** Every objective value the final best has at the end (its keep's trials and re-measurements). */
  finalValues: number[];
  trialsUsed: number;
  experiments: number;
  /** Every decided candidate: true improvement over the best's true value (positive = better), trials, kept. */
  candidates: { improvement: number; trials: number; kept: boolean; incumbent: number; reason?: string }[];
  /** Trials spent re-measuring incumbents. */
  incumbentTrials: number;
  /**
   * True value of the evaluated configuration with the best GP posterior mean (posteriorBest),
   * when `posterior` was asked for.
   */
  posteriorTrue?: number;
  /** The GP's predicted value of that configuration (what `autolab status` reports for it). */
  posteriorPredicted?: number;
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
  const baseSigma = o.baselineSigma ?? o.sigma;
  const scaled = (k: number, s: number) => (o.sigma > 0 ? (noise(k) * s) / o.sigma : 0);
  // Trial k of every experiment gets seed o.seed + k, as the loop gives it run.seed + k.
  let baseTrials: TrialResult[] = [];
  for (let attempt = 0; ; attempt++) {
    baseTrials = [];
    for (let k = 0; k < judge.baselineTrials; k++)
      baseTrials.push(simTrial(truth(start) + scaled(k, baseSigma), o.seed + k));
    const vs = baseTrials.map((t) => t.metrics.value as number);
    if (!o.baselineIf || o.baselineIf(vs, truth(start))) break;
    if (attempt > 100_000) throw new Error("baselineIf never held");
    seedNoise.length = 0;
  }
  used += baseTrials.length;
  const baseValues = baseTrials.map((t) => t.metrics.value as number);
  const baseMean = baseValues.reduce((a, b) => a + b, 0) / baseValues.length;
  let best = {
    n: 0,
    u: start,
    metric: baseMean,
    values: baseValues,
    trials: baseTrials,
    true: truth(start),
    sigma: baseSigma,
  };
  /** Every configuration judged so far, for the run-wide noise model. */
  const groups = new Map<number, number[]>([[0, baseValues]]);
  let incumbentTrials = 0;
  const keeps: KeepRecord[] = [];
  const history: TpeObservation[] = [{ params: fromUnit(fn.space, start), value: baseMean }];
  /** The same, with every trial's value (the GP models repeats); the best's grow as it is re-measured. */
  const gpHistory: GpObservation[] = [{ params: fromUnit(fn.space, start), values: baseValues }];
  const trueOf: number[] = [truth(start)];
  let n = 0;
  const candidates: KeepLoopResult["candidates"] = [];

  outer: while (used < o.totalTrials) {
    n++;
    let u: number[];
    let syntheticTrue: number | undefined;
    if (o.proposeTrue) {
      u = best.u;
      syntheticTrue = o.proposeTrue(proposeRng, best.true);
    } else if (o.proposer === "tpe" || o.proposer === "gp") {
      const rng = createRng(mixSeed(o.seed, 5, n));
      const current = fromUnit(fn.space, best.u);
      const s =
        o.proposer === "gp"
          ? suggestGp(fn.space, gpHistory, rng, {
              direction: "minimize",
              current,
              startup: defaultStartup(dims),
              ...(o.acquisition ? { acquisition: o.acquisition } : {}),
              ...(o.escape !== undefined ? { escape: o.escape } : {}),
            })
          : suggestTpe(fn.space, history, rng, { direction: "minimize", current });
      u = Object.entries(fn.space).map(([name, k]) => {
        const v = s.params[name] as number;
        return k.log ? Math.log(v / k.low) / Math.log(k.high / k.low) : (v - k.low) / (k.high - k.low);
      });
    } else {
      u = proposeLocal(proposeRng, best.u);
    }
    const trueValue = syntheticTrue ?? truth(u);
    const trials: TrialResult[] = [];
    let decision: Decision | undefined;
    let next = true;
    while (!decision) {
      if (next) {
        if (used >= o.totalTrials) break outer;
        const k = trials.length;
        trials.push(simTrial(trueValue + noise(k), o.seed + k));
        used++;
      }
      next = true;
      const verdict = judge.decide({
        program,
        trials,
        best: {
          n: best.n,
          metric: best.metric,
          values: best.values,
          ...(o.unpaired ? {} : { trials: best.trials }),
        },
        baseline: groups.get(0) ?? baseValues,
        ...(o.runGroups === false ? {} : { run: [...groups].map(([g, values]) => ({ n: g, values })) }),
        ...(o.budgetAware ? { budget: { left: o.totalTrials - used, total: o.totalTrials } } : {}),
      });
      if (verdict.action !== "more") decision = verdict;
      else if (verdict.incumbent && best.trials.length < (o.incumbentCap ?? 24)) {
        // The incumbent's next seed, as the loop runs it; then the judge is asked again.
        if (used >= o.totalTrials) break outer;
        const k = best.trials.length;
        best.trials = [...best.trials, simTrial(best.true + scaled(k, best.sigma), o.seed + k)];
        best.values = best.trials.map((t) => t.metrics.value as number);
        groups.set(best.n, best.values);
        (gpHistory[best.n] as GpObservation).values = best.values;
        used++;
        incumbentTrials++;
        next = false;
      } else if (trials.length >= judge.maxTrials) decision = { action: "discard", reason: verdict.reason };
    }
    const values = trials.map((t) => t.metrics.value as number);
    groups.set(n, values);
    candidates.push({
      incumbent: best.n,
      improvement: best.true - trueValue,
      trials: trials.length,
      kept: decision.action === "keep",
      reason: decision.reason,
    });
    const measured = decision.metric ?? values.reduce((a, b) => a + b, 0) / values.length;
    history.push({ params: fromUnit(fn.space, u), value: measured });
    gpHistory.push({ params: fromUnit(fn.space, u), values });
    trueOf.push(trueValue);
    if (decision.action === "keep") {
      const reported = decision.metric as number;
      keeps.push({
        n,
        trueNew: trueValue,
        trueOld: best.true,
        reported,
        trials: trials.length,
        reason: decision.reason,
      });
      best = { n, u, metric: reported, values, trials, true: trueValue, sigma: o.sigma };
    }
  }
  const pb = o.posterior ? posteriorBest(fn.space, gpHistory, "minimize") : undefined;
  return {
    ...(pb ? { posteriorTrue: trueOf[pb.index] as number, posteriorPredicted: pb.predicted } : {}),
    keeps,
    falseKeeps: keeps.filter((k) => k.trueNew > k.trueOld).length,
    finalReported: best.metric,
    finalTrue: best.true,
    finalValues: best.values,
    trialsUsed: used,
    experiments: n,
    candidates,
    incumbentTrials,
  };
}
