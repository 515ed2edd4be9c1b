/**
 * `autolab export -o FILE` never overwrites a user's file (issue #36: docs/migrate.md's way back
 * to pi-autoresearch, `export -f log-jsonl -o .auto/log.jsonl`, turned a 12-line log with two
 * segments and hook lines into 4 lines; `export -o results.tsv` did the same to autoresearch's
 * results). An existing file is refused (OUTPUT_EXISTS) unless `--append` (the run added: a new
 * segment of the log, rows under the results' header) or `--force` (replaced).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parsePiLog } from "../src/app/migrate/pi-autoresearch.ts";
import { runCli, stackLines, type ToyProject, toysOfFile } from "./helpers/toy-project.ts";

const { toy } = toysOfFile();

/** A pi-autoresearch log as that tool writes it: two segments, hook lines between runs (12 lines). */
const PI_LOG = [
  { type: "config", name: "tiny", metricName: "score", metricUnit: "", bestDirection: "lower" },
  {
    run: 0,
    commit: "a1b2c3d",
    metric: 3,
    metrics: {},
    status: "keep",
    description: "baseline",
    timestamp: 1,
    segment: 0,
  },
  { type: "hook", stage: "after", output: "ok" },
  {
    run: 1,
    commit: "b2c3d4e",
    metric: 2.5,
    metrics: {},
    status: "keep",
    description: "wider",
    timestamp: 2,
    segment: 0,
  },
  {
    run: 2,
    commit: "c3d4e5f",
    metric: 2.7,
    metrics: {},
    status: "discard",
    description: "narrower",
    timestamp: 3,
    segment: 0,
  },
  { type: "hook", stage: "after", output: "ok" },
  { type: "config", name: "tiny", metricName: "score", metricUnit: "", bestDirection: "lower" },
  {
    run: 3,
    commit: "d4e5f6a",
    metric: 2.4,
    metrics: {},
    status: "keep",
    description: "lr",
    timestamp: 4,
    segment: 1,
  },
  { type: "hook", stage: "after", output: "ok" },
  {
    run: 4,
    commit: "e5f6a7b",
    metric: 0,
    metrics: {},
    status: "crash",
    description: "oom",
    timestamp: 5,
    segment: 1,
  },
  {
    run: 5,
    commit: "f6a7b8c",
    metric: 2.45,
    metrics: {},
    status: "discard",
    description: "lr2",
    timestamp: 6,
    segment: 1,
  },
  { type: "hook", stage: "after", output: "ok" },
]
  .map((l) => JSON.stringify(l))
  .join("\n")
  .concat("\n");

const RESULTS_TSV = "commit\tscore\tmemory_gb\tstatus\tdescription\na1b2c3d\t3.000000\t0.1\tkeep\tbaseline\n";

let t: ToyProject;
beforeAll(async () => {
  t = toy({});
  const r = await runCli(["run", "-n", "1"], { cwd: t.dir, timeoutMs: 120_000 });
  expect(r.code, r.stderr).toBe(0);
}, 180_000);

