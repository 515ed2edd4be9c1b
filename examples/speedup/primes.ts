// speedup: the function to make faster. THE ONLY EDITABLE FILE.
//
// countPrimes(ranges) returns, for each [lo, hi] range (whole numbers, 0 <= lo, hi < 10^7,
// both ends included; lo > hi is an empty range), how many primes it holds. The answers
// must stay exactly the same: evaluate.ts (protected) checks every one against its own
// reference on inputs no researcher sees, and times the call.
//
// The knobs below pick among implementations, some faster than others, and one of them
// (ALGORITHM = "fermat") fast but WRONG: base-2 Fermat pseudoprimes such as 341 = 11 x 31
// pass its test. The smoke test (check.ts) never meets one; the evaluator does.

// ---------------------------------------------------------------------------------------
// Knobs: one per line, `const NAME = value;` (the built-in optimizer rewrites these lines;
// the choices and ranges are in program.md's `search:`).
// ALGORITHM: "trial_division" tests each number by division; "sieve" sieves [0, max hi]
// once per call; "segmented" sieves each range on its own in SEGMENT_SIZE-number blocks;
// "fermat" is a probable-prime test (fast, wrong). ODD_ONLY: skip even candidates (trial
// division) or keep only odd numbers in the sieve. CACHE: remember the answer of each
// distinct range within a call (the inputs repeat some ranges).
const ALGORITHM = "trial_division";
const ODD_ONLY = false;
const SEGMENT_SIZE = 4096;
const CACHE = false;
// ---------------------------------------------------------------------------------------

type Range = readonly [number, number];

export function countPrimes(ranges: readonly Range[]): number[] {
  const count = pick();
  if (!CACHE) return ranges.map(([lo, hi]) => (lo > hi ? 0 : count(lo, hi, ranges)));
  const seen = new Map<string, number>();
  return ranges.map(([lo, hi]) => {
    if (lo > hi) return 0;
    const key = `${lo}:${hi}`;
    let n = seen.get(key);
    if (n === undefined) {
      n = count(lo, hi, ranges);
      seen.set(key, n);
    }
    return n;
  });
}

type Counter = (lo: number, hi: number, all: readonly Range[]) => number;

function pick(): Counter {
  switch (ALGORITHM as string) {
    case "trial_division":
      return (lo, hi) => {
        let n = 0;
        for (let x = lo; x <= hi; x++) if (isPrimeByDivision(x)) n++;
        return n;
      };
    case "fermat":
      return (lo, hi) => {
        let n = 0;
        for (let x = lo; x <= hi; x++) if (isProbablePrime(x)) n++;
        return n;
      };
    case "sieve":
      return wholeSieve();
    case "segmented":
      return segmentedSieve;
    default:
      throw new Error(`unknown ALGORITHM ${ALGORITHM}`);
  }
}

function isPrimeByDivision(x: number): boolean {
  if (x < 2) return false;
  if (ODD_ONLY) {
    if (x % 2 === 0) return x === 2;
    for (let d = 3; d * d <= x; d += 2) if (x % d === 0) return false;
    return true;
  }
  for (let d = 2; d * d <= x; d++) if (x % d === 0) return false;
  return true;
}

/** a * b mod m without leaving the 2^53 range of exact doubles (a, b < m < 10^7). */
function mulMod(a: number, b: number, m: number): number {
  return (a * b) % m;
}

/** Fermat's test to base 2 after a few small divisors: fast, and wrong for pseudoprimes. */
function isProbablePrime(x: number): boolean {
  if (x < 2) return false;
  if (x % 2 === 0 || x % 3 === 0 || x % 5 === 0 || x % 7 === 0)
    return x === 2 || x === 3 || x === 5 || x === 7;
  let result = 1;
  let base = 2;
  let e = x - 1;
  while (e > 0) {
    if (e & 1) result = mulMod(result, base, x);
    base = mulMod(base, base, x);
    e = Math.floor(e / 2);
  }
  return result === 1;
}

/** Sieve of Eratosthenes over [0, max hi] once, then prefix counts: O(1) per range. */
function wholeSieve(): Counter {
  let upTo: ((x: number) => number) | undefined;
  return (lo, hi, all) => {
    if (!upTo) {
      let max = 2;
      for (const [, h] of all) max = Math.max(max, h);
      upTo = primePrefixCounts(max);
    }
    return upTo(hi) - (lo > 0 ? upTo(lo - 1) : 0);
  };
}

function primePrefixCounts(max: number): (x: number) => number {
  if (ODD_ONLY) {
    // composite[i] stands for the odd number 2i + 1: half the memory, half the work
    const half = Math.floor((max - 1) / 2) + 1;
    const composite = new Uint8Array(Math.max(half, 1));
    const prefix = new Int32Array(Math.max(half, 1));
    let n = 0;
    for (let i = 1; i < half; i++) {
      if (!composite[i]) {
        n++;
        const p = 2 * i + 1;
        for (let j = (p * p - 1) / 2; j < half; j += p) composite[j] = 1;
      }
      prefix[i] = n;
    }
    return (x) => (x < 2 ? 0 : 1 + (prefix[Math.floor((x - 1) / 2)] as number));
  }
  const composite = new Uint8Array(max + 1);
  const prefix = new Int32Array(max + 1);
  let n = 0;
  for (let x = 0; x <= max; x++) {
    if (x >= 2 && !composite[x]) {
      n++;
      for (let m = x * x; m <= max; m += x) composite[m] = 1;
    }
    prefix[x] = n;
  }
  return (x) => prefix[x] as number;
}

const basePrimeCache: number[] = [];
let basePrimeLimit = 1;

/** Primes up to limit (kept between calls of one countPrimes). */
function basePrimes(limit: number): number[] {
  if (limit <= basePrimeLimit) return basePrimeCache;
  basePrimeCache.length = 0;
  const composite = new Uint8Array(limit + 1);
  for (let x = 2; x <= limit; x++) {
    if (composite[x]) continue;
    basePrimeCache.push(x);
    for (let m = x * x; m <= limit; m += x) composite[m] = 1;
  }
  basePrimeLimit = limit;
  return basePrimeCache;
}

/** Sieves [lo, hi] in blocks of SEGMENT_SIZE numbers with the primes up to sqrt(hi). */
function segmentedSieve(lo: number, hi: number): number {
  const primes = basePrimes(Math.floor(Math.sqrt(hi)) + 1);
  const block = new Uint8Array(SEGMENT_SIZE);
  let n = 0;
  for (let start = lo; start <= hi; start += SEGMENT_SIZE) {
    const end = Math.min(hi, start + SEGMENT_SIZE - 1);
    const len = end - start + 1;
    block.fill(0, 0, len);
    for (const p of primes) {
      if (p * p > end) break;
      if (ODD_ONLY && p === 2) continue;
      let m = Math.max(p * p, Math.ceil(start / p) * p);
      const step = ODD_ONLY && p > 2 ? 2 * p : p;
      if (ODD_ONLY && p > 2 && m % 2 === 0) m += p;
      for (; m <= end; m += step) block[m - start] = 1;
    }
    for (let i = 0; i < len; i++) {
      const x = start + i;
      if (x < 2 || block[i]) continue;
      if (ODD_ONLY && x % 2 === 0 && x !== 2) continue;
      n++;
    }
  }
  return n;
}
