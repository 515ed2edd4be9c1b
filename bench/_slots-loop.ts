/**
 * The parallel scheduler (src/core/scheduler.ts) simulated on a noisy objective, the way
 * bench/_keep-loop.ts simulates the serial loop: same judge calls, same trial seeds, a budget of
 * total trials (baseline included). What the scheduler adds, and this reproduces:
 *
 *   - `slots` trials at once; a trial takes 0.9–1.1 time units (a fixed time budget per trial),
 *     so trials finish, and are judged, in completion order;
 *   - proposals are instant (the built-in optimizer) and, as the scheduler makes them for an
 *     instant proposer, one at a time and only for a free slot: a proposal sees up to
 *     slots − 1 experiments without a decision (pending, the constant liar's fantasies);
 *     `queue: slots` simulates the scheduler for agents that think (a trial ahead, up to
 *     2·slots − 1 pending);
 *   - each proposal builds on the best of its moment and is judged against that best (its
 *     parent), with the parent's re-measurements on the candidate's slot when the judge asks;
 *   - a winner whose best moved meanwhile is rebased: its changed knob values written onto the
 *     new best as a new experiment (first in the queue), evaluated again; the same values as the
 *     new best: discarded ("already in");
 *   - the baseline's trials run on the first slots at once; the other slots run candidates' first
 *     trials meanwhile, judged once the baseline is kept.
 *
 * When the next trial would exceed the budget, no trial starts; those running finish, and an
 * experiment that still wanted a trial stays undecided. The configuration named best at the end
 * is the one a GP of every measured configuration predicts best (src/trust/posterior.ts), as
 * `autolab status` names it.
 */
import { type GpObservation, posteriorBest, suggestGp } from "../src/agents/builtin/gp.ts";
import { createRng, mixSeed } from "../src/agents/builtin/rng.ts";
import { keyOf, makeDims, type Params } from "../src/agents/builtin/space.ts";
import { defaultStartup, suggestTpe, type TpeObservation } from "../src/agents/builtin/tpe.ts";
import type { Judge } from "../src/core/judge.ts";
import type { Decision, TrialResult } from "../src/core/types.ts";
import { fromUnit, type Point, type TestFunction } from "./_functions.ts";
import { simProgram, simTrial } from "./_keep-loop.ts";

export interface SlotsLoopOptions {
  fn: TestFunction;
  sigma: number;
  judge: Judge;
  /** Total trials, baseline included. */
  totalTrials: number;
  seed: number;
  slots: number;
  proposer: "gp" | "tpe";
  /**
   * Candidates that may wait for a slot besides those running. Default 0: a proposal is made
   * only when a slot is free for it, as the scheduler does for an instant proposer (the built-in
   * optimizer, Agent.instant); `slots`: a trial ahead, as it does for agents that think.
   */
  queue?: number;
  /** Tell the judge how many trials are left (JudgeInput.budget). Default true. */
  budgetAware?: boolean;
  /** Most trials an incumbent is re-measured to, whatever the judge asks. Default 24. */
  incumbentCap?: number;
  /**
   * How proposals see experiments without a result: "liar" (default, the samplers' constant
   * liar) or "failed" (counted as the worst, as the built-in agent did before it).
   */
  pending?: "liar" | "failed";
}

export interface SlotsLoopResult {
  /** True value of the last kept configuration and of the one the GP posterior names. */
  finalTrue: number;
  posteriorTrue: number;
  keeps: number;
  /** Kept changes whose true value is worse than the best they replaced. */
  falseKeeps: number;
  trialsUsed: number;
  experiments: number;
  /** Winners rebased onto a best that moved meanwhile. */
  rebased: number;
}

interface Exp {
  n: number;
  params: Params;
  true: number;
  /** The best it was built on (judged against it). */
  parent: number;
  results: TrialResult[];
  /** Trials started (the next one's seed index). */
  started: number;
  decision?: Decision;
}

/** What a slot runs next: a trial of this experiment (a candidate, or an incumbent re-measured). */
type Work = Generator<Exp, void, void>;

