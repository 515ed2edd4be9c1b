/**
 * The hub's verification policy (issue #14, item 3): pure decisions over plain data. The hub
 * server stores the state (claims, verifier results, reputations) and calls these; nothing
 * here touches a database, a clock or a process. docs/hub.md, "Verification policy".
 *
 * 1. One verifier's job (`verifierStep`): re-run the candidate on the claim's own seeds (the
 *    agreement check), then parent and candidate paired on fresh seeds the hub drew (sequential
 *    seeds), asking the same acceptance rule a local run uses (src/trust/noise-judge.ts, the
 *    parent as the best) after each trial. Its verdict (`VerifierVerdict`): `confirm` when the
 *    rule keeps the candidate and the claim agrees with what the verifier measured on the
 *    claim's seeds within noise; `contradict` when the claim lies beyond noise of the
 *    verifier's measurement or a candidate trial failed on the verifier (crash, sandbox
 *    violation, tampered file); `unconfirmed` otherwise (the rule did not keep it, the claim
 *    itself is plausible: an honest winner's curse looks like this).
 * 2. The quorum (`nextStep`): two verifiers; accepted with two confirmations (the recorded
 *    value is the verifiers', never the claim's); each verifier that does not confirm calls
 *    another ("a third on disagreement"); rejected once two confirmations can no longer be
 *    reached within four verifiers, or at once when two verifiers contradicted the claim.
 * 3. Work that does not move the frontier (`checkProbability`): adaptive replication after
 *    BOINC's: re-checked always until an identity has `trustAfter` consecutive verified
 *    results, then with probability max(floor, 1 / consecutive).
 * 4. Reputation (`updateReputation`) and quarantine (`quarantinePlan`): a contradicted or
 *    invalid claim quarantines the identity; what it had accepted, and what was accepted on
 *    top of that, is re-verified.
 */

import type { JudgeInput } from "../core/judge.ts";
import type { Decision, Direction, Program, TrialResult } from "../core/types.ts";
import { createNoiseJudge, type NoiseJudgeOptions } from "../trust/noise-judge.ts";
import { mean, pooledSd } from "../trust/stats.ts";

// ---------------------------------------------------------------------------------------------
// One verifier's job

/** One trial as the hub stores it: a seed and the objective's value, or why it failed. */
export interface HubTrial {
  seed: number;
  /** The objective's value; absent when the trial failed. */
  value?: number;
  /** Why the trial failed (crash, timeout, sandbox violation, tampered protected file). */
  failure?: string;
}

/** What a claim says, as far as verification needs it (the signed claim carries more). */
export interface ClaimForVerification {
  direction: Direction;
  /** The claim's seeds, in order, with the candidate's per-seed values it reports. */
  seeds: readonly number[];
  candidateValues: readonly number[];
}

/**
 * What one verifier has run so far: the candidate on the claim's own seeds (`agreement`), then
 * parent and candidate paired on fresh seeds the hub drew (`parent`, `candidate`).
 */
export interface VerifierRun {
  agreement: readonly HubTrial[];
  parent: readonly HubTrial[];
  candidate: readonly HubTrial[];
}

export interface VerifierVerdict {
  outcome: "confirm" | "unconfirmed" | "contradict";
  /** The candidate's value as the verifier measured it (the rule's noise-corrected value on a keep). */
  value?: number;
  /** Trials the verifier ran (agreement, parent and candidate). */
  trials: number;
  reason: string;
}

export type VerifierStep =
  | { kind: "run"; side: "agreement" | "parent" | "candidate"; seed: number }
  | { kind: "verdict"; verdict: VerifierVerdict };

export interface VerifierOptions {
  /** The acceptance rule's options (a local run's defaults unless the program sets others). */
  judge?: NoiseJudgeOptions;
  /**
   * How far, in standard errors of the claim-minus-verifier difference on the claim's seeds, the
   * claim may be better than what the verifier measured and still agree. One-sided: a claim that
   * understates is no cheat (the verifier's value is recorded anyway). Default 3.
   */
  agreeZ?: number;
  /** How many of the claim's seeds the candidate is re-run on for the agreement check. Default 2. */
  agreeSeeds?: number;
}

const AGREE_Z = 3;
const AGREE_SEEDS = 2;

/**
 * The verifier's rule the simulation recommends for a hub (docs/hub.md): the local rule with a
 * keep at 2.5 standard errors after 16 trials. With the local defaults a verifier confirms a
 * candidate no better than its parent 8% of the time, and modest no-gain claims got through a
 * quorum (bench/hub-sim.ts: 83 a day at 10,000 contributors); with these, none in 3 days.
 */
