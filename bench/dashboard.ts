/**
 * The dashboard at scale: a notebook of 10,000 experiments (default; `npm run bench --
 * dashboard 20000` for another size) written through SqliteLedger, served by startServer.
 *
 * - time to a drawn chart: headless chromium loads the dashboard; the figure is the page's
 *   own performance.now() (from navigation start) when the chart with every point has been
 *   painted (two animation frames after the SVG went in). Target ≤ 1 s.
 * - API latency: each endpoint's first answer and its median over 20 (warm), and the chart
 *   right after another connection wrote a row (the cache is brought up to date
 *   incrementally). notebook_read_ms: reading the whole run once, which `autolab serve` does
 *   as it starts.
 * - the report's chart for the same notebook: SVG and PNG render times.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { progressSeries } from "../src/app/progress-series.ts";
import { svgToPng } from "../src/app/report.ts";
import { renderProgressChart } from "../src/chart/progress-chart.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { startServer } from "../src/server/serve.ts";
import { CHROMIUM, launchChromium } from "../test/helpers/chromium.ts";
import { appendExperiment, buildNotebook, syntheticExperiments } from "../test/helpers/notebook-fixture.ts";

type Figures = Record<string, number | string | null>;

export async function main(args: string[]): Promise<Figures> {
  const count = Number(args[0] ?? 10_000);
  const dir = mkdtempSync(join(tmpdir(), "autolab-bench-dashboard-"));
  const figures: Figures = { benchmark: "dashboard", experiments: count };
  try {
    let t = performance.now();
    const ledgerPath = buildNotebook(
      dir,
      [{ tag: "bench", programName: "tiny-lm", experiments: syntheticExperiments(count) }],
      { bulk: true },
    );
    figures.fixture_write_ms = ms(performance.now() - t);
    {
      // What a server pays once for a whole run (later changes are read incrementally).
      const ledger = new SqliteLedger(ledgerPath);
      const run = ledger.latestRun();
      t = performance.now();
      if (run) ledger.listExperiments(run.id);
      figures.notebook_read_ms = ms(performance.now() - t);
      ledger.close();
    }

    const server = await startServer({ ledgerPath, port: 0, host: "127.0.0.1" });
    try {
      const base = server.url;
      const endpoints = {
        status: "api/status",
        chart: "api/chart",
        experiments_page: "api/experiments?sort=-n&limit=50",
        experiments_search: "api/experiments?q=HIDDEN%20%E2%86%92%2012&sort=metric&limit=50",
        experiment: `api/experiments/${Math.floor(count / 2)}`,
        runs: "api/runs",
      };
      for (const [name, path] of Object.entries(endpoints)) {
        const cold = await timeFetch(base + path, server.token);
        const warm: number[] = [];
        for (let i = 0; i < 20; i++) warm.push(await timeFetch(base + path, server.token));
        figures[`api_${name}_cold_ms`] = ms(cold);
        figures[`api_${name}_warm_ms`] = ms(median(warm));
      }
      const chartBytes = (
        await (
          await fetch(`${base}api/chart`, { headers: { authorization: `Bearer ${server.token}` } })
        ).text()
      ).length;
      figures.chart_json_kb = Math.round(chartBytes / 1024);

      // A write by another connection invalidates the cache: the next read pays for the notebook.
      const writer = new SqliteLedger(ledgerPath);
      const run = writer.getRun("bench");
      if (!run) throw new Error("bench run missing");
      appendExperiment(writer, run, count, { action: "discard", metric: 3 });
      figures.api_chart_after_write_ms = ms(await timeFetch(`${base}api/chart`, server.token));

      // The report's chart of the same notebook, without a browser.
      const exps = writer.listExperiments(run.id);
      t = performance.now();
      const svg = renderProgressChart(progressSeries(run, exps), { titles: true });
      figures.report_svg_ms = ms(performance.now() - t);
      t = performance.now();
      svgToPng(svg, 2);
      figures.report_png_ms = ms(performance.now() - t);
      writer.close();

      if (!CHROMIUM) {
        figures.chart_drawn_ms = null;
        figures.note = "no chromium found (apt-get install chromium): browser figures skipped";
      } else {
        const browser = await launchChromium(CHROMIUM);
        try {
          const drawn: number[] = [];
          const wall: number[] = [];
          for (let i = 0; i < 5; i++) {
            const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
            const t0 = performance.now();
            await page.goto(server.openUrl);
            await page.waitForSelector(`body[data-chart-drawn="${count + 1}"]`, { timeout: 30_000 });
            wall.push(performance.now() - t0);
            const at = await page.evaluate(
              () => (globalThis as unknown as { autolabChartDrawnAt: number }).autolabChartDrawnAt,
            );
            drawn.push(at);
            // Every experiment: its own element, or a dot of the crowd's cloud path.
            const points = (await page.evaluate(`(() => {
              const svg = document.querySelector("#chart svg");
              let n = svg.querySelectorAll(".pt").length;
              for (const c of svg.querySelectorAll(".cloud")) n += Number(c.getAttribute("data-count"));
              return n;
            })()`)) as number;
            if (points !== count + 1) throw new Error(`chart drew ${points} points, expected ${count + 1}`);
            await page.close();
          }
          figures.chart_drawn_ms = ms(median(drawn));
          figures.chart_drawn_min_ms = ms(Math.min(...drawn));
          figures.chart_drawn_max_ms = ms(Math.max(...drawn));
          figures.chart_drawn_wall_ms = ms(median(wall));
        } finally {
          await browser.close();
        }
      }
    } finally {
      await server.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  figures.target_chart_drawn_ms = 1000;
  console.log(
    `${count} experiments: chart drawn in ${figures.chart_drawn_ms ?? "—"} ms (median of 5, target ≤ 1000 ms); ` +
      `API warm: status ${figures.api_status_warm_ms} ms, chart ${figures.api_chart_warm_ms} ms, ` +
      `page of 50 ${figures.api_experiments_page_warm_ms} ms, one experiment ${figures.api_experiment_warm_ms} ms; ` +
      `after a write: chart ${figures.api_chart_after_write_ms} ms; whole notebook read once: ${figures.notebook_read_ms} ms`,
  );
  return figures;
}

async function timeFetch(url: string, token?: string): Promise<number> {
  const t = performance.now();
  const res = await fetch(url, token ? { headers: { authorization: `Bearer ${token}` } } : {});
  await res.arrayBuffer();
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  return performance.now() - t;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
}

function ms(x: number): number {
  return Math.round(x * 10) / 10;
}