interface Running {
  end: number;
  order: number;
  slot: number;
  exp: Exp;
  value: number;
  seed: number;
}

export function runSlotsLoop(o: SlotsLoopOptions): SlotsLoopResult {
  const { fn, judge } = o;
  const program = simProgram();
  const dims = makeDims(fn.space);
  const space = Object.keys(fn.space);
  // The start point and the noise as in runKeepLoop for the same seed; durations their own stream.
  const startRng = createRng(mixSeed(o.seed, 1));
  const noiseRng = createRng(mixSeed(o.seed, 3));
  const timeRng = createRng(mixSeed(o.seed, 6));
  const start = fromUnit(
    fn.space,
    space.map(() => startRng.next()),
  );
  const values = (e: Exp) => e.results.map((r) => r.metrics.value as number);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

  const exps: Exp[] = [{ n: 0, params: start, true: fn.f(start), parent: 0, results: [], started: 0 }];
  const baseline = exps[0] as Exp;
  let best = baseline;
  let baselineKept = false;
  let started = 0;
  let order = 0;
  let now = 0;
  let keeps = 0;
  let falseKeeps = 0;
  let rebased = 0;
  const queue: Exp[] = [];
  /** Candidates whose first trial ran before the baseline was kept: they wait for it. */
  const waiting: Exp[] = [];
  /** Those put back in the queue: they need a decision more than a slot (outside the queue's bound). */
  const toJudge = new Set<Exp>();
  const running: Running[] = [];
  const capacity = o.queue ?? 0;

  /** The history a proposal sees, as the built-in agent builds it (src/agents/builtin/builtin-agent.ts). */
  const observations = (): (GpObservation & TpeObservation)[] =>
    exps.map((e) => {
      if (e.results.length === 0)
        return { params: e.params, values: [], ...(o.pending === "failed" ? {} : { pending: true }) };
      const vs = values(e);
      return { params: e.params, values: vs, value: e.decision?.metric ?? mean(vs) };
    });
  const propose = () => {
    // Proposals made at one moment run concurrently: none sees the others.
    const seen = observations();
    const queued = queue.filter((e) => !toJudge.has(e)).length;
    // queue 0: only for a slot that is free now (no proposal waits for a slot).
    const room = capacity > 0 ? capacity - queued : idleSlots() - queue.length;
    for (let i = 0; i < room && started < o.totalTrials; i++) {
      const n = exps.length;
      const rng = createRng(mixSeed(o.seed, 5, n));
      const options = {
        direction: "minimize" as const,
        current: best.params,
        startup: defaultStartup(dims.length),
      };
      const s =
        o.proposer === "gp"
          ? suggestGp(fn.space, seen, rng, options)
          : suggestTpe(fn.space, seen, rng, options);
      // The bench's spaces are numeric.
      const e: Exp = {
        n,
        params: s.params,
        true: fn.f(s.params as Point),
        parent: best.n,
        results: [],
        started: 0,
      };
      exps.push(e);
      queue.push(e);
    }
  };

  const record = (e: Exp, decision: Decision) => {
    if (decision.action === "keep" && e.parent !== best.n) {
      // The scheduler's merge: the knob values it changed, written onto the new best.
      const parent = exps[e.parent] as Exp;
      const params = { ...best.params };
      for (const k of space) if (e.params[k] !== parent.params[k]) params[k] = e.params[k] as number;
      e.decision = { action: "discard", reason: "rebased" };
      if (keyOf(dims, params) === keyOf(dims, best.params)) return;
      const m: Exp = {
        n: exps.length,
        params,
        true: fn.f(params as Point),
        parent: best.n,
        results: [],
        started: 0,
      };
      exps.push(m);
      queue.unshift(m);
      rebased++;
      return;
    }
    e.decision = decision;
    if (decision.action !== "keep") return;
    keeps++;
    if (e.true > best.true) falseKeeps++;
    best = e;
  };

  function* evaluate(e: Exp): Work {
    if (!baselineKept) {
      if (e.started === 0) yield e;
      if (!baselineKept) {
        waiting.push(e);
        return;
      }
    }
    const parent = exps[e.parent] as Exp;
    while (true) {
      if (e.results.length === 0) {
        yield e;
        continue;
      }
      const verdict = judge.decide({
        program,
        trials: e.results,
        best: {
          n: parent.n,
          metric: parent.decision?.metric as number,
          values: values(parent),
          trials: parent.results,
        },
        baseline: values(baseline),
        run: exps.filter((x) => x !== e).map((x) => ({ n: x.n, values: values(x) })),
        ...(o.budgetAware === false
          ? {}
          : { budget: { left: o.totalTrials - started, total: o.totalTrials } }),
      });
      if (verdict.action !== "more") return record(e, verdict);
      if (verdict.incumbent && parent.started < (o.incumbentCap ?? 24)) yield parent;
      else if (e.results.length >= judge.maxTrials)
        return record(e, { action: "discard", reason: verdict.reason });
      else yield e;
    }
  }

  function* measureBaseline(slot: number, slotsUsed: number): Work {
    for (let k = slot; k < judge.baselineTrials; k += slotsUsed) yield baseline;
  }
  function* worker(): Work {
    while (true) {
      const e = queue.shift();
      if (!e) return;
      toJudge.delete(e);
      yield* evaluate(e);
    }
  }

  const baselineSlots = Math.min(o.slots, judge.baselineTrials);
  const work: (Work | undefined)[] = Array.from({ length: o.slots }, (_, j) =>
    j < baselineSlots ? measureBaseline(j, baselineSlots) : undefined,
  );
  /** Starts the slot's next trial; false when it has nothing to run. */
  const step = (j: number): boolean => {
    if (!work[j] && (baselineKept || j >= baselineSlots)) work[j] = worker();
    const w = work[j];
    const next = w?.next();
    if (!next || next.done) {
      work[j] = undefined;
      return false;
    }
    if (started >= o.totalTrials) {
      work[j] = undefined; // out of budget: the experiment stays undecided
      return false;
    }
    const e = next.value;
    started++;
    running.push({
      end: now + 0.9 + 0.2 * timeRng.next(),
      order: order++,
      slot: j,
      exp: e,
      value: e.true + o.sigma * noiseRng.normal(),
      seed: o.seed + e.started++,
    });
    return true;
  };
  const busy = (j: number) => running.some((r) => r.slot === j);
  const idleSlots = () => {
    let idle = 0;
    for (let j = 0; j < o.slots; j++) if (!busy(j) && (baselineKept || j >= baselineSlots)) idle++;
    return idle;
  };
  const fill = () => {
    // Proposals refill the queue, idle slots take from it, until nothing changes.
    for (let changed = true; changed; ) {
      changed = false;
      propose();
      for (let j = 0; j < o.slots; j++) if (!busy(j) && step(j)) changed = true;
    }
  };

  fill();
  while (running.length) {
    running.sort((a, b) => a.end - b.end || a.order - b.order);
    const r = running.shift() as Running;
    now = r.end;
    r.exp.results.push(simTrial(r.value, r.seed));
    if (r.exp === baseline && !baselineKept && baseline.results.length >= judge.baselineTrials) {
      baseline.decision = { action: "keep", reason: "baseline", metric: mean(values(baseline)) };
      baselineKept = true;
      for (const e of waiting) toJudge.add(e);
      queue.unshift(...waiting.splice(0));
    }
    step(r.slot);
    fill();
  }

  const measured = exps.filter((e) => e.results.length > 0);
  const pb = posteriorBest(
    fn.space,
    measured.map((e) => ({ params: e.params, values: values(e) })),
    "minimize",
  );
  return {
    finalTrue: best.true,
    posteriorTrue: pb ? (measured[pb.index] as Exp).true : best.true,
    keeps,
    falseKeeps,
    trialsUsed: started,
    experiments: exps.length - 1,
    rebased,
  };
}
