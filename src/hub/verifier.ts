/**
 * The hub's verifier driver (issue #14 item 3; docs/hub.md "The verifier driver"): it owns the
 * claims in 'verifying' (frontier claims) and 'checking' (sampled findings) and drives them to a
 * decision with the pure policy of src/hub/verification-policy.ts, every step written to the
 * hub's tables so that a driver started on the same database resumes from them alone.
 *
 * - A frontier claim is verified in rounds. A round pairs against one head (`hub_claims.against`,
 *   every verifier row's `against`); `nextStep` over the round's verdicts says how many verifiers
 *   to add; each is a row of hub_verifications (fresh seeds drawn here, never shown) and a task
 *   that loops `verifierStep` over `HubTrials.run`, appending every trial to the row as it
 *   lands, then stores the verdict.
 * - accept: only over the head the round verified against (the chain, the claim's status, the
 *   'frontier' event and the reputation in one transaction); when the head moved meanwhile, a
 *   new round against the new head (or 'superseded' when the verified value does not beat it).
 * - reject: status, 'refuted' event, reputation (`invalid` when contradicted: quarantine;
 *   `unconfirmed` otherwise, quarantining after `quarantineAfterUnconfirmed` in a row). A
 *   quarantine withdraws the identity's accepted chain rows and those built on them
 *   (`quarantinePlan`) and sends them back to verification.
 * - A finding in 'checking' gets one agreement check: 'checked', or 'invalid' (quarantine).
 * Several drivers may share a database: everything that decides takes one transaction-level
 * advisory lock, and a verifier task runs only in the driver holding its row's session-level
 * advisory lock (freed when that driver's connection closes: a dead driver's tasks are resumed
 * by the next one). Trial keys are deterministic, so a resumed task re-attaches to the fleet
 * job its predecessor started instead of running it again.
 */
import { randomInt } from "node:crypto";
import type pg from "pg";
import { mean, normalCdf, pooledSd, tQuantile } from "../trust/stats.ts";
import type { HubTrials } from "./hub-trials.ts";
import {
  type ClaimForVerification,
  claimExcessZ,
  failureVerdict,
  type HubTrial,
  NEW_REPUTATION,
  type NewcomerOptions,
  nextStep,
  type QuorumOptions,
  quarantinePlan,
  quorumFor,
  RECOMMENDED_VERIFIER,
  type ReplicationOptions,
  type ReputationEvent,
  type ReputationOptions,
  updateReputation,
  type VerifierOptions,
  type VerifierRun,
  type VerifierStep,
  type VerifierVerdict,
  verifierStep,
} from "./verification-policy.ts";
import {
  acceptedWithAncestry,
  appendChain,
  appendTrial,
  type ClaimRow,
  cancelRunning,
  claimById,
  claimsToDrive,
  commitSubject,
  consecutiveOf,
  decideClaim,
  ensureRoot,
  finishVerification,
  head,
  identityForUpdate,
  insertEvent,
  insertVerifications,
  inTransaction,
  lockHead,
  noteClaim,
  runningVerificationIds,
  type Side,
  type StoredVerdict,
  setAgainst,
  setRootValue,
  storeIdentity,
  type VerificationRow,
  verificationById,
  verificationsOf,
  withdrawAndReverify,
} from "./verification-store.ts";

export type { HubTrials } from "./hub-trials.ts";

export interface VerifierDriverOptions {
  pool: pg.Pool;
  schema: string;
  trials: HubTrials;
  direction: "minimize" | "maximize";
  /** The verifier's rule. Default RECOMMENDED_VERIFIER (confirmZ 2.5 after 16 trials: docs/hub.md). */
  verifier?: VerifierOptions;
  quorum?: QuorumOptions;
  /** Default `{ quarantineAfterUnconfirmed: 3 }` (what the simulation recommends). */
  reputation?: ReputationOptions;
  /**
   * The quorum of an identity without a track record (quorumFor). Default 3 confirmations until
   * 10 verified results in a row: with two, no-gain claims of new identities got through about
   * 0.3 times a simulated day at 10,000 contributors (docs/benchmarks.md "hub-sim").
   */
  newcomer?: NewcomerOptions;
  /** Not used by the driver (the server samples findings with it); accepted so one options object serves both. */
  replication?: ReplicationOptions;
  /** Uniform [0, 1) draws for fresh seeds; default crypto randomness. Tests pass a seeded one. */
  random?: () => number;
  onEvent?: (kind: string, payload: unknown) => void;
  /**
   * The objective's metric name in claims' `metrics` (program.md's objective). Default: the
   * metric whose mean over the claim's seeds is the claim's `claimed_value`.
   */
  metric?: string;
  /** Fresh seeds drawn per verifier (minus the claim's own). Default 64. */
  freshSeeds?: number;
  /** Parent trials on fresh seeds a finding's check adds to its noise estimate. Default 4. */
  checkNoiseTrials?: number;
  /** First wait before retrying a trial whose `run` threw (doubling, at most 30 s). Default 500 ms. */
  retryMs?: number;
  /** Poll interval of start(). Default 500 ms. */
  pollMs?: number;
  /** Errors the loop survives (a trial that threw, a lost connection). Default: console.error. */
  onError?: (err: unknown) => void;
}

