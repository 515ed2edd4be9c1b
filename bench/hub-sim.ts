/**
 * The hub's verification policy under attack (issue #14 item 6, the simulation): a seeded
 * discrete-event simulation of contributors submitting frontier claims to a hub that verifies
 * them with src/hub/verification-policy.ts — the verifier's job on the local acceptance rule,
 * the quorum, reputation and quarantine — on a pool of trusted verifiers.
 *
 * Trial values (minimize, σ = 1 in total): value(code, seed) = μ_code + a(seed) + b(code, seed)
 * + ε, with a seed-tied part shared by every code (a(seed), variance 0.4: data order), a
 * seed-tied part of the code itself (b, variance 0.1: its initialisation on that seed, which a
 * re-run of the same seed reproduces) and run-to-run noise ε (variance 0.5).
 *
 * Honest contributors claim real gains: 90% of their frontier claims truly better by
 * U(0.75, 2.5)σ, 10% by N(0, 0.25)σ (the local rule's false keeps); the claim's per-seed values
 * are their own measurements on 8 seeds. Cheaters (`--cheat-share`, spread evenly over five
 * strategies), each modelled as what the verifier's re-run sees:
 *   - fake-metrics: the code changes nothing; the claim reports values U(1, 3)σ better than
 *     the parent's on its seeds;
 *   - lucky-seed: the code changes nothing; the cheater ran it on 40 seeds and claims the 2
 *     whose values were best (b reproduces on a re-run of those seeds, ε does not);
 *   - inflated: a real gain of U(0.25, 0.75)σ, claimed 2σ larger;
 *   - copy: a cosmetic copy of the head (the last accepted move, whose gain is already in the
 *     parent), claiming that move's gain again;
 *   - time-bomb: claims a U(1, 2)σ gain that shows only where it is not verified: on a verifier
 *     it detects the sandbox (probability 0.8) and behaves like the parent, or trips it (a
 *     network call, a write outside) and the trial fails.
 * A cheater whose claim is rejected keeps trying until quarantined (the hub's cheap gate then
 * refuses its claims); every identity has at most one frontier claim pending (a quota).
 *
 *   npm run bench -- hub-sim [--contributors=10000] [--cheat-share=0.2] [--hours=24]
 *     [--verifiers=2500] [--run-minutes=5] [--honest-rate=0.02] [--cheat-rate=0.25]
 *     [--finding-rate=1] [--gain-min=0.75] [--gain-max=2.5] [--seeds=3] [--first-seed=1]
 *     [--variants=issue,staged,strict,strict-staged,staged-q3,strict3,strict-q3,strict-q3-n3,strict-q3-agree,strict-staged-q3,strict-staged-q3-c1]
 */

import { mulberry32 } from "../src/core/random.ts";
import {
  type ClaimForVerification,
  checkProbability,
  freshSeeds,
  type HubTrial,
  NEW_REPUTATION,
  type NewcomerOptions,
  nextStep,
  type QuorumOptions,
  quorumFor,
  RECOMMENDED_VERIFIER,
  type Reputation,
  type ReputationOptions,
  updateReputation,
  type VerifierOptions,
  type VerifierVerdict,
  verifierStep,
} from "../src/hub/verification-policy.ts";
import { estimate, flags, numberFlag, show } from "./_stats.ts";

export const STRATEGIES = ["fake-metrics", "lucky-seed", "inflated", "copy", "time-bomb"] as const;
export type Strategy = (typeof STRATEGIES)[number];

export interface SimOptions {
  contributors: number;
  cheatShare: number;
  hours: number;
  /** Trusted verifiers (one GPU each, one trial at a time). */
  verifiers: number;
  /** Length of one trial (one run of the experiment), minutes. */
  runMinutes: number;
  /** Frontier claims per honest contributor per hour (Poisson). */
  honestRate: number;
  /** Frontier claims per cheater per hour (Poisson; the hub's quota caps it). */
  cheatRate: number;
  /** Findings (work that does not move the frontier) per honest contributor per hour. */
  findingRate: number;
  /** Honest real gains are U(gainMin, gainMax)σ (90% of honest claims). Default 0.75–2.5. */
  gainMin?: number;
  gainMax?: number;
  seed: number;
  quorum?: QuorumOptions;
  /** A higher quorum for identities without a track record (quorumFor). */
  newcomer?: NewcomerOptions;
  verifier?: VerifierOptions;
  reputation?: ReputationOptions;
}

