import { describe, expect, it } from "vitest";
import { simulate } from "../bench/hub-sim.ts";
import { mulberry32 } from "../src/core/random.ts";
import {
  type AcceptedClaim,
  type ClaimForVerification,
  checkProbability,
  claimExcessZ,
  freshSeeds,
  type HubTrial,
  NEW_REPUTATION,
  nextStep,
  quarantinePlan,
  RECOMMENDED_VERIFIER,
  type Reputation,
  shouldCheck,
  updateReputation,
  type VerifierRun,
  type VerifierVerdict,
  verifierStep,
} from "../src/hub/verification-policy.ts";

const confirm = (value = 1): VerifierVerdict => ({ outcome: "confirm", value, trials: 10, reason: "kept" });
const unconfirmed: VerifierVerdict = {
  outcome: "unconfirmed",
  value: 2,
  trials: 10,
  reason: "not credibly better",
};
const contradict: VerifierVerdict = {
  outcome: "contradict",
  value: 2,
  trials: 10,
  reason: "the claim is 5σ better",
};

describe("the quorum (nextStep)", () => {
  it("sends two verifiers for a new claim, then waits for them", () => {
    expect(nextStep({ verdicts: [], running: 0 })).toEqual({ kind: "verify", verifiers: 2 });
    expect(nextStep({ verdicts: [], running: 2 })).toEqual({ kind: "wait", running: 2 });
    expect(nextStep({ verdicts: [confirm()], running: 1 })).toEqual({ kind: "wait", running: 1 });
  });

  it("accepts two agreeing verifiers with their value, not the claim's", () => {
    const step = nextStep({ verdicts: [confirm(1.5), confirm(2.5)], running: 0 });
    expect(step).toMatchObject({ kind: "accept", value: 2 });
  });

  it("calls a third verifier on disagreement and accepts when it confirms", () => {
    expect(nextStep({ verdicts: [confirm(), unconfirmed], running: 0 })).toEqual({
      kind: "verify",
      verifiers: 1,
    });
    expect(nextStep({ verdicts: [confirm(1), unconfirmed, confirm(3)], running: 0 })).toMatchObject({
      kind: "accept",
      value: 2,
    });
  });

  it("with rejectWhenNoneConfirm, two verifiers that agree nothing is confirmed reject without a third", () => {
    const o = { rejectWhenNoneConfirm: true };
    expect(nextStep({ verdicts: [unconfirmed, unconfirmed], running: 0 }, o)).toMatchObject({
      kind: "reject",
      contradicted: false,
    });
    // By default both remaining verifiers go: two confirmations are still reachable within four.
    expect(nextStep({ verdicts: [unconfirmed, unconfirmed], running: 0 })).toEqual({
      kind: "verify",
      verifiers: 2,
    });
    // Disagreement still calls a third.
    expect(nextStep({ verdicts: [confirm(), unconfirmed], running: 0 }, o)).toEqual({
      kind: "verify",
      verifiers: 1,
    });
  });

  it("rejects after four verifiers without two confirmations", () => {
    const three = [confirm(), unconfirmed, unconfirmed];
    expect(nextStep({ verdicts: three, running: 0 })).toEqual({ kind: "verify", verifiers: 1 });
    const four = nextStep({ verdicts: [...three, unconfirmed], running: 0 });
    expect(four).toMatchObject({ kind: "reject", contradicted: false });
    // Never a fifth.
    expect(nextStep({ verdicts: [unconfirmed, unconfirmed, unconfirmed], running: 0 })).toMatchObject({
      kind: "reject",
    });
  });

  it("rejects at once, as contradicted, when two verifiers contradict the claim", () => {
    const step = nextStep({ verdicts: [contradict, contradict], running: 0 });
    expect(step).toMatchObject({ kind: "reject", contradicted: true });
    if (step.kind === "reject") expect(step.reason).toContain("5σ better");
  });

  it("is safe to call again after dispatching: never more than `initial` in flight, never past four", () => {
    let state = { verdicts: [unconfirmed, unconfirmed] as VerifierVerdict[], running: 0 };
    let sent = 0;
    for (let i = 0; i < 5; i++) {
      const step = nextStep(state);
      if (step.kind !== "verify") break;
      sent += step.verifiers;
      state = { ...state, running: state.running + step.verifiers };
    }
    expect(sent).toBe(2);
    expect(nextStep(state)).toEqual({ kind: "wait", running: 2 });
  });

  it("staged: one verifier first, the next only when it returns", () => {
    expect(nextStep({ verdicts: [], running: 0 }, { initial: 1 })).toEqual({ kind: "verify", verifiers: 1 });
    expect(nextStep({ verdicts: [], running: 1 }, { initial: 1 })).toEqual({ kind: "wait", running: 1 });
    expect(nextStep({ verdicts: [confirm()], running: 0 }, { initial: 1 })).toEqual({
      kind: "verify",
      verifiers: 1,
    });
  });
});

