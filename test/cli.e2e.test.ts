/**
 * End-to-end: the real `autolab` CLI, run as a process against toy projects in temporary git
 * repositories. What a user sees (exit codes, messages, JSON shapes) and what the harness
 * promises (ratchet branch, holdouts hidden, protected files restored) are checked from the
 * outside.
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { appendExperiment, type FixtureExperiment, writeRun } from "./helpers/notebook-fixture.ts";
import {
  git,
  REPO_ROOT,
  runCli,
  stackLines,
  TOY_HOLDOUT,
  type ToyProject,
  toysOfFile,
} from "./helpers/toy-project.ts";

const { toy, removeLater } = toysOfFile();

interface LogRow {
  id: number;
  hypothesis: string;
  commit: string;
  parent: string;
  ref: string;
  decision: string;
  reason: string | null;
  metric: number | null;
  metrics: Record<string, number>;
  trials: { attempt: number; status: string; reason: string | null }[];
}

async function json<T>(args: string[], cwd: string): Promise<T> {
  const r = await runCli(args, { cwd });
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as T;
}

/** An expected failure: exit 1, a message (and fix) on stderr, no stack trace, nothing on stdout's error path. */
function expectUserError(r: { code: number | null; stderr: string }): void {
  expect(r.code, r.stderr).toBe(1);
  expect(r.stderr).toMatch(/^autolab: /m);
  expect(stackLines(r.stderr)).toEqual([]);
  expect(r.stderr).not.toMatch(/internal error/);
}

/** The `status --json` example of docs/cli.md. */
function documentedStatus(): unknown {
  const doc = readFileSync(join(REPO_ROOT, "docs", "cli.md"), "utf8");
  const m = /## `status --json`\s+```json\n([\s\S]*?)```/.exec(doc);
  if (!m?.[1]) throw new Error("docs/cli.md has no `status --json` example");
  return JSON.parse(m[1]);
}

/** Key structure of a JSON value: objects become sorted key → shape, everything else its kind. */
function shapeOf(v: unknown): unknown {
  if (v === null || typeof v !== "object") return "value";
  if (Array.isArray(v)) return "array";
  return Object.fromEntries(
    Object.keys(v)
      .sort()
      .map((k) => [k, shapeOf((v as Record<string, unknown>)[k])]),
  );
}

const HOLDOUT_TEXT = String(TOY_HOLDOUT).slice(0, 6); // "4242.4"

