/**
 * `autolab init --from`: the pure half (src/app/migrate/) on a fixture set of hand-written
 * checkouts under test/fixtures/migrate/ — karpathy/autoresearch's layout, forks (extra and
 * renamed columns, spaces instead of tabs, no results.tsv), pi-autoresearch's `.auto/` and
 * legacy flat layouts — and the surfaces that show imported history (context, status, chart).
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  budgetSeconds,
  commandFromProgram,
  knobsFromScript,
  loopInstructions,
  objectiveFromProgram,
  parseResultsTsv,
  planAutoresearch,
} from "../src/app/migrate/autoresearch.ts";
import { diskCheckout } from "../src/app/migrate/import.ts";
import { parsePiLog, piLayout, piLogJsonl, planPiAutoresearch } from "../src/app/migrate/pi-autoresearch.ts";
import { type Checkout, programText } from "../src/app/migrate/plan.ts";
import { progressSeries } from "../src/app/progress-series.ts";
import { resultsTsv, statusOf } from "../src/app/status.ts";
import { renderProgressChart } from "../src/chart/progress-chart.ts";
import type { ExperimentRecord, ImportedResultRecord, RunRecord } from "../src/core/ledger.ts";
import { buildContext } from "../src/core/views.ts";
import { parseProgram } from "../src/program/index.ts";
import { REPO_ROOT } from "./helpers/toy-project.ts";

const FIXTURES = join(REPO_ROOT, "test", "fixtures", "migrate");
const fixture = (name: string) => diskCheckout(join(FIXTURES, name));
const noUv = { hasExecutable: () => false };
const withUv = { hasExecutable: (n: string) => n === "uv" };

/** A checkout from a map of files (for layouts not worth a fixture directory). */
function memoryCheckout(files: Record<string, string>, name = "mem"): Checkout {
  return {
    name,
    exists: (p) => p in files || Object.keys(files).some((f) => f.startsWith(`${p}/`)),
    read: (p) => files[p],
  };
}

describe("autoresearch: results.tsv", () => {
  it("reads the upstream layout: commits, values, statuses, descriptions; a crash's 0.000000 is no value", () => {
    const p = planAutoresearch(fixture("autoresearch-upstream"), noUv);
    expect(p.problems).toEqual([]);
    expect(p.history.map((r) => [r.seq, r.commit, r.status, r.metrics, r.description])).toEqual([
      [1, "a1b2c3d", "keep", { val_bpb: 0.9979, memory_gb: 44 }, "baseline"],
      [2, "b2c3d4e", "keep", { val_bpb: 0.9932, memory_gb: 44.2 }, "increase LR to 0.04"],
      [3, "c3d4e5f", "discard", { val_bpb: 1.005, memory_gb: 44 }, "switch to GeLU activation"],
      [4, "d4e5f6a", "crash", {}, "double model width (OOM)"],
    ]);
    expect(new Set(p.history.map((r) => r.source))).toEqual(new Set(["autoresearch:results.tsv"]));
  });

  it("a fork with extra and renamed columns: found by name; malformed rows reported, the rest imported", () => {
    const p = planAutoresearch(fixture("autoresearch-fork-columns"), noUv);
    expect(p.settings.metric).toBe("val_loss");
    expect(p.history.map((r) => r.commit)).toEqual(["1111111", "2222222", "6666666"]);
    expect(p.history[0]?.metrics).toEqual({
      val_loss: 2.1,
      val_bpb: 1.01,
      memory_gb: 20.5,
      train_seconds: 300.1,
    });
    // A stray tab inside the last column is part of the description; KEEP is keep.
    expect(p.history[1]).toMatchObject({ status: "keep", description: "halve batch size to 2^16" });
    expect(p.history[2]).toMatchObject({ status: "crash", metrics: { train_seconds: 12 } });
    expect(p.problems).toEqual([
      'results.tsv:4: val_loss "not-a-number" is not a number',
      "results.tsv:5: 2 field(s), the header has 7",
      'results.tsv:6: status "???" is not a word such as keep, discard or crash',
    ]);
    expect(p.settings.secondary).toEqual(["val_bpb", "memory_gb", "train_seconds", "peak_vram_mb"]);
  });

  it("a fork that separates columns with spaces: descriptions are the rest of the line, and it says so", () => {
    const p = planAutoresearch(fixture("autoresearch-fork-spaces"), noUv);
    expect(p.problems).toEqual([]);
    expect(p.history.map((r) => r.description)).toEqual([
      "baseline (AdamW, default config)",
      "lower weight decay to 0.1",
      "halve total batch size to 2^16",
    ]);
    expect(p.history[2]?.metrics).toEqual({ val_bpb: 2.588904, memory_gb: 26.9 });
    expect(p.notes.join("\n")).toMatch(/spaces, not tabs/);
  });

  it("no results.tsv: no history, said so; everything else still detected", () => {
    const p = planAutoresearch(fixture("autoresearch-no-results"), noUv);
    expect(p.history).toEqual([]);
    expect(p.historyFrom).toBeUndefined();
    expect(p.notes).toContain("No results.tsv: no prior history to import.");
    expect(p.settings).toMatchObject({ metric: "val_bpb", command: "python3 train.py", budgetMs: 120_000 });
  });

  it("a header it cannot read is one clear problem, not a row per line", () => {
    const r = parseResultsTsv("a1b2c3d\t0.99\tkeep\tbaseline\n", "results.tsv");
    expect(r.rows).toEqual([]);
    expect(r.problems).toHaveLength(1);
    expect(r.problems[0]).toMatch(
      /results\.tsv:1: the first line is not a header naming a commit and a status column/,
    );
    expect(parseResultsTsv("", "results.tsv").rows).toEqual([]);
  });
});