export const RECOMMENDED_VERIFIER: VerifierOptions = Object.freeze({
  judge: Object.freeze({ confirmZ: 2.5, testTrials: 16, confirmTrials: 16 }),
});

/**
 * The fresh seeds of a verifier job: `drawn` (the hub draws them per job, the contributor never
 * sees them) minus the claim's own. The acceptance rule is applied on these only, so a claim
 * whose seeds were picked for luck cannot bias it; the claim's seeds serve the agreement check.
 */
export function freshSeeds(claim: ClaimForVerification, drawn: readonly number[]): number[] {
  const own = new Set(claim.seeds);
  return [...new Set(drawn)].filter((s) => !own.has(s));
}

/** A program as much as the judge reads of it: the objective and no constraints. */
function programFor(direction: Direction): Program {
  return {
    path: "hub",
    name: "hub",
    objective: { metric: "objective", direction },
    run: { command: "", budgetMs: 0, graceMs: 0, setupTimeoutMs: 0, evaluateTimeoutMs: 0 },
    files: { editable: [], protected: [], holdout: [] },
    outputs: [],
    sandbox: { enabled: true, required: true, network: false, caches: [], env: [], limits: {} },
    metrics: { holdout: [] },
    constraints: [],
    acceptance: "noise",
    agent: { backend: "builtin", args: [], env: {} },
    search: {},
    directions: "",
  };
}

function trialResult(t: HubTrial): TrialResult {
  const ok = t.failure === undefined && typeof t.value === "number" && Number.isFinite(t.value);
  return {
    status: ok ? "ok" : "crash",
    ...(ok ? {} : { reason: t.failure ?? "no value" }),
    exitCode: ok ? 0 : 1,
    signal: null,
    wallS: 0,
    cpuS: 0,
    peakRssMb: 0,
    metrics: ok ? { objective: t.value as number } : {},
    selfReported: false,
    seed: t.seed,
    command: "",
    stdoutPath: "",
    stderrPath: "",
    logTail: "",
  };
}

const isFailed = (t: HubTrial) =>
  t.failure !== undefined || typeof t.value !== "number" || !Number.isFinite(t.value);

/**
 * The verdict a failed trial forces, if any: a failed candidate trial contradicts at once (a
 * verifier is trusted hardware running the sandbox, so the failure is the candidate's); a failed
 * parent trial leaves the verifier unconfirmed (it says nothing about `about`).
 */
export function failureVerdict(
  candidate: readonly HubTrial[],
  parent: readonly HubTrial[],
  trials: number,
  about: string,
): VerifierStep | undefined {
  const c = candidate.find(isFailed);
  if (c) {
    return {
      kind: "verdict",
      verdict: {
        outcome: "contradict",
        trials,
        reason: `the candidate failed on the verifier (seed ${c.seed}): ${c.failure ?? "no value"}`,
      },
    };
  }
  const p = parent.find(isFailed);
  if (p) {
    return {
      kind: "verdict",
      verdict: {
        outcome: "unconfirmed",
        trials,
        reason: `the parent failed on the verifier (seed ${p.seed}): ${p.failure ?? "no value"}; the verifier's result says nothing about ${about}`,
      },
    };
  }
  return undefined;
}

/**
 * The next thing one verifier does, or its verdict. First the candidate on the claim's first
 * `agreeSeeds` seeds (the agreement check), then the acceptance rule on `fresh` seeds
 * (freshSeeds(...)): the parent on the rule's baseline trials (its noise sample), then the
 * candidate, the rule asked after each trial for another trial of the candidate (next seed) or
 * of the parent (the incumbent is evidence too), as a local run asks it. A failed candidate
 * trial is a verdict at once: a verifier is trusted hardware running the sandbox, so the
 * failure is the candidate's.
 */
