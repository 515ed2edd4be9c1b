/**
 * The front as viewers show it: status (JSON and text), the report (table, scatter), the API's
 * /api/status and the front chart — from a fixture notebook whose program.md lists two
 * objectives. Researcher text in it is escaped wherever it is shown.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { frontOf } from "../src/app/front.ts";
import { reportMarkdown, writeReport } from "../src/app/report.ts";
import { statusOf } from "../src/app/status.ts";
import { renderFrontChart } from "../src/chart/front-chart.ts";
import { frontLines } from "../src/cli/front-lines.ts";
import { buildContext } from "../src/core/views.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { parseProgram } from "../src/program/parse.ts";
import { createApp } from "../src/server/app.ts";
import { cleanupTemp, tempDir } from "./helpers/git-project.ts";
import { buildNotebook, type FixtureExperiment } from "./helpers/notebook-fixture.ts";

afterAll(cleanupTemp);

const PROGRAM = `---
name: two-objectives
objective:
  metrics:
    - { metric: loss, direction: minimize }
    - { metric: latency, direction: minimize }
  mode: pareto
run:
  command: node train.ts
  budget: 10s
files:
  editable: [train.ts]
---
`;

const EVIL = `<img src=x onerror=alert(1)> fast | but \u001b]0;pwned\u0007 bigger`;
const EXPERIMENTS: FixtureExperiment[] = [
  { action: "keep", metric: 1.0, metrics: { latency: 10 } },
  { action: "keep", metric: 0.8, metrics: { latency: 12 }, hypothesis: "wider model" },
  { action: "discard", metric: 1.1, metrics: { latency: 13 }, hypothesis: "worse on both" },
  { action: "keep", metric: 0.9, metrics: { latency: 5 }, hypothesis: EVIL },
  { action: "keep", metric: 0.95, metrics: { latency: 6 }, hypothesis: "dominated by #3 since" },
];

function lab() {
  const dir = tempDir();
  const programPath = join(dir, "program.md");
  writeFileSync(programPath, PROGRAM);
  const ledgerPath = buildNotebook(dir, [{ programPath, metric: "loss", experiments: EXPERIMENTS }]);
  const ledger = new SqliteLedger(ledgerPath);
  const run = ledger.latestRun();
  if (!run) throw new Error("no run");
  const exps = ledger.listExperiments(run.id);
  ledger.close();
  return { dir, ledgerPath, run, exps, program: parseProgram(PROGRAM, programPath) };
}

describe("the front", () => {
  it("status: the kept experiments no other kept one dominates, each metric; the head marked", () => {
    const { run, exps, program } = lab();
    const s = statusOf(run, exps, program);
    expect(s.front?.mode).toBe("pareto");
    expect(s.front?.kept).toBe(4);
    // #0 (1.0, 10) is dominated by #3 (0.9, 5); #4 (0.95, 6) too. #1 and #3 trade off.
    expect(s.front?.points.map((p) => p.id)).toEqual([1, 3]);
    expect(s.front?.points[1]?.values).toEqual({ loss: 0.9, latency: 5 });
    // The branch holds #4 (the last kept), which is no longer on the front: no head on it.
    expect(s.front?.points.some((p) => p.head)).toBe(false);
    const text = frontLines(s.front as NonNullable<typeof s.front>).join("\n");
    expect(text).toContain(
      "Front (pareto over minimize loss, minimize latency): 2 of 4 kept experiments non-dominated",
    );
    expect(text).toMatch(/ {4}1 +0\.8 +12 +1 +wider model/);
    expect(s.front?.head).toBe(4);
    expect(text).toContain("the branch holds #4 (the last kept), no longer on the front");
  });

  it("status without several objectives has no front", () => {
    const { run, exps, program } = lab();
    const one = { ...program, objectives: undefined };
    expect(statusOf(run, exps, one).front).toBeNull();
    expect(frontOf(undefined, exps)).toBeNull();
  });

  it("a front of one kept point says so", () => {
    const { run, exps, program } = lab();
    const s = statusOf(run, exps.slice(0, 1), program);
    expect(s.front?.points.map((p) => [p.id, p.head])).toEqual([[0, true]]);
    expect(frontLines(s.front as NonNullable<typeof s.front>).join("\n")).toContain(
      "one point: nothing has traded",
    );
  });

  it("the report: a Front table with every metric, researcher text escaped, and front.svg/png", () => {
    const { dir, run, exps, program } = lab();
    const md = reportMarkdown(run, exps, { program });
    const section = md.slice(md.indexOf("## Front"), md.indexOf("## Kept changes"));
    expect(section).toContain("| # | loss | latency | trials | commit | hypothesis |");
    expect(section).toMatch(/\| 1 \| 0\.8 \| 12 \| 1 \|/);
    expect(section).toContain("![front](front.png)");
    expect(section).not.toContain("<img");
    expect(section).toContain("&lt;img");
    expect(section).not.toContain("\u001b");
    const files = writeReport(run, exps, join(dir, "report"), { program });
    expect(files.frontSvg).toBeDefined();
    const svg = readFileSync(files.frontSvg as string, "utf8");
    // Every kept experiment is a point; the two on the front are filled.
    expect(svg.match(/class="pt"/g)?.length).toBe(4);
    expect(svg.match(/class="pt"[^>]*fill="#2ca02c"/g)?.length).toBe(2);
    expect(
      readFileSync(files.frontPng as string)
        .subarray(1, 4)
        .toString(),
    ).toBe("PNG");
    // Without the program (one objective) there is no front section or chart.
    expect(reportMarkdown(run, exps)).not.toContain("## Front");
  });

  it("the researcher's context names every objective and the mode", () => {
    const { program } = lab();
    const ctx = buildContext(program, undefined, []);
    expect(ctx).toContain(
      "Several objectives (pareto): minimize loss, minimize latency. A change is kept when it is credibly better",
    );
    expect(buildContext({ ...program, objectives: undefined }, undefined, [])).not.toContain(
      "Several objectives",
    );
  });

  it("GET /api/status carries the front", async () => {
    const { ledgerPath } = lab();
    const app = createApp({ ledgerPath });
    try {
      const res = await app.request("/api/status");
      expect(res.status).toBe(200);
      const body = (await res.json()) as {
        front: { points: { id: number; values: Record<string, number> }[] };
      };
      expect(body.front.points.map((p) => p.id)).toEqual([1, 3]);
      expect(body.front.points[0]?.values).toEqual({ loss: 0.8, latency: 12 });
    } finally {
      app.close();
    }
  });

  it("the chart escapes metric names and the title, and draws the bar", () => {
    const svg = renderFrontChart({
      x: { metric: "acc<y>", direction: "maximize" },
      y: { metric: "size", direction: "minimize" },
      points: [{ n: 0, x: 0.8, y: 10, front: true, head: true }],
      bar: { metric: "acc<y>", value: 0.9 },
      title: "<script>\u001b",
    });
    expect(svg).not.toContain("<script>");
    expect(svg).not.toContain("\u001b");
    expect(svg).not.toContain("acc<y>");
    expect(svg).toContain('class="bar"');
  });
});
