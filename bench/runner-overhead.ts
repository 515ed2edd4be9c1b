/**
 * Per-trial overhead of the local executor: the median time of runTrial(`true`) minus the median
 * time of spawning `/bin/sh -c true` bare (until its pipes close). Run: `npm run bench -- runner-overhead [n]`.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { LocalExecutor } from "../src/runner/local-executor.ts";

const dir = mkdtempSync(join(tmpdir(), "autolab-bench-"));
const executor = new LocalExecutor();

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

async function bare(): Promise<number> {
  const t = performance.now();
  await new Promise<void>((resolve) => {
    const c = spawn("/bin/sh", ["-c", "true"], {
      cwd: dir,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    c.once("close", () => resolve());
  });
  return performance.now() - t;
}

async function trial(i: number): Promise<number> {
  const t = performance.now();
  const r = await executor.runTrial({
    cwd: dir,
    command: "true",
    budgetMs: 10_000,
    graceMs: 1000,
    evaluateTimeoutMs: 10_000,
    seed: i,
    logDir: join(dir, "logs", String(i)),
    objective: "score",
  });
  if (r.status !== "missing_metric") throw new Error(`unexpected status ${r.status}: ${r.reason}`);
  return performance.now() - t;
}

export async function main(args: string[]): Promise<Record<string, number | string>> {
  const N = Number(args[0] ?? 50);
  // Warm up both paths (module loading, JIT, page cache).
  for (let i = 0; i < 5; i++) {
    await bare();
    await trial(-1 - i);
  }
  const bareMs: number[] = [];
  const trialMs: number[] = [];
  for (let i = 0; i < N; i++) {
    bareMs.push(await bare());
    trialMs.push(await trial(i));
  }
  rmSync(dir, { recursive: true, force: true });
  const result = {
    bench: "runner-overhead",
    n: N,
    bareSpawnMedianMs: Number(median(bareMs).toFixed(2)),
    runTrialMedianMs: Number(median(trialMs).toFixed(2)),
    overheadMedianMs: Number((median(trialMs) - median(bareMs)).toFixed(2)),
  };
  console.log(
    `runTrial(\`true\`) median ${result.runTrialMedianMs} ms, bare spawn ${result.bareSpawnMedianMs} ms`,
  );
  return result;
}
