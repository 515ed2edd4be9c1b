/**
 * The bench's report: intervals per configuration and split, the verdict per layer, the mean
 * best-so-far vs compute curves as SVG (one chart per split), the curriculum's choices, the
 * failed cells. `benchSummary` is what `--json` prints; `writeBenchReport` writes report.md,
 * curves-tuning.svg, curves-held-out.svg and report.json.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { esc } from "../chart/front-chart.ts";
import { niceTicks } from "../chart/progress-chart.ts";
import type { BenchRun, CellRecord, OrderEntry } from "./bench.ts";
import {
  type Interval,
  improvementIntervals,
  type LayerVerdict,
  layerVerdict,
  MIN_REMEASURE,
  meanCurve,
  requireRemeasured,
} from "./bench-stats.ts";
import type { Suite } from "./suite.ts";

export interface BenchSummary {
  suite: string;
  hash: string;
  unit: "experiments" | "trials";
  budget: Suite["budget"];
  seeds: number[];
  /** Fresh-seed trials of each cell's baseline and best (0: the runs' own record). */
  remeasure: number;
  order: Suite["order"];
  complete: boolean;
  intervals: { config: string; split: "tuning" | "held-out"; interval: Interval }[];
  verdicts: LayerVerdict[];
  curves: Record<"tuning" | "held-out", Record<string, [number, number][]>>;
  curriculum: OrderEntry[];
  cells: CellRecord[];
}

export function benchSummary(suite: Suite, run: BenchRun): BenchSummary {
  const configs = suite.configurations.map((c) => c.name);
  const { resamples, seed } = suite.bootstrap;
  const curves: BenchSummary["curves"] = { tuning: {}, "held-out": {} };
  for (const split of ["tuning", "held-out"] as const)
    for (const c of configs) {
      const mine = run.cells.filter((x) => x.config === c && x.split === split);
      if (mine.length) curves[split][c] = meanCurve(mine);
    }
  return {
    suite: suite.name,
    hash: suite.hash,
    unit: run.unit,
    budget: suite.budget,
    seeds: suite.seeds,
    remeasure: suite.remeasure,
    order: suite.order,
    complete: run.cells.length === suite.configurations.length * suite.programs.length * suite.seeds.length,
    intervals: improvementIntervals(run.cells, configs, resamples, seed),
    verdicts: suite.layers.map((l) =>
      requireRemeasured(layerVerdict(l, run.cells, resamples, seed), suite.remeasure),
    ),
    curves,
    curriculum: suite.order === "curriculum" ? run.order : [],
    cells: run.cells,
  };
}

const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563", "#ca8a04"];

