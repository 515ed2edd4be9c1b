/**
 * The hub's verification policy (issue #14, item 3): pure decisions over plain data. The hub
 * server stores the state (claims, verifier results, reputations) and calls these; nothing
 * here touches a database, a clock or a process. docs/hub.md, "Verification policy".
 *
 * 1. One verifier's job (`verifierStep`): re-run parent and candidate paired on the claim's
 *    seeds, then on seeds the hub chose (sequential seeds), asking the same acceptance rule a
 *    local run uses (src/trust/noise-judge.ts, the parent as the best) after each trial. Its
 *    verdict (`VerifierVerdict`): `confirm` when the rule keeps the candidate and the claim
 *    agrees with what the verifier measured on the claim's seeds within noise; `contradict`
 *    when the claim lies beyond noise of the verifier's measurement or a trial failed on the
 *    verifier (crash, sandbox violation, tampered file); `unconfirmed` otherwise (the rule did
 *    not keep it, the claim itself is plausible: an honest winner's curse looks like this).
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

/** What one verifier has run so far: parent and candidate, paired by seed. */
export interface VerifierRun {
  parent: readonly HubTrial[];
  candidate: readonly HubTrial[];
}

export interface VerifierVerdict {
  outcome: "confirm" | "unconfirmed" | "contradict";
  /** The candidate's value as the verifier measured it (the rule's noise-corrected value on a keep). */
  value?: number;
  /** Parent and candidate trials the verifier ran. */
  trials: number;
  reason: string;
}

export type VerifierStep =
  | { kind: "run"; side: "parent" | "candidate"; seed: number }
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
}

const AGREE_Z = 3;

/**
 * The seeds a verifier runs, in order: the claim's own first (so the claim can be compared
 * seed for seed), then `fresh` ones the hub drew and the contributor never saw (so a lucky seed
 * cannot be chosen in advance). The hub draws the fresh seeds once per verifier job.
 */
export function verificationSeeds(claim: ClaimForVerification, fresh: readonly number[]): number[] {
  const out = [...claim.seeds];
  for (const s of fresh) if (!out.includes(s)) out.push(s);
  return out;
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

/**
 * The next thing one verifier does, or its verdict. `seeds` is verificationSeeds(...): the
 * parent runs first on the rule's baseline trials (its noise sample), then the candidate; after
 * each candidate trial the acceptance rule decides, asking for another trial of the candidate
 * (next seed) or of the parent (the incumbent is evidence too). A failed trial is a verdict at
 * once: a verifier runs trusted hardware in the sandbox, so a failure is the candidate's.
 */
export function verifierStep(
  claim: ClaimForVerification,
  seeds: readonly number[],
  run: VerifierRun,
  options: VerifierOptions = {},
): VerifierStep {
  const judge = createNoiseJudge(options.judge);
  const trials = run.parent.length + run.candidate.length;
  const failed = [...run.parent, ...run.candidate].find(
    (t) => t.failure !== undefined || t.value === undefined,
  );
  if (failed) {
    const side = run.parent.includes(failed) ? "parent" : "candidate";
    return {
      kind: "verdict",
      verdict: {
        outcome: side === "candidate" ? "contradict" : "unconfirmed",
        trials,
        reason: `${side} trial (seed ${failed.seed}) failed on the verifier: ${failed.failure ?? "no value"}`,
      },
    };
  }
  const seedAt = (i: number): number | undefined => seeds[i];
  const next = (side: "parent" | "candidate", i: number): VerifierStep => {
    const seed = seedAt(i);
    if (seed === undefined) {
      return {
        kind: "verdict",
        verdict: {
          outcome: "unconfirmed",
          trials,
          reason: `ran out of seeds (${seeds.length}) before a decision`,
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
 * standard errors: mean over shared seeds of (claimed − measured), signed so that positive is
 * the claim looking better, over σ·√(2/k) with σ the verifier's pooled noise (parent and
 * candidate around their own means). NaN without a shared seed.
 */
export function claimExcessZ(claim: ClaimForVerification, run: VerifierRun): number {
  const sign = claim.direction === "minimize" ? 1 : -1;
  const measured = new Map(run.candidate.map((t) => [t.seed, t.value]));
  const diffs: number[] = [];
  claim.seeds.forEach((seed, i) => {
    const m = measured.get(seed);
    const c = claim.candidateValues[i];
    if (typeof m === "number" && typeof c === "number" && Number.isFinite(c)) diffs.push(sign * (m - c));
  });
  if (diffs.length === 0) return Number.NaN;
  const { sd } = pooledSd([
    run.parent.map((t) => t.value as number),
    run.candidate.map((t) => t.value as number),
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
  /** Verifiers dispatched at once for a new claim. Default 2 (the protocol); 1 = staged. */
  initial?: number;
  /** Most verifiers a claim gets; rejected once `quorum` confirmations cannot be reached. Default 4. */
  maxVerifiers?: number;
  /** Contradictions that reject at once (the claim lies outside the noise twice). Default 2. */
  contradictionsToReject?: number;
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

const QUORUM = { quorum: 2, initial: 2, maxVerifiers: 4, contradictionsToReject: 2 };

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
  const reachable = confirms.length + (o.maxVerifiers - done);
  if (reachable < o.quorum) {
    return {
      kind: "reject",
      contradicted: false,
      reason: `${confirms.length} of ${done} verifiers confirmed; ${o.quorum} are needed within ${o.maxVerifiers}: ${firstReason(state, contradictions > 0 ? "contradict" : "unconfirmed")}`,
    };
  }
  // Verifiers still needed for a quorum, given those running: at first `initial`, then one for
  // each verifier that did not confirm, never past maxVerifiers.
  const missing = o.quorum - confirms.length;
  const wanted = done === 0 && state.running === 0 ? Math.min(o.initial, o.maxVerifiers) : missing;
  const add = Math.min(wanted - state.running, o.maxVerifiers - done - state.running);
  if (add > 0) return { kind: "verify", verifiers: add };
  return { kind: "wait", running: state.running };
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
  quarantined: boolean;
}

export const NEW_REPUTATION: Reputation = { consecutive: 0, verified: 0, unconfirmed: 0, quarantined: false };

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

/**
 * A verified result raises the consecutive count; an unconfirmed frontier claim (the rule did
 * not keep it, the claim itself was plausible) zeroes it; an invalid result (a contradicted
 * claim, a sampled re-check that disagrees) quarantines the identity.
 */
export function updateReputation(rep: Reputation, event: ReputationEvent): Reputation {
  if (event === "verified") return { ...rep, consecutive: rep.consecutive + 1, verified: rep.verified + 1 };
  if (event === "unconfirmed") return { ...rep, consecutive: 0, unconfirmed: rep.unconfirmed + 1 };
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
