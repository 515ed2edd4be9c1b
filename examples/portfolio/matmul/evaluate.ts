// biome-ignore-all lint/style/noNonNullAssertion: typed-array and array reads in the numeric loops are in bounds
// matmul: the evaluator. PROTECTED: experiments may not edit this file.
//
// Times matmul.ts's matmul on fixed batches of matrices that no researcher sees, and checks
// every entry of every product against a reference of its own:
//   time_ms: 123.456     median wall time of one batch (three products) over REPEATS batches
//   correct: 1           1 when every entry matched to 1e-9 (relative to the row's scale), else 0
//   wrong_entries: 0     entries that did not, over all batches
// A wrong entry makes `correct: 0` (the first one is named on stderr), and program.md's
// constraint `correct == 1` rejects the trial whatever its speed. An answer of the wrong
// shape, or a crash, fails the evaluation outright (exit 1, no metrics).
//
// Each batch runs in a fresh child process that imports matmul.ts only once it has the batch:
// the clock (here, from sending the batch to the answer) holds all of matmul.ts's own work.
// What matmul.ts prints goes to stderr: it can never print a metric line of its own.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export const REPEATS = 3;
/** Matrix sizes of one batch: odd and even, not powers of two only. */
const SIZES = [201, 320, 512];
const TOLERANCE = 1e-9;
const WORKER = "--worker";

type Problem = { n: number; a: Float64Array; b: Float64Array };
type Reply = { ok: true; products: unknown } | { ok: false; error: string };

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

function batch(r: number): Problem[] {
  const rand = mulberry32(0x3a7 + r);
  // entries of mixed magnitude, so that single precision loses digits
  const entry = () => (rand() - 0.5) * 10 ** Math.floor(rand() * 4);
  return SIZES.map((n) => ({
    n,
    a: Float64Array.from({ length: n * n }, entry),
    b: Float64Array.from({ length: n * n }, entry),
  }));
}

function reference({ n, a, b }: Problem): { c: Float64Array; scale: Float64Array } {
  const c = new Float64Array(n * n);
  const scale = new Float64Array(n * n); // sum |a_ik| |b_kj|: the size of the rounding error
  for (let i = 0; i < n; i++)
    for (let k = 0; k < n; k++) {
      const x = a[i * n + k]!;
      for (let j = 0; j < n; j++) {
        c[i * n + j] = c[i * n + j]! + x * b[k * n + j]!;
        scale[i * n + j] = scale[i * n + j]! + Math.abs(x * b[k * n + j]!);
      }
    }
  return { c, scale };
}

function worker(): void {
  const send = process.send?.bind(process);
  if (!send) fail(`${WORKER} is for evaluate's own use`);
  process.once("message", async (problems: Problem[]) => {
    let reply: Reply;
    try {
      const mod = (await import(pathToFileURL(path.join(process.cwd(), "matmul.ts")).href)) as {
        matmul?: (a: Float64Array, b: Float64Array, n: number) => unknown;
      };
      if (typeof mod.matmul !== "function") throw new Error("matmul.ts does not export matmul(a, b, n)");
      const fn = mod.matmul;
      reply = { ok: true, products: problems.map((p) => fn(p.a, p.b, p.n)) };
    } catch (err) {
      reply = { ok: false, error: err instanceof Error ? err.message : String(err) };
    }
    send(reply, () => process.disconnect());
  });
  send({ ok: true, products: null } satisfies Reply);
}

function timeBatch(problems: Problem[]): Promise<{ ms: number; products: unknown }> {
  return new Promise((resolve, reject) => {
    const child: ChildProcess = spawn(process.execPath, [fileURLToPath(import.meta.url), WORKER], {
      stdio: ["ignore", "pipe", "inherit", "ipc"],
      serialization: "advanced",
    });
    child.stdout?.pipe(process.stderr);
    let started = 0;
    let answered = false;
    child.on("message", (reply: Reply) => {
      if (!started) {
        started = performance.now();
        child.send(problems);
        return;
      }
      const ms = performance.now() - started;
      answered = true;
      if (reply.ok) resolve({ ms, products: reply.products });
      else reject(new Error(reply.error));
    });
    child.on("error", reject);
    child.on("exit", (code, signal) => {
      if (!answered)
        reject(new Error(`matmul.ts's process exited without an answer (${signal ?? `code ${code}`})`));
    });
  });
}

async function main(): Promise<void> {
  if (!existsSync(path.join(process.cwd(), "matmul.ts")))
    fail("no matmul.ts here: run evaluate from the program's directory");
  const times: number[] = [];
  let wrong = 0;
  let first = "";
  for (let r = 0; r < REPEATS; r++) {
    const problems = batch(r);
    let result: { ms: number; products: unknown };
    try {
      result = await timeBatch(problems);
    } catch (err) {
      fail(err instanceof Error ? err.message : String(err));
    }
    times.push(result.ms);
    const products = result.products;
    if (!Array.isArray(products) || products.length !== problems.length)
      fail(
        `matmul answered ${Array.isArray(products) ? products.length : typeof products} products for ${problems.length}`,
      );
    problems.forEach((p, q) => {
      const got = products[q];
      if (!(got instanceof Float64Array) || got.length !== p.n * p.n)
        fail(
          `matmul returned ${got instanceof Float64Array ? `${got.length} entries` : typeof got} for a ${p.n} x ${p.n} product; a Float64Array of ${p.n * p.n} expected`,
        );
      const { c, scale } = reference(p);
      for (let e = 0; e < c.length; e++) {
        const ok = Math.abs(got[e]! - c[e]!) <= TOLERANCE * (scale[e]! + 1e-300);
        if (ok) continue;
        wrong++;
        first ||= `entry (${Math.floor(e / p.n)}, ${e % p.n}) of a ${p.n} x ${p.n} product is ${got[e]}, not ${c[e]}`;
      }
    });
  }
  if (wrong > 0) console.error(`evaluate: WRONG ENTRIES (${wrong} in all), the first: ${first}`);
  times.sort((a, b) => a - b);
  console.log(`time_ms: ${times[Math.floor(times.length / 2)]!.toFixed(3)}`);
  console.log(`correct: ${wrong === 0 ? 1 : 0}`);
  console.log(`wrong_entries: ${wrong}`);
  console.log(`fastest_ms: ${times[0]!.toFixed(3)}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv[2] === WORKER) worker();
  else await main();
}