interface Task {
  promise: Promise<void>;
  claimId: string;
  abort: AbortController;
}

const FRESH = 64;
const NEWCOMER: NewcomerOptions = Object.freeze({ newcomerQuorum: 3, trustAfter: 10 });
/** Every this many passes, every claim is driven (not only those whose state changed here). */
const FULL_SWEEP_EVERY = 20;
const CHECK_NOISE = 4;
const AGREE_Z = 3;
const AGREE_SEEDS = 2;
const OUTCOMES = new Set(["confirm", "unconfirmed", "contradict"]);

const isVerdict = (v: StoredVerdict | null): v is VerifierVerdict => v !== null && OUTCOMES.has(v.outcome);

/** Verifiers of one round whose trial the harness could not run, before the claim waits for the operator. */
const MAX_NOT_RUN = 4;

/** HubTrialNotRun (src/hub/hub-trials.ts) of kind 'harness', by shape: this module imports that file's types only. */
function isNotRun(err: unknown): boolean {
  return (
    err instanceof Error &&
    err.name === "HubTrialNotRun" &&
    (err as Error & { kind?: string }).kind === "harness"
  );
}

/** The trial key of the design: the same verifier step always has the same key. */
export function trialKey(claimId: string, round: number, idx: number, side: Side, seed: number): string {
  return `hub-${claimId.slice(0, 16)}-r${round}-v${idx}-${side}-${seed}`;
}

/** A claim's seeds and per-seed objective values, read from its signed body. */
export function claimForVerification(
  claim: Pick<ClaimRow, "signed" | "claimedValue">,
  direction: "minimize" | "maximize",
  metric?: string,
): ClaimForVerification {
  const signed = claim.signed as { claim?: { seeds?: unknown; metrics?: unknown } } | null;
  const body = (signed?.claim ?? signed ?? {}) as { seeds?: unknown; metrics?: unknown };
  const seeds = Array.isArray(body.seeds)
    ? (body.seeds.filter((s) => typeof s === "number") as number[])
    : [];
  const metrics = (body.metrics && typeof body.metrics === "object" ? body.metrics : {}) as Record<
    string,
    unknown
  >;
  let values: unknown = metric !== undefined ? metrics[metric] : undefined;
  if (metric === undefined) {
    for (const v of Object.values(metrics)) {
      if (!Array.isArray(v) || v.length === 0) continue;
      const m = mean(v as number[]);
      if (Math.abs(m - claim.claimedValue) <= 1e-9 * Math.max(1, Math.abs(m))) {
        values = v;
        break;
      }
    }
  }
  const candidateValues = Array.isArray(values) ? (values as number[]) : [];
  return { direction, seeds, candidateValues };
}

/**
 * A finding's check (no frontier move, so no acceptance rule): the candidate on the claim's
 * first seeds, the parent on the same seeds and on `noise` fresh seeds (its noise sample). The
 * verdict compares the claim with what was measured on its seeds (`claimExcessZ`) against the
 * Student-t quantile of agreeZ's one-sided probability at the noise estimate's degrees of
 * freedom: with a handful of trials σ is uncertain, and the normal threshold would call ~5% of
 * honest findings lies (t with 2 degrees of freedom exceeds 3 that often).
 */
