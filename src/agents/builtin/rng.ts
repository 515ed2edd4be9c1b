import { mulberry32 } from "../../core/random.ts";

/**
 * A small seeded random number generator (mulberry32). Deterministic across platforms and Node
 * versions, which Math.random is not: the built-in optimizer must make the same proposal for
 * the same seed and history, so that a resumed run can be reproduced.
 */
export interface Rng {
  /** Uniform in [0, 1). */
  next(): number;
  /** Uniform in [low, high). */
  uniform(low: number, high: number): number;
  /** Integer uniform in [0, n). */
  int(n: number): number;
  /** Standard normal (Box–Muller). */
  normal(): number;
}

export function createRng(seed: number): Rng {
  const next = mulberry32(seed);
  return {
    next,
    uniform: (low, high) => low + (high - low) * next(),
    int: (n) => Math.floor(next() * n),
    normal: () => {
      // 1 - next() is in (0, 1], so the logarithm is finite.
      const u = 1 - next();
      const v = next();
      return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
    },
  };
}

/**
 * Mixes several integers into one 32-bit seed (murmur3's finalizer after each part), so that
 * nearby inputs (seed 1 with history 5, seed 1 with history 6) give unrelated streams.
 */
export function mixSeed(...parts: number[]): number {
  let h = 0x9e3779b9;
  for (const part of parts) {
    // Both halves of a 53-bit integer take part, so large seeds (timestamps) stay distinct.
    for (const word of [part >>> 0, Math.floor(part / 4294967296) >>> 0]) {
      h = Math.imul(h ^ word, 0x85ebca6b);
      h ^= h >>> 13;
      h = Math.imul(h, 0xc2b2ae35);
      h ^= h >>> 16;
    }
  }
  return h >>> 0;
}
