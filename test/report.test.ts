/**
 * `autolab report` (report.md + progress.svg + progress.png, no browser), the progress chart
 * renderer it shares with the dashboard, `autolab export --format jsonl` and `autolab watch`.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { marked } from "marked";
import { afterAll, describe, expect, it } from "vitest";
import { progressSeries } from "../src/app/progress-series.ts";
import { writeReport } from "../src/app/report.ts";
import { chartLayout, renderProgressChart } from "../src/chart/progress-chart.ts";
import { eventLine, watchScreen } from "../src/cli/watch-command.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { cleanupTemp, tempDir } from "./helpers/git-project.ts";
import {
  appendExperiment,
  buildNotebook,
  type FixtureExperiment,
  syntheticExperiments,
  TREE_LAB,
} from "./helpers/notebook-fixture.ts";
import { runCli, spawnCli } from "./helpers/toy-project.ts";

afterAll(cleanupTemp);

const LAB: FixtureExperiment[] = [
  { action: "keep", metric: 3.0 },
  { action: "discard", metric: 3.1, hypothesis: "HIDDEN 32 → 64" },
  {
    action: "keep",
    metric: 2.8,
    hypothesis: "LEARNING_RATE 3e-4 → 0.02 | with a pipe",
    metrics: { secret_holdout: 41 },
  },
  { action: "crash", hypothesis: "BATCH_SIZE 32 → 4096", reason: "crash: exit code 137" },
  { action: "reject", metric: 2.5, hypothesis: "HIDDEN 64 → 4096" },
  { action: "keep", metric: 2.7, hypothesis: "WARMDOWN_RATIO 0 → 0.3" },
  { action: "running", hypothesis: "dropout 0.1" },
];

/** Experiments drawn: one element each, or a dot of a crowd's cloud path. */
const points = (svg: string) =>
  (svg.match(/class="pt /g)?.length ?? 0) +
  [...svg.matchAll(/class="cloud" data-count="(\d+)"/g)].reduce((a, m) => a + Number(m[1]), 0);

function open(dir: string) {
  const ledger = new SqliteLedger(join(dir, ".autolab", "lab.db"));
  const run = ledger.latestRun();
  if (!run) throw new Error("no run");
  return { ledger, run, exps: ledger.listExperiments(run.id) };
}

describe("progress chart", () => {
  it("draws one point per experiment, a best line, and labels on kept changes", () => {
    const dir = tempDir();
    buildNotebook(dir, [{ experiments: LAB, holdout: ["secret_holdout"] }]);
    const { ledger, run, exps } = open(dir);
    ledger.close();
    const svg = renderProgressChart(progressSeries(run, exps));
    expect(points(svg)).toBe(7);
    expect(svg.match(/class="pt keep"/g)).toHaveLength(3);
    expect(svg.match(/class="pt crash"/g)).toHaveLength(1);
    expect(svg.match(/class="pt reject"/g)).toHaveLength(1);
    expect(svg.match(/class="pt pending"/g)).toHaveLength(1);
    expect(svg).toContain('class="best-line"');
    expect(svg.match(/class="lbl"/g)).toHaveLength(3);
    expect(svg).toContain(">#2 LEARNING_RATE 3e-4 → 0.02 | with …</text>");
    expect(svg).not.toContain("secret_holdout");
  });

  it("stays readable when empty, all crashed, or huge", () => {
    const empty = renderProgressChart({ metric: "loss", direction: "minimize", points: [] });
    expect(points(empty)).toBe(0);
    expect(empty).toContain("no experiments yet");
    const crashed = renderProgressChart({
      metric: "loss",
      direction: "minimize",
      points: Array.from({ length: 5 }, (_, n) => ({
        n,
        metric: null,
        action: "crash" as const,
        label: "x",
      })),
    });
    expect(points(crashed)).toBe(5);
    expect(crashed).toContain("nothing measured yet");
    const big = syntheticExperiments(10_000);
    const svg = renderProgressChart({
      metric: "val_bpb",
      direction: "minimize",
      points: big.map((x, n) => ({
        n,
        metric: x.metric ?? null,
        action: x.action as "keep",
        label: x.hypothesis ?? "",
      })),
    });
    expect(points(svg)).toBe(10_000);
    expect(svg).toMatch(/class="cloud" data-count="\d{4}"/);
    expect(svg.match(/class="lbl"/g)?.length).toBeLessThanOrEqual(12);
    expect(svg).not.toMatch(/NaN|Infinity/);
  });

  it("draws pruned experiments at the last value of their learning curve, marked as pruned", () => {
    // As in the demo: the progress metric is train_loss; pruned trials end without val_bpb.
    const curve = (start: number, steps: number): Array<[number, number]> =>
      Array.from({ length: steps }, (_, i) => [(i + 1) / 10, Number((start - i * 0.05).toFixed(3))]);
    const lab: FixtureExperiment[] = [
      { action: "keep", metric: 3.0, progress: curve(3.5, 10), metrics: { train_loss: 3.05 } },
      {
        action: "discard",
        status: "pruned",
        reason: "pruned: progress worse",
        progress: curve(3.6, 4),
        metrics: { train_loss: 3.45 },
      },
      { action: "keep", metric: 2.8, progress: curve(3.3, 10), metrics: { train_loss: 2.85 } },
      {
        action: "discard",
        status: "pruned",
        reason: "pruned: progress worse",
        progress: curve(3.5, 5),
        metrics: { train_loss: 3.3 },
      },
      { action: "discard", metric: 2.9, progress: curve(3.4, 10), metrics: { train_loss: 2.95 } },
      { action: "crash", reason: "crash: exit code 1" },
      // No curve recorded, and a discard without any trial value (the budget ran out): no metric.
      { action: "discard", status: "pruned", reason: "pruned" },
      { action: "discard", status: "timeout", reason: "undecided when the run's budget was spent" },
    ];
    const dir = tempDir();
    buildNotebook(dir, [{ experiments: lab }]);
    const { ledger, run, exps } = open(dir);
    ledger.close();
    const series = progressSeries(run, exps);
    expect(series.points.map((p) => p.action)).toEqual([
      "keep",
      "pruned",
      "keep",
      "pruned",
      "discard",
      "crash",
      "pruned",
      "discard",
    ]);
    expect(series.points[1]).toMatchObject({
      metric: 3.45,
      pruned: { metric: "train_loss", step: 4, at: 0.4 },
    });
    expect(series.points[3]).toMatchObject({ metric: 3.3, pruned: { step: 5, at: 0.5 } });
    expect(series.points[6]).toMatchObject({ metric: null, pruned: { step: 0 } });

    const svg = renderProgressChart(series, { titles: true });
    // Every experiment is drawn; each one with a value (objective or curve) inside the plot.
    expect(points(svg)).toBe(lab.length);
    const layout = chartLayout(series);
    const ys = [...svg.matchAll(/<(circle|rect|path) class="pt [^"]*" data-n="(\d+)" ([^>]*)>/g)].map((m) => {
      const attrs = m[3] as string;
      const num = (a: string) => Number(new RegExp(`\\b${a}="([-\\d.]+)"`).exec(attrs)?.[1]);
      if (m[1] === "circle") return num("cy");
      if (m[1] === "rect") return num("y") + num("height") / 2;
      const coords = [...(/d="([^"]*)"/.exec(attrs)?.[1] ?? "").matchAll(/,([-\d.]+)/g)].map((c) =>
        Number(c[1]),
      );
      return (Math.min(...coords) + Math.max(...coords)) / 2;
    });
    const inPlot = ys.filter((y) => y < layout.plotBottom).length;
    const withValue = exps.filter(
      (e) => e.trials.some((t) => t.result?.progress?.length) || e.decision?.metric !== undefined,
    );
    expect(inPlot).toBe(withValue.length);
    expect(inPlot).toBe(5);
    // Pruned ones: a marker of their own, a legend entry, and a tooltip saying where they stopped.
    expect(svg.match(/<rect class="pt pruned"/g)).toHaveLength(2);
    expect(svg).toMatch(/<g class="legend"[\s\S]*>pruned<\/text>/);
    expect(svg).toContain("<title>#1 pruned at step 4 (40% of the budget), train_loss 3.45 — ");
    expect(svg).toContain("<title>#6 pruned — ");
    // A cross in the no-metric lane is stroked whatever its group fills (it was invisible).
    for (const n of [6, 7])
      expect(svg).toMatch(new RegExp(`<path class="pt [a-z]+" data-n="${n}" [^>]*stroke="#`));
    // Without pruned experiments the legend has no entry for them.
    expect(renderProgressChart(progressSeries(run, exps.slice(0, 1)))).not.toContain(">pruned<");

    // The report draws the same series.
    const files = writeReport(run, exps, join(dir, "r"));
    const reportSvg = readFileSync(files.svg, "utf8");
    expect(points(reportSvg)).toBe(lab.length);
    expect(reportSvg.match(/<rect class="pt pruned"/g)).toHaveLength(2);
  });

  it("puts an outlier on the edge instead of squashing the curve", () => {
    const pts = Array.from({ length: 40 }, (_, n) => ({
      n,
      metric: n === 20 ? 1e9 : 3 - n * 0.01,
      action: (n === 20 ? "discard" : "keep") as "discard" | "keep",
      label: "",
    }));
    const svg = renderProgressChart({ metric: "loss", direction: "minimize", points: pts });
    expect(svg.match(/data-clipped="1"/g)).toHaveLength(1);
  });
});

