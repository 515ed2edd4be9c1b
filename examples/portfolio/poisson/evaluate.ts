// biome-ignore-all lint/style/noNonNullAssertion: typed-array and array reads in the numeric loops are in bounds
// poisson: the evaluator. PROTECTED: experiments may not edit this file.
//
// Solves REPEATS problems of size N x N (problem.ts; the right-hand sides come from
// AUTOLAB_SEED), each in a fresh child process that imports solve.ts only once it has the
// problem, and checks each answer itself:
//   time_ms: 123.4            median wall time of one solve (from sending the problem to the answer)
//   rel_residual: 3.2e-9      the worst ||b - A u|| / ||b|| over the solves (1e300 for a non-finite u)
//   iterations: 812           the median of what the solver says it did (information only)
// program.md's constraint wants rel_residual <= 1e-6. An answer of the wrong shape or a crash
// fails the evaluation (exit 1). What solve.ts prints goes to stderr.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { apply, makeProblem, type Problem, stencil } from "./problem.ts";

const N = 64;
const REPEATS = 3;
const WORKER = "--worker";

type Reply = { ok: true; u?: unknown; iterations?: unknown } | { ok: false; error: string };

function fail(message: string): never {
  console.error(`evaluate: ${message}`);
  process.exit(1);
}

function worker(): void {
  const send = process.send?.bind(process);
  if (!send) fail(`${WORKER} is for evaluate's own use`);
  process.once("message", async (p: Problem) => {
    let reply: Reply;
    try {
      const mod = (await import(pathToFileURL(path.join(process.cwd(), "solve.ts")).href)) as {
        solve?: (p: Problem) => { u?: unknown; iterations?: unknown };
      };
      if (typeof mod.solve !== "function") throw new Error("solve.ts does not export solve(problem)");
      const out = mod.solve(p);
      reply = { ok: true, u: out?.u, iterations: out?.iterations };
    } catch (err) {
      reply = { ok: false, error: err instanceof Error ? err.message : String(err) };
    }
    send(reply, () => process.disconnect());
  });
  send({ ok: true } satisfies Reply);
}

function timeSolve(p: Problem): Promise<{ ms: number; u: unknown; iterations: unknown }> {
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
        child.send(p);
        return;
      }
      const ms = performance.now() - started;
      answered = true;
      if (reply.ok) resolve({ ms, u: reply.u, iterations: reply.iterations });
      else reject(new Error(reply.error));
    });
    child.on("error", reject);
    child.on("exit", (code, signal) => {
      if (!answered)
        reject(new Error(`solve.ts's process exited without an answer (${signal ?? `code ${code}`})`));
    });
  });
}

async function main(): Promise<void> {
  if (!existsSync(path.join(process.cwd(), "solve.ts")))
    fail("no solve.ts here: run evaluate from the program's directory");
  const seed = Number(process.env.AUTOLAB_SEED ?? "0");
  const times: number[] = [];
  const iterations: number[] = [];
  let worst = 0;
  for (let r = 0; r < REPEATS; r++) {
    const p = makeProblem(N, (Number.isFinite(seed) ? seed : 0) * REPEATS + r + 1);
    let got: { ms: number; u: unknown; iterations: unknown };
    try {
      got = await timeSolve(p);
    } catch (err) {
      fail(err instanceof Error ? err.message : String(err));
    }
    const u = got.u;
    if (!(u instanceof Float64Array) || u.length !== N * N)
      fail(
        `solve returned ${u instanceof Float64Array ? `${u.length} values` : typeof u} as u; a Float64Array of ${N * N} expected`,
      );
    times.push(got.ms);
    if (typeof got.iterations === "number") iterations.push(got.iterations);
    const ax = new Float64Array(N * N);
    apply(stencil(p), u, ax);
    let num = 0;
    let den = 0;
    for (let c = 0; c < N * N; c++) {
      num += (p.b[c]! - ax[c]!) ** 2;
      den += p.b[c]! ** 2;
    }
    const res = Math.sqrt(num / den);
    worst = Number.isFinite(res) ? Math.max(worst, res) : 1e300;
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  console.log(`time_ms: ${median(times).toFixed(3)}`);
  console.log(`rel_residual: ${worst.toExponential(3)}`);
  if (iterations.length) console.log(`iterations: ${median(iterations)}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv[2] === WORKER) worker();
  else await main();
}