/** One verifier's job against a simulated program: σ 1, the candidate truly better by `gain`. */
function verify(
  claim: ClaimForVerification,
  gain: number,
  seed: number,
  candidate?: (seed: number) => HubTrial,
): VerifierVerdict {
  const r = mulberry32(seed);
  const gauss = () => {
    let u = 0;
    while (u === 0) u = r();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * r());
  };
  const fresh = freshSeeds(
    claim,
    Array.from({ length: 40 }, (_, i) => 1000 + i),
  );
  const run: { agreement: HubTrial[]; parent: HubTrial[]; candidate: HubTrial[] } = {
    agreement: [],
    parent: [],
    candidate: [],
  };
  for (let i = 0; i < 200; i++) {
    const step = verifierStep(claim, fresh, run);
    if (step.kind === "verdict") return step.verdict;
    if (step.side === "parent") run.parent.push({ seed: step.seed, value: 10 + gauss() });
    else {
      const t = candidate?.(step.seed) ?? { seed: step.seed, value: 10 - gain + gauss() };
      (step.side === "agreement" ? run.agreement : run.candidate).push(t);
    }
  }
  throw new Error("the verifier never decided");
}

describe("one verifier's job (verifierStep)", () => {
  const honest = (gain: number): ClaimForVerification => ({
    direction: "minimize",
    seeds: [1, 2, 3],
    candidateValues: [10 - gain, 10 - gain, 10 - gain],
  });

  it("re-runs the candidate on the claim's seeds first, then the parent on fresh ones", () => {
    const claim = honest(3);
    const fresh = freshSeeds(claim, [2, 50, 51, 52]);
    expect(fresh).toEqual([50, 51, 52]);
    const empty: VerifierRun = { agreement: [], parent: [], candidate: [] };
    expect(verifierStep(claim, fresh, empty)).toEqual({ kind: "run", side: "agreement", seed: 1 });
    const agreed = {
      ...empty,
      agreement: [
        { seed: 1, value: 7 },
        { seed: 2, value: 7 },
      ],
    };
    expect(verifierStep(claim, fresh, agreed)).toEqual({ kind: "run", side: "parent", seed: 50 });
  });

  it("confirms a real gain the claim reports faithfully, with the verifier's own value", () => {
    const v = verify(honest(3), 3, 1);
    expect(v.outcome).toBe("confirm");
    expect(v.value).toBeGreaterThan(6);
    expect(v.value).toBeLessThan(8.5);
  });

  it("contradicts a claim far better than what the verifier measures on its seeds", () => {
    const v = verify(honest(8), 0, 2);
    expect(v.outcome).toBe("contradict");
    expect(v.reason).toMatch(/standard errors better than the verifier measured/);
  });

  it("leaves a plausible claim with no real gain unconfirmed", () => {
    const v = verify(honest(0.3), 0, 3);
    expect(v.outcome).toBe("unconfirmed");
  });

  it("contradicts a candidate whose trial fails on the verifier (a time bomb tripping the sandbox)", () => {
    const v = verify(honest(1), 1, 4, (seed) => ({ seed, failure: "sandbox: network access denied" }));
    expect(v.outcome).toBe("contradict");
    expect(v.reason).toContain("network access denied");
  });

  it("measures the claim's excess in standard errors on the shared seeds, one-sided", () => {
    const claim = honest(2);
    const run: VerifierRun = {
      agreement: [
        { seed: 1, value: 10 },
        { seed: 2, value: 10 },
      ],
      parent: [
        { seed: 50, value: 9 },
        { seed: 51, value: 11 },
      ],
      candidate: [
        { seed: 50, value: 9 },
        { seed: 51, value: 11 },
      ],
    };
    // σ pooled over the parent (9, 11) and every candidate trial (10, 10, 9, 11), each around its
    // own mean: √((2 + 2) / (1 + 3)) = 1; claimed 8 vs measured 10 on two seeds: 2 / (1·√(2/2)) = 2.
    expect(claimExcessZ(claim, run)).toBeCloseTo(2, 6);
    // A claim worse than measured is negative: understating is no cheat.
    expect(claimExcessZ({ ...claim, candidateValues: [12, 12, 12] }, run)).toBeLessThan(0);
  });
});

