// speedup: the smoke test, run as each trial's command. PROTECTED.
//
// Calls primes.ts's countPrimes on a few small public ranges (all below 300) and checks the
// answers, so a broken implementation shows up in the trial's log at once. Passing it proves
// little: the evaluator's inputs are larger and include the numbers that fool a shortcut.
//   smoke_ms: 1.234
import { countPrimes } from "./primes.ts";

const CASES: [number, number, number][] = [
  [0, 10, 4],
  [0, 1, 0],
  [2, 2, 1],
  [10, 2, 0],
  [11, 19, 4],
  [100, 200, 21],
  [0, 299, 62],
];

const t0 = performance.now();
const got = countPrimes(CASES.map(([lo, hi]) => [lo, hi] as const));
const ms = performance.now() - t0;
let bad = 0;
CASES.forEach(([lo, hi, want], i) => {
  if (got[i] === want) return;
  bad++;
  console.error(`check: countPrimes gave ${got[i]} for [${lo}, ${hi}], want ${want}`);
});
if (bad) process.exit(1);
console.log(`smoke_ms: ${ms.toFixed(3)}`);
