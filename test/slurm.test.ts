/**
 * The Slurm executor's pure parts (no Slurm needed): program.md's `executor:`, squeue/sacct
 * parsing, what each job state means, `--time`, and the job script (run here by /bin/sh, since
 * it is the script a node would run). The executor against a real Slurm: slurm-executor.test.ts.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { executorFor } from "../src/app/create-run.ts";
import { AutolabError } from "../src/core/errors.ts";
import { parseProgram } from "../src/program/parse.ts";
import { LocalExecutor } from "../src/runner/local-executor.ts";
import { parseSacctLine, parseSqueueLine } from "../src/runner/slurm/cli.ts";
import { jobScript, parseExitStatus, shellQuote } from "../src/runner/slurm/job-script.ts";
import { outcomeOfEnd, phaseOf, slurmTime } from "../src/runner/slurm/states.ts";
import { SlurmExecutor } from "../src/runner/slurm-executor.ts";

const MINIMAL = `---
name: m
objective: { metric: loss, direction: minimize }
run:
  command: python train.py
  budget: 2m
files:
  editable: [train.py]
---
`;
const LINES = MINIMAL.split("\n").length - 1;
const withExtra = (extra: string) => `${MINIMAL.slice(0, -4)}${extra}\n---\n`;

function failure(text: string): AutolabError {
  try {
    parseProgram(text, "lab/program.md");
  } catch (err) {
    expect(err).toBeInstanceOf(AutolabError);
    expect((err as AutolabError).code).toBe("PROGRAM_INVALID");
    return err as AutolabError;
  }
  throw new Error("expected the program to be rejected");
}

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe("program.md executor: { slurm }", () => {
  it("absent: no executor (the local one); `slurm: {}` and a bare `slurm:` take the defaults", () => {
    expect(parseProgram(MINIMAL, "p.md").executor).toBeUndefined();
    const defaults = { slurm: { extraArgs: [], pendingLimitMs: 600_000 } };
    expect(parseProgram(withExtra("executor: { slurm: {} }"), "p.md").executor).toEqual(defaults);
    expect(parseProgram(withExtra("executor:\n  slurm:"), "p.md").executor).toEqual(defaults);
  });

  it("reads every field", () => {
    const p = parseProgram(
      withExtra(
        "executor:\n  slurm: { partition: gpu, gres: 'gpu:1', account: lab, extra_args: [--mem=16G, --qos=high], pending_limit: 90s }",
      ),
      "p.md",
    );
    expect(p.executor).toEqual({
      slurm: {
        partition: "gpu",
        gres: "gpu:1",
        account: "lab",
        extraArgs: ["--mem=16G", "--qos=high"],
        pendingLimitMs: 90_000,
      },
    });
  });

  it("names the field of an unknown key, a wrong type, a reserved or non-option argument, a bad limit", () => {
    const at = (err: AutolabError, field: string) => {
      const line = err.message
        .split("\n")
        .find((l) => l.includes(`lab/program.md:`) && l.includes(`${field}:`));
      expect(line, `no line for ${field} in\n${err.message}`).toBeDefined();
      return line ?? "";
    };
    expect(
      at(failure(withExtra("executor: { slurm: { partiton: gpu } }")), "executor.slurm.partiton"),
    ).toContain('did you mean "partition"');
    expect(at(failure(withExtra("executor: { kubernetes: {} }")), "executor.kubernetes")).toContain(
      "the keys here are: slurm",
    );
    expect(
      at(failure(withExtra("executor: { slurm: { partition: 3 } }")), "executor.slurm.partition"),
    ).toMatch(/expected text, got 3/);
    expect(
      at(failure(withExtra("executor: { slurm: { partition: 'gpu a100' } }")), "executor.slurm.partition"),
    ).toContain("one word");
    expect(
      at(failure(withExtra("executor: { slurm: { extra_args: --mem=1G } }")), "executor.slurm.extra_args"),
    ).toMatch(/array|list/i);
    const reserved = failure(
      withExtra("executor: { slurm: { extra_args: [--time=10, -o, out.log, --mem=1G] } }"),
    );
    expect(reserved.message).toContain(
      'executor.slurm.extra_args[0]: "--time=10" sets --time, which autolab sets itself: autolab sets it to run.budget + grace',
    );
    expect(reserved.message).toContain('executor.slurm.extra_args[1]: "-o" sets --output');
    expect(reserved.message).toContain(
      'executor.slurm.extra_args[2]: "out.log" is not an sbatch option: write each option with its value after = (--mem=16G)',
    );
    expect(reserved.message).not.toContain("extra_args[3]");
    expect(
      at(failure(withExtra("executor: { slurm: { pending_limit: 0s } }")), "executor.slurm.pending_limit"),
    ).toContain("longer than zero");
    expect(failure(withExtra("executor: { slurm: { pending_limit: soon } }")).message).toContain(
      `lab/program.md:${LINES}`,
    );
  });
});

describe("the executor a run gets", () => {
  it("local without executor:, Slurm with it, SLURM_UNAVAILABLE naming the missing tools", () => {
    expect(executorFor(parseProgram(MINIMAL, "p.md"), "/nonexistent")).toBeInstanceOf(LocalExecutor);
    const slurm = parseProgram(withExtra("executor: { slurm: {} }"), "p.md");
    const bin = mkdtempSync(join(tmpdir(), "autolab-slurm-bin-"));
    dirs.push(bin);
    for (const tool of ["sbatch", "squeue", "scancel"])
      writeFileSync(join(bin, tool), "#!/bin/sh\n", { mode: 0o755 });
    expect(executorFor(slurm, bin)).toBeInstanceOf(SlurmExecutor);
    rmSync(join(bin, "scancel"));
    rmSync(join(bin, "squeue"));
    let err: unknown;
    try {
      executorFor(slurm, bin);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(AutolabError);
    expect((err as AutolabError).code).toBe("SLURM_UNAVAILABLE");
    expect((err as AutolabError).message).toBe(
      "program.md's executor.slurm runs each trial as a Slurm job, but squeue, scancel are not on this machine's PATH.",
    );
    expect((err as AutolabError).hint).toContain("remove `executor:` from program.md");
  });
});

describe("squeue and sacct lines", () => {
  it("parses squeue's %i|%T|%r|%P|%N and ignores anything else", () => {
    expect(parseSqueueLine("42|PENDING|BeginTime|debug|")).toEqual({
      id: "42",
      state: "PENDING",
      reason: "BeginTime",
      partition: "debug",
      nodes: "",
    });
    expect(parseSqueueLine("  7|RUNNING|None|gpu|node[01-02]  ")?.nodes).toBe("node[01-02]");
    expect(parseSqueueLine("slurm_load_jobs error: Invalid job id specified")).toBeUndefined();
    expect(parseSqueueLine("x|RUNNING|None|gpu|n1")).toBeUndefined();
    expect(parseSqueueLine("")).toBeUndefined();
  });

  it("parses sacct --parsable2 JobID|State|ExitCode, with 'CANCELLED by <uid>' and a signal", () => {
    expect(parseSacctLine("12|CANCELLED by 0|0:15")).toEqual({
      id: "12",
      state: "CANCELLED",
      exitCode: 0,
      signal: 15,
    });
    expect(parseSacctLine("12|FAILED|3:0")).toEqual({ id: "12", state: "FAILED", exitCode: 3, signal: null });
    expect(parseSacctLine("12.batch|FAILED|3:0")).toBeUndefined();
    expect(parseSacctLine("Slurm accounting storage is disabled")).toBeUndefined();
  });
});

describe("job states", () => {
  it("knows waiting, running and ended states (COMPLETING is still running)", () => {
    for (const s of ["PENDING", "CONFIGURING", "REQUEUED"]) expect(phaseOf(s)).toBe("waiting");
    for (const s of ["RUNNING", "COMPLETING", "SUSPENDED", "STAGE_OUT"]) expect(phaseOf(s)).toBe("running");
    for (const s of [
      "COMPLETED",
      "FAILED",
      "TIMEOUT",
      "CANCELLED",
      "NODE_FAIL",
      "OUT_OF_MEMORY",
      "PREEMPTED",
    ])
      expect(phaseOf(s)).toBe("ended");
  });

  it("maps an end the command did not choose to an outcome naming the state", () => {
    expect(outcomeOfEnd("COMPLETED", "5", "n1")).toBeUndefined();
    expect(outcomeOfEnd("FAILED", "5", "n1")).toBeUndefined();
    expect(outcomeOfEnd("TIMEOUT", "5", "n1")).toEqual({
      status: "timeout",
      reason: "Slurm ended job 5 on n1 at its time limit (state TIMEOUT)",
    });
    expect(outcomeOfEnd("NODE_FAIL", "5", "n1")).toEqual({
      status: "crash",
      reason: "Slurm job 5 on n1 did not finish: its node failed (state NODE_FAIL)",
    });
    expect(outcomeOfEnd("OUT_OF_MEMORY", "5", "")?.reason).toBe(
      "Slurm job 5 did not finish: it ran out of memory (the job's memory limit: --mem in extra_args) (state OUT_OF_MEMORY)",
    );
    expect(outcomeOfEnd("CANCELLED", "5", "n1")?.status).toBe("crash");
    expect(outcomeOfEnd("WEIRD_NEW_STATE", "5", "n1")?.reason).toContain("it ended in state WEIRD_NEW_STATE");
  });

  it("--time is budget + grace as minutes:seconds, rounded up to a whole second", () => {
    expect(slurmTime(5000)).toBe("0:05");
    expect(slurmTime(65_001)).toBe("1:06");
    expect(slurmTime(3_600_000)).toBe("60:00");
    expect(slurmTime(0)).toBe("0:01");
  });
});

describe("the job script", () => {
  it("quotes every word: a command, cwd and env value with quotes, $ and ; are passed as they are", () => {
    const dir = mkdtempSync(join(tmpdir(), "autolab-slurm-script-"));
    dirs.push(dir);
    const cwd = join(dir, "it's a dir");
    const logDir = join(dir, "logs");
    mkdirSync(cwd);
    mkdirSync(logDir);
    const text = jobScript({
      command: `printf '%s|%s|%s\\n' "$AUTOLAB_SEED" "$TRICKY" "$(pwd)"; exit 4`,
      cwd,
      logDir,
      env: { AUTOLAB_SEED: "3", TRICKY: `a'b"c$(touch ${join(dir, "pwned")});d`, AUTOLAB_TRIAL_TOKEN: "tok" },
    });
    const script = join(logDir, "job.sh");
    writeFileSync(script, text);
    const r = spawnSync("/bin/sh", [script], { encoding: "utf8" });
    expect(r.status).toBe(4);
    expect(r.stdout).toBe(`3|a'b"c$(touch ${join(dir, "pwned")});d|${cwd}\n`);
    expect(spawnSync("ls", [dir], { encoding: "utf8" }).stdout).not.toContain("pwned");
    const status = parseExitStatus(readFileSync(join(logDir, "exit-status"), "utf8"));
    expect(status?.exitCode).toBe(4);
    expect(status?.wallS).toBeGreaterThanOrEqual(0);
  });

  it("refuses an env without the trial token or with a name no shell could export", () => {
    const base = { command: "true", cwd: "/", logDir: "/tmp" };
    expect(() => jobScript({ ...base, env: {} })).toThrow(/AUTOLAB_TRIAL_TOKEN/);
    expect(() => jobScript({ ...base, env: { AUTOLAB_TRIAL_TOKEN: "t", "A;B": "x" } })).toThrow(
      /not an environment variable name/,
    );
  });

  it("shellQuote and the exit-status file", () => {
    expect(shellQuote("it's")).toBe(`'it'\\''s'`);
    expect(parseExitStatus("0 1000000000 3500000000\n")).toEqual({ exitCode: 0, wallS: 2.5 });
    expect(parseExitStatus("0 1000")).toBeUndefined();
    expect(parseExitStatus("")).toBeUndefined();
  });
});