export interface SimResult {
  claims: { honest: number; cheat: number };
  accepted: { honest: number; cheat: number };
  /** Cheaters' claims accepted whose true gain is ≤ 0 (the frontier moved by nothing). */
  fakeAccepted: number;
  fakeAcceptedBy: Record<Strategy, number>;
  /** Cheaters' claims accepted with a real gain (inflated ones: at the verifiers' value). */
  cheatAcceptedReal: number;
  /** Honest claims with a true gain ≥ gainMin that were rejected, share of those decided. */
  falseRejections: number;
  honestRealDecided: number;
  /** Verifier jobs over accepted claims (every frontier claim's jobs counted, fakes' included). */
  jobsPerAccepted: number;
  /** Jobs spent on honest claims over honest claims accepted: the protocol's own cost, without attackers. */
  honestJobsPerAccepted: number;
  /** Trials (runs of the experiment) per verifier job. */
  trialsPerJob: number;
  /** Hours from claim to acceptance, median and 90th percentile. */
  acceptHoursMedian: number;
  acceptHoursP90: number;
  /** Verifier utilisation over the simulated time. */
  utilisation: number;
  cheatersQuarantined: number;
  honestQuarantined: number;
  /** Non-frontier results re-checked per honest finding (adaptive replication). */
  checksPerFinding: number;
  /** Claims still pending at the end. */
  pending: number;
}

const SHARED = 0.4;
const CODE = 0.1;
const EPS = 0.5;

/** A standard normal from a uniform source (Box–Muller). */
function gauss(r: () => number): number {
  let u = 0;
  while (u === 0) u = r();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * r());
}

function hash(...xs: number[]): number {
  let h = 0x9e3779b9;
  for (const x of xs) {
    h = Math.imul(h ^ (x >>> 0), 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
  }
  return h >>> 0;
}

/** A deterministic standard normal per key (the seed-tied parts reproduce on a re-run). */
function tied(...key: number[]): number {
  return gauss(mulberry32(hash(...key)));
}

interface Code {
  id: number;
  mu: number;
}

interface SimClaim {
  id: number;
  who: number;
  strategy: Strategy | "honest";
  parent: Code;
  candidate: Code;
  trueGain: number;
  claim: ClaimForVerification;
  submitted: number;
  verdicts: VerifierVerdict[];
  running: number;
  jobs: number;
  done: boolean;
}

/** A min-heap of events by time. */
class Events<T> {
  private heap: { t: number; k: number; v: T }[] = [];
  private k = 0;
  push(t: number, v: T): void {
    const h = this.heap;
    h.push({ t, k: this.k++, v });
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (this.less(h[p] as never, h[i] as never)) break;
      [h[p], h[i]] = [h[i] as never, h[p] as never];
      i = p;
    }
  }
  pop(): { t: number; v: T } | undefined {
    const h = this.heap;
    if (h.length === 0) return undefined;
    const top = h[0] as { t: number; v: T };
    const last = h.pop() as (typeof h)[number];
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && this.less(h[l] as never, h[m] as never)) m = l;
        if (r < h.length && this.less(h[r] as never, h[m] as never)) m = r;
        if (m === i) break;
        [h[m], h[i]] = [h[i] as never, h[m] as never];
        i = m;
      }
    }
    return top;
  }
  private less(a: { t: number; k: number }, b: { t: number; k: number }): boolean {
    return a.t < b.t || (a.t === b.t && a.k < b.k);
  }
}

type Event =
  | { kind: "claim"; who: number }
  | { kind: "finding"; who: number }
  | { kind: "job"; claim: SimClaim; verdict: VerifierVerdict; trials: number };