describe("reputation and adaptive replication", () => {
  it("checks new identities always and trusted ones less, monotone in consecutive verified results", () => {
    let rep: Reputation = NEW_REPUTATION;
    const probs: number[] = [];
    for (let i = 0; i < 40; i++) {
      probs.push(checkProbability(rep));
      rep = updateReputation(rep, "verified");
    }
    expect(probs[0]).toBe(1);
    expect(probs[9]).toBe(1);
    expect(probs[10]).toBeCloseTo(0.1, 10);
    expect(probs[39]).toBeLessThan(probs[10] as number);
    for (let i = 1; i < probs.length; i++) expect(probs[i]).toBeLessThanOrEqual(probs[i - 1] as number);
    expect(checkProbability({ ...rep, consecutive: 1000 })).toBe(0.05);
    expect(shouldCheck(rep, 0.01)).toBe(true);
    expect(shouldCheck(rep, 0.99)).toBe(false);
  });

  it("an unconfirmed claim resets trust; an invalid one quarantines and is always checked", () => {
    const trusted: Reputation = { ...NEW_REPUTATION, consecutive: 20, verified: 20 };
    const reset = updateReputation(trusted, "unconfirmed");
    expect(reset).toMatchObject({ consecutive: 0, unconfirmed: 1, quarantined: false });
    expect(checkProbability(reset)).toBe(1);
    const bad = updateReputation(trusted, "invalid");
    expect(bad.quarantined).toBe(true);
    expect(checkProbability({ ...bad, consecutive: 50 })).toBe(1);
    expect(trusted.quarantined).toBe(false);
  });

  it("quarantines after N unconfirmed claims in a row when asked", () => {
    let rep: Reputation = NEW_REPUTATION;
    for (let i = 0; i < 2; i++) rep = updateReputation(rep, "unconfirmed", { quarantineAfterUnconfirmed: 3 });
    expect(rep.quarantined).toBe(false);
    const verifiedBetween = updateReputation(rep, "verified");
    expect(
      updateReputation(verifiedBetween, "unconfirmed", { quarantineAfterUnconfirmed: 3 }).quarantined,
    ).toBe(false);
    expect(updateReputation(rep, "unconfirmed", { quarantineAfterUnconfirmed: 3 }).quarantined).toBe(true);
    // By default only an invalid result quarantines.
    expect(updateReputation(rep, "unconfirmed").quarantined).toBe(false);
  });
});

describe("quarantine (quarantinePlan)", () => {
  it("re-verifies the identity's accepted claims and everything built on them, ancestors first", () => {
    const accepted: AcceptedClaim[] = [
      { id: "root", identity: "alice", verified: true },
      { id: "m1", identity: "mallory", parent: "root", verified: true },
      { id: "b1", identity: "bob", parent: "m1", verified: true },
      { id: "m2", identity: "mallory", parent: "b1", verified: false },
      { id: "c1", identity: "carol", parent: "m2", verified: true },
      { id: "a2", identity: "alice", parent: "root", verified: true },
    ];
    expect(quarantinePlan("mallory", accepted)).toEqual([
      { id: "m1", reason: "own" },
      { id: "b1", reason: "built-on" },
      { id: "m2", reason: "own" },
      { id: "c1", reason: "built-on" },
    ]);
    expect(quarantinePlan("nobody", accepted)).toEqual([]);
  });
});

describe("the simulation (bench/hub-sim.ts), small", () => {
  it("accepts no fake claim on a fixed seed with the strict verifier rule", () => {
    const r = simulate({
      contributors: 300,
      cheatShare: 0.2,
      hours: 24,
      verifiers: 60,
      runMinutes: 5,
      honestRate: 0.05,
      cheatRate: 0.25,
      findingRate: 0.5,
      seed: 11,
      verifier: RECOMMENDED_VERIFIER,
    });
    expect(r.claims.cheat).toBeGreaterThan(50);
    expect(r.accepted.honest).toBeGreaterThan(50);
    expect(r.fakeAccepted).toBe(0);
    expect(r.cheatersQuarantined).toBeGreaterThan(0);
  });
});