describe("a run of the toy project (protected evaluate step, holdout metric)", () => {
  let t: ToyProject;
  let tag: string;
  let firstRows: LogRow[];

  beforeAll(async () => {
    t = toy({ evaluate: true });
    const r = await runCli(["run", "-n", "4"], { cwd: t.dir });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/stopped: reached --max-experiments 4/);
  });

  it("status --json: the documented shape, with consistent numbers", async () => {
    const s = await json<Record<string, unknown>>(["status", "--json"], t.dir);
    // Exactly the fields docs/cli.md documents (fields are added there first, never renamed).
    expect(shapeOf(s)).toEqual(shapeOf(documentedStatus()));
    const status = s as {
      tag: string;
      branch: string;
      metric: string;
      direction: string;
      baseline: { id: number; metric: number };
      best: { id: number; metric: number; commit: string; hypothesis: string };
      improvement: { absolute: number; relative: number };
      counts: {
        total: number;
        kept: number;
        discarded: number;
        crashed: number;
        rejected: number;
        pending: number;
      };
      selfReported: boolean;
    };
    tag = status.tag;
    expect(tag).toMatch(/^[a-z]{3}\d{1,2}$/);
    expect(status.branch).toBe(`autolab/${tag}`);
    expect(status.metric).toBe("score");
    expect(status.direction).toBe("minimize");
    expect(Object.keys(status.baseline).sort()).toEqual(["id", "metric"]);
    expect(Object.keys(status.best)).toEqual(expect.arrayContaining(["id", "metric", "commit"]));
    expect(Object.keys(status.counts)).toEqual(
      expect.arrayContaining(["total", "kept", "discarded", "crashed", "rejected"]),
    );
    expect(status.baseline.id).toBe(0);
    expect(Number.isFinite(status.baseline.metric)).toBe(true);
    const c = status.counts;
    expect(c.total).toBe(5);
    expect(c.pending).toBe(0);
    expect(c.kept + c.discarded + c.crashed + c.rejected).toBe(c.total);
    expect(c.kept).toBeGreaterThanOrEqual(1); // the baseline
    expect(status.best.metric).toBeLessThanOrEqual(status.baseline.metric);
    expect(status.best.commit).toBe(t.git(["rev-parse", `autolab/${tag}`]).trim());
    expect(status.improvement.absolute).toBeCloseTo(status.best.metric - status.baseline.metric, 12);
    // The score comes from the protected evaluate step, so it is not self-reported.
    expect(status.selfReported).toBe(false);
  });

  it("log --json: one row per experiment, each with a decision and a reason", async () => {
    const rows = await json<LogRow[]>(["log", "--json"], t.dir);
    firstRows = rows;
    expect(rows.map((r) => r.id)).toEqual([0, 1, 2, 3, 4]);
    for (const r of rows) {
      expect(["keep", "discard", "crash", "reject"]).toContain(r.decision);
      expect(r.reason).toEqual(expect.any(String));
      expect(r.reason?.length).toBeGreaterThan(0);
      expect(r.ref).toBe(`refs/autolab/${tag}/${r.id}`);
      expect(t.git(["rev-parse", r.ref]).trim()).toBe(r.commit);
    }
    expect(rows[0]?.decision).toBe("keep");
    expect(rows[0]?.reason).toBe("baseline");
    // The ratchet: the branch is the last kept experiment.
    const lastKept = rows.filter((r) => r.decision === "keep").at(-1);
    expect(t.git(["rev-parse", `autolab/${tag}`]).trim()).toBe(lastKept?.commit);
  });

  it("log --json hides holdout metrics unless --holdout", async () => {
    const hidden = await runCli(["log", "--json"], { cwd: t.dir });
    expect(hidden.stdout).not.toContain("secret_holdout");
    expect(hidden.stdout).not.toContain(HOLDOUT_TEXT);
    const rows = await json<LogRow[]>(["log", "--json", "--holdout"], t.dir);
    expect(rows[0]?.metrics.secret_holdout).toBe(TOY_HOLDOUT);
    expect(rows[0]?.metrics.score).toBe(rows[0]?.metric);
  });

  it("show 1 prints the hypothesis and the diff, without holdout metrics", async () => {
    const row = firstRows[1] as LogRow;
    const r = await runCli(["show", "1"], { cwd: t.dir });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`Hypothesis: ${row.hypothesis}`);
    expect(r.stdout).toContain(`Decision:   ${row.decision} — ${row.reason}`);
    expect(r.stdout).toContain("diff --git a/train.mjs b/train.mjs");
    expect(r.stdout).toMatch(/^-const (LR|WIDTH) = /m);
    expect(r.stdout).toMatch(/^\+const (LR|WIDTH) = /m);
    expect(r.stdout).not.toContain("secret_holdout");
    const shown = await json<LogRow & { diffText: string }>(["show", "1", "--json"], t.dir);
    expect(shown.id).toBe(1);
    expect(shown.diffText).toContain("+++ b/train.mjs");
    expect(shown.metrics).not.toHaveProperty("secret_holdout");
  });

  it("context shows the best and the recent experiments, never a holdout metric", async () => {
    const r = await runCli(["context"], { cwd: t.dir });
    expect(r.code).toBe(0);
    const best = firstRows.filter((x) => x.decision === "keep").at(-1) as LogRow;
    expect(r.stdout).toContain(`Best: #${best.id} score = `);
    expect(r.stdout).toContain("## Recent experiments");
    for (const row of firstRows) expect(r.stdout).toContain(`#${row.id} ${row.hypothesis.split("\n")[0]}`);
    expect(r.stdout).toContain("Tune LR and WIDTH"); // the research directions
    expect(r.stdout).not.toContain("secret_holdout");
    expect(r.stdout).not.toContain(HOLDOUT_TEXT);
    const f = await runCli(["failures"], { cwd: t.dir });
    expect(f.code).toBe(0);
    expect(f.stdout).not.toContain("secret_holdout");
  });

  it("export prints autoresearch's results.tsv", async () => {
    const r = await runCli(["export"], { cwd: t.dir });
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split("\n");
    // No trial printed memory_gb or peak_vram_mb: no memory_gb column is made up (issue #36).
    expect(lines[0]).toBe("commit\tscore\tstatus\tdescription");
    expect(lines).toHaveLength(6);
    lines.slice(1).forEach((line, i) => {
      const row = firstRows[i] as LogRow;
      const cols = line.split("\t");
      expect(cols).toHaveLength(4);
      expect(cols[0]).toBe(row.commit.slice(0, 7));
      expect(cols[1]).toMatch(/^\d+\.\d{6}$/);
      expect(["keep", "discard", "crash"]).toContain(cols[2]);
      expect(cols[3]).toBe(i === 0 ? "baseline" : row.hypothesis);
    });
    expect(r.stdout).not.toContain(HOLDOUT_TEXT);
  });

  it("a second run resumes the same tag and adds exactly the missing experiments", async () => {
    const r = await runCli(["run", "-n", "6"], { cwd: t.dir });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`Resuming run ${tag} (5 experiments so far)`);
    const rows = await json<LogRow[]>(["log", "--json"], t.dir);
    expect(rows.map((x) => x.id)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    // The first five are untouched.
    expect(rows.slice(0, 5).map((x) => [x.commit, x.decision, x.reason])).toEqual(
      firstRows.map((x) => [x.commit, x.decision, x.reason]),
    );
    const s = await json<{ tag: string; counts: { total: number } }>(["status", "--json"], t.dir);
    expect(s.tag).toBe(tag);
    expect(s.counts.total).toBe(7);
    const branches = t.git(["for-each-ref", "--format=%(refname:short)", "refs/heads/autolab/"]);
    expect(branches.trim().split("\n")).toEqual([`autolab/${tag}`]);
  });

  it("--max-trials counts the run's trials so far: two more, then it stops and says why", async () => {
    const before = await json<LogRow[]>(["log", "--json"], t.dir);
    const used = before.reduce((a, r) => a + r.trials.length, 0);
    const r = await runCli(["run", "--max-trials", String(used + 2)], { cwd: t.dir });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`stopped: reached --max-trials ${used + 2}`));
    const after = await json<LogRow[]>(["log", "--json"], t.dir);
    expect(after.reduce((a, x) => a + x.trials.length, 0)).toBe(used + 2);
    expect(after.every((x) => x.decision)).toBe(true);
    // Bad values are refused before anything runs: no trials at all, and a time that is not one.
    const zero = await runCli(["run", "--max-trials", "0"], { cwd: t.dir });
    expectUserError(zero);
    expect(zero.stderr).toMatch(/--max-trials 0 leaves no trial for a candidate/);
    const time = await runCli(["run", "--max-time", "soon"], { cwd: t.dir });
    expect(time.code).toBe(2);
    expect(time.stderr).toMatch(/--max-time/);
  });
});

