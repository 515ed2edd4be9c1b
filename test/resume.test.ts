/**
 * "Nothing is lost": the harness is killed (-9) at every point between two of its writes and at
 * timed moments of a real run, then `autolab run` is started again until it finishes. Whatever
 * the moment, the notebook, the refs, the ratchet branch and the worktree must end up as if the
 * run had never been interrupted: experiments 0..N once each, one decision each, every trial
 * start closed, the branch at the last kept experiment, a clean worktree.
 */
import { existsSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { CrashPoint } from "../src/core/crash-points.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { dropSchemas, freshSchemaUrl, PG_SKIP } from "./helpers/pg.ts";
import {
  git,
  type LedgerDump,
  readLedger,
  runCli,
  spawnCli,
  type ToyOptions,
  type ToyProject,
  toysOfFile,
  withRawNotebook,
} from "./helpers/toy-project.ts";
import { valueProject, git as vgit } from "./helpers/value-project.ts";

const { toy } = toysOfFile();

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `autolab run -n n` without fault injection, repeated until it exits 0 (it must within a few tries). */
async function runToCompletion(t: ToyProject, n: number, db?: string): Promise<string> {
  let out = "";
  for (let i = 0; i < 3; i++) {
    const r = await runCli(["run", "-n", String(n)], {
      cwd: t.dir,
      ...(db ? { env: { AUTOLAB_DB: db } } : {}),
    });
    out += r.stdout;
    expect(r.stderr, r.stdout).not.toMatch(/internal error/);
    if (r.code === 0) return out;
  }
  throw new Error(`autolab run -n ${n} did not finish after 3 attempts:\n${out}`);
}

interface Exp {
  n: number;
  id: number;
  commit: string;
  parent: string;
  decision: LedgerDump["decisions"][number] | undefined;
  trials: { attempt: number; status: string | undefined }[];
}

function experiments(db: LedgerDump): Exp[] {
  return db.experiments.map((e) => ({
    n: e.n,
    id: e.id,
    commit: e.commit_sha,
    parent: e.parent_commit,
    decision: db.decisions.find((d) => d.experiment_id === e.id),
    trials: db.trialStarts
      .filter((s) => s.experiment_id === e.id)
      .map((s) => ({ attempt: s.attempt, status: db.trialResults.find((r) => r.trial_id === s.id)?.status })),
  }));
}

/** The invariants every finished run must satisfy, however often it was killed on the way. */
function checkInvariants(t: ToyProject, n: number, pgUrl?: string): { tag: string; exps: Exp[] } {
  const db = readLedger(t.dir, pgUrl);
  expect(db.runs).toHaveLength(1);
  const tag = db.runs[0]?.tag as string;
  const exps = experiments(db);

  // Experiments 0..n, each once.
  expect(exps.map((e) => e.n)).toEqual(Array.from({ length: n + 1 }, (_, i) => i));
  // Exactly one decision per experiment, and none for an experiment that does not exist.
  expect(exps.every((e) => e.decision !== undefined)).toBe(true);
  expect(db.decisions).toHaveLength(exps.length);
  // Every trial start has exactly one result.
  for (const s of db.trialStarts) expect(db.trialResults.filter((r) => r.trial_id === s.id)).toHaveLength(1);
  expect(db.trialResults).toHaveLength(db.trialStarts.length);
  for (const e of exps) {
    // Attempts are numbered 1..k; only the last one may have finished for real, earlier ones
    // were cut short; a decided experiment that ran has a finished (non-interrupted) last trial.
    expect(e.trials.map((x) => x.attempt)).toEqual(e.trials.map((_, i) => i + 1));
    expect(e.trials.slice(0, -1).every((x) => x.status === "interrupted")).toBe(true);
    if (e.decision?.action !== "reject" || e.trials.length > 0) {
      expect(e.trials.at(-1)?.status).not.toBe("interrupted");
    }
    // Each experiment's ref exists and names its commit.
    expect(t.git(["rev-parse", `refs/autolab/${tag}/${e.n}`]).trim()).toBe(e.commit);
  }

  // The ratchet: each kept candidate was built on the previous best, and the branch is the last one.
  const kept = exps.filter((e) => e.decision?.action === "keep");
  expect(kept[0]?.n).toBe(0);
  for (let i = 1; i < kept.length; i++) expect(kept[i]?.parent).toBe(kept[i - 1]?.commit);
  const best = kept.at(-1) as Exp;
  expect(t.git(["rev-parse", `autolab/${tag}`]).trim()).toBe(best.commit);

  // The worktree has no tracked modifications; no lock is left behind. (Its HEAD is not checked:
  // a run that stops at --max-experiments leaves it at the last candidate, resume resets it.)
  const wt = join(t.dir, ".autolab", "worktrees", tag);
  expect(git(wt, ["status", "--porcelain", "--untracked-files=no"])).toBe("");
  expect(existsSync(join(t.dir, ".autolab", `run-${tag}.lock`))).toBe(false);
  return { tag, exps };
}

const N = 3;

// The same crash points against each notebook: SQLite, and PostgreSQL where there is one
// (test/helpers/pg.ts: required in CI).
const STORES = [
  { name: "SQLite", url: (): string | undefined => undefined },
  ...(PG_SKIP ? [] : [{ name: "PostgreSQL", url: (): string | undefined => freshSchemaUrl("resume") }]),
];
afterAll(dropSchemas);

for (const store of STORES)
  describe(`kill -9 between two writes (AUTOLAB_CRASH_AT), then resume — ${store.name} notebook`, () => {
    // k-th pass of the point: the baseline passes after-trial-start and after-trial-result once,
    // the other points only candidates pass; every k below lands on experiment 2.
    const cases: { point: CrashPoint; k: number; opts?: ToyOptions }[] = [
      { point: "after-commit", k: 2 },
      { point: "after-row", k: 2 },
      { point: "after-trial-start", k: 3 },
      { point: "after-trial-result", k: 3 },
      // Every candidate improves, so experiment 2 is a keep whose branch move is cut off.
      { point: "after-decision", k: 2, opts: { score: "decreasing" } },
      // Hooks: the baseline's after hook passes first, then #1's before and after: the 4th pass is
      // #2's before hook, recorded, with nothing of #2 committed yet.
      {
        point: "after-hook",
        k: 4,
        opts: { hooks: { before: "echo before $AUTOLAB_N", after: "echo after $AUTOLAB_N" } },
      },
    ];

    for (const { point, k, opts } of cases) {
      it(`${point}:${k}`, async () => {
        const t = toy(opts ?? {});
        const pgUrl = store.url();
        const crashed = await runCli(["run", "-n", String(N)], {
          cwd: t.dir,
          env: { AUTOLAB_CRASH_AT: `${point}:${k}`, ...(pgUrl ? { AUTOLAB_DB: pgUrl } : {}) },
        });
        expect(crashed.signal, crashed.stdout + crashed.stderr).toBe("SIGKILL");
        const before = experiments(readLedger(t.dir, pgUrl));
        const tag = readLedger(t.dir, pgUrl).runs[0]?.tag as string;
        const orphanRef = t.git(["for-each-ref", "--format=%(objectname)", `refs/autolab/${tag}/2`]).trim();
        const invocationsAtCrash = t.invocations();

        await runToCompletion(t, N, pgUrl);
        const { exps } = checkInvariants(t, N, pgUrl);
        const e2 = exps[2] as Exp;

        switch (point) {
          case "after-commit":
            // Committed and ref'd but not recorded: adopted as experiment 2, not proposed again.
            expect(before.map((e) => e.n)).toEqual([0, 1]);
            expect(orphanRef).not.toBe("");
            expect(e2.commit).toBe(orphanRef);
            expect(e2.trials).toHaveLength(1);
            break;
          case "after-row":
            expect(before.at(-1)?.n).toBe(2);
            expect(before.at(-1)?.trials).toEqual([]);
            expect(e2.commit).toBe(before.at(-1)?.commit);
            expect(e2.trials).toHaveLength(1);
            break;
          case "after-trial-start":
            // The start row was written but the process never spawned: interrupted, then run again.
            expect(before.at(-1)?.trials).toEqual([{ attempt: 1, status: undefined }]);
            expect(e2.trials.map((x) => x.status)).toEqual(["interrupted", "ok"]);
            break;
          case "after-trial-result":
            // The result was on record: only the decision was missing, the trial is not run again.
            expect(before.at(-1)?.trials).toEqual([{ attempt: 1, status: "ok" }]);
            expect(before.at(-1)?.decision).toBeUndefined();
            expect(e2.trials).toHaveLength(1);
            expect(t.invocations()).toBe(invocationsAtCrash + (N - 2));
            break;
          case "after-hook": {
            // #2's before hook was recorded, nothing else of #2: it is proposed (and its hook run) again.
            expect(before.map((e) => e.n)).toEqual([0, 1]);
            expect(orphanRef).toBe("");
            expect(e2.trials).toHaveLength(1);
            const hooks = withRawNotebook(t.dir, pgUrl, (all) =>
              all<{ n: number; phase: string; status: string; output: string }>(
                "SELECT n, phase, status, output FROM hook_runs ORDER BY id",
              ),
            );
            expect(hooks.filter((h) => h.n === 2 && h.phase === "before").map((h) => h.output)).toEqual([
              "before 2",
              "before 2",
            ]);
            // Every experiment has its after hook, the baseline's included, each once.
            expect(hooks.filter((h) => h.phase === "after").map((h) => h.n)).toEqual([0, 1, 2, 3]);
            expect(hooks.every((h) => h.status === "ok")).toBe(true);
            break;
          }
          case "after-decision":
            // Decided keep, branch not moved yet: resume moves it (checked by the invariants).
            expect(before.at(-1)?.decision?.action).toBe("keep");
            expect(e2.decision).toEqual(before.at(-1)?.decision);
            expect(e2.trials).toHaveLength(1);
            break;
        }
      });
    }
  });

describe("kill -9 right after the advisor's answer (AUTOLAB_CRASH_AT=after-advice), then resume", () => {
  it("keeps the answer once and asks again only after new discards", async () => {
    const dir = valueProject();
    const program = join(dir, "program.md");
    const echo = (json: string) => `echo '${json.replaceAll('"', '\\"')}'`;
    writeFileSync(
      program,
      readFileSync(program, "utf8").replace(
        "---\nLower",
        `agent: { backend: command, command: "echo 'export const X = 9;' > value.mjs; ${echo('{"hypothesis": "X to 9"}')}" }\n` +
          `advisor: { agent: { backend: command, command: "${echo('{"hypothesis": "IDEA: try X = 1"}')}" }, after_discards: 1 }\n---\nLower`,
      ),
    );
    vgit(dir, "commit", "-qam", "advisor");
    const t = { dir, git: (args: string[]) => git(dir, args) } as unknown as ToyProject;
    const advice = () => {
      const l = new SqliteLedger(join(dir, ".autolab", "lab.db"));
      const rows = l.listAdvice(l.getRun(readLedger(dir).runs[0]?.tag as string)?.id ?? -1);
      l.close();
      return rows;
    };
    const crashed = await runCli(["run", "-n", String(N)], {
      cwd: dir,
      env: { AUTOLAB_CRASH_AT: "after-advice:1" },
    });
    expect(crashed.signal, crashed.stdout + crashed.stderr).toBe("SIGKILL");
    const before = advice();
    expect(before.map((a) => [a.verdict, a.afterN])).toEqual([["ideas", 1]]);
    expect(experiments(readLedger(dir)).map((e) => e.n)).toEqual([0, 1]);

    await runToCompletion(t, N);
    const { exps } = checkInvariants(t, N);
    expect(exps.map((e) => e.decision?.action)).toEqual(["keep", "discard", "discard", "discard"]);
    const after = advice();
    // The answer on record stays as it was; the advisor was asked again after #2 only (the
    // budget was spent after #3).
    expect(after[0]).toEqual(before[0]);
    expect(after.map((a) => a.afterN)).toEqual([1, 2]);
  });
});

describe("timed kill -9 of a real run, then resume", () => {
  // Trials sleep 400 ms, setup 300 ms: wide enough windows to land a kill inside them.
  const slow: ToyOptions = { sleepMs: 400, setupMs: 300 };

  it("during setup", async () => {
    const t = toy(slow);
    const p = spawnCli(["run", "-n", "2"], { cwd: t.dir });
    await p.waitFor(/setup: node setup\.mjs/);
    await sleep(100);
    p.child.kill("SIGKILL");
    expect((await p.done).signal).toBe("SIGKILL");
    const out = await runToCompletion(t, 2);
    expect(out).toMatch(/setup: node setup\.mjs/); // setup had not finished: it runs again
    const { tag } = checkInvariants(t, 2);
    expect(existsSync(join(t.dir, ".autolab", "worktrees", tag, "data", "ready"))).toBe(true);
  });

  it("mid-trial: the killed trial is recorded as interrupted and run again", async () => {
    const t = toy(slow);
    const p = spawnCli(["run", "-n", String(N)], { cwd: t.dir });
    await p.waitFor(/#2 trial 1 started/);
    await sleep(150);
    p.child.kill("SIGKILL");
    expect((await p.done).signal).toBe("SIGKILL");
    await sleep(400); // let the orphaned trial finish (resume would kill it; see "orphans" below)
    await runToCompletion(t, N);
    const { exps } = checkInvariants(t, N);
    expect(exps[2]?.trials.map((x) => x.status)).toEqual(["interrupted", "ok"]);
    expect(exps.filter((e) => e.n !== 2).every((e) => e.trials.length === 1)).toBe(true);
  });

  it("at arbitrary moments, several times in one run", async () => {
    const t = toy({ sleepMs: 400 });
    // Offsets from the start of each invocation; the CLI itself takes ~0.4 s to get going.
    for (const offset of [1000, 1500, 1250]) {
      const p = spawnCli(["run", "-n", "4"], { cwd: t.dir });
      await sleep(offset);
      p.child.kill("SIGKILL");
      await p.done;
      await sleep(450);
    }
    await runToCompletion(t, 4);
    const { exps } = checkInvariants(t, 4);
    const interrupted = exps.flatMap((e) => e.trials).filter((x) => x.status === "interrupted");
    // Not asserted > 0: a kill may land between trials. The invariants are the point.
    expect(interrupted.length).toBeLessThanOrEqual(3);
  });
});

describe("kill -9 while the incumbent is re-measured (noise acceptance), then resume", () => {
  it("the incumbent's cut trial is closed as interrupted; nothing is lost or decided twice", async () => {
    const t = toy({ acceptance: "noise" });
    // Trial starts: the baseline's 3, candidate #1's first, then the incumbent's 4th.
    const crashed = await runCli(["run", "-n", "1"], {
      cwd: t.dir,
      env: { AUTOLAB_CRASH_AT: "after-trial-start:5" },
    });
    expect(crashed.signal, crashed.stdout + crashed.stderr).toBe("SIGKILL");
    const cut = experiments(readLedger(t.dir));
    expect(cut[0]?.decision?.action).toBe("keep");
    expect(cut[0]?.trials.at(-1)).toEqual({ attempt: 4, status: undefined });
    expect(cut[1]?.decision).toBeUndefined();

    await runToCompletion(t, 1);
    const db = readLedger(t.dir);
    const exps = experiments(db);
    expect(exps.map((e) => e.n)).toEqual([0, 1]);
    expect(db.decisions).toHaveLength(2);
    for (const s of db.trialStarts)
      expect(db.trialResults.filter((r) => r.trial_id === s.id)).toHaveLength(1);
    const base = exps[0] as Exp;
    expect(base.trials.map((x) => x.attempt)).toEqual(base.trials.map((_, i) => i + 1));
    expect(base.trials[3]?.status).toBe("interrupted");
    expect(base.trials.filter((x) => x.status === "ok").length).toBeGreaterThanOrEqual(4);
    expect(exps[1]?.decision).toBeDefined();
  });
});

describe("Ctrl-C", () => {
  it("exits 130 without waiting for its trial (recorded as interrupted), and the next run resumes it", async () => {
    const t = toy({ sleepMs: 1500 });
    const p = spawnCli(["run", "-n", "1"], { cwd: t.dir });
    await p.waitFor(/#1 trial 1 started/, 30_000);
    await sleep(300);
    p.child.kill("SIGINT");
    const r = await p.done;
    expect(r.code, r.stdout + r.stderr).toBe(130);
    expect(r.stderr).toMatch(/stopping/);
    expect(r.stderr).not.toMatch(/internal error|^\s{4}at /m);

    const db = readLedger(t.dir);
    const e1 = experiments(db).find((e) => e.n === 1);
    expect(e1?.trials).toEqual([{ attempt: 1, status: "interrupted" }]);
    expect(e1?.decision).toBeUndefined();
    const tag = db.runs[0]?.tag as string;
    const wt = join(t.dir, ".autolab", "worktrees", tag);
    expect(git(wt, ["status", "--porcelain", "--untracked-files=no"])).toBe("");

    const out = await runToCompletion(t, 1);
    expect(out).toMatch(new RegExp(`Resuming run ${tag}`));
    const { exps } = checkInvariants(t, 1);
    expect(exps[1]?.commit).toBe(e1?.commit);
    expect(exps[1]?.trials.map((x) => x.status)).toEqual(["interrupted", "ok"]);
  }, 60_000);
});

describe("orphans", () => {
  /**
   * Trials run in their own process group, so a harness killed with -9 leaves the running
   * trial's tree alive. Its AUTOLAB_TRIAL_TOKEN is recorded with the trial start; resume kills
   * every process carrying it before the experiment runs again.
   */
  it("a trial orphaned by kill -9 of the harness is killed on resume", async () => {
    const t = toy({ plan: ["ok", "hang"], budget: "30s" });
    const p = spawnCli(["run", "-n", "1"], { cwd: t.dir });
    await p.waitFor(/#1 trial 1 started/);
    await sleep(300);
    p.child.kill("SIGKILL");
    await p.done;
    const counter = readFileSync(join(t.scratch, "invocations"), "utf8").trim().split("\n");
    const orphan = Number(counter[1]);
    try {
      await runToCompletion(t, 1);
      expect(alive(orphan)).toBe(false);
    } finally {
      if (alive(orphan)) process.kill(orphan, "SIGKILL");
    }
  });
});

describe("a trial never outlives its budget + grace, harness or not", () => {
  // Nobody resumes here: the killed harness's trial must stop by itself. Inside the sandbox
  // bwrap's --die-with-parent kills it with the harness; outside, coreutils' timeout at the
  // budget + grace (+ the margin that lets a live harness time it out first).
  for (const sandbox of ["on", "off"] as const) {
    it(`sandbox ${sandbox}: a hanging trial of a harness killed with -9 is gone by its deadline`, async () => {
      const t = toy({
        plan: ["ok", "hang"],
        budget: "2s",
        grace: "1s",
        ...(sandbox === "off" ? { sandbox } : {}),
      });
      const p = spawnCli(["run", "-n", "1"], { cwd: t.dir });
      await p.waitFor(/#1 trial 1 started/);
      await sleep(300);
      const running = trialPids(t.dir);
      expect(running.length, "the hanging trial is running").toBeGreaterThan(0);
      p.child.kill("SIGKILL");
      await p.done;
      // Deadline from the trial's start: 2 s + 1 s + margin 2 s, then SIGKILL after the kill grace.
      // Waited for generously; the trial itself would sleep for minutes.
      const until = Date.now() + 30_000;
      while (trialPids(t.dir).length > 0 && Date.now() < until) await sleep(200);
      try {
        expect(trialPids(t.dir)).toEqual([]);
      } finally {
        for (const pid of trialPids(t.dir)) process.kill(pid, "SIGKILL");
      }
    }, 60_000);
  }
});

/** Live train.mjs processes whose working directory is inside `dir` (host pids, sandbox or not). */
function trialPids(dir: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    const pid = Number(name);
    if (!Number.isInteger(pid)) continue;
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("train.mjs")) continue;
      if (readlinkSync(`/proc/${pid}/cwd`).startsWith(dir)) out.push(pid);
    } catch {}
  }
  return out;
}

/** Whether pid is a live train.mjs process (not a reused pid). */
function alive(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("train.mjs");
  } catch {
    return false;
  }
}