export function simulate(o: SimOptions): SimResult {
  const rng = mulberry32(hash(o.seed, 1));
  const nCheat = Math.round(o.contributors * o.cheatShare);
  // Cheaters are the first nCheat identities, strategies in turn.
  const strategyOf = (who: number): Strategy | "honest" =>
    who < nCheat ? (STRATEGIES[who % STRATEGIES.length] as Strategy) : "honest";
  const reps: Reputation[] = Array.from({ length: o.contributors }, () => NEW_REPUTATION);
  const pending = new Set<number>();
  const events = new Events<Event>();
  const exp = (rate: number) => -Math.log(1 - rng()) / rate;
  for (let who = 0; who < o.contributors; who++) {
    const rate = who < nCheat ? o.cheatRate : o.honestRate;
    if (rate > 0) events.push(exp(rate), { kind: "claim", who });
    if (who >= nCheat && o.findingRate > 0) events.push(exp(o.findingRate), { kind: "finding", who });
  }
  let codes = 0;
  const newCode = (mu: number): Code => ({ id: ++codes, mu });
  // The head: the last accepted frontier move (μ relative to the program's start) and its gain.
  let head: Code = newCode(0);
  let lastGain = 1;
  let claimIds = 0;
  const value = (code: Code, seed: number, r: () => number) =>
    code.mu +
    Math.sqrt(SHARED) * tied(seed, 0) +
    Math.sqrt(CODE) * tied(seed, code.id) +
    Math.sqrt(EPS) * gauss(r);
  const drawSeeds = (k: number, r: () => number) =>
    Array.from({ length: k }, () => Math.floor(r() * 2 ** 31));

  const res = {
    claims: { honest: 0, cheat: 0 },
    accepted: { honest: 0, cheat: 0 },
    fakeAccepted: 0,
    fakeAcceptedBy: Object.fromEntries(STRATEGIES.map((s) => [s, 0])) as Record<Strategy, number>,
    cheatAcceptedReal: 0,
    falseRejections: 0,
    honestRealDecided: 0,
    jobs: 0,
    honestJobs: 0,
    trials: 0,
    acceptHours: [] as number[],
    busyHours: 0,
    checks: 0,
    findings: 0,
  };

  function makeClaim(who: number, t: number): SimClaim {
    const strategy = strategyOf(who);
    const r = mulberry32(hash(o.seed, 2, claimIds));
    const parent = head;
    let trueGain = 0;
    let seeds: number[] = drawSeeds(8, r);
    let values: number[];
    let candidate: Code;
    switch (strategy) {
      case "honest": {
        const lo = o.gainMin ?? 0.75;
        const hi = o.gainMax ?? 2.5;
        trueGain = r() < 0.9 ? lo + (hi - lo) * r() : 0.25 * gauss(r);
        candidate = newCode(parent.mu - trueGain);
        values = seeds.map((s) => value(candidate, s, r));
        break;
      }
      case "fake-metrics": {
        candidate = newCode(parent.mu);
        const claimed = 1 + 2 * r();
        values = seeds.map((s) => value(parent, s, r) - claimed);
        break;
      }
      case "lucky-seed": {
        candidate = newCode(parent.mu);
        // The cheater's own runs on 40 seeds; it claims the 2 where the candidate looked best.
        const tries = drawSeeds(40, r).map((s) => {
          const v = value(candidate, s, r);
          return { s, v, d: v - value(parent, s, r) };
        });
        tries.sort((x, y) => x.d - y.d);
        const best = tries.slice(0, 2);
        seeds = best.map((x) => x.s);
        values = best.map((x) => x.v);
        break;
      }
      case "inflated": {
        trueGain = 0.25 + 0.5 * r();
        candidate = newCode(parent.mu - trueGain);
        values = seeds.map((s) => value(candidate, s, r) - 2);
        break;
      }
      case "copy": {
        candidate = newCode(parent.mu);
        values = seeds.map((s) => value(parent, s, r) - lastGain);
        break;
      }
      case "time-bomb": {
        candidate = newCode(parent.mu);
        const claimed = 1 + r();
        values = seeds.map((s) => value(parent, s, r) - claimed);
        break;
      }
    }
    return {
      id: claimIds++,
      who,
      strategy,
      parent,
      candidate,
      trueGain,
      claim: { direction: "minimize", seeds, candidateValues: values },
      submitted: t,
      verdicts: [],
      running: 0,
      jobs: 0,
      done: false,
    };
  }

  /** One verifier job, run to its verdict at once (the event fires when it would finish). */
  function runJob(c: SimClaim): { verdict: VerifierVerdict; trials: number } {
    const r = mulberry32(hash(o.seed, 3, c.id, c.jobs));
    const fresh = freshSeeds(c.claim, drawSeeds(40, r));
    const run = { agreement: [] as HubTrial[], parent: [] as HubTrial[], candidate: [] as HubTrial[] };
    // The time bomb decides once per verifier job whether it recognised the sandbox.
    const bombDetects = r() < 0.8;
    for (;;) {
      const step = verifierStep(c.claim, fresh, run, o.verifier);
      if (step.kind === "verdict") return { verdict: step.verdict, trials: step.verdict.trials };
      if (step.side === "parent") {
        run.parent.push({ seed: step.seed, value: value(c.parent, step.seed, r) });
        continue;
      }
      const trial: HubTrial =
        c.strategy === "time-bomb" && !bombDetects
          ? { seed: step.seed, failure: "sandbox: network access denied" }
          : { seed: step.seed, value: value(c.candidate, step.seed, r) };
      (step.side === "agreement" ? run.agreement : run.candidate).push(trial);
    }
  }

  const queue: SimClaim[] = [];
  let free = o.verifiers;
  const dispatch = (t: number) => {
    while (free > 0 && queue.length > 0) {
      const c = queue.shift() as SimClaim;
      free--;
      const { verdict, trials } = runJob(c);
      c.jobs++;
      res.jobs++;
      if (c.strategy === "honest") res.honestJobs++;
      res.trials += trials;
      const hours = (trials * o.runMinutes) / 60;
      res.busyHours += Math.min(hours, Math.max(0, o.hours - t));
      events.push(t + hours, { kind: "job", claim: c, verdict, trials });
    }
  };
  const advance = (c: SimClaim, t: number) => {
    const step = nextStep(
      { verdicts: c.verdicts, running: c.running },
      quorumFor(reps[c.who] as Reputation, o.quorum, o.newcomer),
    );
    if (step.kind === "verify") {
      c.running += step.verifiers;
      for (let i = 0; i < step.verifiers; i++) queue.push(c);
      return;
    }
    if (step.kind === "wait") return;
    c.done = true;
    pending.delete(c.who);
    const honest = c.strategy === "honest";
    if (step.kind === "accept") {
      res.acceptHours.push(t - c.submitted);
      reps[c.who] = updateReputation(reps[c.who] as Reputation, "verified", o.reputation);
      if (honest) {
        res.accepted.honest++;
        if (c.trueGain >= (o.gainMin ?? 0.75)) res.honestRealDecided++;
      } else {
        res.accepted.cheat++;
        if (c.trueGain <= 0) {
          res.fakeAccepted++;
          res.fakeAcceptedBy[c.strategy as Strategy]++;
        } else res.cheatAcceptedReal++;
      }
      head = c.candidate;
      lastGain = Math.max(0.5, c.parent.mu - c.candidate.mu);
      return;
    }
    reps[c.who] = updateReputation(
      reps[c.who] as Reputation,
      step.contradicted ? "invalid" : "unconfirmed",
      o.reputation,
    );
    if (honest && c.trueGain >= (o.gainMin ?? 0.75)) {
      res.honestRealDecided++;
      res.falseRejections++;
    }
  };

  for (;;) {
    const e = events.pop();
    if (!e || e.t > o.hours) break;
    const { t, v } = e;
    if (v.kind === "claim") {
      const rate = v.who < nCheat ? o.cheatRate : o.honestRate;
      events.push(t + exp(rate), v);
      const rep = reps[v.who] as Reputation;
      if (rep.quarantined || pending.has(v.who)) continue;
      const c = makeClaim(v.who, t);
      pending.add(v.who);
      if (c.strategy === "honest") res.claims.honest++;
      else res.claims.cheat++;
      advance(c, t);
    } else if (v.kind === "finding") {
      events.push(t + exp(o.findingRate), v);
      res.findings++;
      const rep = reps[v.who] as Reputation;
      if (rng() < checkProbability(rep)) {
        res.checks++;
        reps[v.who] = updateReputation(rep, "verified", o.reputation);
      }
    } else {
      free++;
      v.claim.running--;
      v.claim.verdicts.push(v.verdict);
      advance(v.claim, t);
    }
    dispatch(t);
  }
  const sorted = [...res.acceptHours].sort((a, b) => a - b);
  const q = (p: number) =>
    sorted.length
      ? (sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] as number)
      : Number.NaN;
  const accepted = res.accepted.honest + res.accepted.cheat;
  return {
    claims: res.claims,
    accepted: res.accepted,
    fakeAccepted: res.fakeAccepted,
    fakeAcceptedBy: res.fakeAcceptedBy,
    cheatAcceptedReal: res.cheatAcceptedReal,
    falseRejections: res.honestRealDecided ? res.falseRejections / res.honestRealDecided : 0,
    honestRealDecided: res.honestRealDecided,
    jobsPerAccepted: accepted ? res.jobs / accepted : Number.NaN,
    honestJobsPerAccepted: res.accepted.honest ? res.honestJobs / res.accepted.honest : Number.NaN,
    trialsPerJob: res.jobs ? res.trials / res.jobs : Number.NaN,
    acceptHoursMedian: q(0.5),
    acceptHoursP90: q(0.9),
    utilisation: res.busyHours / (o.verifiers * o.hours),
    cheatersQuarantined: reps.slice(0, nCheat).filter((r) => r.quarantined).length,
    honestQuarantined: reps.slice(nCheat).filter((r) => r.quarantined).length,
    checksPerFinding: res.findings ? res.checks / res.findings : 0,
    pending: pending.size,
  };
}