describe("autolab report", () => {
  it("writes report.md, progress.svg and progress.png from the notebook", () => {
    const dir = tempDir();
    buildNotebook(dir, [{ experiments: LAB, holdout: ["secret_holdout"] }]);
    const { ledger, run, exps } = open(dir);
    const out = join(dir, "report");
    const files = writeReport(run, exps, out);
    ledger.close();
    for (const f of [files.markdown, files.svg, files.png]) expect(existsSync(f)).toBe(true);
    expect(points(readFileSync(files.svg, "utf8"))).toBe(LAB.length);
    const png = readFileSync(files.png);
    expect([...png.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    expect(png.readUInt32BE(16)).toBe(1920); // width: 960 drawn at 2×
    const md = readFileSync(files.markdown, "utf8");
    expect(md).toContain("![progress](progress.png)");
    expect(md).toContain("progress.svg");
    expect(md).toMatch(/\| best \| 2\.7 \(#5/);
    expect(md).toMatch(/\| experiments \| 7/);
    expect(md).toMatch(/\| crashed \| 1 \|/);
    // Kept changes: the baseline and two kept experiments, pipes escaped.
    const kept = md.split("## Kept changes")[1]?.split("##")[0] ?? "";
    expect(kept.match(/^\| \d+ \|/gm)).toHaveLength(3);
    expect(kept).toContain("LEARNING_RATE 3e-4 → 0.02 \\| with a pipe");
    expect(kept).toContain("-6.67%");
    expect(md).not.toContain("secret_holdout");
    expect(md).toContain("crash: exit code 137");
  });

  it("draws the tree when the run branched (the tree frontier), researcher text escaped", () => {
    const dir = tempDir();
    buildNotebook(dir, [{ experiments: TREE_LAB }]);
    const { ledger, run, exps } = open(dir);
    const md = readFileSync(writeReport(run, exps, join(dir, "report")).markdown, "utf8");
    ledger.close();
    const tree = md.split("## Tree")[1]?.split("\n## ")[0] ?? "";
    expect(tree).toContain("4 nodes, 1 kept in the tree without moving the ratchet");
    const items = tree.split("\n").filter((l) => /^\s*- #/.test(l));
    expect(items.map((l) => l.replace(/ — .*/, ""))).toEqual([
      "- #0 val_bpb 10",
      "  - #1 val_bpb 8",
      "  - #2 val_bpb 9 _(tree node)_",
      "    - #3 val_bpb 7 **(best)**",
    ]);
    expect(tree).toContain("&lt;img src=x onerror=alert(1)&gt; further \\[x\\](javascript:alert(1))");
    // Rendered, the hostile hypothesis is text: no element, no link.
    const html = marked.parse(tree) as string;
    expect(html).not.toContain("<img");
    expect(html).not.toContain("<a ");
  });

  it("has no tree section when the run never branched", () => {
    const dir = tempDir();
    buildNotebook(dir, [{ experiments: LAB }]);
    const { ledger, run, exps } = open(dir);
    const md = readFileSync(writeReport(run, exps, join(dir, "report")).markdown, "utf8");
    ledger.close();
    expect(md).not.toContain("## Tree");
  });

  it("the CLI writes the report (default under .autolab/reports/<tag>), holdouts only with --holdout", async () => {
    const dir = tempDir();
    buildNotebook(dir, [{ tag: "nov22", experiments: LAB, holdout: ["secret_holdout"] }]);
    const r = await runCli(["report"], { cwd: dir });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(join(".autolab", "reports", "nov22", "report.md"));
    expect(existsSync(join(dir, ".autolab", "reports", "nov22", "progress.png"))).toBe(true);
    const r2 = await runCli(["report", "--out", "out", "--holdout"], { cwd: dir });
    expect(r2.code).toBe(0);
    expect(readFileSync(join(dir, "out", "report.md"), "utf8")).toContain("secret_holdout (holdout)");
  });

  it("lists the credit of each role and the slots' utilization when the run had an org", () => {
    const dir = tempDir();
    const roles = ["tuner", "explorer", "tuner", "explorer", "tuner", "tuner", "explorer"];
    buildNotebook(dir, [
      { experiments: LAB.map((x, i) => (i === 0 ? x : { ...x, role: roles[i], slot: i % 2 })) },
    ]);
    const { ledger, run, exps } = open(dir);
    ledger.startSession(run.id, 2);
    const md = readFileSync(
      writeReport(run, exps, join(dir, "r"), { sessions: ledger.listSessions(run.id) }).markdown,
      "utf8",
    );
    ledger.close();
    const table = md.split("## Roles")[1]?.split("##")[0] ?? "";
    expect(table).toMatch(/^\| tuner \| 3 \| 2 \| 0.3 \| /m);
    expect(table).toMatch(/^\| explorer \| 3 \| 0 \| 0 \| /m);
    expect(md).toMatch(/Slots: 2, utilization \d+(\.\d)?% in the latest session/);
    expect(
      readFileSync(
        writeReport(
          run,
          exps.map((e) => ({ ...e, role: undefined }) as typeof e),
          join(dir, "r2"),
        ).markdown,
        "utf8",
      ),
    ).not.toContain("## Roles");
  });

  it("shows researcher text as text: no HTML, links, code spans or table cells of its own", () => {
    // Everything a researcher (or program.md) wrote, carrying what a Markdown viewer would act on.
    const XSS = "<img src=x onerror=alert(1)>";
    const LINKS = "![](javascript:alert(2)) [click](javascript:alert(3))";
    const dir = tempDir();
    buildNotebook(dir, [
      {
        programName: `lab<svg onload=alert(4)>`,
        metric: "val`bpb",
        holdout: ["h<b>old</b>"],
        experiments: [
          { action: "keep", metric: 3.0, metrics: { "h<b>old</b>": 1 } },
          { action: "keep", metric: 2.9, role: `critic ${XSS}|x`, hypothesis: `${XSS} | ${LINKS}` },
          {
            action: "keep",
            metric: 2.8,
            role: "tuner",
            hypothesis: "tick ` opens a code span | and 'quotes' & \"more\"",
          },
          {
            action: "crash",
            hypothesis: `${LINKS} \\| escaped?`,
            reason: `crash: <script>alert(5)</script> ${LINKS}`,
          },
        ],
      },
    ]);
    const { ledger, run, exps } = open(dir);
    const md = readFileSync(writeReport(run, exps, join(dir, "r"), { holdout: true }).markdown, "utf8");
    ledger.close();
    // A real Markdown renderer (GFM) makes no element and no link from any of it.
    const html = marked.parse(md, { async: false, gfm: true });
    // (The report's own: the chart as an image and links to its two files.)
    const own = html
      .replace('<img src="progress.png" alt="progress">', "")
      .replace(/<a href="progress\.(svg|png)">/g, "");
    for (const tag of ["<img", "<svg", "<script", "<b>", "<a "]) expect(own).not.toContain(tag);
    expect(html).not.toMatch(/(href|src)="javascript:/i);
    // The text shows as typed (entities decode to it).
    const text = html
      .replace(/<[^>]*>/g, "")
      .replace(/&lt;|&gt;|&amp;|&quot;|&#39;/g, (e) =>
        e === "&lt;" ? "<" : e === "&gt;" ? ">" : e === "&amp;" ? "&" : e === "&quot;" ? '"' : "'",
      );
    expect(text).toContain(`${XSS} | ${LINKS}`);
    expect(text).toContain(`crash: <script>alert(5)</script> ${LINKS} — ${LINKS} \\| escaped?`);
    expect(text).toContain("tick ` opens a code span | and 'quotes' & \"more\"");
    expect(text).toContain(`critic ${XSS}|x`);
    expect(text).toContain("lab<svg onload=alert(4)>: run fixture");
    // The metric name as one code span; every table row has its table's number of cells.
    expect(html).toContain("<code>val`bpb</code>");
    for (const table of html.split("<table>").slice(1)) {
      const rows = table.split("</table>")[0]?.split("<tr>").slice(1) ?? [];
      const cells = rows.map((r) => (r.match(/<t[dh][ >]/g) ?? []).length);
      expect(new Set(cells).size).toBe(1);
    }
    const kept = html.split("Kept changes")[1]?.split("</table>")[0] ?? "";
    expect(kept.match(/<tr>/g)).toHaveLength(4); // header, baseline, two kept
  });

  it("an empty run still gets a report", () => {
    const dir = tempDir();
    buildNotebook(dir, [{ experiments: [] }]);
    const { ledger, run, exps } = open(dir);
    const files = writeReport(run, exps, join(dir, "r"));
    ledger.close();
    expect(readFileSync(files.markdown, "utf8")).toContain("Nothing kept yet");
    expect(points(readFileSync(files.svg, "utf8"))).toBe(0);
  });
});

describe("autolab export --format jsonl", () => {
  it("writes every experiment, pending ones included", async () => {
    const dir = tempDir();
    buildNotebook(dir, [{ experiments: LAB }]);
    const r = await runCli(["export", "--format", "jsonl"], { cwd: dir });
    expect(r.code).toBe(0);
    const rows = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { id: number; decision: string });
    expect(rows.map((x) => x.id)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(rows[6]?.decision).toBe("pending");
  });
});

describe("autolab watch", () => {
  it("a terminal screen: status, best, the running trial, the last experiments", () => {
    const dir = tempDir();
    buildNotebook(dir, [{ experiments: LAB }]);
    const { ledger, run, exps } = open(dir);
    ledger.close();
    const startedAt = exps[6]?.trials[0]?.startedAt as string;
    const screen = watchScreen(
      run,
      exps,
      [{ n: 6, attempt: 1, hypothesis: "dropout 0.1", startedAt, budgetMs: 10_000, state: "running" }],
      { last: 3, columns: 120, rows: 40, now: Date.parse(startedAt) + 5000 },
    );
    expect(screen).toContain("best 2.7 (#5, -10.00%)");
    expect(screen).toMatch(/▶ #6 trial 1 ▕██████████░{10}▏ 5\.0s\/10s {2}dropout 0\.1/);
    const table = screen.split("\n").filter((l) => /^\d+ {2}/.test(l));
    expect(table.map((l) => l.split(/\s+/)[0])).toEqual(["6", "5", "4"]);
    expect(watchScreen(undefined, [], [], { last: 5, columns: 80, rows: 24, now: 0 })).toMatch(
      /Waiting for a run/,
    );
  });

  it("shows the roles' credit and the slots' utilization of an org run", () => {
    const dir = tempDir();
    const roles = ["tuner", "explorer", "tuner", "explorer", "tuner", "tuner", "explorer"];
    buildNotebook(dir, [
      { experiments: LAB.map((x, i) => (i === 0 ? x : { ...x, role: roles[i], slot: i % 2 })) },
    ]);
    const { ledger, run, exps } = open(dir);
    ledger.startSession(run.id, 2);
    const sessions = ledger.listSessions(run.id);
    ledger.close();
    const screen = watchScreen(run, exps, [], { last: 3, columns: 120, rows: 40, now: Date.now(), sessions });
    expect(screen).toMatch(/Roles:\n +role +proposals/);
    expect(screen).toMatch(/^ +tuner +3 +2 /m);
    expect(screen).toMatch(/^slots: 2 · utilization /m);
    expect(watchScreen(run, exps, [], { last: 3, columns: 120, rows: 40, now: Date.now() })).not.toContain(
      "Roles:",
    );
  });

  it("plain output when not a terminal: status once, then a line per event; Ctrl-C exits 0", async () => {
    const dir = tempDir();
    const ledgerPath = buildNotebook(dir, [{ tag: "w", experiments: LAB.slice(0, 3) }]);
    const cli = spawnCli(["watch", "--interval", "50ms"], { cwd: dir });
    try {
      await cli.waitFor(/Run w \(fixture-lab\)/);
      await cli.waitFor(/best 2\.8 \(#2/);
      const writer = new SqliteLedger(ledgerPath);
      const run = writer.getRun("w");
      if (!run) throw new Error("no run");
      appendExperiment(writer, run, 3, { action: "discard", metric: 2.95, hypothesis: "HIDDEN 64 → 80" });
      writer.close();
      await cli.waitFor(/#3 discard 2\.95 \(not better: 2\.95\) · best 2\.8 \(#2\)/);
      expect(cli.stdout()).toContain("#3 proposed: HIDDEN 64 → 80");
      expect(cli.stdout().includes("\u001b")).toBe(false);
    } finally {
      cli.child.kill("SIGINT");
    }
    const done = await cli.done;
    expect(done.code).toBe(0);
    expect(done.stderr).toBe("");
  });

  it("event lines name what happened", () => {
    expect(
      eventLine({
        type: "trial_finished",
        run: "r",
        at: "",
        n: 3,
        attempt: 1,
        status: "timeout",
        wallS: 12.04,
        reason: "killed at budget",
      }),
    ).toBe("#3 trial 1: timeout in 12.0s — killed at budget");
    const advice = {
      type: "advice",
      run: "r",
      at: "",
      agent: "claude",
      trigger: "8 discards in a row",
      afterN: 9,
    } as const;
    expect(eventLine({ ...advice, verdict: "ideas", ideas: ["wider", "revisit #3: x"], reason: "" })).toBe(
      "advisor (claude) after #9: IDEA: wider | IDEA: revisit #3: x",
    );
    expect(eventLine({ ...advice, verdict: "stop", ideas: [], reason: "flat\u001b[2J" })).toBe(
      "advisor (claude) after #9: STOP — flat\\x1b[2J",
    );
    expect(eventLine({ ...advice, verdict: "garbage", ideas: [], reason: "no IDEA: line" })).toBe(
      "advisor (claude) after #9: answer not used (no IDEA: line); the run goes on",
    );
  });
});
