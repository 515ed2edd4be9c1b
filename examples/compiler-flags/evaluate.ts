// compiler-flags: the evaluator. PROTECTED: experiments may not edit this file.
//
// Runs out/bench (built by build.ts with flags.conf's flags) once per seed of prepare.ts's
// SEEDS at SIZE, checks that every output is exactly the reference's (data/expected.txt,
// written by setup from a plainly compiled bench.c) and prints:
//   runtime_ms: 123.4    median wall time of one run over the seeds
//   correct: 1           1 when every output matched, else 0
// A changed output makes `correct: 0` (the first difference is named on stderr), and
// program.md's constraint `correct == 1` rejects the trial whatever its speed. A binary
// that is missing, crashes or hangs fails the evaluation outright (exit 1, no metrics).

import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { EXPECTED, SEEDS, SIZE } from "./prepare.ts";

const BINARY = path.resolve("out", "bench");
const RUN_TIMEOUT_MS = 20_000;

function fail(message: string): never {
  console.error(`evaluate: ${message}`);
  process.exit(1);
}

/** seed → the reference's output. */
function expected(): Map<number, string> {
  if (!existsSync(EXPECTED)) fail(`no ${EXPECTED}: run \`node prepare.ts\` first`);
  const byseed = new Map<number, string>();
  let seed = -1;
  for (const line of readFileSync(EXPECTED, "utf8").split("\n")) {
    const m = /^seed (\d+)$/.exec(line);
    if (m) seed = Number(m[1]);
    else if (seed >= 0 && line) byseed.set(seed, byseed.has(seed) ? `${byseed.get(seed)}\n${line}` : line);
  }
  return byseed;
}

function main(): void {
  if (!existsSync(BINARY)) fail(`no ${BINARY}: run \`node build.ts\` first`);
  const want = expected();
  const times: number[] = [];
  let wrong = 0;
  let first = "";
  for (const seed of SEEDS) {
    const t0 = performance.now();
    const run = spawnSync(BINARY, [String(seed), String(SIZE)], {
      encoding: "utf8",
      timeout: RUN_TIMEOUT_MS,
    });
    const ms = performance.now() - t0;
    if (run.error) fail(`out/bench ${seed} ${SIZE}: ${run.error.message}`);
    if (run.status !== 0)
      fail(`out/bench ${seed} ${SIZE} exited with ${run.status ?? run.signal}:\n${run.stderr}`);
    times.push(ms);
    const got = run.stdout.trimEnd();
    const ref = want.get(seed);
    if (ref === undefined) fail(`${EXPECTED} has no output for seed ${seed}: run \`node prepare.ts\` again`);
    if (got === ref) continue;
    wrong++;
    if (!first) {
      const g = got.split("\n");
      const i = ref.split("\n").findIndex((line, k) => line !== g[k]);
      first = `seed ${seed}: printed ${JSON.stringify(g[i] ?? "")}, the reference ${JSON.stringify(ref.split("\n")[i])}`;
    }
  }
  if (wrong)
    console.error(`evaluate: OUTPUT CHANGED on ${wrong} of ${SEEDS.length} inputs, the first: ${first}`);
  times.sort((a, b) => a - b);
  console.log(`runtime_ms: ${(times[Math.floor(times.length / 2)] as number).toFixed(3)}`);
  console.log(`correct: ${wrong ? 0 : 1}`);
  console.log(`fastest_ms: ${(times[0] as number).toFixed(3)}`);
}

main();