/** The verifier's rule made stricter: a longer test, and a keep needs 2.5 standard errors. */
const STRICT: VerifierOptions = RECOMMENDED_VERIFIER;

const VARIANTS: Record<
  string,
  {
    label: string;
    quorum?: QuorumOptions;
    newcomer?: NewcomerOptions;
    verifier?: VerifierOptions;
    reputation?: ReputationOptions;
  }
> = {
  issue: {
    label:
      "the issue's protocol (2 verifiers at once, one more per non-confirmation, at most 4; the local rule's defaults)",
  },
  staged: { label: "staged: one verifier first, the next when it returns", quorum: { initial: 1 } },
  strict: {
    label: "the issue's quorum, the verifier's rule stricter (confirmZ 2.5, 16 trials)",
    verifier: STRICT,
  },
  "strict-staged": { label: "strict and staged", verifier: STRICT, quorum: { initial: 1 } },
  "staged-q3": {
    label: "staged, and 3 unconfirmed claims in a row quarantine (the local rule's defaults)",
    quorum: { initial: 1 },
    reputation: { quarantineAfterUnconfirmed: 3 },
  },
  strict3: {
    label: "the issue's quorum, the verifier's rule stricter still (confirmZ 3, 16 trials)",
    verifier: { judge: { confirmZ: 3, testTrials: 16, confirmTrials: 16 } },
  },
  "strict-q3": {
    label: "strict, and 3 unconfirmed claims in a row quarantine (the hub's verifier driver's defaults)",
    verifier: STRICT,
    reputation: { quarantineAfterUnconfirmed: 3 },
  },
  "strict-staged-q3": {
    label: "strict, staged, and 3 unconfirmed claims in a row quarantine",
    verifier: STRICT,
    quorum: { initial: 1 },
    reputation: { quarantineAfterUnconfirmed: 3 },
  },
  "strict-q3-n3": {
    label:
      "strict, 3 unconfirmed quarantine, and 3 confirmations for identities without 10 verified results in a row",
    verifier: STRICT,
    newcomer: { newcomerQuorum: 3 },
    reputation: { quarantineAfterUnconfirmed: 3 },
  },
  "strict-q3-agree": {
    label:
      "strict, 3 unconfirmed quarantine, and no third verifier when the first two agree nothing is confirmed",
    verifier: STRICT,
    quorum: { rejectWhenNoneConfirm: true },
    reputation: { quarantineAfterUnconfirmed: 3 },
  },
  "strict-staged-q3-c1": {
    label: "strict, staged, 3 unconfirmed quarantine, and one contradiction rejects",
    verifier: STRICT,
    quorum: { initial: 1, contradictionsToReject: 1 },
    reputation: { quarantineAfterUnconfirmed: 3 },
  },
};