export function checkStep(
  claim: ClaimForVerification,
  fresh: readonly number[],
  run: VerifierRun,
  o: { agreeZ?: number; agreeSeeds?: number; noise?: number } = {},
): VerifierStep {
  const trials = run.agreement.length + run.parent.length + run.candidate.length;
  const failed = failureVerdict(run.agreement, run.parent, trials, "the finding");
  if (failed) return failed;
  const k = Math.min(o.agreeSeeds ?? AGREE_SEEDS, claim.seeds.length);
  if (run.agreement.length < k)
    return { kind: "run", side: "agreement", seed: claim.seeds[run.agreement.length] as number };
  if (run.parent.length < k)
    return { kind: "run", side: "parent", seed: claim.seeds[run.parent.length] as number };
  const noise = Math.min(o.noise ?? CHECK_NOISE, fresh.length);
  if (run.parent.length < k + noise)
    return { kind: "run", side: "parent", seed: fresh[run.parent.length - k] as number };
  // claimExcessZ pools the agreement trials with the parent's: the same samples the df below counts.
  const asRun: VerifierRun = { agreement: run.agreement, parent: run.parent, candidate: [] };
  const z = claimExcessZ(claim, asRun);
  const { df } = pooledSd([
    run.parent.map((x) => x.value as number),
    run.agreement.map((x) => x.value as number),
  ]);
  const agreeZ = o.agreeZ ?? AGREE_Z;
  const threshold = df > 0 ? tQuantile(normalCdf(agreeZ), df) : Number.POSITIVE_INFINITY;
  const value = run.agreement.length > 0 ? mean(run.agreement.map((x) => x.value as number)) : undefined;
  if (Number.isNaN(z)) {
    return {
      kind: "verdict",
      verdict: {
        outcome: "contradict",
        trials,
        reason: "the finding has no per-seed value the verifier could compare",
      },
    };
  }
  const zs = z === Number.POSITIVE_INFINITY ? "∞" : z.toFixed(1);
  if (z > threshold) {
    return {
      kind: "verdict",
      verdict: {
        outcome: "contradict",
        trials,
        ...(value !== undefined ? { value } : {}),
        reason: `the finding is ${zs} standard errors better than the verifier measured on its seeds (agreement allows ${threshold.toFixed(1)} at ${df} degrees of freedom)`,
      },
    };
  }
  return {
    kind: "verdict",
    verdict: {
      outcome: "confirm",
      trials,
      ...(value !== undefined ? { value } : {}),
      reason: `the finding agrees with the verifier within noise (${zs} standard errors, ${threshold.toFixed(1)} allowed)`,
    },
  };
}

class Stopped extends Error {}

export class VerifierDriver {
  private readonly o: VerifierDriverOptions;
  private readonly verifierOptions: VerifierOptions;
  private readonly reputationOptions: ReputationOptions;
  private readonly tasks = new Map<number, Task>();
  /** Claims whose verifier returned since the last pass (driven even while another one runs). */
  private readonly dirty = new Set<string>();
  private passes = 0;
  private lockClient: pg.PoolClient | null = null;
  private lockClientP: Promise<pg.PoolClient> | null = null;
  private lockChain: Promise<unknown> = Promise.resolve();
  private stopped = false;
  private started = false;
  private timer: ReturnType<typeof setInterval> | null = null;
  private ticking: Promise<void> | null = null;
  private again = false;
  private readonly stopWaiters = new Set<() => void>();

  constructor(o: VerifierDriverOptions) {
    this.o = o;
    this.verifierOptions = o.verifier ?? RECOMMENDED_VERIFIER;
    this.reputationOptions = o.reputation ?? { quarantineAfterUnconfirmed: 3 };
  }