export function verifierStep(
  claim: ClaimForVerification,
  fresh: readonly number[],
  run: VerifierRun,
  options: VerifierOptions = {},
): VerifierStep {
  const judge = createNoiseJudge(options.judge);
  const trials = run.agreement.length + run.parent.length + run.candidate.length;
  const failed = failureVerdict([...run.agreement, ...run.candidate], run.parent, trials, "the claim");
  if (failed) return failed;
  const agreeSeeds = Math.min(options.agreeSeeds ?? AGREE_SEEDS, claim.seeds.length);
  if (run.agreement.length < agreeSeeds) {
    return { kind: "run", side: "agreement", seed: claim.seeds[run.agreement.length] as number };
  }
  const next = (side: "parent" | "candidate", i: number): VerifierStep => {
    const seed = fresh[i];
    if (seed === undefined) {
      return {
        kind: "verdict",
        verdict: {
          outcome: "unconfirmed",
          trials,
          reason: `ran out of fresh seeds (${fresh.length}) before a decision`,
        },
      };
    }
    return { kind: "run", side, seed };
  };
  if (run.parent.length < judge.baselineTrials) return next("parent", run.parent.length);
  if (run.candidate.length === 0) return next("candidate", 0);

  const parentValues = run.parent.map((t) => t.value as number);
  const input: JudgeInput = {
    program: programFor(claim.direction),
    trials: run.candidate.map(trialResult),
    best: { n: 0, metric: mean(parentValues), values: parentValues, trials: run.parent.map(trialResult) },
    baseline: parentValues,
  };
  const d = judge.decide(input);
  if (d.action === "more") {
    return d.incumbent ? next("parent", run.parent.length) : next("candidate", run.candidate.length);
  }
  return { kind: "verdict", verdict: verdictOf(claim, run, d as Decision, trials, options) };
}

/**
 * How far the claim is better than what the verifier measured on the claim's own seeds, in
 * standard errors: the mean over those seeds of (claimed − measured), signed so that positive
 * is the claim looking better, over σ·√(2/k), σ the noise of the verifier's paired trials
 * (the parent's trials, and every trial of the candidate — agreement and fresh seeds — pooled,
 * each around its own mean). NaN without a compared seed.
 */
export function claimExcessZ(claim: ClaimForVerification, run: VerifierRun): number {
  const sign = claim.direction === "minimize" ? 1 : -1;
  const claimed = new Map(claim.seeds.map((s, i) => [s, claim.candidateValues[i]]));
  const diffs: number[] = [];
  for (const t of run.agreement) {
    const c = claimed.get(t.seed);
    if (typeof c === "number" && Number.isFinite(c) && typeof t.value === "number")
      diffs.push(sign * (t.value - c));
  }
  if (diffs.length === 0) return Number.NaN;
  // Every measurement of the candidate (its agreement trials on the claim's seeds and its trials
  // on fresh seeds) is one sample around its mean: pooled with the parent's, a rule that stops
  // after one candidate trial still leaves 4 degrees of freedom, not 2 — with 2, σ came out
  // twice too large about 2% of the time and a 6σ lie went unconfirmed instead of contradicted.
  const { sd } = pooledSd([
    run.parent.map((t) => t.value as number),
    [...run.agreement, ...run.candidate].map((t) => t.value as number),
  ]);
  const se = sd * Math.sqrt(2 / diffs.length);
  const excess = mean(diffs);
  if (!(se > 0)) return excess > 0 ? Number.POSITIVE_INFINITY : excess < 0 ? Number.NEGATIVE_INFINITY : 0;
  return excess / se;
}

function verdictOf(
  claim: ClaimForVerification,
  run: VerifierRun,
  d: Decision,
  trials: number,
  options: VerifierOptions,
): VerifierVerdict {
  const agreeZ = options.agreeZ ?? AGREE_Z;
  const z = claimExcessZ(claim, run);
  const measured = mean(run.candidate.map((t) => t.value as number));
  if (!(z <= agreeZ)) {
    const why = Number.isNaN(z)
      ? "the claim has no per-seed value the verifier could compare"
      : `the claim is ${z === Number.POSITIVE_INFINITY ? "∞" : z.toFixed(1)} standard errors better than the verifier measured on its seeds (agreement allows ${agreeZ})`;
    return { outcome: "contradict", value: measured, trials, reason: `${why}; the rule said: ${d.reason}` };
  }
  if (d.action === "keep") {
    return { outcome: "confirm", value: d.metric ?? measured, trials, reason: d.reason };
  }
  return { outcome: "unconfirmed", value: measured, trials, reason: d.reason };
}

// ---------------------------------------------------------------------------------------------
// The quorum

export interface QuorumOptions {
  /** Confirmations that accept a claim. Default 2. */
  quorum?: number;
  /**
   * Verifiers in flight at most: dispatched at once for a new claim, and again after verifiers
   * that did not confirm. Default 2 (the protocol); 1 = staged (the next verifier only
   * when the previous one returned).
   */
  initial?: number;
  /** Most verifiers a claim gets; rejected once `quorum` confirmations cannot be reached. Default 4. */
  maxVerifiers?: number;
  /** Contradictions that reject at once (the claim lies outside the noise twice). Default 2. */
  contradictionsToReject?: number;
  /**
   * "A third on disagreement", read literally: when the first `quorum` verifiers all return
   * without confirming, they agree, and the claim is rejected without a third. Default false
   * (each verifier that does not confirm calls another, up to `maxVerifiers`).
   */
  rejectWhenNoneConfirm?: boolean;
}