describe("trials that fail", () => {
  // Invocation 0 is the baseline; then a crash, a trial that outlives its budget, and one that
  // rewrites the protected evaluator while it runs.
  let t: ToyProject;
  let rows: LogRow[];
  let out: string;

  beforeAll(async () => {
    t = toy({ evaluate: true, budget: "1500ms", grace: "200ms", plan: ["ok", "crash", "hang", "tamper"] });
    const r = await runCli(["run", "-n", "4"], { cwd: t.dir });
    out = r.stdout;
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    rows = await json<LogRow[]>(["log", "--json"], t.dir);
  });

  it("a crashed trial is recorded as crash and the run continues", () => {
    expect(rows.map((r) => r.id)).toEqual([0, 1, 2, 3, 4]);
    const crashed = rows.filter((r) => r.decision === "crash" && r.reason?.includes("simulated crash"));
    expect(crashed).toHaveLength(1);
    expect(crashed[0]?.reason).toMatch(/exited with code 3/);
    expect(crashed[0]?.reason).toContain("simulated crash");
    // Later experiments ran and were decided.
    expect(rows.filter((r) => r.id > (crashed[0]?.id ?? 0)).every((r) => r.decision !== "pending")).toBe(
      true,
    );
    expect(out).toMatch(/#\d crash /);
  });

  it("a trial beyond budget + grace is rejected with a timeout reason", () => {
    const timedOut = rows.filter((r) => r.reason?.startsWith("timeout"));
    expect(timedOut).toHaveLength(1);
    expect(timedOut[0]?.decision).toBe("reject");
    expect(timedOut[0]?.reason).toMatch(/budget 1\.5s \+ grace 0\.2s/);
    expect(timedOut[0]?.trials.at(-1)?.status).toBe("timeout");
  });

  it("a trial that rewrites the protected evaluator cannot: the file is read-only in its sandbox", async () => {
    // The 4th invocation (experiment #3) is the one that writes evaluate.mjs.
    const tampered = rows.filter((r) => r.id === 3);
    expect(tampered[0]?.decision).toBe("crash");
    const f = await runCli(["failures"], { cwd: t.dir });
    expect(f.stdout).toMatch(/#3 crash[\s\S]*path: 'evaluate.mjs'/);
    // The fake evaluator's perfect score never became the best.
    const s = await json<{ best: { metric: number } }>(["status", "--json"], t.dir);
    expect(s.best.metric).toBeGreaterThan(0);
    const tag = (await json<{ tag: string }>(["status", "--json"], t.dir)).tag;
    const wt = join(t.dir, ".autolab", "worktrees", tag);
    expect(readFileSync(join(wt, "evaluate.mjs"), "utf8")).toBe(
      readFileSync(join(t.dir, "evaluate.mjs"), "utf8"),
    );
    expect(git(wt, ["status", "--porcelain", "--untracked-files=no"])).toBe("");
    // The last (4th) candidate ran after the tampering with the pristine evaluator.
    expect(rows[4]?.trials.at(-1)?.status).toBe("ok");
  });

  it("failures lists the crash and the rejections with their reasons", async () => {
    const r = await runCli(["failures"], { cwd: t.dir });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/crash: /);
    expect(r.stdout).toMatch(/reason: timeout/);
    expect(r.stdout).toMatch(/#3 crash/);
    expect(r.stdout).toContain("simulated crash");
  });
});

describe("init", () => {
  it("creates program.md in a new git repository with a first commit", async () => {
    const parent = mkdtempSync(join(tmpdir(), "autolab-init-"));
    removeLater(parent);
    const dir = join(parent, "fresh");
    const r = await runCli(["init", dir], { cwd: parent });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("program.md");
    expect(existsSync(join(dir, "program.md"))).toBe(true);
    expect(git(dir, ["ls-files"]).split("\n")).toContain("program.md");
    expect(git(dir, ["log", "--oneline"]).trim().split("\n")).toHaveLength(1);
    expect(git(dir, ["status", "--porcelain"])).toBe("");
    // Not twice.
    const again = await runCli(["init", dir], { cwd: parent });
    expectUserError(again);
    expect(again.stderr).toContain("already exists");
  });
});

describe("bad input: exit 1 with a message, never a stack trace", () => {
  it("no program.md points at `autolab init`", async () => {
    const dir = mkdtempSync(join(tmpdir(), "autolab-empty-"));
    removeLater(dir);
    const r = await runCli(["run"], { cwd: dir });
    expectUserError(r);
    expect(r.stderr).toContain("autolab init");
  });

  it("malformed frontmatter names the file and the line", async () => {
    const t = toy();
    const broken = readFileSync(join(t.dir, "program.md"), "utf8").replace(
      "objective: { metric: score, direction: minimize }",
      "objective: { metric: score, direction: minimize",
    );
    writeFileSync(join(t.dir, "program.md"), broken);
    const r = await runCli(["run"], { cwd: t.dir });
    expectUserError(r);
    expect(r.stderr).toMatch(/program\.md:\d+/);

    const misspelt = readFileSync(join(t.dir, "program.md"), "utf8")
      .replace("direction: minimize\n", "direction: minimize }\n")
      .replace("  budget: 5s", "  budgett: 5s");
    writeFileSync(join(t.dir, "program.md"), misspelt);
    const r2 = await runCli(["run"], { cwd: t.dir });
    expectUserError(r2);
    const line = misspelt.split("\n").findIndex((l) => l.includes("budgett")) + 1;
    expect(r2.stderr).toContain(`program.md:${line}`);
    expect(r2.stderr).toContain("budgett");
  });

  it("a directory that is not a git repository", async () => {
    const t = toy({ noGit: true });
    const r = await runCli(["run"], { cwd: t.dir });
    expectUserError(r);
    expect(r.stderr).toMatch(/not inside a git repository/);
  });

  it("an uncommitted change to an editable file mentions --allow-dirty", async () => {
    const t = toy();
    writeFileSync(join(t.dir, "train.mjs"), `${readFileSync(join(t.dir, "train.mjs"), "utf8")}// wip\n`);
    const r = await runCli(["run", "-n", "1"], { cwd: t.dir });
    expectUserError(r);
    expect(r.stderr).toContain("train.mjs");
    expect(r.stderr).toContain("--allow-dirty");
    expect(t.git(["branch", "--list", "autolab/*"])).toBe("");
  });

  it("a command that does not exist fails the baseline with a message naming it", async () => {
    const t = toy({ command: "definitely-not-a-command-7f3a" });
    const r = await runCli(["run", "-n", "2"], { cwd: t.dir });
    expectUserError(r);
    expect(r.stderr).toContain("baseline");
    expect(r.stderr).toContain("command not found: definitely-not-a-command-7f3a");
    // Only the baseline was tried.
    const rows = await json<LogRow[]>(["log", "--json"], t.dir);
    expect(rows.map((x) => [x.id, x.decision])).toEqual([[0, "crash"]]);
  });

  it("an unknown --agent, before anything is created", async () => {
    const t = toy();
    const r = await runCli(["run", "-n", "1", "--agent", "no-such-agent"], { cwd: t.dir });
    expectUserError(r);
    expect(r.stderr).toContain('unknown agent "no-such-agent"');
    expect(r.stderr).toContain("builtin");
    // No run, branch or worktree was left behind by the refused invocation.
    expect(t.git(["branch", "--list", "autolab/*"])).toBe("");
    expect(existsSync(join(t.dir, ".autolab", "worktrees"))).toBe(false);
  });

  it("an unknown agent in program.md", async () => {
    const t = toy({ agent: "no-such-agent" });
    const r = await runCli(["run", "-n", "1"], { cwd: t.dir });
    expectUserError(r);
    expect(r.stderr).toMatch(
      /program\.md:\d+ +agent\.backend: "no-such-agent" is not one of builtin, claude/,
    );
  });

  it("views before any run, and a bad experiment number", async () => {
    const t = toy();
    const r = await runCli(["status"], { cwd: t.dir });
    expectUserError(r);
    expect(r.stderr).toContain("autolab run");
    const r2 = await runCli(["show", "abc"], { cwd: t.dir });
    expectUserError(r2);
  });
});

describe("status of an organization", () => {
  it("prints a credit table per role and the slots of the latest session", async () => {
    const dir = mkdtempSync(join(tmpdir(), "autolab-org-status-"));
    removeLater(dir);
    const path = join(dir, ".autolab", "lab.db");
    const ledger = new SqliteLedger(path);
    try {
      const run = writeRun(ledger, { tag: "org", experiments: [] });
      ledger.startSession(run.id, 2);
      const exps: FixtureExperiment[] = [
        { action: "keep", metric: 3.0, slot: 0, wallS: 10 },
        { action: "keep", metric: 2.8, role: "tuner", slot: 0, wallS: 60 },
        { action: "discard", metric: 3.1, role: "explorer", slot: 1, wallS: 30 },
        { action: "keep", metric: 2.7, role: "explorer", slot: 1, wallS: 90 },
        { action: "running", role: "tuner", slot: 1, hypothesis: "warmup 200" },
      ];
      exps.forEach((x, n) => {
        appendExperiment(ledger, run, n, x);
      });
    } finally {
      ledger.close();
    }
    const r = await runCli(["status"], { cwd: dir });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const lines = r.stdout.split("\n");
    const at = lines.indexOf("Roles:");
    expect(at).toBeGreaterThan(0);
    expect(lines[at + 1]).toMatch(/^ {2}role +proposals +kept +improvement +compute +value\/h +share$/);
    expect(lines[at + 2]).toMatch(/^ {2}tuner +2 +1 +0\.2 +1m00s +12 +50%$/);
    expect(lines[at + 3]).toMatch(/^ {2}explorer +2 +1 +0\.1 +2m00s +3 +50%$/);
    // No harness holds the lock: the last session, its open trial cut short.
    expect(r.stdout).toMatch(/^slots: 2 · utilization \d+\.\d% \(busy \S+ of 2 × \S+ last session\)$/m);
    expect(r.stdout).toMatch(/^ {2}slot 0: idle {2}\(2 trials, \d+% busy\)$/m);
    expect(r.stdout).toMatch(/^ {2}slot 1: cut short: #4 \[tuner\] warmup 200 {2}\(3 trials, \d+% busy\)$/m);

    const s = await json<{ roles: { role: string }[]; slots: { count: number; live: boolean } }>(
      ["status", "--json"],
      dir,
    );
    expect(s.roles.map((x) => x.role)).toEqual(["tuner", "explorer"]);
    expect(s.slots).toMatchObject({ count: 2, live: false });
  });
});