export async function main(args: string[]): Promise<unknown> {
  const f = flags(args);
  const base = {
    contributors: numberFlag(f, "contributors", 10_000),
    cheatShare: numberFlag(f, "cheat-share", 0.2),
    hours: numberFlag(f, "hours", 24),
    verifiers: numberFlag(f, "verifiers", 2500),
    runMinutes: numberFlag(f, "run-minutes", 5),
    honestRate: numberFlag(f, "honest-rate", 0.02),
    cheatRate: numberFlag(f, "cheat-rate", 0.25),
    findingRate: numberFlag(f, "finding-rate", 1),
    gainMin: numberFlag(f, "gain-min", 0.75),
    gainMax: numberFlag(f, "gain-max", 2.5),
  };
  const seeds = numberFlag(f, "seeds", 3);
  const first = numberFlag(f, "first-seed", 1);
  const names = (f.variants ?? "issue,strict,strict-staged-q3").split(",");
  console.log(
    `hub-sim: ${base.contributors} contributors (${base.cheatShare * 100}% cheating, 5 strategies), ${base.hours} h, ${base.verifiers} verifiers, ${base.runMinutes}-minute runs; ${seeds} seeds (${first}–${first + seeds - 1}), mean ± 95% CI`,
  );
  const figures: Record<string, unknown> = { ...base, seeds, first };
  for (const name of names) {
    const v = VARIANTS[name];
    if (!v) throw new Error(`unknown variant ${name}: ${Object.keys(VARIANTS).join(", ")}`);
    const runs: SimResult[] = [];
    for (let s = first; s < first + seeds; s++) {
      runs.push(
        simulate({
          ...base,
          seed: s,
          quorum: v.quorum,
          newcomer: v.newcomer,
          verifier: v.verifier,
          reputation: v.reputation,
        }),
      );
    }
    const e = (pick: (r: SimResult) => number) => estimate(runs.map(pick));
    const row = {
      fakeAccepted: e((r) => r.fakeAccepted),
      fakeAcceptedMax: Math.max(...runs.map((r) => r.fakeAccepted)),
      fakeAcceptedBy: Object.fromEntries(STRATEGIES.map((st) => [st, runs.map((r) => r.fakeAcceptedBy[st])])),
      cheatAcceptedReal: e((r) => r.cheatAcceptedReal),
      jobsPerAccepted: e((r) => r.jobsPerAccepted),
      honestJobsPerAccepted: e((r) => r.honestJobsPerAccepted),
      trialsPerJob: e((r) => r.trialsPerJob),
      falseRejections: e((r) => r.falseRejections),
      acceptHoursMedian: e((r) => r.acceptHoursMedian),
      acceptHoursP90: e((r) => r.acceptHoursP90),
      utilisation: e((r) => r.utilisation),
      claimsHonest: e((r) => r.claims.honest),
      claimsCheat: e((r) => r.claims.cheat),
      acceptedHonest: e((r) => r.accepted.honest),
      cheatersQuarantined: e((r) => r.cheatersQuarantined),
      honestQuarantined: e((r) => r.honestQuarantined),
      checksPerFinding: e((r) => r.checksPerFinding),
      pending: e((r) => r.pending),
    };
    figures[name] = row;
    console.log(`\n${name}: ${v.label}`);
    console.log(
      `  fake claims accepted: ${show(row.fakeAccepted)} (max ${row.fakeAcceptedMax}) ${JSON.stringify(row.fakeAcceptedBy)}`,
    );
    console.log(`  cheaters' real gains accepted at the verifiers' value: ${show(row.cheatAcceptedReal)}`);
    console.log(
      `  verifier jobs per accepted frontier move: ${show(row.jobsPerAccepted)} (${show(row.trialsPerJob)} trials per job); honest claims alone ${show(row.honestJobsPerAccepted)}`,
    );
    console.log(
      `  honest claims truly better by ≥ ${base.gainMin}σ rejected: ${show(row.falseRejections, 3, 100)}%`,
    );
    console.log(
      `  claim → acceptance: median ${show(row.acceptHoursMedian)} h, p90 ${show(row.acceptHoursP90)} h; verifier utilisation ${show(row.utilisation, 3, 100)}%`,
    );
    console.log(
      `  claims: honest ${show(row.claimsHonest)} (accepted ${show(row.acceptedHonest)}), cheat ${show(row.claimsCheat)}; pending at the end ${show(row.pending)}`,
    );
    console.log(
      `  quarantined: cheaters ${show(row.cheatersQuarantined)}, honest ${show(row.honestQuarantined)}; re-checks per honest finding ${show(row.checksPerFinding)}`,
    );
  }
  return figures;
}
