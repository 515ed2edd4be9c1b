/**
 * End-to-end: `autolab init --from autoresearch | pi-autoresearch` with the real CLI on fixture
 * checkouts in temporary git repositories, then a real run — the imported history shows in
 * status, context, export and the report, and never stands in for autolab's own baseline or
 * best. Export back (`--format log-jsonl`) re-imports into a pi-autoresearch session.
 */
import { cpSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createRun } from "../src/app/create-run.ts";
import { onPath } from "../src/app/migrate/import.ts";
import { cleanupTemp, gitSync, tempDir } from "./helpers/git-project.ts";
import { REPO_ROOT, runCli, stackLines } from "./helpers/toy-project.ts";

const FIXTURES = join(REPO_ROOT, "test", "fixtures", "migrate");

afterAll(cleanupTemp);

/** A tiny train.py in autoresearch's shape: prints the summary block in well under a second. */
const TINY_TRAIN = `from prepare import TIME_BUDGET, evaluate_bpb

LEARNING_RATE = 0.01
DEPTH = 4

loss = 0.69 + abs(LEARNING_RATE - 0.02) + 0.001 * DEPTH
print("---")
print(f"val_bpb:          {evaluate_bpb(loss):.6f}")
print(f"peak_vram_mb:     {1234.5:.1f}")
`;

/** A fixture checkout copied into a new git repository with results.tsv untracked (as upstream's .gitignore has it). */
function checkout(fixture: string, edit: (dir: string) => void = () => {}): string {
  const dir = tempDir("autolab-migrate-");
  cpSync(join(FIXTURES, fixture), dir, { recursive: true });
  edit(dir);
  writeFileSync(join(dir, ".gitignore"), "results.tsv\n");
  gitSync(dir, "init", "-q", "-b", "master");
  gitSync(dir, "add", "-A");
  gitSync(dir, "commit", "-q", "-m", "upstream");
  return dir;
}

const read = (dir: string, f: string) => readFileSync(join(dir, f), "utf8");

function expectCleanError(r: { code: number | null; stderr: string }, code: number, pattern: RegExp): void {
  expect(r.code).toBe(code);
  expect(r.stderr).toMatch(pattern);
  expect(stackLines(r.stderr)).toEqual([]);
}

