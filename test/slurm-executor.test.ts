/**
 * The Slurm executor against a REAL Slurm (slurmctld + slurmd on this machine: .ci/start-slurm.sh).
 * Skipped, saying why, where sbatch is missing or slurmctld does not answer — except with
 * AUTOLAB_REQUIRE_SLURM=1 (CI), where a missing Slurm fails these tests instead.
 *
 * Jobs are found by name (`autolab-<token>`, the token set in each spec) and their end state is
 * read with `squeue --states=all` (this cluster keeps no accounting, so `sacct` has nothing).
 */
import { execFileSync, spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { SandboxSpec, SlurmConfig, TrialSpec } from "../src/core/types.ts";
import { probeSandbox } from "../src/runner/sandbox.ts";
import { SlurmExecutor } from "../src/runner/slurm-executor.ts";
import { commitAll, readLedger, runCli, toysOfFile } from "./helpers/toy-project.ts";

/** Why Slurm cannot be used here, or undefined when it can. */
function slurmProblem(): string | undefined {
  const v = spawnSync("sbatch", ["--version"], { encoding: "utf8" });
  if (v.error || v.status !== 0) return "sbatch is not installed (run .ci/start-slurm.sh as root)";
  const ping = spawnSync("scontrol", ["ping"], { encoding: "utf8", timeout: 20_000 });
  if (ping.status !== 0 || !/ is UP\b/.test(ping.stdout))
    return `slurmctld does not answer (scontrol ping: ${(ping.stdout + ping.stderr).trim() || "no output"})`;
  return undefined;
}

const problem = slurmProblem();
/** The single-node cluster of .ci/start-slurm.sh (ClusterName=local), where a test may take the node down. */
function testCluster(): boolean {
  const conf = spawnSync("scontrol", ["show", "config"], { encoding: "utf8" }).stdout ?? "";
  return (
    /^ClusterName\s*=\s*local$/m.test(conf) &&
    /^NodeName=\S+ CPUs=/m.test(readFileSafe("/etc/slurm/slurm.conf"))
  );
}
function readFileSafe(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}
const required = process.env.AUTOLAB_REQUIRE_SLURM === "1";
const withSlurm = problem === undefined || required ? describe : describe.skip;
const title = problem && !required ? `Slurm executor (skipped: ${problem})` : "Slurm executor (real Slurm)";
const sandboxed = probeSandbox().ok;

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "autolab-slurm-test-"));
  dirs.push(d);
  return d;
}

const CONFIG: SlurmConfig = { extraArgs: [], pendingLimitMs: 10 * 60_000 };
const FAST = { pollIntervalMs: 200 };

/** A trial in a fresh directory (its own worktree-like cwd and log dir), sandboxed where bwrap works. */
function trial(command: string, over: Partial<TrialSpec> = {}): TrialSpec & { token: string } {
  const dir = tempDir();
  const cwd = join(dir, "work");
  mkdirSync(cwd);
  const token = `t${Math.random().toString(16).slice(2)}${Date.now().toString(16)}`;
  const sb: SandboxSpec = {
    writable: [cwd],
    readOnly: [],
    hidden: [join(dir, "logs")],
    network: false,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    limits: {},
    devices: [],
  };
  return {
    cwd,
    command,
    budgetMs: 20_000,
    graceMs: 1000,
    evaluateTimeoutMs: 20_000,
    seed: 7,
    logDir: join(dir, "logs", "1"),
    objective: "loss",
    env: { AUTOLAB_TRIAL_TOKEN: token },
    ...(sandboxed ? { sandbox: { command: sb, evaluate: sb } } : {}),
    ...over,
    token,
  };
}

/** The job of a trial as squeue lists it: `<id>|<STATE>`, or "" when squeue does not know it. */
function jobState(token: string): string {
  return execFileSync(
    "squeue",
    ["--name", `autolab-${token}`, "--states=all", "--noheader", "--format=%i|%T"],
    {
      encoding: "utf8",
    },
  ).trim();
}

/** Polls until the job named after `token` is in one of `states` (polling only; the test timeout bounds it). */
async function untilState(token: string, states: RegExp): Promise<string> {
  for (;;) {
    const s = jobState(token);
    if (states.test(s)) return s;
    await new Promise((r) => setTimeout(r, 200));
  }
}