export interface QuorumState {
  verdicts: readonly VerifierVerdict[];
  /** Verifier jobs dispatched whose verdict has not come back (a crashed one is re-leased, still running). */
  running: number;
}

export type QuorumStep =
  | { kind: "verify"; verifiers: number }
  | { kind: "wait"; running: number }
  | { kind: "accept"; value: number; reason: string }
  | { kind: "reject"; reason: string; contradicted: boolean };

const QUORUM = {
  quorum: 2,
  initial: 2,
  maxVerifiers: 4,
  contradictionsToReject: 2,
  rejectWhenNoneConfirm: false,
};

/**
 * What the hub does next with a claim that would move the frontier. Data in, decision out:
 * the hub stores verdicts as they come back and calls this again.
 */
export function nextStep(state: QuorumState, options: QuorumOptions = {}): QuorumStep {
  const o = { ...QUORUM, ...options };
  const confirms = state.verdicts.filter((v) => v.outcome === "confirm");
  const contradictions = state.verdicts.filter((v) => v.outcome === "contradict").length;
  const done = state.verdicts.length;
  if (confirms.length >= o.quorum) {
    const values = confirms.map((v) => v.value as number);
    return {
      kind: "accept",
      value: mean(values),
      reason: `confirmed by ${confirms.length} of ${done} verifiers; recorded value is the verifiers' mean ${mean(values)}`,
    };
  }
  if (contradictions >= o.contradictionsToReject) {
    return {
      kind: "reject",
      contradicted: true,
      reason: `${contradictions} verifiers contradicted the claim: ${firstReason(state, "contradict")}`,
    };
  }
  if (o.rejectWhenNoneConfirm && confirms.length === 0 && done >= o.quorum) {
    return {
      kind: "reject",
      contradicted: false,
      reason: `none of the first ${done} verifiers confirmed (they agree; no third on agreement): ${firstReason(state, contradictions > 0 ? "contradict" : "unconfirmed")}`,
    };
  }
  const reachable = confirms.length + (o.maxVerifiers - done);
  if (reachable < o.quorum) {
    return {
      kind: "reject",
      contradicted: false,
      reason: `${confirms.length} of ${done} verifiers confirmed; ${o.quorum} are needed within ${o.maxVerifiers}: ${firstReason(state, contradictions > 0 ? "contradict" : "unconfirmed")}`,
    };
  }
  // Never more than `initial` verifiers in flight: while confirmations are missing, one more
  // for each verifier that returned without confirming, never past maxVerifiers. Calling this
  // again after dispatching (running updated) answers "wait": the hub may call it on any event.
  const missing = o.quorum - confirms.length;
  const add = Math.min(
    missing - state.running,
    Math.max(1, o.initial) - state.running,
    o.maxVerifiers - done - state.running,
  );
  if (add > 0) return { kind: "verify", verifiers: add };
  return { kind: "wait", running: state.running };
}

export interface NewcomerOptions {
  /** Confirmations a claim of an identity without a track record needs. Default: the base quorum (off). */
  newcomerQuorum?: number;
  /** Consecutive verified results that make a track record. Default 10 (as `trustAfter`). */
  trustAfter?: number;
}

/**
 * The quorum a claim gets, by its identity's reputation (BOINC's adaptive replication, applied
 * to confirmations): an identity with fewer than `trustAfter` consecutive verified results
 * needs `newcomerQuorum` confirmations, with as many more verifiers allowed; one with a track
 * record the base quorum. A no-gain claim passes two strict verifiers about 6·p² of the time
 * (p ≈ 0.3%) and three about 10·p³: the rare fake accepts the simulation saw came from identities
 * that had not earned trust (docs/benchmarks.md "hub-sim").
 */
export function quorumFor(rep: Reputation, base: QuorumOptions = {}, o: NewcomerOptions = {}): QuorumOptions {
  const quorum = base.quorum ?? QUORUM.quorum;
  const want = o.newcomerQuorum ?? quorum;
  if (want <= quorum || rep.consecutive >= (o.trustAfter ?? 10)) return base;
  return {
    ...base,
    quorum: want,
    maxVerifiers: (base.maxVerifiers ?? QUORUM.maxVerifiers) + (want - quorum),
  };
}

function firstReason(state: QuorumState, outcome: VerifierVerdict["outcome"]): string {
  return state.verdicts.find((v) => v.outcome === outcome)?.reason ?? "";
}

// ---------------------------------------------------------------------------------------------
// Reputation, adaptive replication, quarantine

