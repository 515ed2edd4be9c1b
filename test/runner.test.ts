import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { TrialSpec } from "../src/core/types.ts";
import { LocalExecutor } from "../src/runner/local-executor.ts";
import { LineSplitter, parseMetricLine } from "../src/runner/metrics.ts";
import { DEADLINE_MARGIN_MS, isAlive, killTree, spawnGroup } from "../src/runner/process-tree.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "autolab-runner-"));
  dirs.push(d);
  return d;
}

function spec(command: string, over: Partial<TrialSpec> = {}): TrialSpec {
  const cwd = over.cwd ?? tempDir();
  return {
    cwd,
    command,
    budgetMs: 10_000,
    graceMs: 1000,
    evaluateTimeoutMs: 10_000,
    seed: 7,
    logDir: join(cwd, "logs"),
    objective: "score",
    ...over,
  };
}

function readPid(dir: string, file: string): number {
  return Number(readFileSync(join(dir, file), "utf8").trim());
}

const executor = new LocalExecutor({ killGraceMs: 500 });
const node = JSON.stringify(process.execPath);

describe("parseMetricLine", () => {
  it("reads autoresearch's `name: value` summary lines", () => {
    expect(parseMetricLine("val_bpb:          0.997900")).toEqual([["val_bpb", 0.9979]]);
    expect(parseMetricLine("peak_vram_mb:     45060.2")).toEqual([["peak_vram_mb", 45060.2]]);
    expect(parseMetricLine("  train.loss/avg: -1.5e-3  ")).toEqual([["train.loss/avg", -0.0015]]);
  });

  it("reads `METRIC name=value`, several per line", () => {
    expect(parseMetricLine("METRIC val_bpb=1.25")).toEqual([["val_bpb", 1.25]]);
    expect(parseMetricLine("METRIC total_µs=15200")).toEqual([["total_µs", 15200]]);
    expect(parseMetricLine("METRIC a=1 b=2e3 junk c=-3")).toEqual([
      ["a", 1],
      ["b", 2000],
      ["c", -3],
    ]);
  });

  it("reads the numeric fields of JSON object lines", () => {
    expect(parseMetricLine('{"val_bpb": 1.2, "step": 3, "name": "x", "ok": true}')).toEqual([
      ["val_bpb", 1.2],
      ["step", 3],
    ]);
    // Python's json.dumps writes bare NaN / Infinity.
    expect(parseMetricLine('{"loss": NaN, "gn": -Infinity, "lr": 0.1}')).toEqual([
      ["loss", Number.NaN],
      ["gn", Number.NEGATIVE_INFINITY],
      ["lr", 0.1],
    ]);
    expect(parseMetricLine("[1, 2]")).toEqual([]);
    expect(parseMetricLine("{not json}")).toEqual([]);
  });

  it("parses non-finite spellings", () => {
    expect(parseMetricLine("loss: nan")).toEqual([["loss", Number.NaN]]);
    expect(parseMetricLine("loss: NaN")).toEqual([["loss", Number.NaN]]);
    expect(parseMetricLine("loss: inf")).toEqual([["loss", Number.POSITIVE_INFINITY]]);
    expect(parseMetricLine("loss: -inf")).toEqual([["loss", Number.NEGATIVE_INFINITY]]);
    expect(parseMetricLine("METRIC loss=Infinity")).toEqual([["loss", Number.POSITIVE_INFINITY]]);
  });

  it("ignores prose with colons and progress lines", () => {
    for (const line of [
      "Loading data: done",
      "step 00100 (12.3%) | loss: 3.2 | lrm: 1.0",
      "Time: 12:30",
      "error: 3 files failed",
      "12: 5",
      "val_bpb: 0.99 (best)",
      "note: nan is bad",
      "",
      "METRIC",
      "METRICS a=1",
    ]) {
      expect(parseMetricLine(line), line).toEqual([]);
    }
  });
});

describe("LineSplitter", () => {
  it("splits on \\n and \\r\\n across chunk boundaries and marks \\r redraws", () => {
    const got: Array<[string, boolean]> = [];
    const s = new LineSplitter((l, r) => got.push([l, r]));
    for (const part of ["a: 1\r", "\nb", ": 2\n10%\r20%\rdone\n", "tail"]) s.push(Buffer.from(part));
    s.end();
    expect(got).toEqual([
      ["a: 1", false],
      ["b: 2", false],
      ["10%", true],
      ["20%", true],
      ["done", false],
      ["tail", false],
    ]);
  });
});