/** Mean best-so-far improvement (%) vs compute, one line per configuration. */
export function renderCurves(
  title: string,
  unit: string,
  curves: Record<string, [number, number][]>,
): string {
  const W = 640;
  const H = 360;
  const m = { l: 56, r: 150, t: 32, b: 44 };
  const pts = Object.values(curves).flat();
  const xMax = Math.max(1, ...pts.map(([x]) => x));
  const yLo = Math.min(0, ...pts.map(([, y]) => y));
  const yHi = Math.max(1e-9, ...pts.map(([, y]) => y));
  const yTicks = niceTicks(yLo, yHi, 5);
  const y0 = Math.min(yLo, yTicks[0] ?? yLo);
  const y1 = Math.max(yHi, yTicks[yTicks.length - 1] ?? yHi);
  const sx = (x: number) => m.l + (x / xMax) * (W - m.l - m.r);
  const sy = (y: number) => H - m.b - ((y - y0) / (y1 - y0 || 1)) * (H - m.t - m.b);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="${m.l}" y="18" font-size="13">${esc(title)}</text>`,
  ];
  for (const t of yTicks) {
    parts.push(
      `<line x1="${m.l}" x2="${W - m.r}" y1="${sy(t).toFixed(1)}" y2="${sy(t).toFixed(1)}" stroke="#e5e7eb"/>`,
      `<text x="${m.l - 6}" y="${(sy(t) + 4).toFixed(1)}" text-anchor="end">${esc(`${t}%`)}</text>`,
    );
  }
  for (const t of niceTicks(0, xMax, 6))
    parts.push(`<text x="${sx(t).toFixed(1)}" y="${H - m.b + 16}" text-anchor="middle">${t}</text>`);
  parts.push(
    `<line x1="${m.l}" x2="${W - m.r}" y1="${H - m.b}" y2="${H - m.b}" stroke="#374151"/>`,
    `<line x1="${m.l}" x2="${m.l}" y1="${m.t}" y2="${H - m.b}" stroke="#374151"/>`,
    `<text x="${(m.l + W - m.r) / 2}" y="${H - 8}" text-anchor="middle">${esc(unit)}</text>`,
  );
  Object.entries(curves).forEach(([name, curve], i) => {
    const color = PALETTE[i % PALETTE.length];
    let d = "";
    curve.forEach(([x, y], j) => {
      const px = sx(x).toFixed(1);
      const py = sy(y).toFixed(1);
      if (j === 0) d += `M${px},${py}`;
      else d += `H${px}V${py}`;
    });
    const last = curve[curve.length - 1];
    if (last && last[0] < xMax) d += `H${sx(xMax).toFixed(1)}`;
    parts.push(
      `<path class="curve" data-config="${esc(name)}" d="${d}" fill="none" stroke="${color}" stroke-width="2"/>`,
      `<rect x="${W - m.r + 12}" y="${m.t + i * 18}" width="10" height="10" fill="${color}"/>`,
      `<text x="${W - m.r + 26}" y="${m.t + i * 18 + 9}">${esc(name)}</text>`,
    );
  });
  parts.push("</svg>");
  return `${parts.join("\n")}\n`;
}

/**
 * Text of a markdown table cell: no pipes, no newlines, no HTML, no control characters, no
 * markdown emphasis, code or links (researchers' and writers' text is untrusted).
 */
export function cell(s: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: removing control characters is the point
  const flat = s.replace(/[\u0000-\u001f\u007f-\u009f]/g, " ");
  return flat.replace(/[|<>&`*_[\]\\]/g, (c) => `&#${c.charCodeAt(0)};`);
}

function num(x: number | undefined): string {
  return x === undefined ? "–" : String(Number(x.toPrecision(6)));
}

/** "10 experiments, 30 trials, 60 s": a cell's budget in words. */
export function budgetText(b: Suite["budget"]): string {
  return [
    b.experiments !== undefined ? `${b.experiments} experiments` : "",
    b.trials !== undefined ? `${b.trials} trials` : "",
    b.timeMs !== undefined ? `${b.timeMs / 1000} s` : "",
  ]
    .filter(Boolean)
    .join(", ");
}

export function pct(x: number | undefined): string {
  if (x === undefined) return "–";
  return Number.isFinite(x) ? `${x >= 0 ? "+" : ""}${x.toFixed(2)}%` : "–";
}

