/**
 * mulberry32: a small seeded random source, uniform in [0, 1). Deterministic across platforms
 * and Node versions (Math.random is not), so that a resumed run draws what it would have drawn:
 * the tree frontier's choice of node (frontier.ts) and the built-in optimizer (agents/builtin/rng.ts).
 */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
