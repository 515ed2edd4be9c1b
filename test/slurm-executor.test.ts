/**
 * The Slurm executor against a REAL Slurm (slurmctld + slurmd on this machine: .ci/start-slurm.sh).
 * Skipped, saying why, where sbatch is missing or slurmctld does not answer — except with
 * AUTOLAB_REQUIRE_SLURM=1 (CI), where a missing Slurm fails these tests instead.
 *
 * Jobs are found by name (`autolab-<token>`, the token set in each spec) and their end state is
 * read with `squeue --states=all` (this cluster keeps no accounting, so `sacct` has nothing).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
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
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { SandboxSpec, SlurmConfig, TrialSpec } from "../src/core/types.ts";
import { parseFleetUrl } from "../src/fleet/db.ts";
import { FleetExecutor } from "../src/fleet/fleet-executor.ts";
import { probeSandbox } from "../src/runner/sandbox.ts";
import { SlurmExecutor } from "../src/runner/slurm-executor.ts";
import { fleetSchemaOfFile, NO_PG, NO_PG_REASON, requirePgCase, testClient } from "./helpers/fleet-db.ts";
import { dropSchemas, freshSchemaUrl } from "./helpers/pg.ts";
import { SLURM_REQUIRED, slurmProblem } from "./helpers/slurm.ts";
import { CLI_MAIN, commitAll, REPO_ROOT, readLedger, runCli, toysOfFile } from "./helpers/toy-project.ts";

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
const required = SLURM_REQUIRED;
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

/*
 * All three pieces of issue #13 at once (docs/distributed.md): a worker fleet started as a Slurm
 * job array (`autolab worker` in each array task, as examples/slurm/worker-array.sbatch does), a
 * coordinator `autolab run --fleet` whose notebook is on PostgreSQL, and `scancel` ending the
 * fleet.
 */
const { url: fleetUrl, schema } = fleetSchemaOfFile();
const fleetToys = toysOfFile();
requirePgCase();
afterAll(dropSchemas);

const skipFleet = NO_PG || (problem !== undefined && !SLURM_REQUIRED);
const whyFleet = NO_PG ? NO_PG_REASON : problem;

let jobId: string | undefined;
afterAll(() => {
  if (jobId) spawnSync("scancel", [jobId]);
});