describe("LocalExecutor.runTrial", () => {
  it("runs a command, parses metrics in every format, passes seed, budget and env", async () => {
    const s = spec(
      [
        "echo 'Loading data: done'",
        "echo 'score: 1.0'",
        'echo "METRIC seed=$AUTOLAB_SEED budget=$AUTOLAB_BUDGET_S extra=$MY_VAR"',
        `echo '{"score": 0.5, "step": 3}'`,
        "echo warn >&2",
      ].join("; "),
      { env: { MY_VAR: "42" }, budgetMs: 2500 },
    );
    const r = await executor.runTrial(s);
    expect(r.status).toBe("ok");
    expect(r.reason).toBeUndefined();
    expect(r.metrics).toEqual({ score: 0.5, seed: 7, budget: 2.5, extra: 42, step: 3 });
    expect(r.selfReported).toBe(true);
    expect(r.exitCode).toBe(0);
    expect(r.signal).toBeNull();
    expect(r.seed).toBe(7);
    expect(r.wallS).toBeGreaterThan(0);
    expect(readFileSync(r.stdoutPath, "utf8")).toContain("Loading data: done");
    expect(readFileSync(r.stderrPath, "utf8")).toBe("warn\n");
    expect(r.logTail.split("\n")).toEqual(expect.arrayContaining(["score: 1.0", "warn"]));
  });

  it("streams metrics to onMetric while the command still runs", async () => {
    const dir = tempDir();
    // The command waits for a file that only onMetric creates: it can only succeed if the
    // callback fires before the process exits.
    const s = spec(
      'echo "METRIC progress=1"; for i in $(seq 1 100); do if [ -f go ]; then echo "score: 2"; exit 0; fi; sleep 0.02; done; exit 3',
      {
        cwd: dir,
        onMetric: (name) => {
          if (name === "progress") writeFileSync(join(dir, "go"), "");
        },
      },
    );
    const r = await executor.runTrial(s);
    expect(r.status).toBe("ok");
    expect(r.metrics).toEqual({ progress: 1, score: 2 });
  });

  it("kills a command at budget + grace", async () => {
    const r = await executor.runTrial(spec("sleep 30", { budgetMs: 300, graceMs: 200 }));
    expect(r.status).toBe("timeout");
    expect(r.reason).toContain("exceeded budget 0.3s + grace 0.2s; killed");
    expect(r.wallS).toBeGreaterThanOrEqual(0.45);
  });

  it("a command stops at its deadline even while the harness cannot act (backstop: coreutils timeout)", async () => {
    const dir = tempDir();
    const running = executor.runTrial(
      spec("echo $$ > sh.pid; sleep 30 & echo $! > sleep.pid; wait", {
        cwd: dir,
        budgetMs: 200,
        graceMs: 100,
      }),
    );
    while (!existsSync(join(dir, "sleep.pid"))) await sleep(20);
    await sleep(20);
    const pid = readPid(dir, "sleep.pid");
    // Hold this event loop past budget + grace + the backstop's margin (+ its kill grace): the
    // harness's own timer cannot fire, as if the harness had been stopped or killed.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300 + DEADLINE_MARGIN_MS + 700);
    const goneMeanwhile = !isAlive(pid); // read before any timer of this process ran
    const r = await running;
    expect(goneMeanwhile).toBe(true);
    expect(r.status).toBe("timeout");
    expect(r.reason).toContain("exceeded budget 0.2s + grace 0.1s");
  });

  it("SIGKILLs a tree that ignores SIGTERM, and nothing of it survives", async () => {
    const dir = tempDir();
    const r = await executor.runTrial(
      spec("trap '' TERM; echo $$ > sh.pid; sleep 100 & echo $! > sleep.pid; wait", {
        cwd: dir,
        budgetMs: 300,
        graceMs: 100,
      }),
    );
    expect(r.status).toBe("timeout");
    expect(r.reason).toMatch(/killed \(SIGKILL/);
    expect(r.signal).toBe("SIGKILL");
    expect(isAlive(readPid(dir, "sh.pid"))).toBe(false);
    expect(isAlive(readPid(dir, "sleep.pid"))).toBe(false);
  });

  it("kills descendants that left the process group with setsid, even orphaned ones", async () => {
    const dir = tempDir();
    const r = await executor.runTrial(
      spec(
        [
          // a grandchild in its own session, its parent still alive
          "setsid sh -c 'echo $$ > gc.pid; exec sleep 100' &",
          // a double fork: the setsid process is orphaned to init at once
          "(setsid sh -c 'echo $$ > orphan.pid; exec sleep 100' &)",
          "sleep 100",
        ].join("\n"),
        { cwd: dir, budgetMs: 400, graceMs: 100 },
      ),
    );
    expect(r.status).toBe("timeout");
    for (const f of ["gc.pid", "orphan.pid"]) {
      const pid = readPid(dir, f);
      expect(pid).toBeGreaterThan(1);
      expect(isAlive(pid), f).toBe(false);
    }
  });

  it("kills processes a successful command left behind", async () => {
    const dir = tempDir();
    const r = await executor.runTrial(
      spec("setsid sh -c 'echo $$ > daemon.pid; exec sleep 100' & sleep 0.1; echo 'score: 1'", { cwd: dir }),
    );
    // Not waited for: the leftover is killed as soon as the command exits (its sleep 100 would
    // outlast the test's time limit).
    expect(r.status).toBe("ok");
    expect(isAlive(readPid(dir, "daemon.pid"))).toBe(false);
  });

  it("reports a non-zero exit as a crash with the last stderr line", async () => {
    const r = await executor.runTrial(spec("echo 'score: 1'; echo first >&2; echo 'boom: bad' >&2; exit 3"));
    expect(r.status).toBe("crash");
    expect(r.exitCode).toBe(3);
    expect(r.reason).toBe("exited with code 3: boom: bad");
  });

  it("names the signal behind a shell's 128 + N exit code", async () => {
    const r = await executor.runTrial(spec("sh -c 'kill -9 $$'; exit $?"));
    expect(r.status).toBe("crash");
    expect(r.reason).toMatch(/^exited with code 137 \(= 128 \+ SIGKILL\)/);
  });

  it("rethrows an exception from onMetric: a bug of the caller, not an outcome", async () => {
    const s = spec("echo 'score: 1'", {
      onMetric: () => {
        throw new Error("listener bug");
      },
    });
    await expect(executor.runTrial(s)).rejects.toThrow("listener bug");
  });

  it("reports a command that does not exist", async () => {
    const r = await executor.runTrial(spec("definitely-not-a-command-xyz --flag"));
    expect(r.status).toBe("crash");
    expect(r.exitCode).toBe(127);
    expect(r.reason).toBe("command not found: definitely-not-a-command-xyz");
  });

  it("reports a missing working directory as a crash, without throwing", async () => {
    const dir = tempDir();
    const r = await executor.runTrial(spec("true", { cwd: join(dir, "nope"), logDir: join(dir, "logs") }));
    expect(r.status).toBe("crash");
    expect(r.reason).toContain("working directory does not exist");
  });

  it("reports a missing objective metric", async () => {
    const r = await executor.runTrial(spec("echo 'other: 1'"));
    expect(r.status).toBe("missing_metric");
    expect(r.reason).toContain("objective metric score was not found on the command's stdout");
    expect(r.metrics).toEqual({ other: 1 });
  });

  it("reports a non-finite objective metric", async () => {
    const r = await executor.runTrial(spec("echo 'score: 1'; echo 'score: nan'"));
    expect(r.status).toBe("nonfinite_metric");
    expect(r.reason).toBe("objective metric score is NaN");
    expect(r.metrics.score).toBeNaN();
  });

  it("takes metrics from the evaluate step over the command's, and keeps evaluate output out of the tail", async () => {
    const r = await executor.runTrial(
      spec("echo 'score: 1'; echo 'train_loss: 2'", {
        evaluate: "echo 'score: 5'; echo 'test_score: 3'; echo secret-internals",
      }),
    );
    expect(r.status).toBe("ok");
    expect(r.selfReported).toBe(false);
    expect(r.metrics).toEqual({ score: 5, train_loss: 2, test_score: 3 });
    expect(readFileSync(join(r.stdoutPath, "..", "evaluate.stdout.log"), "utf8")).toContain("score: 5");
    expect(r.logTail).not.toContain("secret-internals");
    expect(r.logTail).not.toContain("test_score");
  });

  it("does not accept a self-reported objective when an evaluate step exists", async () => {
    const r = await executor.runTrial(spec("echo 'score: 1'", { evaluate: "echo 'other: 5'" }));
    expect(r.status).toBe("missing_metric");
    expect(r.reason).toContain("evaluate step");
    expect(r.metrics).toEqual({ other: 5 });
  });

  it("reports a failing evaluate step as a crash without quoting it", async () => {
    const r = await executor.runTrial(spec("echo 'score: 1'", { evaluate: "echo holdout-leak >&2; exit 2" }));
    expect(r.status).toBe("crash");
    expect(r.reason).toBe("evaluate step failed: exited with code 2 (see evaluate.stderr.log)");
    expect(r.exitCode).toBe(0);
  });

  it("stops at a tampered protected file and does not evaluate", async () => {
    const dir = tempDir();
    const r = await executor.runTrial(
      spec("echo 'score: 1'", {
        cwd: dir,
        evaluate: "touch evaluated; echo 'score: 2'",
        beforeEvaluate: async () => ({ status: "tampered", reason: "evaluate.ts changed (sha256 mismatch)" }),
      }),
    );
    expect(r.status).toBe("tampered");
    expect(r.reason).toBe("evaluate.ts changed (sha256 mismatch)");
    expect(existsSync(join(dir, "evaluated"))).toBe(false);
  });

  it("caps logs, keeping the head and the tail", async () => {
    // `seq 1 3000000` prints about 21 MB.
    const r = await executor.runTrial(spec("seq 1 3000000; echo 'score: 1'; echo TAIL_MARKER"));
    expect(r.status).toBe("ok");
    expect(statSync(r.stdoutPath).size).toBeLessThanOrEqual(5 * 1024 * 1024);
    const text = readFileSync(r.stdoutPath, "utf8");
    expect(text.startsWith("1\n2\n3\n")).toBe(true);
    expect(text.endsWith("2999999\n3000000\nscore: 1\nTAIL_MARKER\n")).toBe(true);
    expect(text).toMatch(/\n\[autolab: \d+ bytes elided\]\n/);
    expect(r.logTail.endsWith("score: 1\nTAIL_MARKER")).toBe(true);
  });

  it("measures the peak RSS and CPU of the tree", async () => {
    const js =
      "const b = Buffer.alloc(100 * 1024 * 1024, 1); setTimeout(() => console.log('score: ' + b[7]), 500)";
    const r = await executor.runTrial(spec(`${node} -e "${js}"`));
    expect(r.status).toBe("ok");
    expect(r.peakRssMb).toBeGreaterThan(90);
    expect(r.cpuS).toBeGreaterThan(0);
  });

  it("stops on abort with status interrupted", async () => {
    const ac = new AbortController();
    setTimeout(() => ac.abort("operator pressed Ctrl-C"), 200);
    const dir = tempDir();
    const r = await executor.runTrial(spec("echo $$ > sh.pid; sleep 30", { cwd: dir, signal: ac.signal }));
    expect(r.status).toBe("interrupted");
    expect(r.reason).toBe("interrupted: operator pressed Ctrl-C");
    expect(isAlive(readPid(dir, "sh.pid"))).toBe(false);

    const pre = await executor.runTrial(spec("touch ran", { signal: AbortSignal.abort() }));
    expect(pre.status).toBe("interrupted");
  });
});

describe("LocalExecutor.setup", () => {
  it("runs setup with its own logs and time limit", async () => {
    const dir = tempDir();
    const ok = await executor.setup(dir, "echo prepared > data.txt; echo done", 5000, join(dir, "logs"));
    expect(ok.status).toBe("ok");
    expect(readFileSync(join(dir, "logs", "setup.stdout.log"), "utf8")).toBe("done\n");
    const bad = await executor.setup(dir, "exit 4", 5000, join(dir, "logs"));
    expect(bad.status).toBe("crash");
    expect(bad.reason).toBe("setup failed: exited with code 4 (no stderr output)");
    const slow = await executor.setup(dir, "sleep 30", 200, join(dir, "logs"));
    expect(slow.status).toBe("timeout");
  });
});

describe("killTree", () => {
  it("kills a process group and its setsid descendants", async () => {
    const dir = tempDir();
    const child = spawnGroup(
      "setsid sh -c 'echo $$ > gc.pid; exec sleep 100' & echo $$ > sh.pid; sleep 100",
      {
        cwd: dir,
        env: process.env,
      },
    );
    const pid = child.pid as number;
    const gone = new Promise((resolve) => child.once("exit", resolve));
    while (!existsSync(join(dir, "gc.pid")) || !existsSync(join(dir, "sh.pid"))) await sleep(10);
    await sleep(20);
    const report = await killTree(pid, { graceMs: 300 });
    await gone;
    expect(report.terminated).toBeGreaterThanOrEqual(3);
    expect(isAlive(readPid(dir, "gc.pid"))).toBe(false);
    expect(isAlive(pid)).toBe(false);
  });
});

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
