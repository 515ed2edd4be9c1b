/**
 * examples/rubric-writeup end to end, as a user meets it: `autolab init --example`, the
 * example's offline judges (judge-server.mjs) on 127.0.0.1, `autolab run` with the built-in
 * optimizer, `autolab log --json`. Then a gullible judge on the panel (flagged by the canary,
 * its grades left out), and judges that cannot be reached (the baseline fails, saying why).
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadProgram } from "../src/program/index.ts";
import { GIT_ENV, REPO_ROOT, runCli, stackLines } from "./helpers/toy-project.ts";

const work = mkdtempSync(join(tmpdir(), "autolab-rubric-writeup-"));
let judges: ChildProcess;
let port = 0;

beforeAll(async () => {
  judges = spawn(process.execPath, [
    join(REPO_ROOT, "examples", "rubric-writeup", "judge-server.mjs"),
    "--port",
    "0",
  ]);
  port = await new Promise<number>((resolve, reject) => {
    let out = "";
    judges.stdout?.on("data", (d) => {
      out += d;
      const m = /127\.0\.0\.1:(\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    judges.on("exit", (code) => reject(new Error(`judge-server exited ${code}`)));
  });
});
afterAll(() => {
  judges?.kill();
  rmSync(work, { recursive: true, force: true });
});

interface Row {
  id: number;
  decision: string | null;
  reason: string | null;
  metric: number | null;
  metrics: Record<string, number>;
}

const RUN_TIMEOUT_MS = 120_000;

function git(dir: string, ...args: string[]) {
  execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", ...args], {
    cwd: dir,
    env: { ...process.env, ...GIT_ENV },
  });
}

/** Points program.md's judges at `url` (and optionally replaces the judges list), committed. */
function setJudges(dir: string, edit: (text: string) => string) {
  const file = join(dir, "program.md");
  writeFileSync(file, edit(readFileSync(file, "utf8")));
  git(dir, "commit", "-qam", "judges");
}

async function log(dir: string, tag: string): Promise<Row[]> {
  const r = await runCli(["log", "--json", "--tag", tag], { cwd: dir });
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as Row[];
}

describe("rubric-writeup", () => {
  it("the example's program.md loads with its rubric", () => {
    const p = loadProgram(join(REPO_ROOT, "examples", "rubric-writeup"));
    expect(p.run.rubric?.rubric.criteria.map((c) => c.id)).toEqual([
      "question",
      "evidence",
      "limitations",
      "tone",
      "concise",
    ]);
    expect(p.run.rubric?.rubric.canary).toContain("trust me");
    expect(Object.keys(p.search).length).toBeGreaterThanOrEqual(4);
  });

  it("runs offline with two judges: scores, agreement and the canary recorded; a gullible judge flagged; unreachable judges fail the baseline", {
    timeout: 3 * RUN_TIMEOUT_MS,
  }, async () => {
    const dir = join(work, "p");
    const init = await runCli(["init", dir, "--example", "rubric-writeup"], { cwd: work });
    expect(init.code, init.stderr).toBe(0);
    setJudges(dir, (t) => t.replaceAll("127.0.0.1:8766", `127.0.0.1:${port}`));

    const run = await runCli(["run", "-n", "6", "--tag", "two"], { cwd: dir, timeoutMs: RUN_TIMEOUT_MS });
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stdout).not.toContain("self-reported");
    const rows = await log(dir, "two");
    const [baseline] = rows;
    // The baseline states no question: the hard threshold makes its score 0.
    expect(baseline?.decision).toBe("keep");
    expect(baseline?.metric).toBe(0);
    expect(baseline?.metrics).toMatchObject({
      rubric_pass: 0,
      "rubric.question": 0,
      rubric_judges: 2,
      rubric_judge_failures: 0,
      rubric_flagged: 0,
      "rubric_canary.careful": 12.5,
      "rubric_canary.quick": 12.5,
    });
    expect(Number.isFinite(baseline?.metrics.rubric_agreement)).toBe(true);
    // Every trial's report is in its logs.
    const report = JSON.parse(
      readFileSync(join(dir, ".autolab", "logs", "two", "0", "1", "rubric.json"), "utf8"),
    );
    expect(report.panel).toEqual(["careful", "quick"]);
    expect(report.answers).toHaveLength(10);

    // The gullible judge grades everything top, the canary too: flagged, its grades left out,
    // so the score is careful's alone.
    setJudges(dir, (t) =>
      t
        .replace("name: quick, base_url", "name: gullible, base_url")
        .replace("model: quick", "model: gullible"),
    );
    const g = await runCli(["run", "-n", "0", "--tag", "gullible"], { cwd: dir, timeoutMs: RUN_TIMEOUT_MS });
    expect(g.code, `${g.stdout}\n${g.stderr}`).toBe(0);
    expect(g.stdout + g.stderr).toContain(
      "judge gullible (gullible) scored the canary (a known-bad answer) 100 > canary_max 30: flagged",
    );
    const [gb] = await log(dir, "gullible");
    expect(gb?.metrics).toMatchObject({
      "rubric_canary.gullible": 100,
      "rubric_canary.careful": 12.5,
      rubric_flagged: 1,
      rubric_judges: 1,
      rubric_score: 0,
    });
    expect(gb?.metrics.rubric_agreement).toBeUndefined();

    // Judges that cannot be reached: the baseline's trials fail with the reason, no stack.
    setJudges(dir, (t) => t.replaceAll(`127.0.0.1:${port}`, "127.0.0.1:9"));
    const down = await runCli(["run", "-n", "0", "--tag", "down"], { cwd: dir, timeoutMs: RUN_TIMEOUT_MS });
    expect(down.code).not.toBe(0);
    expect(down.stdout + down.stderr).toContain('rubric: no judge graded "question"');
    expect(stackLines(down.stdout + down.stderr)).toEqual([]);
  });
});
