// speedup: the evaluator. PROTECTED: experiments may not edit this file.
//
// Times primes.ts's countPrimes on fixed batches of ranges that no researcher sees, and
// checks every answer against a reference sieve of its own:
//   time_ms: 12.345      median wall time of one call over REPEATS batches
//   correct: 1           1 when every answer matched, else 0
//   wrong_answers: 0     answers that differ from the reference, over all batches
// A wrong answer makes `correct: 0` (the first one is named on stderr), and program.md's
// constraint `correct == 1` rejects the trial whatever its speed. An answer of the wrong
// shape, or a crash, fails the evaluation outright (exit 1, no metrics).
//
// Each batch runs in a fresh child process: the child imports primes.ts only once it has
// the batch, so the timed region holds all of primes.ts's own work (module code included),
// and nothing can be cached from one batch to the next. What primes.ts prints goes to
// stderr: it can never print a metric line of its own.

import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

/** Batches timed (the metric is their median). */
export const REPEATS = 5;
/** Random ranges per batch, their largest end and width. */
const RANGES = 60;
const MAX_N = 4_000_000;
const MAX_WIDTH = 30_000;
/** Ranges every batch also holds: ends, tiny ranges, and base-2 pseudoprimes (341 = 11 x 31,
 * 2047 = 23 x 89, 29341 = 13 x 37 x 61, ...) that a Fermat test takes for primes. */
export const EDGE_RANGES: readonly (readonly [number, number])[] = [
  [0, 0],
  [0, 1],
  [0, 2],
  [2, 2],
  [3, 3],
  [4, 4],
  [10, 1],
  [0, 100],
  [341, 341],
  [2047, 2047],
  [3277, 3277],
  [4033, 4033],
  [29341, 29341],
  [46657, 46657],
  [1_000_000, 1_010_000],
  [3_999_971, 3_999_971],
];
const WORKER = "--worker";

type Range = readonly [number, number];

function fail(message: string): never {
  console.error(`evaluate: ${message}`);
  process.exit(1);
}

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Batch r: the edge ranges, RANGES random ones and a few repeats of them, shuffled. */
export function batch(r: number): Range[] {
  const rand = mulberry32(0x5eed + r);
  const int = (n: number) => Math.floor(rand() * n);
  const random: Range[] = [];
  for (let i = 0; i < RANGES; i++) {
    const lo = int(MAX_N - MAX_WIDTH);
    random.push([lo, lo + int(MAX_WIDTH)]);
  }
  const repeats = random.slice(0, RANGES / 4).map((x) => [x[0], x[1]] as const);
  const all = [...EDGE_RANGES, ...random, ...repeats];
  for (let i = all.length - 1; i > 0; i--) {
    const j = int(i + 1);
    [all[i], all[j]] = [all[j] as Range, all[i] as Range];
  }
  return all;
}

/** The reference: a plain sieve up to MAX_N and prefix counts. */
function reference(): (lo: number, hi: number) => number {
  const composite = new Uint8Array(MAX_N + 1);
  const prefix = new Int32Array(MAX_N + 1);
  let n = 0;
  for (let x = 0; x <= MAX_N; x++) {
    if (x >= 2 && !composite[x]) {
      n++;
      for (let m = x * x; m <= MAX_N; m += x) composite[m] = 1;
    }
    prefix[x] = n;
  }
  return (lo, hi) => (lo > hi ? 0 : (prefix[hi] as number) - (lo > 0 ? (prefix[lo - 1] as number) : 0));
}

type Reply = { ok: true; counts: unknown } | { ok: false; error: string };

/** Child mode: wait for one batch, import ./primes.ts, answer, exit. */
function worker(): void {
  const send = process.send?.bind(process);
  if (!send) fail(`${WORKER} is for evaluate's own use`);
  process.once("message", async (ranges: Range[]) => {
    let reply: Reply;
    try {
      const mod = (await import(pathToFileURL(path.join(process.cwd(), "primes.ts")).href)) as {
        countPrimes?: (r: readonly Range[]) => unknown;
      };
      if (typeof mod.countPrimes !== "function")
        throw new Error("primes.ts does not export countPrimes(ranges)");
      reply = { ok: true, counts: mod.countPrimes(ranges) };
    } catch (err) {
      reply = { ok: false, error: err instanceof Error ? err.message : String(err) };
    }
    send(reply, () => process.disconnect());
  });
  send({ ok: true, counts: null } satisfies Reply);
}

/** Runs one batch in a fresh child; the clock runs from sending the batch to the answer. */
function timeBatch(ranges: Range[]): Promise<{ ms: number; counts: unknown }> {
  return new Promise((resolve, reject) => {
    const child: ChildProcess = spawn(process.execPath, [fileURLToPath(import.meta.url), WORKER], {
      stdio: ["ignore", "pipe", "inherit", "ipc"],
    });
    child.stdout?.pipe(process.stderr); // primes.ts's own prints: visible, never metrics
    let started = 0;
    let answered = false;
    child.on("message", (reply: Reply) => {
      if (!started) {
        started = performance.now();
        child.send(ranges);
        return;
      }
      const ms = performance.now() - started;
      answered = true;
      if (reply.ok) resolve({ ms, counts: reply.counts });
      else reject(new Error(reply.error));
    });
    child.on("error", reject);
    child.on("exit", (code, signal) => {
      if (!answered)
        reject(new Error(`primes.ts's process exited without an answer (${signal ?? `code ${code}`})`));
    });
  });
}

async function main(): Promise<void> {
  if (!existsSync(path.join(process.cwd(), "primes.ts")))
    fail("no primes.ts here: run evaluate from the example directory");
  const truth = reference();
  const times: number[] = [];
  let wrong = 0;
  let first = "";
  for (let r = 0; r < REPEATS; r++) {
    const ranges = batch(r);
    let result: { ms: number; counts: unknown };
    try {
      result = await timeBatch(ranges);
    } catch (err) {
      fail(err instanceof Error ? err.message : String(err));
    }
    times.push(result.ms);
    const counts = result.counts;
    if (!Array.isArray(counts) || counts.length !== ranges.length) {
      fail(
        `countPrimes returned ${Array.isArray(counts) ? `${counts.length} answers` : typeof counts} for ${ranges.length} ranges`,
      );
    }
    ranges.forEach(([lo, hi], i) => {
      const want = truth(lo, hi);
      if (counts[i] === want) return;
      wrong++;
      first ||= `countPrimes gave ${JSON.stringify(counts[i])} for [${lo}, ${hi}], which holds ${want} primes`;
    });
  }
  if (wrong > 0) console.error(`evaluate: WRONG ANSWERS (${wrong} in all), the first: ${first}`);
  times.sort((a, b) => a - b);
  console.log(`time_ms: ${(times[Math.floor(times.length / 2)] as number).toFixed(3)}`);
  console.log(`correct: ${wrong === 0 ? 1 : 0}`);
  console.log(`wrong_answers: ${wrong}`);
  console.log(`fastest_ms: ${(times[0] as number).toFixed(3)}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv[2] === WORKER) worker();
  else await main();
}