describe("autolab init --from autoresearch, then autolab run", () => {
  // The tiny train.py needs python3; the command falls back to it only where uv is absent.
  it.skipIf(onPath("uv") || !onPath("python3"))(
    "imports results.tsv as prior history that every surface labels, and the run measures its own baseline",
    async () => {
      const dir = checkout("autoresearch-upstream", (d) => {
        writeFileSync(join(d, "train.py"), TINY_TRAIN);
        writeFileSync(
          join(d, "prepare.py"),
          read(d, "prepare.py").replace("TIME_BUDGET = 300", "TIME_BUDGET = 20"),
        );
      });
      const before = Object.fromEntries(
        ["program.md", "results.tsv", "train.py", "prepare.py"].map((f) => [f, read(dir, f)]),
      );
      const head = gitSync(dir, "rev-parse", "HEAD");

      const init = await runCli(["init", "--from", "autoresearch"], { cwd: dir });
      expect(init.stderr).toBe("");
      expect(init.code).toBe(0);
      expect(init.stdout).toMatch(/Imported an autoresearch project/);
      expect(init.stdout).toMatch(/history {5}4 results from results\.tsv \(before autolab, not re-measured/);
      expect(init.stdout).toMatch(/uv is not installed here: the command is "python3 train\.py"/);
      expect(init.stdout).toMatch(/Committed program\.md\./);

      // program.md gained frontmatter above its text, verbatim; nothing else of the user's changed.
      const program = read(dir, "program.md");
      expect(program.startsWith("---\n")).toBe(true);
      expect(program.endsWith(before["program.md"] as string)).toBe(true);
      expect(program).toMatch(/command: "python3 train\.py"/);
      for (const f of ["results.tsv", "train.py", "prepare.py"]) expect(read(dir, f), f).toBe(before[f]);
      // One commit on top, with program.md only; results.tsv stays untracked and ignored.
      expect(gitSync(dir, "rev-parse", "HEAD~1")).toBe(head);
      expect(gitSync(dir, "show", "--name-only", "--format=", "HEAD")).toBe("program.md");
      expect(gitSync(dir, "status", "--porcelain")).toBe("");
      expect(gitSync(dir, "ls-files")).not.toMatch(/results\.tsv/);

      // Before the first run: status and context show the prior history.
      const s0 = await runCli(["status"], { cwd: dir });
      expect(s0.code).toBe(0);
      expect(s0.stdout).toMatch(/No run yet/);
      expect(s0.stdout).toMatch(
        /Prior history: 4 results imported from autoresearch:results\.tsv — before autolab, not re-measured \(2 keep, 1 discard, 1 crash\); last kept there: val_bpb 0\.9932 \(b2c3d4e\)/,
      );

      const run = await runCli(["run", "--max-experiments", "1"], { cwd: dir, timeoutMs: 120_000 });
      expect(run.stderr).toBe("");
      expect(run.code).toBe(0);

      const status = await runCli(["status", "--json"], { cwd: dir });
      const s = JSON.parse(status.stdout);
      // The baseline and the best are autolab's measurements (1.0157…), not the claimed 0.9932.
      expect(s.baseline.id).toBe(0);
      expect(s.baseline.metric).toBeGreaterThan(1);
      expect(s.best.id).toBe(0);
      expect(s.counts.total).toBe(2);
      expect(s.imported).toMatchObject({
        note: "before autolab, not re-measured",
        count: 4,
        sources: ["autoresearch:results.tsv"],
        lastKept: { metric: 0.9932, commit: "b2c3d4e" },
      });
      const text = await runCli(["status"], { cwd: dir });
      expect(text.stdout).toMatch(/Baseline: 1\.01/);
      expect(text.stdout).toMatch(
        /Prior history: 4 results imported from autoresearch:results\.tsv — before autolab, not re-measured/,
      );

      // The agent's context (the same text `autolab context` prints).
      const ctx = await runCli(["context"], { cwd: dir });
      expect(ctx.stdout).toMatch(
        /## Prior history \(before autolab, not re-measured: 4 results from autoresearch:results\.tsv\)/,
      );
      expect(ctx.stdout).toMatch(/- increase LR to 0\.04 → keep val_bpb=0\.9932 \(commit b2c3d4e\)/);
      expect(ctx.stdout).toMatch(/Best: #0 val_bpb = 1\.01/);

      // results.tsv export holds the run's own experiments only: the claims are not re-exported as measurements.
      const tsv = await runCli(["export", "--format", "results-tsv"], { cwd: dir });
      const rows = tsv.stdout.trim().split("\n");
      expect(rows[0]).toBe("commit\tval_bpb\tmemory_gb\tstatus\tdescription");
      expect(rows).toHaveLength(3);
      // memory_gb is what train.py printed (peak_vram_mb 1234.5 → 1.2 GB), not the process's RAM.
      expect(rows[1]?.split("\t")[2]).toBe("1.2");
      expect(tsv.stdout).not.toMatch(/a1b2c3d|b2c3d4e/);

      const report = await runCli(["report"], { cwd: dir });
      expect(report.code).toBe(0);
      const svg = read(dir, ".autolab/reports/".concat(s.tag, "/progress.svg"));
      expect(svg.match(/class="prior-pt /g)).toHaveLength(4);
      expect(svg.match(/class="pt /g)).toHaveLength(2);
      expect(read(dir, ".autolab/reports/".concat(s.tag, "/report.md"))).toMatch(
        /## Prior history \(before autolab, not re-measured\)/,
      );

      // Export back: pi-autoresearch's log.jsonl, re-imported into a pi-autoresearch session.
      const pi = tempDir("autolab-pi-");
      const log = await runCli(["export", "--format", "log-jsonl", "--out", join(pi, "exported.jsonl")], {
        cwd: dir,
      });
      expect(log.code).toBe(0);
      const exported = read(pi, "exported.jsonl");
      expect(exported.split("\n")[0]).toBe(
        '{"type":"config","name":"'.concat(
          s.program,
          '","metricName":"val_bpb","metricUnit":"","bestDirection":"lower"}',
        ),
      );
      cpSync(join(pi, "exported.jsonl"), join(pi, ".auto", "log.jsonl"));
      writeFileSync(
        join(pi, ".auto", "prompt.md"),
        "# Autoresearch: tiny\n\n## Metrics\n- **Primary**: val_bpb (bpb, lower is better)\n\n## Files in Scope\n- `train.py`\n",
      );
      writeFileSync(join(pi, ".auto", "measure.sh"), "python3 train.py\n");
      writeFileSync(join(pi, "train.py"), TINY_TRAIN);
      writeFileSync(join(pi, "prepare.py"), read(dir, "prepare.py"));
      const again = await runCli(["init", "--from", "pi-autoresearch"], { cwd: pi });
      expect(again.stderr).toBe("");
      expect(again.code).toBe(0);
      expect(again.stdout).toMatch(/history {5}2 results from \.auto\/log\.jsonl/);
      expect(again.stdout).toMatch(/new git repository/);
      // The first commit holds program.md, the benchmark script and the code, not the old log.
      const tracked = gitSync(pi, "ls-files").split("\n");
      expect(tracked).toEqual(
        expect.arrayContaining(["program.md", ".auto/measure.sh", ".auto/prompt.md", "train.py"]),
      );
      expect(tracked).not.toContain(".auto/log.jsonl");
      const piStatus = await runCli(["status"], { cwd: pi });
      expect(piStatus.stdout).toMatch(
        /Prior history: 2 results imported from pi-autoresearch:\.auto\/log\.jsonl — before autolab, not re-measured \(1 keep, 1 discard\)/,
      );

      // A second import of the same checkout is refused, with what to do.
      const twice = await runCli(["init", "--from", "autoresearch"], { cwd: dir });
      expectCleanError(twice, 1, /already has frontmatter: it is an autolab program/);
    },
    180_000,
  );
});

describe("the researcher's context after init --from", () => {
  it.skipIf(onPath("uv") || !onPath("python3"))(
    "every proposal's context carries the prior history, labelled; the best it names is autolab's",
    async () => {
      const dir = checkout("autoresearch-upstream", (d) => {
        writeFileSync(join(d, "train.py"), TINY_TRAIN);
      });
      expect((await runCli(["init", "--from", "autoresearch"], { cwd: dir })).code).toBe(0);
      const contexts: string[] = [];
      const outcome = await createRun({
        program: dir,
        tag: "peek",
        maxExperiments: 1,
        agent: {
          name: "peek",
          async propose(ctx) {
            contexts.push(ctx.contextText);
            writeFileSync(join(ctx.worktree, "train.py"), TINY_TRAIN.replace("DEPTH = 4", "DEPTH = 3"));
            return { hypothesis: "shallower", mechanism: "fewer layers" };
          },
        },
      });
      outcome.lab.ledger.close();
      expect(contexts).toHaveLength(1);
      const ctx = contexts[0] as string;
      expect(ctx).toMatch(
        /## Prior history \(before autolab, not re-measured: 4 results from autoresearch:results\.tsv\)/,
      );
      expect(ctx).toMatch(/- switch to GeLU activation → discard val_bpb=1\.005 \(commit c3d4e5f\)/);
      expect(ctx).toMatch(/Best: #0 val_bpb = 1\.01/);
      expect(outcome.experiments.map((e) => e.n)).toEqual([0, 1]);
    },
    120_000,
  );
});

describe("autolab init --from: faults", () => {
  it("a fork's malformed results.tsv rows: the rest imported, each bad line reported", async () => {
    const dir = checkout("autoresearch-fork-columns");
    const r = await runCli(["init", "--from", "autoresearch"], { cwd: dir });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/history {5}3 results from results\.tsv/);
    expect(r.stdout).toMatch(/Not imported \(3 lines\):/);
    expect(r.stdout).toMatch(/results\.tsv:4: val_loss "not-a-number" is not a number/);
    expect(r.stdout).toMatch(/results\.tsv:5: 2 field\(s\), the header has 7/);
    expect(r.stdout).toMatch(/objective {3}minimize val_loss/);
  });

  it("an init cut short after importing (program.md not yet written) completes without importing twice", async () => {
    const dir = checkout("autoresearch-upstream");
    expect((await runCli(["init", "--from", "autoresearch"], { cwd: dir })).code).toBe(0);
    // As if it had stopped before writing program.md: autoresearch's program.md is back.
    gitSync(dir, "reset", "-q", "--hard", "HEAD~1");
    const again = await runCli(["init", "--from", "autoresearch"], { cwd: dir });
    expect(again.stderr).toBe("");
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/4 results from results\.tsv .*; already in the notebook/);
    expect(again.stdout).toMatch(
      /imported into the notebook by an earlier init: its history is not imported again/,
    );
    const s = await runCli(["status"], { cwd: dir });
    expect(s.stdout).toMatch(/Prior history: 4 results imported/);
  });

  it("pi-autoresearch: descriptions are untrusted text, escaped in the terminal", async () => {
    const dir = tempDir("autolab-pi-");
    cpSync(join(FIXTURES, "pi-current"), dir, { recursive: true });
    const r = await runCli(["init", "--from", "pi-autoresearch"], { cwd: dir });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/history {5}5 results from \.auto\/log\.jsonl/);
    expect(r.stdout).toMatch(/left out segment 0 \(bundle_kb\)/);
    expect(r.stdout).toMatch(/Next: cd .* && autolab run -n 30/);
    const ctx = await runCli(["context"], { cwd: dir });
    expect(ctx.code).toBe(0);
    expect(ctx.stdout).toMatch(/## Prior history \(before autolab, not re-measured: 5 results/);
    expect(ctx.stdout).toMatch(/recursion .*blew.* the stack → crash/);
    expect(ctx.stdout).not.toContain("\u001b");
  });

  it("a directory that is neither: says what it expected and what it found, and writes nothing", async () => {
    const dir = tempDir("autolab-migrate-");
    writeFileSync(join(dir, "README.md"), "hello\n");
    writeFileSync(join(dir, "main.go"), "package main\n");
    const r = await runCli(["init", "--from", "autoresearch"], { cwd: dir });
    expectCleanError(
      r,
      1,
      /is not an autoresearch checkout: expected program\.md and train\.py \(with prepare\.py and results\.tsv\), found README\.md, main\.go/,
    );
    const p = await runCli(["init", "--from", "pi-autoresearch"], { cwd: dir });
    expectCleanError(
      p,
      1,
      /has no pi-autoresearch session: expected \.auto\/ \(prompt\.md, measure\.sh, log\.jsonl\)/,
    );
    expect(existsSync(join(dir, "program.md"))).toBe(false);
    expect(existsSync(join(dir, ".git"))).toBe(false);
  });

  it("the wrong tool for the checkout points at the right one; an unknown tool is a usage error", async () => {
    const dir = checkout("autoresearch-no-results");
    const r = await runCli(["init", "--from", "pi-autoresearch"], { cwd: dir });
    expectCleanError(r, 1, /It looks like an autoresearch checkout: autolab init --from autoresearch/);
    const bad = await runCli(["init", "--from", "karpathy"], { cwd: dir });
    expectCleanError(bad, 2, /--from "karpathy" is not a tool autolab imports from/);
    expect(gitSync(dir, "status", "--porcelain")).toBe("");
  });
});