withSlurm(title, () => {
  it("a partition, gres, account or extra argument is never read by a shell (the attack)", async () => {
    const dir = tempDir();
    const marker = (n: number) => join(dir, `pwned-${n}`);
    const attack: SlurmConfig = {
      partition: `debug;touch ${marker(1)}`,
      gres: `$(touch ${marker(2)})`,
      account: `\`touch ${marker(3)}\``,
      extraArgs: [`--comment=x; touch ${marker(4)}`],
      pendingLimitMs: 60_000,
    };
    // The control: the same partition through a shell does run the injected command.
    spawnSync("/bin/sh", ["-c", `sbatch --test-only --wrap true --partition ${attack.partition}`]);
    expect(existsSync(marker(1))).toBe(true);
    rmSync(marker(1));

    const spec = trial("echo loss: 1");
    const r = await new SlurmExecutor(attack, FAST).runTrial(spec);
    expect(r.status).toBe("crash");
    expect(r.reason).toMatch(
      /^sbatch refused the trial's job \(partition debug;touch [^)]*\): sbatch: error: /,
    );
    for (const n of [1, 2, 3, 4]) expect(existsSync(marker(n))).toBe(false);
    expect(jobState(spec.token)).toBe("");
  });

  it("runs the command as a job and reads its metrics from the job's output", async () => {
    const seen: Array<[string, number]> = [];
    const spec = trial(
      'echo "seed=$AUTOLAB_SEED budget=$AUTOLAB_BUDGET_S token=$AUTOLAB_TRIAL_TOKEN"; echo "loss: 0.25"; echo warn >&2',
      { onMetric: (name, value) => seen.push([name, value]) },
    );
    const r = await new SlurmExecutor(CONFIG, FAST).runTrial(spec);
    expect(r.status).toBe("ok");
    expect(r.metrics).toEqual({ loss: 0.25 });
    expect(seen).toEqual([["loss", 0.25]]);
    expect(r.exitCode).toBe(0);
    expect(r.selfReported).toBe(true);
    const out = readFileSync(r.stdoutPath, "utf8");
    expect(out).toContain(`seed=7 budget=20 token=${spec.token}`);
    expect(readFileSync(r.stderrPath, "utf8")).toContain("warn");
    expect(r.logTail).toContain("loss: 0.25");
    expect(await untilState(spec.token, /COMPLETED/)).toMatch(/^\d+\|COMPLETED$/);
    // --time is budget + grace (21 s), which Slurm rounds up to a whole minute.
    const id = jobState(spec.token).split("|")[0] as string;
    expect(
      execFileSync("squeue", ["--jobs", id, "--states=all", "--noheader", "--format=%l"], {
        encoding: "utf8",
      }).trim(),
    ).toBe("1:00");
  });

  it.runIf(sandboxed)("runs the command inside the local executor's sandbox on the node", async () => {
    const spec = trial(
      'ls ../logs 2>/dev/null | wc -l | sed "s/^/hidden_entries: /"; echo "job: $SLURM_JOB_ID"; env | cut -d= -f1 | sort | tr "\\n" " "; echo; echo "loss: 1"',
    );
    const r = await new SlurmExecutor(CONFIG, FAST).runTrial(spec);
    expect(r.status).toBe("ok");
    // The log directory (next to the job's script and exit status) is an empty directory inside.
    expect(r.metrics.hidden_entries).toBe(0);
    const out = readFileSync(r.stdoutPath, "utf8");
    // Slurm's job variables reach the command (the node's GPUs would too); nothing else of the harness's.
    const id = jobState(spec.token).split("|")[0];
    expect(out).toContain(`job: ${id}\n`);
    const names = (out.split("\n")[2] ?? "").trim().split(" ");
    const allowed =
      /^(PATH|PWD|OLDPWD|SHLVL|_|AUTOLAB_(SEED|BUDGET_S|TRIAL_TOKEN)|SLURMD?_[A-Z_]+|CUDA_VISIBLE_DEVICES)$/;
    expect(names.filter((n) => !allowed.test(n))).toEqual([]);
    expect(names).toEqual(
      expect.arrayContaining(["PATH", "AUTOLAB_SEED", "AUTOLAB_TRIAL_TOKEN", "SLURM_JOB_ID"]),
    );
  });

  it("a command that fails is a crash with its exit code and last stderr line", async () => {
    const spec = trial('echo "loss: 2"; echo "CUDA out of memory" >&2; exit 3');
    const r = await new SlurmExecutor(CONFIG, FAST).runTrial(spec);
    expect(r.status).toBe("crash");
    expect(r.exitCode).toBe(3);
    expect(r.reason).toBe("exited with code 3: CUDA out of memory");
    expect(r.metrics).toEqual({ loss: 2 });
    expect(await untilState(spec.token, /FAILED/)).toMatch(/\|FAILED$/);
  });

  it("budget + grace: the executor cancels a job that runs too long (timeout), and Slurm says CANCELLED", async () => {
    const spec = trial('echo "loss: 5"; sleep 120', { budgetMs: 1000, graceMs: 500 });
    const r = await new SlurmExecutor(CONFIG, FAST).runTrial(spec);
    expect(r.status).toBe("timeout");
    expect(r.reason).toMatch(
      /^exceeded budget 1s \+ grace 0\.5s; cancelled Slurm job \d+ on \S+ \(scancel\)$/,
    );
    expect(r.metrics).toEqual({ loss: 5 });
    expect(await untilState(spec.token, /CANCELLED/)).toMatch(/\|CANCELLED$/);
  });

  it("prune: the metric streamed from the running job's output prunes it, and the job is cancelled", async () => {
    const prune = new AbortController();
    const spec = trial(
      'for i in 1 2 3 4 5 6 7 8 9 10; do echo "METRIC train_loss=$i"; sleep 1; done; echo "loss: 0"',
      {
        prune: prune.signal,
        onMetric: (name, value) => {
          if (name === "train_loss" && value >= 2)
            prune.abort("train_loss 2 is worse than the best's at 20%");
        },
      },
    );
    const r = await new SlurmExecutor(CONFIG, FAST).runTrial(spec);
    expect(r.status).toBe("pruned");
    expect(r.reason).toBe("train_loss 2 is worse than the best's at 20%");
    expect(r.metrics.loss).toBeUndefined();
    expect(await untilState(spec.token, /CANCELLED/)).toMatch(/\|CANCELLED$/);
  });

  it("the run's stop signal cancels the job: interrupted", async () => {
    const stop = new AbortController();
    const spec = trial('echo "METRIC step=1"; sleep 120', {
      signal: stop.signal,
      onMetric: () => stop.abort("Ctrl-C"),
    });
    const r = await new SlurmExecutor(CONFIG, FAST).runTrial(spec);
    expect(r.status).toBe("interrupted");
    expect(r.reason).toBe("interrupted: Ctrl-C");
    expect(await untilState(spec.token, /CANCELLED/)).toMatch(/\|CANCELLED$/);
  });

  it("a job pending past pending_limit is cancelled and recorded with the partition and the fix", async () => {
    const spec = trial('echo "loss: 1"');
    const config: SlurmConfig = {
      partition: "debug",
      extraArgs: ["--begin=now+1hour"],
      pendingLimitMs: 1500,
    };
    const r = await new SlurmExecutor(config, FAST).runTrial(spec);
    expect(r.status).toBe("crash");
    expect(r.reason).toMatch(
      /^Slurm job \d+ was still pending after 1\.5s in partition debug \(Slurm's reason: BeginTime\); it was cancelled\. Check the partition \(sinfo -p debug; squeue -p debug\), then choose another `partition:` or raise `pending_limit:` under executor\.slurm in program\.md$/,
    );
    expect(r.wallS).toBe(0);
    expect(await untilState(spec.token, /CANCELLED/)).toMatch(/\|CANCELLED$/);
  });

  it("reap(token) cancels the job a dead harness left; the trial still waiting on it says so", async () => {
    const spec = trial('echo "METRIC step=1"; sleep 120');
    const running = new SlurmExecutor(CONFIG, FAST).runTrial(spec);
    await untilState(spec.token, /RUNNING/);
    // Another harness (the one that resumes the run) finds the job by its name.
    expect(await new SlurmExecutor(CONFIG).reap(spec.token)).toBe(1);
    const r = await running;
    expect(r.status).toBe("crash");
    expect(r.reason).toMatch(/^Slurm job \d+ on \S+ was cancelled outside autolab/);
    expect(await untilState(spec.token, /CANCELLED/)).toMatch(/\|CANCELLED$/);
    expect(await new SlurmExecutor(CONFIG).reap(spec.token)).toBe(0);
  });

  // Takes the node down and up again: only on the single-node cluster .ci/start-slurm.sh makes.
  it.runIf(problem === undefined && testCluster())(
    "a node that fails under the job: crash naming NODE_FAIL",
    async () => {
      const spec = trial('echo "METRIC step=1"; sleep 120');
      const running = new SlurmExecutor(CONFIG, FAST).runTrial(spec);
      await untilState(spec.token, /RUNNING/);
      const nodeName = execFileSync(
        "squeue",
        ["--name", `autolab-${spec.token}`, "--noheader", "--format=%N"],
        {
          encoding: "utf8",
        },
      ).trim();
      try {
        execFileSync("scontrol", [
          "update",
          `NodeName=${nodeName}`,
          "State=DOWN",
          "Reason=autolab-test-node-fail",
        ]);
        const r = await running;
        expect(r.status).toBe("crash");
        expect(r.reason).toBe(
          `Slurm job ${jobState(spec.token).split("|")[0]} on ${nodeName} did not finish: its node failed (state NODE_FAIL)`,
        );
      } finally {
        execFileSync("scontrol", ["update", `NodeName=${nodeName}`, "State=RESUME"]);
      }
      // --no-requeue: the job is not run again behind the harness's back.
      expect(jobState(spec.token)).toMatch(/\|NODE_FAIL$/);
    },
  );

  it("slurmctld unreachable for longer than the limit: the job is cancelled and the trial is a crash saying so", async () => {
    const bin = tempDir();
    for (const tool of ["sbatch", "scancel", "sacct"]) symlinkSync(`/usr/bin/${tool}`, join(bin, tool));
    writeFileSync(
      join(bin, "squeue"),
      "#!/bin/sh\necho 'squeue: error: Unable to contact slurm controller (connect failure)' >&2\nexit 1\n",
      { mode: 0o755 },
    );
    const spec = trial('echo "METRIC step=1"; sleep 120');
    const r = await new SlurmExecutor(CONFIG, { ...FAST, bin, unreachableLimitMs: 1000 }).runTrial(spec);
    expect(r.status).toBe("crash");
    expect(r.reason).toMatch(
      /^Slurm job \d+: Slurm did not answer for 1s \(squeue: error: Unable to contact slurm controller \(connect failure\)\); the job was cancelled if it could be$/,
    );
    expect(await untilState(spec.token, /CANCELLED/)).toMatch(/\|CANCELLED$/);
  });

  it("a job squeue has forgotten (past MinJobAge) ends by the exit status its script wrote", async () => {
    for (const [command, status, reason] of [
      ['echo "loss: 0.5"', "ok", undefined],
      ['echo "bad input" >&2; exit 3', "crash", "exited with code 3: bad input"],
    ] as const) {
      const spec = trial(command);
      // squeue answers as Slurm does for a job it no longer keeps, once the job has ended.
      const bin = tempDir();
      for (const tool of ["sbatch", "scancel", "sacct"]) symlinkSync(`/usr/bin/${tool}`, join(bin, tool));
      writeFileSync(
        join(bin, "squeue"),
        `#!/bin/sh\nif [ -e ${JSON.stringify(join(spec.logDir, "exit-status"))} ]; then echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1; fi\nexec /usr/bin/squeue "$@"\n`,
        { mode: 0o755 },
      );
      const r = await new SlurmExecutor(CONFIG, { ...FAST, bin }).runTrial(spec);
      expect(r.status).toBe(status);
      expect(r.reason).toBe(reason);
    }
  });

  it("evaluate runs on this machine after beforeEvaluate, and owns the score", async () => {
    const order: string[] = [];
    const spec = trial('echo "loss: 0.001"; echo 0.5 > result.txt', {
      evaluate: 'echo "loss: $(cat result.txt)"; echo "holdout: 9"',
      beforeEvaluate: async () => {
        order.push(`before:${existsSync(join(spec.cwd, "result.txt"))}`);
        return undefined;
      },
    });
    const r = await new SlurmExecutor(CONFIG, FAST).runTrial(spec);
    expect(r.status).toBe("ok");
    expect(order).toEqual(["before:true"]);
    expect(r.metrics).toEqual({ loss: 0.5, holdout: 9 });
    expect(r.selfReported).toBe(false);
    // Evaluate's output stays out of the tail the agent sees.
    expect(r.logTail).not.toContain("holdout");
    expect(readFileSync(join(spec.logDir, "evaluate.stdout.log"), "utf8")).toContain("holdout: 9");
  });

  it("autolab run with `executor: { slurm: {} }` runs its trials as Slurm jobs and keeps a result", async () => {
    const { toy } = toysOfFile();
    const t = toy({ score: "decreasing", budget: "20s" });
    const program = readFileSync(join(t.dir, "program.md"), "utf8");
    writeFileSync(
      join(t.dir, "program.md"),
      program.replace("search:\n", "executor: { slurm: {} }\nsearch:\n"),
    );
    commitAll(t.dir, "trials on Slurm");
    const r = await runCli(["run", "-n", "2"], { cwd: t.dir, timeoutMs: 120_000 });
    expect(r.code, r.stderr).toBe(0);
    const ledger = readLedger(t.dir);
    expect(ledger.trialResults.map((x) => x.status)).toEqual(["ok", "ok", "ok"]);
    expect(ledger.decisions.filter((d) => d.action === "keep").length).toBe(3);
    // Every trial ran as a job: its script and the exit status it wrote are next to its logs.
    const logs = join(t.dir, ".autolab", "logs");
    const scripts = readdirSync(logs, { recursive: true, encoding: "utf8" }).filter((f) =>
      f.endsWith("job.sh"),
    );
    expect(scripts.length).toBe(3);
    for (const f of scripts) {
      expect(readFileSync(join(logs, f.replace(/job\.sh$/, "exit-status")), "utf8")).toMatch(/^0 \d+ \d+\n$/);
    }
  });
});