export interface Reputation {
  /** Verified results in a row (BOINC's consecutive valid count); zeroed by one that is not. */
  consecutive: number;
  verified: number;
  unconfirmed: number;
  /** Unconfirmed frontier claims since the last verified result. */
  unconfirmedInRow: number;
  quarantined: boolean;
}

export const NEW_REPUTATION: Reputation = Object.freeze({
  consecutive: 0,
  verified: 0,
  unconfirmed: 0,
  unconfirmedInRow: 0,
  quarantined: false,
});

export interface ReplicationOptions {
  /** Consecutive verified results before any result goes unchecked. Default 10 (BOINC's). */
  trustAfter?: number;
  /** Lowest check probability, whatever the reputation. Default 0.05. */
  floor?: number;
}

/**
 * The probability that a result which does not move the frontier (a negative result, a
 * finding) is re-checked by a verifier: 1 for a quarantined identity or one with fewer than
 * `trustAfter` consecutive verified results, else max(floor, 1/consecutive). Never increases
 * as the consecutive count grows.
 */
export function checkProbability(rep: Reputation, options: ReplicationOptions = {}): number {
  const trustAfter = options.trustAfter ?? 10;
  const floor = options.floor ?? 0.05;
  if (rep.quarantined || rep.consecutive < trustAfter) return 1;
  return Math.max(floor, 1 / rep.consecutive);
}

/** Whether to check this result: `u` is a uniform draw in [0, 1) the hub made. */
export function shouldCheck(rep: Reputation, u: number, options: ReplicationOptions = {}): boolean {
  return u < checkProbability(rep, options);
}

export type ReputationEvent = "verified" | "unconfirmed" | "invalid";

export interface ReputationOptions {
  /**
   * Unconfirmed frontier claims in a row (no verified result between them) that quarantine an
   * identity as an invalid one does. Default Infinity: only an invalid result quarantines (the
   * issue's protocol); bench/hub-sim.ts measures finite values (docs/hub.md).
   */
  quarantineAfterUnconfirmed?: number;
}

/**
 * A verified result raises the consecutive count; an unconfirmed frontier claim (the rule did
 * not keep it, the claim itself was plausible) zeroes it; an invalid result (a contradicted
 * claim, a sampled re-check that disagrees) quarantines the identity, and so do
 * `quarantineAfterUnconfirmed` unconfirmed claims in a row.
 */
export function updateReputation(
  rep: Reputation,
  event: ReputationEvent,
  options: ReputationOptions = {},
): Reputation {
  if (event === "verified") {
    return { ...rep, consecutive: rep.consecutive + 1, verified: rep.verified + 1, unconfirmedInRow: 0 };
  }
  if (event === "unconfirmed") {
    const inRow = rep.unconfirmedInRow + 1;
    const limit = options.quarantineAfterUnconfirmed ?? Number.POSITIVE_INFINITY;
    return {
      ...rep,
      consecutive: 0,
      unconfirmed: rep.unconfirmed + 1,
      unconfirmedInRow: inRow,
      quarantined: rep.quarantined || inRow >= limit,
    };
  }
  return { ...rep, consecutive: 0, quarantined: true };
}

/** A claim the hub accepted, as the quarantine needs it. */
export interface AcceptedClaim {
  id: string;
  identity: string;
  /** The claim this one was built on (its parent commit's claim); absent on the program's root. */
  parent?: string;
  /** Whether a verifier re-ran it (false: accepted unchecked under adaptive replication). */
  verified: boolean;
}

/**
 * What a quarantine triggers: the quarantined identity's accepted claims and every accepted
 * claim built on one of them (descendants, any identity), in the order given (acceptance
 * order: a claim after what it was built on). Each is re-verified; until then it stays out of
 * the frontier.
 */
export function quarantinePlan(
  identity: string,
  accepted: readonly AcceptedClaim[],
): { id: string; reason: "own" | "built-on" }[] {
  const children = new Map<string, AcceptedClaim[]>();
  for (const c of accepted) {
    if (c.parent === undefined) continue;
    const list = children.get(c.parent) ?? [];
    list.push(c);
    children.set(c.parent, list);
  }
  const tainted = new Set<string>();
  const queue = accepted.filter((c) => c.identity === identity);
  for (const c of queue) tainted.add(c.id);
  while (queue.length > 0) {
    const c = queue.shift() as AcceptedClaim;
    for (const k of children.get(c.id) ?? []) {
      if (tainted.has(k.id)) continue;
      tainted.add(k.id);
      queue.push(k);
    }
  }
  return accepted
    .filter((c) => tainted.has(c.id))
    .map((c) => ({ id: c.id, reason: c.identity === identity ? "own" : "built-on" }));
}