// In this file, not its own: its tests run one after the other, and one of them takes the node
// down (NODE_FAIL), which would kill the array's workers.
describe.skipIf(skipFleet)(
  `a worker fleet as a Slurm job array${skipFleet ? ` (skipped: ${whyFleet})` : ""}`,
  () => {
    it("two array tasks each run `autolab worker`; a run on a PostgreSQL notebook uses them; scancel ends them", async () => {
      const dir = tempDir();
      const script = join(dir, "workers.sbatch");
      writeFileSync(
        script,
        `#!/bin/bash
#SBATCH --job-name=autolab-workers-test
#SBATCH --array=0-1
#SBATCH --cpus-per-task=1
#SBATCH --time=10:00
#SBATCH --output=${dir}/worker-%a.out
#SBATCH --error=${dir}/worker-%a.err
set -euo pipefail
exec "$AUTOLAB_NODE" "$AUTOLAB_CLI" worker --db "$AUTOLAB_FLEET_DB" --slots 1 \\
  --name "slurm-$SLURM_ARRAY_TASK_ID" --cache "${dir}/cache-$SLURM_ARRAY_TASK_ID"
`,
      );
      const submitted = spawnSync("sbatch", ["--parsable", script], {
        cwd: dir,
        encoding: "utf8",
        env: {
          ...process.env,
          AUTOLAB_NODE: process.execPath,
          AUTOLAB_CLI: CLI_MAIN,
          AUTOLAB_FLEET_DB: fleetUrl,
        },
      });
      expect(submitted.status, submitted.stderr).toBe(0);
      jobId = submitted.stdout.trim().split(";")[0];

      const client = await testClient();
      try {
        // Both array tasks register as live workers.
        const deadline = Date.now() + 90_000;
        let live: string[] = [];
        while (Date.now() < deadline) {
          const r = await client
            .query(
              `SELECT name FROM ${schema}.fleet_workers WHERE stopped_at IS NULL AND heartbeat_at > now() - interval '15 seconds' ORDER BY name`,
            )
            .catch(() => ({ rows: [] as { name: string }[] }));
          live = r.rows.map((x) => x.name);
          if (live.length === 2) break;
          await new Promise((res) => setTimeout(res, 500));
        }
        expect(live).toEqual(["slurm-0", "slurm-1"]);

        const t = fleetToys.toy({ score: "decreasing", evaluate: true });
        const notebook = freshSchemaUrl("slurmfleet");
        const run = await runCli(["run", "--fleet", fleetUrl, "--db", notebook, "-n", "3"], {
          cwd: t.dir,
          timeoutMs: 240_000,
        });
        expect(run.code, run.stdout + run.stderr).toBe(0);
        expect(run.stdout).toMatch(/2 live workers, 2 slots: the run uses 2/);
        const db = readLedger(t.dir, notebook);
        // With two slots a winner may be rebased onto a newer best: more numbers than -n, each once, each decided.
        const ns = db.experiments.map((e) => e.n);
        expect(ns.slice(0, 4)).toEqual([0, 1, 2, 3]);
        expect(new Set(ns).size).toBe(ns.length);
        expect(db.decisions).toHaveLength(ns.length);
        expect(db.trialResults.every((r) => r.status === "ok")).toBe(true);
        expect(db.trialResults).toHaveLength(db.trialStarts.length);
        const ran = await client.query(
          `SELECT DISTINCT split_part(worker_id, ':', 1) AS name FROM ${schema}.fleet_results`,
        );
        expect(ran.rows.map((r) => r.name).every((n: string) => /^slurm-[01]$/.test(n))).toBe(true);
        expect(t.invocations()).toBe(db.trialStarts.length);

        // scancel: Slurm signals the workers (SIGTERM first); they leave the fleet.
        expect(spawnSync("scancel", [jobId as string]).status).toBe(0);
        const gone = Date.now() + 60_000;
        let stillLive = 2;
        while (Date.now() < gone) {
          const r = await client.query(
            `SELECT count(*)::int AS n FROM ${schema}.fleet_workers WHERE stopped_at IS NULL AND heartbeat_at > now() - interval '15 seconds'`,
          );
          stillLive = r.rows[0]?.n ?? 0;
          if (stillLive === 0) break;
          await new Promise((res) => setTimeout(res, 500));
        }
        expect(stillLive).toBe(0);
        jobId = undefined;
      } finally {
        await client.end();
      }
    }, 300_000);

    it("the shipped examples/slurm/worker-array.sbatch, submitted as its header says (resources this node lacks overridden on the command line), runs a worker that processes a job; scancel ends it", async () => {
      // As a user: autolab installed in the project (`npx autolab`), logs/ made, AUTOLAB_FLEET_DB exported.
      const project = tempDir();
      mkdirSync(join(project, "node_modules", ".bin"), { recursive: true });
      symlinkSync(join(REPO_ROOT, "bin", "autolab.mjs"), join(project, "node_modules", ".bin", "autolab"));
      mkdirSync(join(project, "logs"));
      const home = tempDir();
      const submitted = spawnSync(
        "sbatch",
        [
          "--parsable",
          // One task, no GPU, one core, no memory request, ten minutes: what this one-node cluster has.
          "--array=0",
          "--gres=none",
          "--cpus-per-task=1",
          "--mem=0",
          "--time=10:00",
          join(REPO_ROOT, "examples", "slurm", "worker-array.sbatch"),
        ],
        { cwd: project, encoding: "utf8", env: { ...process.env, HOME: home, AUTOLAB_FLEET_DB: fleetUrl } },
      );
      expect(submitted.status, submitted.stderr).toBe(0);
      jobId = submitted.stdout.trim().split(";")[0];
      const out = join(project, "logs", `worker-${jobId}_0.out`);
      const err = join(project, "logs", `worker-${jobId}_0.err`);
      const t = fleetToys.toy({ evaluate: true });
      const exec = await FleetExecutor.open(parseFleetUrl(fleetUrl), { pollMs: 100 });
      const client = await testClient();
      try {
        exec.bind({
          repoRoot: t.dir,
          prefix: "",
          programFile: "program.md",
          programText: readFileSync(join(t.dir, "program.md"), "utf8"),
          baseCommit: t.git(["rev-parse", "HEAD"]).trim(),
          tag: "shipped",
        });
        const said = () => `${readFileSafe(out)}${readFileSafe(err)}`;
        // Its worker registers, or the job ends (a script that does not run) and says why.
        const until = Date.now() + 120_000;
        let live = 0;
        while (Date.now() < until) {
          const q = await client.query(
            `SELECT count(*)::int AS n FROM ${schema}.fleet_workers WHERE stopped_at IS NULL AND heartbeat_at > now() - interval '15 seconds'`,
          );
          live = q.rows[0]?.n ?? 0;
          const queued = spawnSync("squeue", ["-h", "-j", jobId as string], {
            encoding: "utf8",
          }).stdout.trim();
          if (live > 0 || queued === "") break;
          await new Promise((res) => setTimeout(res, 500));
        }
        expect(live, `the array task's worker never registered:\n${said()}`).toBe(1);
        const logs = tempDir();
        const key = randomBytes(12).toString("hex");
        const r = await exec.runTrial({
          cwd: t.dir,
          command: "node train.mjs",
          evaluate: "node evaluate.mjs",
          budgetMs: 60_000,
          graceMs: 5_000,
          evaluateTimeoutMs: 30_000,
          seed: 0,
          logDir: join(logs, "1", "1"),
          env: { AUTOLAB_TRIAL_TOKEN: key },
          objective: "score",
        });
        expect(r.status, `${r.reason}\n${said()}`).toBe("ok");
        const row = await client.query(`SELECT worker_id FROM ${schema}.fleet_results WHERE key = $1`, [key]);
        expect(row.rows[0]?.worker_id.split(":")[0]).toBe(hostname());
        expect(readFileSafe(out)).toMatch(/worker \S+ slot 0: shipped #1\.1 ok/);
        // Its cache is the script's: one per array task under $HOME.
        expect(existsSync(join(home, ".cache", "autolab", "fleet-0", "worker.lock"))).toBe(true);

        expect(spawnSync("scancel", [jobId as string]).status).toBe(0);
        const gone = Date.now() + 60_000;
        let stillLive = 1;
        while (Date.now() < gone) {
          const q = await client.query(
            `SELECT count(*)::int AS n FROM ${schema}.fleet_workers WHERE stopped_at IS NULL AND heartbeat_at > now() - interval '15 seconds'`,
          );
          stillLive = q.rows[0]?.n ?? 0;
          if (stillLive === 0) break;
          await new Promise((res) => setTimeout(res, 500));
        }
        expect(stillLive, said()).toBe(0);
        jobId = undefined;
      } finally {
        await client.end();
        await exec.close();
      }
    }, 300_000);
  },
);
