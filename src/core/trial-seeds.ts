/**
 * Trial seeds a candidate cannot predict (docs/security.md "Seeds the candidate cannot predict").
 *
 * Every run draws a secret key at random when it starts (`newSeedKey`, recorded in the notebook's
 * runs row, never shown to a researcher). Every seed a trial of the run gets derives from it
 * (HMAC-SHA256, the first 31 bits, so any program can hand it to its RNG):
 *
 * - slot seeds: trial slot k of every experiment gets the run's k-th seed (`slotSeed`), so the
 *   judge's paired comparison holds (docs/trust.md "Common seeds"): seed-tied noise cancels
 *   between a candidate's trial k and the best's;
 * - fresh seeds: a candidate's first trial (a rule may keep on one: greedy, an exact objective)
 *   and its confirmation trials (MoreTrials.fresh) get a seed no trial of the run has used
 *   (`freshSeed`); `finalize --verify` and the bench's re-measurement get seeds drawn outside the
 *   run (`outsideSeeds`). Code that remembers the seeds it has seen (a cache) cannot recognise them;
 * - an incumbent re-measured for a challenger runs on the challenger's seeds it lacks (after the
 *   challenger ran them), else its next slot: pairs again.
 *
 * Which trial of its experiment a trial is says nothing about its seed's value. The key and each
 * trial's seed are in the notebook: a run is reproduced from it (the same key gives the same
 * seeds; trial_starts.seed is each trial's, and AUTOLAB_SEED in its recorded env).
 *
 * Runs recorded before the key existed have none: their slot k keeps seed + k (resuming them keeps
 * their pairs), and their fresh seeds are drawn from crypto randomness.
 */
import { createHmac, randomBytes, randomInt } from "node:crypto";

/** A new run's secret: 32 random bytes, hex. */
export function newSeedKey(): string {
  return randomBytes(32).toString("hex");
}

/** The largest seed + 1: seeds are in [0, 2^31), which every RNG takes (numpy, torch, Python). */
const SEED_RANGE = 2 ** 31;

function derived(key: string, label: string): number {
  return createHmac("sha256", key).update(label).digest().readUInt32BE(0) >>> 1;
}

/** The run facts a seed is derived from. */
export interface SeedSource {
  seed: number;
  seedKey?: string;
}

/** The seed of trial slot `k` (0-based) of every experiment of the run. */
export function slotSeed(run: SeedSource, k: number): number {
  return run.seedKey ? derived(run.seedKey, `slot ${k}`) : run.seed + k;
}

/**
 * The first slot index whose seed is not in `taken` (an experiment's full-budget trials that
 * finished or run): the next trial of an experiment that continues its own sequence.
 */
export function nextSlot(run: SeedSource, taken: ReadonlySet<number>): number {
  let k = 0;
  while (taken.has(slotSeed(run, k))) k++;
  return k;
}

/** Seeds in early slots (a long run may still reach them): never fresh. A collision is a 2^-31 event. */
function earlySlots(run: SeedSource): Set<number> {
  return new Set(Array.from({ length: 64 }, (_, k) => slotSeed(run, k)));
}

/**
 * A seed no trial of the run has used (`used`: every seed of the run's trials, running ones
 * included) and no early slot holds: the j-th fresh seed of the key for the first unused j
 * (reproducible from the notebook), or a crypto draw for a run without a key.
 */
export function freshSeed(run: SeedSource, used: ReadonlySet<number>): number {
  const slots = earlySlots(run);
  const free = (s: number) => !used.has(s) && !slots.has(s);
  if (run.seedKey) {
    for (let j = 0; ; j++) {
      const s = derived(run.seedKey, `fresh ${j}`);
      if (free(s)) return s;
    }
  }
  for (;;) {
    const s = randomInt(0, SEED_RANGE);
    if (free(s)) return s;
  }
}

/**
 * `n` distinct seeds for re-measurements outside the notebook (`finalize --verify`, the bench's
 * re-measurement): crypto draws, none a seed of the run's trials or early slots. Not derived from
 * the key: the run's own later fresh seeds must not be ones a re-measured commit already ran.
 */
export function outsideSeeds(run: SeedSource, used: ReadonlySet<number>, n: number): number[] {
  const slots = earlySlots(run);
  const out = new Set<number>();
  while (out.size < n) {
    const s = randomInt(0, SEED_RANGE);
    if (!used.has(s) && !slots.has(s)) out.add(s);
  }
  return [...out];
}

/** Every seed the run's trials have used or are using (interrupted ones too: a fresh seed is fresh once). */
export function usedSeeds(experiments: readonly { trials: readonly { seed: number }[] }[]): Set<number> {
  const out = new Set<number>();
  for (const e of experiments) for (const t of e.trials) out.add(t.seed);
  return out;
}