describe("export -o onto an existing file", () => {
  it("log-jsonl onto pi-autoresearch's log is refused, saying how to append or replace; the log is untouched", async () => {
    mkdirSync(join(t.dir, ".auto"), { recursive: true });
    const log = join(t.dir, ".auto", "log.jsonl");
    writeFileSync(log, PI_LOG);
    const r = await runCli(["export", "-f", "log-jsonl", "-o", ".auto/log.jsonl"], { cwd: t.dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(".auto/log.jsonl exists");
    expect(r.stderr).toMatch(/--append/);
    expect(r.stderr).toMatch(/--force/);
    expect(stackLines(r.stderr)).toEqual([]);
    expect(readFileSync(log, "utf8")).toBe(PI_LOG);
  });

  it("--append adds the run as a new segment after the user's lines; pi-autoresearch's reader sees three segments", async () => {
    const log = join(t.dir, ".auto", "log.jsonl");
    writeFileSync(log, PI_LOG);
    const r = await runCli(["export", "-f", "log-jsonl", "-o", ".auto/log.jsonl", "--append"], {
      cwd: t.dir,
    });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const text = readFileSync(log, "utf8");
    expect(text.startsWith(PI_LOG)).toBe(true);
    const added = text
      .slice(PI_LOG.length)
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(added[0]).toMatchObject({ type: "config", metricName: "score" });
    // The run's two decided experiments, numbered on from the log's runs, in a segment of their own.
    expect(added.slice(1).map((l) => [l.run, l.segment])).toEqual([
      [6, 2],
      [7, 2],
    ]);
    const parsed = parsePiLog(text);
    expect(parsed.segments).toHaveLength(3);
    expect(parsed.problems).toEqual([]);
  });

  it("results-tsv onto autoresearch's results.tsv: refused; --append adds rows under its header; --force replaces it", async () => {
    const tsv = join(t.dir, "results.tsv");
    writeFileSync(tsv, RESULTS_TSV);
    const refused = await runCli(["export", "-o", "results.tsv"], { cwd: t.dir });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("results.tsv exists");
    expect(readFileSync(tsv, "utf8")).toBe(RESULTS_TSV);

    const appended = await runCli(["export", "-o", "results.tsv", "--append"], { cwd: t.dir });
    expect(appended.code, appended.stderr).toBe(0);
    const rows = readFileSync(tsv, "utf8").trim().split("\n");
    expect(rows.slice(0, 2)).toEqual(RESULTS_TSV.trim().split("\n"));
    expect(rows).toHaveLength(4);
    expect(rows.filter((l) => l.startsWith("commit\t"))).toHaveLength(1);

    const replaced = await runCli(["export", "-o", "results.tsv", "--force"], { cwd: t.dir });
    expect(replaced.code, replaced.stderr).toBe(0);
    const now = readFileSync(tsv, "utf8").trim().split("\n");
    expect(now).toHaveLength(3);
    expect(now.join("\n")).not.toContain("a1b2c3d");
  });

  it("--append onto results with another objective's header is refused: the columns would not mean the same", async () => {
    const tsv = join(t.dir, "other.tsv");
    const other = "commit\tval_bpb\tmemory_gb\tstatus\tdescription\n";
    writeFileSync(tsv, other);
    const r = await runCli(["export", "-o", "other.tsv", "--append"], { cwd: t.dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/header/);
    expect(readFileSync(tsv, "utf8")).toBe(other);
  });

  it("a file that does not exist yet is written; trajectories onto an existing file are refused too", async () => {
    const fresh = join(t.dir, "fresh.jsonl");
    const r = await runCli(["export", "-f", "jsonl", "-o", "fresh.jsonl"], { cwd: t.dir });
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(fresh)).toBe(true);
    const before = readFileSync(fresh, "utf8");
    const traj = await runCli(["export", "-f", "trajectories", "-o", "fresh.jsonl"], { cwd: t.dir });
    expect(traj.code).toBe(1);
    expect(traj.stderr).toContain("fresh.jsonl exists");
    expect(readFileSync(fresh, "utf8")).toBe(before);
  });
});

describe("report -o onto a directory holding the user's files", () => {
  it("is refused while one of the report's files exists there; --force replaces them", async () => {
    const dir = join(t.dir, "docs");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "report.md"), "# my own report\n");
    const r = await runCli(["report", "-o", "docs"], { cwd: t.dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("report.md exists");
    expect(r.stderr).toMatch(/--force/);
    expect(readFileSync(join(dir, "report.md"), "utf8")).toBe("# my own report\n");
    expect(existsSync(join(dir, "progress.svg"))).toBe(false);
    const forced = await runCli(["report", "-o", "docs", "--force"], { cwd: t.dir });
    expect(forced.code, forced.stderr).toBe(0);
    expect(readFileSync(join(dir, "report.md"), "utf8")).not.toBe("# my own report\n");
  });
});