export function renderBenchMarkdown(s: BenchSummary): string {
  const lines: string[] = [`# Bench: ${cell(s.suite)}`, ""];
  const budget = budgetText(s.budget);
  lines.push(
    `Budget per configuration per program and seed: ${budget}; seeds ${s.seeds.join(", ")}; ${s.cells.length} cells${s.complete ? "" : " (incomplete: run the bench again to finish it)"}.`,
    "",
    s.remeasure > 0
      ? `Each cell's baseline and best kept commit were measured again on ${s.remeasure} seeds the run never used; improvements and verdicts use those values (the runs' own are in report.json as runBaseline/runBest).`
      : "Improvements are each run's own record (`remeasure: 0`): a rule that keeps lucky trials looks better than it is.",
    "",
    "## Verdicts (held-out programs)",
    "",
  );
  if (s.verdicts.length === 0) lines.push("No layers named in the suite.");
  for (const v of s.verdicts) lines.push(`- **${cell(v.label)}**: ${cell(v.line)}`);
  lines.push(
    "",
    `A layer ships when the wider of two 95% intervals of its paired gain over the simpler configuration (same held-out program, same seed, same budget) lies above zero: the cluster bootstrap's (programs resampled, then seeds) and Student's t over the held-out programs' mean gains (over the seeds when there is one program). Values must be re-measured on at least ${MIN_REMEASURE} fresh seeds, and a failed re-measurement trial makes its cell a failed one (no improvement).`,
    "",
    "## Final improvement per configuration",
    "",
    "| configuration | split | mean improvement | 95% CI | programs | cells |",
    "|---|---|---|---|---|---|",
  );
  for (const r of s.intervals)
    lines.push(
      `| ${cell(r.config)} | ${r.split} | ${pct(r.interval.mean)} | [${pct(r.interval.lo)}, ${pct(r.interval.hi)}] | ${r.interval.programs} | ${r.interval.cells} |`,
    );
  lines.push(
    "",
    "## Best so far vs compute",
    "",
    s.unit === "experiments"
      ? "x axis: experiments (the budget counts experiments); y: the mean best-so-far improvement (%)."
      : s.budget.trials === undefined
        ? `x axis: trials spent (the budget is time, ${s.budget.timeMs === undefined ? "" : `${s.budget.timeMs / 1000} s, `}counted on the curves in the trials each cell ran within it); y: the mean best-so-far improvement (%).`
        : "x axis: trials spent (the budget counts trials); y: the mean best-so-far improvement (%).",
    "",
  );
  for (const split of ["tuning", "held-out"] as const)
    if (Object.keys(s.curves[split]).length) lines.push(`![${split}](curves-${split}.svg)`, "");
  if (s.curriculum.length) {
    lines.push(
      "## Curriculum",
      "",
      "Each configuration's next program was the one at the learnability frontier (success rate closest to 0.5; src/learn/curriculum.ts):",
      "",
    );
    s.curriculum.forEach((o, i) => {
      lines.push(`${i + 1}. ${cell(o.config)} → ${cell(o.program)} (seed ${o.seed}): ${cell(o.reason)}`);
    });
    lines.push("");
  }
  const failed = s.cells.filter((c) => c.status === "failed");
  if (failed.length) {
    lines.push(
      "## Failed cells (counted as no improvement)",
      "",
      "| configuration | program | seed | why |",
      "|---|---|---|---|",
    );
    for (const c of failed)
      lines.push(
        `| ${cell(c.config)} | ${cell(c.program)} | ${c.seed} | ${cell((c.error ?? "").replace(/\s+/g, " ").slice(0, 400))} |`,
      );
    lines.push("");
  }
  lines.push(
    "## Cells",
    "",
    "| configuration | program | split | seed | baseline | best | improvement | experiments | trials |",
    "|---|---|---|---|---|---|---|---|---|",
  );
  for (const c of s.cells)
    lines.push(
      `| ${cell(c.config)} | ${cell(c.program)} | ${c.split} | ${c.seed} | ${num(c.baseline)} | ${num(c.best)} | ${c.status === "ok" ? pct(c.improvement) : "failed"} | ${c.experiments} | ${c.trials} |`,
    );
  return `${lines.join("\n")}\n`;
}

/** report.md, curves-<split>.svg and report.json in `dir`; returns the files written. */
export function writeBenchReport(s: BenchSummary, dir: string): string[] {
  mkdirSync(dir, { recursive: true });
  const files: string[] = [];
  for (const split of ["tuning", "held-out"] as const) {
    if (!Object.keys(s.curves[split]).length) continue;
    const f = join(dir, `curves-${split}.svg`);
    writeFileSync(
      f,
      renderCurves(
        `Best so far vs compute — ${split} programs (mean improvement, %)`,
        s.unit,
        s.curves[split],
      ),
    );
    files.push(f);
  }
  const md = join(dir, "report.md");
  writeFileSync(md, renderBenchMarkdown(s));
  const json = join(dir, "report.json");
  writeFileSync(json, `${JSON.stringify(s, null, 1)}\n`);
  return [md, ...files, json];
}