describe("autoresearch: program.md frontmatter", () => {
  it("upstream: train.py editable, prepare.py protected, val_bpb minimized, 5 minutes plus program.md's give-up time", () => {
    const p = planAutoresearch(fixture("autoresearch-upstream"), withUv);
    expect(p.settings).toMatchObject({
      name: "autoresearch-upstream",
      metric: "val_bpb",
      direction: "minimize",
      command: "uv run train.py",
      budgetMs: 300_000,
      graceMs: 300_000,
      editable: ["train.py"],
      protected: ["prepare.py"],
      secondary: ["memory_gb", "peak_vram_mb"],
    });
    expect(p.notes.join("\n")).not.toMatch(/uv is not installed/);
  });

  it("falls back to python3 where uv is absent, and says so", () => {
    const p = planAutoresearch(fixture("autoresearch-upstream"), noUv);
    expect(p.settings.command).toBe("python3 train.py");
    expect(p.notes.join("\n")).toMatch(
      /uv is not installed here: the command is "python3 train\.py" instead of "uv run train\.py"/,
    );
  });

  it("writes a program autolab parses, with program.md's text verbatim after the frontmatter", () => {
    for (const name of [
      "autoresearch-upstream",
      "autoresearch-fork-columns",
      "autoresearch-fork-spaces",
      "autoresearch-no-results",
    ]) {
      const c = fixture(name);
      const plan = planAutoresearch(c, noUv);
      const text = programText(plan);
      const program = parseProgram(text, join(FIXTURES, name, "program.md"));
      expect(program.objective.metric, name).toBe(plan.settings.metric);
      expect(program.files.editable).toEqual(["train.py"]);
      expect(text.endsWith(c.read("program.md") as string), name).toBe(true);
      expect(program.agent.backend).toBe("builtin");
      expect(Object.keys(program.search)).toEqual(["DEPTH", "MATRIX_LR", "WARMDOWN_RATIO"]);
    }
  });

  it("finds the objective, command and budget as program.md and prepare.py state them", () => {
    expect(objectiveFromProgram("get the lowest val_bpb.")).toEqual({
      metric: "val_bpb",
      direction: "minimize",
    });
    expect(objectiveFromProgram("aim for the highest `accuracy`")).toEqual({
      metric: "accuracy",
      direction: "maximize",
    });
    expect(objectiveFromProgram("no goal here")).toBeUndefined();
    // `uv run prepare.py` comes first in upstream's text: the command is the one running train.py.
    expect(commandFromProgram("run `uv run prepare.py`, then `uv run train.py > run.log 2>&1`")).toBe(
      "uv run train.py",
    );
    expect(commandFromProgram("launch `python3 src/train.py`")).toBe("python3 src/train.py");
    expect(budgetSeconds("TIME_BUDGET = 300  # s", "")).toEqual({
      s: 300,
      from: "prepare.py's TIME_BUDGET = 300",
    });
    expect(budgetSeconds(undefined, "a **fixed time budget of 2 minutes**")?.s).toBe(120);
  });

  it("knobs: plain numeric constants get ranges around their value; hardware peaks and expressions do not", () => {
    const knobs = knobsFromScript(
      "DEPTH = 8  # layers\nMATRIX_LR = 0.04\nWARMDOWN_RATIO = 0.5\nTOTAL = 2**19\nH100_PEAK_FLOPS = 989.5e12\nZERO = 0.0\nx = 3\n",
    );
    expect(knobs).toEqual([
      { name: "DEPTH", low: 4, high: 16, log: true, int: true },
      { name: "MATRIX_LR", low: 0.01, high: 0.16, log: true, int: false },
      { name: "WARMDOWN_RATIO", low: 0, high: 1, log: false, int: false },
    ]);
  });

  it("no knobs: a coding agent (claude) reads the directions", () => {
    const files = {
      "program.md": "Get the lowest val_bpb. Launch `uv run train.py`.",
      "train.py": "print('val_bpb: 1.0')\n",
    };
    const plan = planAutoresearch(memoryCheckout(files), noUv);
    expect(plan.settings.search).toEqual([]);
    expect(parseProgram(programText(plan), "/x/program.md").agent.backend).toBe("claude");
  });
});