  /** The loop: a pass every pollMs (500 ms) and whenever wake() is called. */
  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    this.timer = setInterval(() => this.wake(), this.o.pollMs ?? 500);
    this.timer.unref?.();
    this.wake();
  }

  /** Asks for a pass now (the server calls it after storing a 'verifying' or 'checking' claim). */
  wake(): void {
    if (this.stopped || !this.started) return;
    this.tick().catch((err) => this.report(err));
  }

  /**
   * Stops the loop. In-flight trials are not waited for (they may run for hours) nor cancelled:
   * their requests' signals are aborted, which stops waiting while the fleet job keeps running
   * (the next driver re-attaches to it by its key); their results are dropped here, the rows keep
   * what was stored, and this driver's verifier locks are released with its lock connection.
   */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    for (const w of this.stopWaiters) w();
    this.stopWaiters.clear();
    // HubTrialRequest.signal: stop waiting; the fleet job goes on (hub-trials.ts detaches).
    for (const t of this.tasks.values()) t.abort.abort();
    await this.ticking?.catch(() => {});
    const c = this.lockClient ?? (this.lockClientP ? await this.lockClientP.catch(() => null) : null);
    this.lockClient = null;
    // Destroying the connection frees every session-level advisory lock this driver held.
    c?.release(true);
  }

  /** Verifier tasks running in this driver (for tests and status). */
  get running(): number {
    return this.tasks.size;
  }

  /** One pass: resume orphaned verifications, then dispatch and decide what each claim's state asks for. */
  tick(): Promise<void> {
    if (this.ticking) {
      this.again = true;
      return this.ticking;
    }
    const p = (async () => {
      try {
        do {
          this.again = false;
          await this.pass();
        } while (this.again && !this.stopped);
      } finally {
        this.ticking = null;
      }
    })();
    this.ticking = p;
    return p;
  }

  /** For tests: passes until every claim is decided or waits on nothing this driver runs. */
  async drain(): Promise<void> {
    for (;;) {
      await this.tick();
      if (this.stopped) return;
      if (this.tasks.size === 0) {
        await this.tick();
        if (this.tasks.size === 0) return;
        continue;
      }
      await Promise.race([...this.tasks.values()].map((t) => t.promise));
    }
  }

  private report(err: unknown): void {
    if (err instanceof Stopped) return;
    if (this.o.onError) this.o.onError(err);
    else console.error(`autolab hub: verifier: ${err instanceof Error ? err.message : String(err)}`);
  }

  private async pass(): Promise<void> {
    if (this.stopped) return;
    const { pool, schema } = this.o;
    await ensureRoot(pool, schema);
    const errors: unknown[] = [];
    const orphans = (await runningVerificationIds(pool, schema)).filter((id) => !this.tasks.has(id));
    for (const id of await this.tryLockMany(orphans)) {
      if (this.stopped) return;
      // Re-read under the lock: the driver that held it may have finished the row meanwhile.
      const row = await verificationById(pool, schema, id);
      if (row?.state !== "running") {
        await this.unlock(id);
        continue;
      }
      this.startTask(row);
    }
    const also = [...this.dirty];
    this.dirty.clear();
    const all = this.passes++ % FULL_SWEEP_EVERY === 0;
    for (const claim of await claimsToDrive(pool, schema, { all, also })) {
      if (this.stopped) return;
      try {
        if (claim.kind === "finding") await this.driveFinding(claim.id);
        else await this.driveFrontier(claim.id);
      } catch (err) {
        if (this.stopped) return;
        errors.push(err);
        this.report(err);
      }
    }
    if (errors.length > 0) throw errors[0];
  }

  // -------------------------------------------------------------------------------------------
  // Locks: one connection of this driver holds a session-level advisory lock per verifier it runs

  private async lockConn(): Promise<pg.PoolClient> {
    if (this.lockClient) return this.lockClient;
    if (!this.lockClientP) {
      const p = this.o.pool.connect().then((c) => {
        // A lost connection has lost its locks: the next lock query opens another. (Another
        // driver may resume this one's verifiers meanwhile; appends are compare-and-set and
        // the fleet runs a key once.)
        c.on("error", () => {
          if (this.lockClient !== c) return;
          this.lockClient = null;
          this.lockClientP = null;
          c.release(true);
        });
        this.lockClient = c;
        return c;
      });
      p.catch(() => {
        if (this.lockClientP === p) this.lockClientP = null;
      });
      this.lockClientP = p;
    }
    return this.lockClientP;
  }

  private get lockPrefix(): string {
    return `autolab-hub:${this.o.schema}:verification:`;
  }

  /** Queries on the lock connection, one at a time (a pg client runs one query at once). */
  private lockQuery(sql: string, params: unknown[]): Promise<pg.QueryResult> {
    const next = this.lockChain.then(async () => {
      const c = await this.lockConn();
      return c.query(sql, params);
    });
    this.lockChain = next.catch(() => {});
    return next;
  }

  private async tryLock(id: number): Promise<boolean> {
    if (this.stopped) return false;
    const r = await this.lockQuery("SELECT pg_try_advisory_lock(hashtextextended($1 || $2::text, 0)) AS ok", [
      this.lockPrefix,
      id,
    ]);
    return r.rows[0].ok === true;
  }

  /** The ids of `ids` this driver could lock (one round trip; those another driver holds are left). */
  private async tryLockMany(ids: number[]): Promise<number[]> {
    if (ids.length === 0 || this.stopped) return [];
    const r = await this.lockQuery(
      "SELECT id FROM unnest($2::bigint[]) AS id WHERE pg_try_advisory_lock(hashtextextended($1 || id::text, 0))",
      [this.lockPrefix, ids],
    );
    return r.rows.map((row) => Number(row.id));
  }

  private async unlock(id: number): Promise<void> {
    if (this.stopped || !this.lockClient) return;
    await this.lockQuery("SELECT pg_advisory_unlock(hashtextextended($1 || $2::text, 0))", [
      this.lockPrefix,
      id,
    ]);
  }

  // -------------------------------------------------------------------------------------------
  // Decisions

  private async withDecision<T>(
    fn: (c: pg.PoolClient, events: [string, unknown][]) => Promise<T>,
  ): Promise<T> {
    const events: [string, unknown][] = [];
    const out = await inTransaction(this.o.pool, async (c) => {
      await lockHead(c, this.o.schema);
      return fn(c, events);
    });
    for (const [kind, payload] of events) this.o.onEvent?.(kind, payload);
    return out;
  }

  private async event(
    c: pg.PoolClient,
    events: [string, unknown][],
    kind: string,
    payload: unknown,
  ): Promise<void> {
    // Readers of the feed (other contributors' researchers) need the idea, not only its hash:
    // the commit's subject as the hub stored it (control characters replaced, 200 characters).
    const p = payload as { commit?: unknown; subject?: unknown };
    const withSubject =
      typeof p?.commit === "string" && p.subject === undefined
        ? { ...p, subject: await commitSubject(c, this.o.schema, p.commit) }
        : payload;
    await insertEvent(c, this.o.schema, kind, withSubject);
    events.push([kind, withSubject]);
  }

  private drawFresh(exclude: readonly number[], n: number): number[] {
    const own = new Set(exclude);
    const out = new Set<number>();
    const draw = this.o.random
      ? () => Math.floor((this.o.random as () => number)() * 2 ** 32)
      : () => randomInt(0, 2 ** 32);
    while (out.size < n) {
      const s = draw();
      if (!own.has(s)) out.add(s);
    }
    return [...out];
  }

  private beats(a: number, b: number): boolean {
    return this.o.direction === "minimize" ? a < b : a > b;
  }

  private async driveFrontier(claimId: string): Promise<void> {
    // A new round asked for by this pass (head moved) is dispatched at once: loop a few times.
    for (let i = 0; i < 3; i++) {
      const started: VerificationRow[] = [];
      let cancelled = 0;
      const cancel = async (c: pg.PoolClient, why: string) => {
        cancelled += await cancelRunning(c, this.o.schema, claimId, why);
      };
      const again = await this.withDecision(async (c, events) => {
        const { schema } = this.o;
        const claim = await claimById(c, schema, claimId, true);
        if (claim?.status !== "verifying") return false;
        const h = await head(c, schema);
        if (!h) return false;
        const rows = await verificationsOf(c, schema, claimId);
        const maxRound = rows.reduce((m, r) => Math.max(m, r.round), 0);
        const needNew = claim.against === null || rows.length === 0;
        const round = needNew ? maxRound + 1 : maxRound;
        const cur = needNew ? [] : rows.filter((r) => r.round === round);
        const verdicts = cur.map((r) => r.verdict).filter(isVerdict);
        const running = cur.filter((r) => r.state === "running").length;
        const quorum = quorumFor(
          { ...NEW_REPUTATION, consecutive: await consecutiveOf(c, schema, claim.contributor) },
          this.o.quorum,
          this.o.newcomer ?? NEWCOMER,
        );
        const step = nextStep({ verdicts, running }, quorum);
        const cfv = claimForVerification(claim, this.o.direction, this.o.metric);
        if (step.kind === "wait") return false;
        if (step.kind === "verify") {
          const notRun = cur.filter((r) => r.verdict?.outcome === "not-run");
          // At most MAX_NOT_RUN verifiers a round whose trials the harness could not run.
          const allowed = Math.min(step.verifiers, MAX_NOT_RUN - notRun.length - running);
          if (allowed <= 0) {
            if (running > 0) return false;
            // The harness cannot run this claim's trials (setup failing, no sandbox on the
            // workers): no verdict on the contributor; it waits, saying why, for the operator.
            const why = `waiting: the harness could not run ${notRun.length} verifiers' trials (${notRun.at(-1)?.verdict?.reason ?? ""})`;
            if (claim.reason !== why) await noteClaim(c, schema, claimId, why);
            return false;
          }
          const against = needNew ? h.commit : (claim.against as string);
          if (needNew) await setAgainst(c, schema, claimId, against);
          // Indexes go on after every row of the round, a not-run one included (its keys are spent).
          const firstIdx = cur.reduce((m, r) => Math.max(m, r.idx), 0) + 1;
          const inserted = await insertVerifications(
            c,
            schema,
            Array.from({ length: allowed }, (_, j) => ({
              claimId,
              round,
              idx: firstIdx + j,
              against,
              fresh: this.drawFresh(cfv.seeds, this.o.freshSeeds ?? FRESH),
            })),
          );
          // Locked before the rows are visible to another driver (this transaction commits after).
          for (const r of inserted) if (await this.tryLock(r.id)) started.push(r);
          return false;
        }
        if (step.kind === "accept") {
          if (claim.against !== h.commit) {
            if (h.value !== null && !this.beats(step.value, h.value)) {
              await cancel(c, "the claim was superseded");
              await decideClaim(c, schema, claimId, {
                status: "superseded",
                reason: `confirmed against ${claim.against} (value ${step.value}), but the head moved to ${h.commit} (value ${h.value}), which it does not beat`,
                recordedValue: step.value,
              });
              await this.reputation(c, events, claim.contributor, "verified", "");
              return false;
            }
            // Nothing is accepted that was not verified against the current head: a new round.
            await cancel(c, "the head moved: a new round");
            await setAgainst(c, schema, claimId, null);
            return true;
          }
          const confirms = cur.filter((r) => r.verdict?.outcome === "confirm");
          let headValue = h.value;
          if (headValue === null) {
            headValue = mean(confirms.flatMap((r) => r.trials.parent.map((t) => t.value as number)));
            await setRootValue(c, schema, h.seq, headValue);
          }
          const { sd } = pooledSd(
            confirms.flatMap((r) => [
              r.trials.parent.map((t) => t.value as number),
              r.trials.candidate.map((t) => t.value as number),
            ]),
          );
          const sign = this.o.direction === "minimize" ? 1 : -1;
          const gain = sd > 0 ? (sign * (headValue - step.value)) / sd : 0;
          await cancel(c, "the claim was accepted");
          const seq = await appendChain(c, schema, {
            commit: claim.commit,
            claimId,
            contributor: claim.contributor,
            value: step.value,
            gain,
          });
          await decideClaim(c, schema, claimId, {
            status: "accepted",
            reason: step.reason,
            recordedValue: step.value,
          });
          await this.event(c, events, "frontier", {
            claimId,
            commit: claim.commit,
            parent: claim.parent,
            against: h.commit,
            contributor: claim.contributor,
            value: step.value,
            gain,
            chainSeq: seq,
            round,
            reason: step.reason,
          });
          await this.reputation(c, events, claim.contributor, "verified", "");
          return false;
        }
        // reject
        const values = verdicts.map((v) => v.value).filter((v): v is number => typeof v === "number");
        await cancel(c, "the claim was rejected");
        await decideClaim(c, schema, claimId, {
          status: "rejected",
          reason: step.reason,
          recordedValue: values.length > 0 ? mean(values) : null,
        });
        await this.event(c, events, "refuted", {
          claimId,
          kind: "frontier",
          commit: claim.commit,
          parent: claim.parent,
          contributor: claim.contributor,
          contradicted: step.contradicted,
          ...(values.length > 0 ? { value: mean(values) } : {}),
          round,
          reason: step.reason,
        });
        // A contradiction is about the claim itself (its own seeds, a crash): always invalid. Not
        // beating a head that moved after the claim (a later round) is no mark against anyone.
        if (step.contradicted) await this.reputation(c, events, claim.contributor, "invalid", step.reason);
        else if (round === 1) await this.reputation(c, events, claim.contributor, "unconfirmed", step.reason);
        return false;
      });
      if (cancelled > 0) this.abortClaim(claimId);
      for (const r of started) this.startTask(r);
      if (!again) return;
    }
  }

  private async driveFinding(claimId: string): Promise<void> {
    const started: VerificationRow[] = [];
    await this.withDecision(async (c, events) => {
      const { schema } = this.o;
      const claim = await claimById(c, schema, claimId, true);
      if (claim?.status !== "checking") return;
      const rows = await verificationsOf(c, schema, claimId);
      if (rows.some((r) => r.state === "running")) return;
      const notRun = rows.filter((r) => r.verdict?.outcome === "not-run");
      if (!rows.some((r) => isVerdict(r.verdict))) {
        if (notRun.length >= MAX_NOT_RUN) {
          const why = `waiting: the harness could not run ${notRun.length} checks' trials (${notRun.at(-1)?.verdict?.reason ?? ""})`;
          if (claim.reason !== why) await noteClaim(c, schema, claimId, why);
          return;
        }
        const cfv = claimForVerification(claim, this.o.direction, this.o.metric);
        await setAgainst(c, schema, claimId, claim.parent);
        const inserted = await insertVerifications(c, schema, [
          {
            claimId,
            round: 1,
            idx: rows.length + 1,
            against: claim.parent,
            fresh: this.drawFresh(cfv.seeds, this.o.checkNoiseTrials ?? CHECK_NOISE),
          },
        ]);
        for (const r of inserted) if (await this.tryLock(r.id)) started.push(r);
        return;
      }
      const v = rows.find((r) => isVerdict(r.verdict));
      if (!v || !isVerdict(v.verdict)) return;
      const verdict = v.verdict;
      const status = verdict.outcome === "contradict" ? "invalid" : "checked";
      await decideClaim(c, schema, claimId, {
        status,
        reason: verdict.reason,
        recordedValue: verdict.value ?? null,
      });
      await this.event(c, events, "refuted", {
        claimId,
        kind: "finding",
        status,
        commit: claim.commit,
        parent: claim.parent,
        contributor: claim.contributor,
        ...(verdict.value !== undefined ? { value: verdict.value } : {}),
        reason: verdict.reason,
      });
      if (verdict.outcome === "contradict")
        await this.reputation(c, events, claim.contributor, "invalid", verdict.reason);
      else if (verdict.outcome === "confirm")
        await this.reputation(c, events, claim.contributor, "verified", "");
    });
    for (const r of started) this.startTask(r);
  }

  /** Reputation after a decided claim; a new quarantine withdraws and re-verifies (same transaction). */
  private async reputation(
    c: pg.PoolClient,
    events: [string, unknown][],
    identity: string,
    event: ReputationEvent,
    reason: string,
  ): Promise<void> {
    const { schema } = this.o;
    const rep = await identityForUpdate(c, schema, identity);
    if (!rep) return;
    const next = updateReputation(
      {
        ...NEW_REPUTATION,
        consecutive: rep.consecutive,
        unconfirmedInRow: rep.unconfirmedRun,
        quarantined: rep.quarantined,
      },
      event,
      this.reputationOptions,
    );
    const newly = next.quarantined && !rep.quarantined;
    const why =
      event === "invalid"
        ? `an invalid claim: ${reason}`
        : `${next.unconfirmedInRow} unconfirmed frontier claims in a row (last: ${reason})`;
    await storeIdentity(
      c,
      schema,
      {
        keyId: identity,
        consecutive: next.consecutive,
        unconfirmedRun: next.unconfirmedInRow,
        quarantined: next.quarantined,
      },
      newly ? why : undefined,
    );
    if (newly) await this.quarantine(c, events, identity, why);
  }

  private async quarantine(
    c: pg.PoolClient,
    events: [string, unknown][],
    identity: string,
    reason: string,
  ): Promise<void> {
    const { schema } = this.o;
    const accepted = await acceptedWithAncestry(c, schema);
    const plan = quarantinePlan(
      identity,
      accepted.map((a) => ({
        id: a.id,
        identity: a.identity,
        ...(a.parent ? { parent: a.parent } : {}),
        verified: true,
      })),
    );
    const own = plan.filter((p) => p.reason === "own").map((p) => p.id);
    const builtOn = plan.filter((p) => p.reason === "built-on").map((p) => p.id);
    await withdrawAndReverify(c, schema, own, `re-verifying: its contributor was quarantined (${reason})`);
    await withdrawAndReverify(
      c,
      schema,
      builtOn,
      "re-verifying: built on a claim of a quarantined contributor",
    );
    const h = await head(c, schema);
    const commitOf = new Map(accepted.map((a) => [a.id, a.commit]));
    await this.event(c, events, "quarantine", {
      identity,
      reason,
      withdrawn: plan.map((p) => ({ claimId: p.id, commit: commitOf.get(p.id), reason: p.reason })),
      head: h?.commit ?? null,
    });
  }

  // -------------------------------------------------------------------------------------------
  // One verifier: a task looping verifierStep (or checkStep) over HubTrials.run

  private startTask(row: VerificationRow): void {
    const abort = new AbortController();
    const task: Task = { claimId: row.claimId, abort, promise: Promise.resolve() };
    task.promise = this.runTask(row, abort.signal)
      .catch((err) => {
        if (!this.stopped && !abort.signal.aborted) this.report(err);
      })
      .finally(async () => {
        this.tasks.delete(row.id);
        this.dirty.add(row.claimId);
        await this.unlock(row.id).catch(() => {});
        this.wake();
      });
    this.tasks.set(row.id, task);
  }

  private async runTask(row: VerificationRow, signal: AbortSignal): Promise<void> {
    const { pool, schema } = this.o;
    const claim = await claimById(pool, schema, row.claimId);
    if (!claim) return;
    const cfv = claimForVerification(claim, this.o.direction, this.o.metric);
    const finding = claim.kind === "finding";
    let run: VerifierRun = row.trials;
    for (;;) {
      if (this.stopped || signal.aborted) return;
      const step = finding
        ? checkStep(cfv, row.fresh, run, {
            agreeZ: this.verifierOptions.agreeZ,
            agreeSeeds: this.verifierOptions.agreeSeeds,
            noise: this.o.checkNoiseTrials,
          })
        : verifierStep(cfv, row.fresh, run, this.verifierOptions);
      if (step.kind === "verdict") {
        await finishVerification(pool, schema, row.id, step.verdict);
        return;
      }
      const commit = step.side === "parent" ? row.against : claim.commit;
      const key = trialKey(claim.id, row.round, row.idx, step.side, step.seed);
      let got: HubTrial;
      try {
        got = await this.runTrial(
          {
            key,
            commit,
            seed: step.seed,
            label: `hub ${claim.id.slice(0, 12)} r${row.round} v${row.idx} ${step.side}`,
            signal,
          },
          signal,
        );
      } catch (err) {
        if (!isNotRun(err) || this.stopped || signal.aborted) throw err;
        const trials = run.agreement.length + run.parent.length + run.candidate.length;
        await finishVerification(pool, schema, row.id, {
          outcome: "not-run",
          trials,
          reason: `the harness could not run ${key}: ${(err as Error).message}`,
        });
        return;
      }
      if (this.stopped || signal.aborted) return;
      const trial: HubTrial =
        got.failure === undefined && typeof got.value === "number" && Number.isFinite(got.value)
          ? { seed: step.seed, value: got.value }
          : { seed: step.seed, failure: got.failure ?? "the trial reported no value" };
      const side = step.side;
      const ok = await appendTrial(pool, schema, row.id, side, run[side].length, trial);
      // Not appended: the row was decided without this verifier, or another driver owns it now.
      if (!ok) return;
      run = { ...run, [side]: [...run[side], trial] };
    }
  }

  /** HubTrials.run, retried with the same key when it throws (a lost connection, a re-leased job): never lost. */
  private async runTrial(
    req: { key: string; commit: string; seed: number; label: string; signal: AbortSignal },
    signal: AbortSignal,
  ): Promise<HubTrial> {
    let wait = this.o.retryMs ?? 500;
    for (;;) {
      try {
        return await this.o.trials.run(req);
      } catch (err) {
        if (this.stopped || signal.aborted) throw new Stopped();
        // The harness tried and could not run it (HubTrialNotRun of src/hub/hub-trials.ts): the
        // same key would re-attach to the same failed attempts. The verifier ends as 'not-run'.
        if (isNotRun(err)) throw err;
        this.report(
          new Error(
            `trial ${req.key} failed to run (retrying in ${wait} ms): ${err instanceof Error ? err.message : String(err)}`,
          ),
        );
        await this.sleep(wait);
        if (this.stopped || signal.aborted) throw new Stopped();
        wait = Math.min(wait * 2, 30_000);
      }
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.stopWaiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.stopWaiters.add(done);
    });
  }

  /** Aborts this driver's tasks of a decided claim (their fleet jobs may be cancelled). */
  private abortClaim(claimId: string): void {
    for (const t of this.tasks.values()) if (t.claimId === claimId) t.abort.abort();
  }
}
