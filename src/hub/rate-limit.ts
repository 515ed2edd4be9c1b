/**
 * Token buckets for the hub's rate limits (docs/hub.md "The hub's API"): one bucket per key (an
 * identity's key id, a client address), `capacity` tokens, refilled at `refillPerS` tokens a
 * second. Pure and clock-injected: the clock is the caller's, so tests step time by hand.
 *
 * In memory only: a restart forgets them (the daily quotas, counted from the tables, do not).
 * The map is bounded: when it grows past `maxKeys`, buckets that have refilled to capacity
 * (indistinguishable from new ones) are dropped; if none has, the least recently used are.
 */
export interface BucketOptions {
  capacity: number;
  refillPerS: number;
  /** Keys kept at most (default 100,000). */
  maxKeys?: number;
}

export type Take = { ok: true; left: number } | { ok: false; retryAfterS: number };

interface Bucket {
  tokens: number;
  at: number;
}

export class RateLimiter {
  readonly #o: Required<BucketOptions>;
  readonly #now: () => number;
  readonly #buckets = new Map<string, Bucket>();

  constructor(o: BucketOptions, now: () => number = Date.now) {
    if (!(o.capacity >= 1) || !(o.refillPerS > 0))
      throw new RangeError("a rate limit needs capacity ≥ 1 and refillPerS > 0");
    this.#o = { maxKeys: 100_000, ...o };
    this.#now = now;
  }

  /** Takes `n` tokens from `key`'s bucket, or says how many seconds until they are there. */
  take(key: string, n = 1): Take {
    const now = this.#now();
    const b = this.#refilled(key, now);
    const ok = b.tokens >= n;
    if (ok) b.tokens -= n;
    // Delete and set: the map's order is least recently used first.
    this.#buckets.delete(key);
    this.#buckets.set(key, b);
    this.#bound(now);
    if (ok) return { ok: true, left: b.tokens };
    const need = Math.min(n, this.#o.capacity) - b.tokens;
    return { ok: false, retryAfterS: Math.max(1, Math.ceil(need / this.#o.refillPerS)) };
  }

  /** Tokens `key` has now (capacity for a key never seen). */
  peek(key: string): number {
    return this.#refilled(key, this.#now()).tokens;
  }

  get size(): number {
    return this.#buckets.size;
  }

  #refilled(key: string, now: number): Bucket {
    const b = this.#buckets.get(key);
    if (!b) return { tokens: this.#o.capacity, at: now };
    // A clock that steps back refills nothing (never a negative refill).
    const dt = Math.max(0, now - b.at) / 1000;
    return {
      tokens: Math.min(this.#o.capacity, b.tokens + dt * this.#o.refillPerS),
      at: Math.max(now, b.at),
    };
  }

  #bound(now: number): void {
    if (this.#buckets.size <= this.#o.maxKeys) return;
    for (const [k, b] of this.#buckets) {
      const dt = Math.max(0, now - b.at) / 1000;
      if (b.tokens + dt * this.#o.refillPerS >= this.#o.capacity) this.#buckets.delete(k);
    }
    // Still too many: drop the least recently used.
    for (const k of this.#buckets.keys()) {
      if (this.#buckets.size <= this.#o.maxKeys) break;
      this.#buckets.delete(k);
    }
  }
}