describe("autoresearch: what the harness does instead (issue #36)", () => {
  // Upstream's loop instructions, in the words karpathy/autoresearch's program.md uses.
  const upstream = [
    "# autoresearch",
    "1. Agree on a run tag and create the branch `autoresearch/<tag>` from master.",
    "**The goal is simple: get the lowest val_bpb.**",
    "LOOP FOREVER:",
    "- git commit the change, then run `uv run train.py > run.log 2>&1`.",
    "- If val_bpb did not improve, git reset back to where you started.",
    "NEVER STOP: do not ask the human whether to continue.",
    "Try a larger learning rate for the embeddings.",
    "",
  ].join("\n");

  it("marks upstream's loop lines as not the researcher's job, above the text it keeps verbatim", () => {
    const c = memoryCheckout({ "program.md": upstream, "train.py": "x = 1\n", "prepare.py": "" });
    const plan = planAutoresearch(c, noUv);
    const text = programText(plan);
    expect(text.endsWith(upstream)).toBe(true);
    expect(loopInstructions(upstream)).toHaveLength(5);
    expect(plan.preface).toMatch(/not the researcher's job/);
    for (const line of loopInstructions(upstream)) expect(plan.preface).toContain(line);
    expect(plan.preface).not.toContain("larger learning rate");
    expect(parseProgram(text, "/x/program.md").objective.metric).toBe("val_bpb");
  });

  it("says the metric is self-reported and that prepare.py is not run", () => {
    const plan = planAutoresearch(fixture("autoresearch-upstream"), noUv);
    const notes = plan.notes.join("\n");
    expect(notes).toMatch(/val_bpb is self-reported: train\.py prints it/);
    expect(notes).toMatch(/prepare\.py .* is not run by autolab/);
  });

  it("a program.md without loop instructions gets no preface", () => {
    const c = memoryCheckout({ "program.md": "Get the lowest val_bpb.\n", "train.py": "x = 1\n" });
    expect(planAutoresearch(c, noUv).preface).toBeUndefined();
  });
});

describe("pi-autoresearch", () => {
  it("no Files in Scope list (issue #36): files named in prose, or changed by kept runs, or both; hooks are named", () => {
    const c = fixture("pi-current");
    const prose = (c.read(".auto/prompt.md") as string)
      .replace(/## Files in Scope[\s\S]*?## Off Limits/, "## Off Limits")
      .concat("\nWe made src/sort.js faster; src/util.js has the helpers.\n");
    const files = (extra: Record<string, string> = {}) =>
      memoryCheckout({
        ".auto/prompt.md": prose,
        ".auto/measure.sh": "echo METRIC total_ms=1",
        "src/sort.js": "",
        "src/util.js": "",
        "bench/data.json": "[]",
        ...extra,
      });
    const fromProse = planPiAutoresearch(files());
    expect(fromProse.settings.editable).toEqual(["src/sort.js", "src/util.js"]);
    expect(fromProse.notes.join("\n")).toMatch(
      /no "## Files in Scope" list: editable files are src\/sort\.js, src\/util\.js, the files its text names/,
    );
    // git says the kept runs changed only src/sort.js (and a session file): that and the prose agree.
    const both = planPiAutoresearch(files(), { keptFiles: ["src/sort.js", ".auto/measure.sh"] });
    expect(both.settings.editable).toEqual(["src/sort.js"]);
    // A prompt that names nothing at all: what git says.
    const none = memoryCheckout({
      ".auto/prompt.md": "**Primary**: t (ms, lower is better)",
      ".auto/measure.sh": "",
      "lib.js": "",
    });
    expect(planPiAutoresearch(none, { keptFiles: ["lib.js"] }).settings.editable).toEqual(["lib.js"]);
    expect(() => planPiAutoresearch(none)).toThrow(/nor in its text/);
    // .auto/hooks/ is not silently dropped.
    const hooks = planPiAutoresearch(files({ ".auto/hooks/after.sh": "echo hi" }));
    expect(hooks.notes.join("\n")).toMatch(/\.auto\/hooks\/ is not carried over/);
  });

  it("knows its two layouts the way pi-autoresearch does: any .auto/ file wins over legacy names", () => {
    expect(piLayout(fixture("pi-current"))).toBe("current");
    expect(piLayout(fixture("pi-legacy"))).toBe("legacy");
    expect(piLayout(fixture("autoresearch-upstream"))).toBeUndefined();
    expect(piLayout(memoryCheckout({ "autoresearch.md": "x", ".auto/log.jsonl": "" }))).toBe("current");
  });

  it(".auto/: prompt.md → directions, measure.sh && checks.sh → command, config.json → -n, files in scope → editable", () => {
    const c = fixture("pi-current");
    const p = planPiAutoresearch(c);
    expect(p.settings).toMatchObject({
      name: "sort speed",
      metric: "total_ms",
      direction: "minimize",
      command: "bash .auto/measure.sh && bash .auto/checks.sh",
      budgetMs: 600_000,
      editable: ["src/sort.js", "src/util.js"],
      protected: [".auto/measure.sh", ".auto/checks.sh"],
      secondary: ["compile_ms"],
    });
    expect(p.maxExperiments).toBe(30);
    expect(p.directions).toBe(c.read(".auto/prompt.md"));
    expect(p.commitFiles).toEqual([".auto/measure.sh", ".auto/checks.sh"]);
    const program = parseProgram(programText(p), join(FIXTURES, "pi-current", "program.md"));
    expect(program.run.command).toBe("bash .auto/measure.sh && bash .auto/checks.sh");
    expect(program.agent.backend).toBe("claude");
  });

  it("log.jsonl with several segments: the last objective's segments imported, the other named; bad lines reported", () => {
    const p = planPiAutoresearch(fixture("pi-current"));
    expect(p.history.map((r) => [r.seq, r.segment, r.commit, r.status, r.metrics])).toEqual([
      [1, 1, "bbbbbbb", "keep", { total_ms: 40.7, compile_ms: 4.2 }],
      [2, 1, "ccccccc", "discard", { total_ms: 38.9, compile_ms: 4.1 }],
      [3, 1, "ddddddd", "crash", {}],
      [4, 1, "eeeeeee", "checks_failed", { total_ms: 33.5, compile_ms: 4 }],
      [5, 2, "fffffff", "keep", { total_ms: 35.1, compile_ms: 3.9 }],
    ]);
    expect(p.history[2]?.description).toBe("recursion \u001b[31mblew\u001b[0m the stack");
    expect(p.problems).toEqual([
      ".auto/log.jsonl:8: not a JSON line",
      '.auto/log.jsonl:12: metric "fast" is not a finite number',
    ]);
    expect(p.notes).toContain(
      ".auto/log.jsonl has 3 segments (each config line starts one): imported segments 1, 2 (total_ms); left out segment 0 (bundle_kb): another objective, not comparable.",
    );
  });

  it("legacy flat names; without a config line the prompt's Primary metric names the values", () => {
    const p = planPiAutoresearch(fixture("pi-legacy"));
    expect(p.settings).toMatchObject({
      metric: "score",
      direction: "maximize",
      command: "bash autoresearch.sh",
    });
    expect(p.history.map((r) => r.metrics)).toEqual([{ score: 3 }, { score: 4 }]);
    expect(p.history[0]?.source).toBe("pi-autoresearch:autoresearch.jsonl");
    expect(p.notes.join("\n")).toMatch(/Legacy flat autoresearch\.\* session files/);
  });

  it("says what is missing: no measure.sh, no files in scope, no metric", () => {
    const base = {
      ".auto/prompt.md": "## Files in Scope\n- `a.js`\n\n**Primary**: t (ms, lower is better)",
      "a.js": "",
    };
    expect(() => planPiAutoresearch(memoryCheckout(base))).toThrow(
      expect.objectContaining({
        code: "IMPORT_UNRECOGNIZED",
        message: expect.stringMatching(/no \.auto\/measure\.sh/),
      }),
    );
    const noScope = { ...base, ".auto/measure.sh": "", ".auto/prompt.md": "**Primary**: t (ms)" };
    expect(() => planPiAutoresearch(memoryCheckout(noScope))).toThrow(
      expect.objectContaining({
        code: "IMPORT_UNRECOGNIZED",
        message: expect.stringMatching(/Files in Scope/),
      }),
    );
    const noMetric = { ...base, ".auto/measure.sh": "", ".auto/prompt.md": "## Files in Scope\n- `a.js`" };
    expect(() => planPiAutoresearch(memoryCheckout(noMetric))).toThrow(
      expect.objectContaining({
        code: "IMPORT_UNRECOGNIZED",
        message: expect.stringMatching(/names the metric/),
      }),
    );
  });
});

// --- surfaces --------------------------------------------------------------------------------

const RUN: RunRecord = {
  id: 1,
  tag: "nov25",
  branch: "autolab/nov25",
  programPath: "/p/program.md",
  programName: "p",
  metric: "val_bpb",
  direction: "minimize",
  baseCommit: "c".repeat(40),
  protectedHashes: {},
  seed: 0,
  startedAt: "2026-11-25T00:00:00.000Z",
};

function experiment(
  n: number,
  action: "keep" | "discard" | "crash" | "reject",
  metric?: number,
): ExperimentRecord {
  return {
    id: n + 1,
    runId: 1,
    n,
    agent: "builtin",
    parentCommit: "p".repeat(40),
    commit: `${n}`.repeat(40).slice(0, 40),
    ref: `refs/autolab/nov25/${n}`,
    hypothesis: n === 0 ? "baseline" : `change ${n}\nsecond line`,
    diff: { files: 1, insertions: 1, deletions: 0 },
    createdAt: "2026-11-25T00:00:00.000Z",
    trials: [
      {
        id: n + 1,
        attempt: 1,
        seed: 0,
        command: "python3 train.py",
        commit: "x",
        budgetMs: 1000,
        env: {},
        startedAt: "2026-11-25T00:00:00.000Z",
        result: {
          status: action === "crash" ? "crash" : "ok",
          exitCode: 0,
          signal: null,
          wallS: 1,
          cpuS: 1,
          peakRssMb: 10,
          metrics: metric === undefined ? {} : { val_bpb: metric, peak_vram_mb: 1000, test_bpb: 9 },
          selfReported: true,
          seed: 0,
          command: "python3 train.py",
          stdoutPath: "",
          stderrPath: "",
          logTail: "",
          finishedAt: "2026-11-25T00:00:01.000Z",
          logDir: "",
        },
      },
    ],
    decision: {
      action,
      reason: action === "reject" ? "constraint" : "r",
      ...(metric !== undefined && action !== "crash" ? { metric } : {}),
      decidedAt: `2026-11-25T00:00:0${n}.000Z`,
    },
  };
}

const IMPORTED: ImportedResultRecord[] = [
  {
    id: 1,
    source: "autoresearch:results.tsv",
    seq: 1,
    commit: "a1b2c3d",
    metrics: { val_bpb: 0.9 },
    status: "keep",
    description: "baseline there",
    importedAt: "x",
  },
  {
    id: 2,
    source: "autoresearch:results.tsv",
    seq: 2,
    commit: "b2c3d4e",
    metrics: { val_bpb: 0.8 },
    status: "keep",
    description: "\u001b[2J<script>x</script> wider",
    importedAt: "x",
  },
  {
    id: 3,
    source: "autoresearch:results.tsv",
    seq: 3,
    commit: "c3d4e5f",
    metrics: {},
    status: "crash",
    description: "OOM",
    importedAt: "x",
  },
];

describe("imported history on the surfaces: a claim, never the best or a baseline", () => {
  const exps = [experiment(0, "keep", 1.2), experiment(1, "discard", 1.3)];

  it("status: the baseline and best are autolab's own; the imported summary stands apart", () => {
    const s = statusOf(RUN, exps, undefined, { imported: IMPORTED });
    expect(s.baseline).toEqual({ id: 0, metric: 1.2 });
    expect(s.best?.id).toBe(0);
    expect(s.best?.metric).toBe(1.2);
    expect(s.counts.total).toBe(2);
    expect(s.imported).toMatchObject({
      note: "before autolab, not re-measured",
      count: 3,
      sources: ["autoresearch:results.tsv"],
      statuses: { keep: 2, crash: 1 },
      lastKept: { seq: 2, metric: 0.8, commit: "b2c3d4e" },
    });
    expect(statusOf(RUN, exps).imported).toBeNull();
  });

  it("context: a prior-history section, labelled, with the run's best still its own", () => {
    const program = parseProgram(
      programText(planAutoresearch(fixture("autoresearch-upstream"), noUv)),
      "/p/program.md",
    );
    const text = buildContext(program, RUN, exps, { imported: IMPORTED });
    expect(text).toMatch(
      /## Prior history \(before autolab, not re-measured: 3 results from autoresearch:results\.tsv\)/,
    );
    expect(text).toMatch(/- baseline there → keep val_bpb=0\.9 \(commit a1b2c3d\)/);
    expect(text).toMatch(/- OOM → crash \(commit c3d4e5f\)/);
    expect(text).toMatch(/Best: #0 val_bpb = 1\.2/);
    expect(buildContext(program, RUN, exps)).not.toMatch(/Prior history/);
    // Before any run: the prior history is the whole notebook.
    expect(buildContext(program, undefined, [], { imported: IMPORTED })).toMatch(
      /No run yet[\s\S]*Prior history/,
    );
  });

  it("chart: a distinct labelled series left of experiment 0, outside the running best, text escaped", () => {
    const series = progressSeries(RUN, exps, IMPORTED);
    expect(series.points.map((p) => p.n)).toEqual([0, 1]);
    expect(series.prior?.map((p) => [p.seq, p.metric, p.status])).toEqual([
      [1, 0.9, "keep"],
      [2, 0.8, "keep"],
      [3, null, "crash"],
    ]);
    const svg = renderProgressChart(series, { titles: true });
    expect(svg.match(/class="pt /g)).toHaveLength(2);
    expect(svg.match(/class="prior-pt /g)).toHaveLength(3);
    expect(svg).toContain("imported (not re-measured)");
    expect(svg).toContain("before autolab, not re-measured");
    expect(svg).not.toContain("<script>");
    expect(svg).not.toContain("\u001b");
    // The running best starts at the baseline: no imported value is part of it.
    const best = /class="best-line" d="M([\d.]+),/.exec(svg);
    const baseline = /class="pt keep" data-n="0" cx="([\d.]+)"/.exec(svg);
    expect(best?.[1]).toBe(baseline?.[1]);
    expect(renderProgressChart(progressSeries(RUN, exps))).not.toContain("prior");
  });
});

describe("export --format log-jsonl", () => {
  it("round-trips through the importer: the run's decided experiments come back as pi-autoresearch runs", () => {
    const exps = [
      experiment(0, "keep", 1.2),
      experiment(1, "discard", 1.3),
      experiment(2, "crash"),
      experiment(3, "reject", 1.1),
    ];
    const text = piLogJsonl(RUN, exps, ["test_bpb"]);
    const lines = text
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines[0]).toEqual({
      type: "config",
      name: "p",
      metricName: "val_bpb",
      metricUnit: "",
      bestDirection: "lower",
    });
    expect(lines[3]).toMatchObject({ run: 2, metric: 0, status: "crash" });
    expect(text).not.toContain("test_bpb");
    const back = parsePiLog(text, ".auto/log.jsonl");
    expect(back.problems).toEqual([]);
    expect(back.metric).toBe("val_bpb");
    expect(back.direction).toBe("minimize");
    expect(back.rows.map((r) => [r.status, r.metrics.val_bpb, r.commit, r.description])).toEqual([
      ["keep", 1.2, exps[0]?.commit.slice(0, 7), "baseline"],
      ["discard", 1.3, exps[1]?.commit.slice(0, 7), "change 1\nsecond line"],
      ["crash", undefined, exps[2]?.commit.slice(0, 7), "change 2\nsecond line"],
      ["checks_failed", 1.1, exps[3]?.commit.slice(0, 7), "change 3\nsecond line"],
    ]);
    expect(back.rows[0]?.metrics).toEqual({ val_bpb: 1.2, peak_vram_mb: 1000 });
  });

  it("a researcher that failed before proposing ran nothing: no run line, no results.tsv row (issue #36)", () => {
    const agentCrash = { ...experiment(2, "crash"), trials: [] };
    const exps = [experiment(0, "keep", 1.2), experiment(1, "discard", 1.3), agentCrash];
    const lines = piLogJsonl(RUN, exps).trim().split("\n");
    expect(lines).toHaveLength(3);
    expect(lines.map((l) => JSON.parse(l).status)).toEqual([undefined, "keep", "discard"]);
    const tsv = resultsTsv(RUN, exps).trim().split("\n");
    // peak_vram_mb 1000 printed: memory_gb is that in GB.
    expect(tsv[0]).toBe("commit\tval_bpb\tmemory_gb\tstatus\tdescription");
    expect(tsv.slice(1).map((l) => l.split("\t")[2])).toEqual(["1.0", "1.0"]);
    expect(tsv).toHaveLength(3);
  });
});
