/**
 * `autolab … | head`: a reader that closes the pipe early is a normal end. Real pipes, closed
 * by a real `head`: views exit 0 without a word, `run` stops the way Ctrl-C does — the trial
 * in flight recorded as interrupted, the lock released — and the next `run` resumes.
 */
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { type FixtureExperiment, writeRun } from "./helpers/notebook-fixture.ts";
import {
  CLI_MAIN,
  commitAll,
  createToyProject,
  GIT_ENV,
  readLedger,
  runCli,
  stackLines,
  type ToyProject,
} from "./helpers/toy-project.ts";

const toys: ToyProject[] = [];
afterAll(() => {
  for (const t of toys) t.cleanup();
});

function toy(...args: Parameters<typeof createToyProject>): ToyProject {
  const t = createToyProject(...args);
  toys.push(t);
  return t;
}

/**
 * Runs `autolab <args> <redirect> | head -<lines>` in bash; returns what head printed, the
 * shell's stderr (autolab's, unless redirected into the pipe) and autolab's own exit code.
 */
function pipeThroughHead(
  cwd: string,
  args: string[],
  lines: number,
  redirect = "",
): Promise<{ head: string; stderr: string; code: number }> {
  const quoted = [process.execPath, CLI_MAIN, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(" ");
  const script = `${quoted} ${redirect} | head -${lines}; echo "autolab exit \${PIPESTATUS[0]}" >&2`;
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["-c", script], {
      cwd,
      env: { ...process.env, ...GIT_ENV, NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let head = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      head += d;
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    child.on("error", reject);
    child.on("close", () => {
      const m = /autolab exit (\d+)\n$/.exec(stderr);
      if (!m) return reject(new Error(`no exit code from the pipeline:\n${stderr}`));
      resolve({ head, stderr: stderr.slice(0, m.index), code: Number(m[1]) });
    });
  });
}

describe("a closed stdout", () => {
  // Far more than a pipe buffers (64 KiB): autolab is still writing when head leaves.
  const many: FixtureExperiment[] = Array.from({ length: 3000 }, (_, i) => ({
    action: i % 3 === 0 ? "keep" : "discard",
    metric: 3 - i / 10_000,
    hypothesis: `LEARNING_RATE step ${i}: a longer hypothesis so every row is wide enough`,
  }));

  function bigLab(): ToyProject {
    const t = toy();
    const ledger = new SqliteLedger(join(t.dir, ".autolab", "lab.db"));
    try {
      writeRun(
        ledger,
        { tag: "big", programPath: join(t.dir, "program.md"), experiments: many },
        { bulk: true },
      );
    } finally {
      ledger.close();
    }
    return t;
  }

  it.each(
    [["log"], ["log", "--json"], ["export", "-f", "jsonl"], ["export"], ["export", "-f", "trajectories"]].map(
      (a) => [a.join(" "), a],
    ),
  )("autolab %s | head -3: exit 0, nothing on stderr", async (_name, args) => {
    const t = bigLab();
    const r = await pipeThroughHead(t.dir, args, 3);
    expect(r.head.split("\n")).toHaveLength(4);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
  });

  /**
   * SFT and DPO records need a diff that git can show: every proposal is the same real commit on
   * the base, half of them kept (a chat each), half lost (a pair each). Far more than a pipe buffers.
   */
  function diffLab(): ToyProject {
    const t = toy();
    const base = t.git(["rev-parse", "HEAD"]).trim();
    writeFileSync(join(t.dir, "train.mjs"), `${readFileSync(join(t.dir, "train.mjs"), "utf8")}// a change\n`);
    commitAll(t.dir, "a change");
    const change = t.git(["rev-parse", "HEAD"]).trim();
    t.git(["reset", "-q", "--hard", base]);
    const ledger = new SqliteLedger(join(t.dir, ".autolab", "lab.db"));
    try {
      writeRun(
        ledger,
        {
          tag: "big",
          programPath: join(t.dir, "program.md"),
          baseCommit: base,
          experiments: Array.from(
            { length: 300 },
            (_, n): FixtureExperiment => ({
              action: n === 0 || n % 2 === 1 ? "keep" : "discard",
              metric: 3 - n / 10_000,
              commit: n === 0 ? base : change,
              parent: base,
              hypothesis: `LEARNING_RATE step ${n}: a longer hypothesis so every record is wide enough`,
            }),
          ),
        },
        { bulk: true },
      );
    } finally {
      ledger.close();
    }
    return t;
  }

  it.each([["trajectories-sft"], ["trajectories-dpo"]])(
    "autolab export -f %s | head -1: exit 0, nothing on stderr",
    async (format) => {
      const t = diffLab();
      // Whole, the export is far more than a pipe holds: head leaves while autolab still writes.
      const whole = await runCli(["export", "-f", format], { cwd: t.dir, timeoutMs: 120_000 });
      expect(whole.code, whole.stderr).toBe(0);
      expect(whole.stdout.length).toBeGreaterThan(256 * 1024);
      const r = await pipeThroughHead(t.dir, ["export", "-f", format], 1);
      expect(r.head.split("\n")).toHaveLength(2);
      expect(JSON.parse(r.head.split("\n")[0] as string)).toBeTruthy();
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
    },
    240_000,
  );

  it("with stderr in the same pipe (2>&1 | head -1): still exit 0", async () => {
    const t = bigLab();
    const r = await pipeThroughHead(t.dir, ["log"], 1, "2>&1");
    expect(r.head).toMatch(/^#\s+decision/);
    expect(r.code).toBe(0);
  });

  it("autolab run | head -3 stops the run like Ctrl-C: nothing lost, the lock released, resumable", async () => {
    // Each trial takes a while, so 30 experiments would run for a long time if nothing stopped them.
    const t = toy({ sleepMs: 300 });
    const r = await pipeThroughHead(t.dir, ["run", "-n", "30"], 3);
    expect(r.head).toMatch(/^Starting run /);
    expect(stackLines(r.stderr)).toEqual([]);
    expect(r.stderr).not.toMatch(/EPIPE|internal error/);
    expect(r.code).toBe(130);

    const db = readLedger(t.dir);
    // It stopped at the first line it could not print: far short of 30 experiments.
    expect(db.experiments.length).toBeLessThan(5);
    // Every trial started has its result; one cut short (if head left while it ran) says why.
    expect(db.trialResults).toHaveLength(db.trialStarts.length);
    const interrupted = db.trialResults.filter((x) => x.status === "interrupted");
    expect(interrupted.length).toBeLessThanOrEqual(1);
    for (const x of interrupted) expect(x.reason).toBe("interrupted: stdout was closed");
    // No lock left behind, and the next run resumes the same tag.
    const tag = db.runs[0]?.tag;
    expect(readdirSync(join(t.dir, ".autolab")).filter((f) => f.endsWith(".lock"))).toEqual([]);
    const again = await runCli(["run", "-n", "2"], { cwd: t.dir });
    expect(again.stderr).toBe("");
    expect(again.code).toBe(0);
    expect(again.stdout).toContain(`Resuming run ${tag}`);
    expect(existsSync(join(t.dir, ".autolab", "lab.db"))).toBe(true);
  });
});
