import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Resvg } from "@resvg/resvg-js";
import { renderFrontChart } from "../chart/front-chart.ts";
import { renderProgressChart } from "../chart/progress-chart.ts";
import { revisitOf } from "../core/advisor.ts";
import { type Directive, directiveLine } from "../core/directives.ts";
import { evidenceLabel } from "../core/evidence.ts";
import { lastResult, objectiveOf } from "../core/experiments.ts";
import { firstLine, formatChange, formatComputeTime, formatMetric, formatMetricTo } from "../core/format.ts";
import type {
  AdviceRecord,
  ExperimentRecord,
  ImportedResultRecord,
  NoteRecord,
  RunRecord,
  SessionRecord,
} from "../core/ledger.ts";
import type { Program } from "../core/types.ts";
import { evidenceByN } from "./evidence.ts";
import { holdoutOf } from "./experiment-json.ts";
import { frontOf, keptObjectivePoints } from "./front.ts";
import { mdCode, mdText } from "./markdown.ts";
import { progressSeries } from "./progress-series.ts";
import { statusOf } from "./status.ts";
import { treeMarkdown, treeOf } from "./tree.ts";

export interface ReportOptions {
  /** Holdout metrics as extra columns of the kept-changes table (for people only). */
  holdout?: boolean;
  /** Chart size in CSS pixels; the PNG is drawn at twice that. */
  width?: number;
  height?: number;
  /** Harness sessions of the run (slot utilization of the latest one). */
  sessions?: SessionRecord[];
  /** The notebook's imported results (`autolab init --from`): drawn and listed as prior history. */
  imported?: readonly ImportedResultRecord[];
  /** The run's program.md: with several objectives, the report shows the front (table and front.svg/png). */
  program?: Program;
  /** The run's advice (Ledger.listAdvice): its stop, and every answer listed. */
  advice?: readonly AdviceRecord[];
  /** The run's directives (`autolab direct`), withdrawn ones marked. */
  directives?: readonly Directive[];
  /** The run's notes (tamper alarms, finalize --verify verdicts): the evidence grade of each kept change. */
  notes?: readonly NoteRecord[];
}

export interface ReportFiles {
  markdown: string;
  svg: string;
  png: string;
  /** The front's scatter (several objectives only). */
  frontSvg?: string;
  frontPng?: string;
}

/**
 * `autolab report`: report.md with the progress chart (progress.svg, and progress.png drawn
 * from the same SVG by resvg, no browser), the summary numbers and the table of kept changes.
 */
export function writeReport(
  run: RunRecord,
  exps: ExperimentRecord[],
  outDir: string,
  opts: ReportOptions = {},
): ReportFiles {
  mkdirSync(outDir, { recursive: true });
  const svg = renderProgressChart(progressSeries(run, exps, opts.imported ?? []), {
    width: opts.width ?? 960,
    height: opts.height ?? 460,
    titles: true,
    title: `${run.programName} · run ${run.tag} · ${run.metric} (${run.direction === "minimize" ? "lower" : "higher"} is better)`,
  });
  const files = {
    markdown: join(outDir, "report.md"),
    svg: join(outDir, "progress.svg"),
    png: join(outDir, "progress.png"),
  };
  writeFileSync(files.svg, svg);
  writeFileSync(files.png, svgToPng(svg, 2));
  const front = opts.program ? frontSvgOf(opts.program, exps) : undefined;
  const more: Pick<ReportFiles, "frontSvg" | "frontPng"> = {};
  if (front) {
    more.frontSvg = join(outDir, "front.svg");
    more.frontPng = join(outDir, "front.png");
    writeFileSync(more.frontSvg, front);
    writeFileSync(more.frontPng, svgToPng(front, 2));
  }
  writeFileSync(files.markdown, reportMarkdown(run, exps, opts));
  return { ...files, ...more };
}

/** The front's scatter over the first two objective metrics; undefined with one objective. */
export function frontSvgOf(program: Program, exps: ExperimentRecord[]): string | undefined {
  const f = frontOf(program, exps);
  const [x, y] = f?.metrics ?? [];
  if (!f || !x || !y) return undefined;
  const onFront = new Set(f.points.map((p) => p.id));
  const head = f.points.find((p) => p.head)?.id ?? keptObjectivePoints(program, exps).at(-1)?.n;
  return renderFrontChart({
    x,
    y,
    points: keptObjectivePoints(program, exps).map((p) => ({
      n: p.n,
      x: p.values[x.metric] ?? Number.NaN,
      y: p.values[y.metric] ?? Number.NaN,
      front: onFront.has(p.n),
      head: p.n === head,
    })),
    ...(f.threshold ? { bar: { metric: f.threshold.metric, value: f.threshold.bar } } : {}),
    title: `${program.name} · front of the kept experiments (${f.mode})`,
  });
}

/** Rasterizes an SVG with resvg at `scale` (system fonts; text needs at least one installed font). */
export function svgToPng(svg: string, scale = 1): Buffer {
  const resvg = new Resvg(svg, {
    fitTo: { mode: "zoom", value: scale },
    font: { loadSystemFonts: true, defaultFontFamily: "DejaVu Sans" },
    background: "#ffffff",
  });
  return resvg.render().asPng();
}

export function reportMarkdown(run: RunRecord, exps: ExperimentRecord[], opts: ReportOptions = {}): string {
  const s = statusOf(run, exps, undefined, {
    ...(opts.sessions ? { sessions: opts.sessions, live: false } : {}),
    ...(opts.imported ? { imported: opts.imported } : {}),
    ...(opts.advice ? { advice: opts.advice } : {}),
  });
  const c = s.counts;
  const holdout = opts.holdout ? holdoutOf(run) : [];
  const lines: string[] = [];
  lines.push(`# ${mdText(run.programName)}: run ${mdText(run.tag)}`, "");
  lines.push(
    `Objective: ${run.direction} ${mdCode(run.metric)}. Branch ${mdCode(run.branch)}, started ${mdText(run.startedAt)}` +
      (s.lastActivity ? `, last activity ${mdText(s.lastActivity)}.` : "."),
  );
  if (s.unsandboxed) {
    lines.push(
      "",
      `> **Unsandboxed:** trials and researchers ran with autolab's own privileges${s.sandbox?.startsWith("unsandboxed") ? ` (${mdText(s.sandbox.slice("unsandboxed: ".length))})` : " in at least one session"}; the sandbox's guarantees (docs/security.md) did not hold.`,
    );
  } else if (s.sandbox) {
    lines.push("", `Sandbox: ${mdText(s.sandbox)}.`);
  }
  if (s.selfReported) {
    lines.push(
      "",
      "> **Self-reported:** the objective came from the editable command (no protected `evaluate` step); the code under test printed its own score.",
    );
  }
  lines.push(
    "",
    "![progress](progress.png)",
    "",
    "Chart: [progress.svg](progress.svg) · [progress.png](progress.png)",
  );
  lines.push("", "## Summary", "", "| | |", "|---|---|");
  lines.push(`| baseline | ${formatMetric(s.baseline?.metric ?? undefined)} |`);
  if (s.best) {
    const change =
      s.baseline?.metric != null && s.best.metric != null
        ? formatChange(s.baseline.metric, s.best.metric)
        : "";
    lines.push(
      `| best | ${formatMetric(s.best.metric ?? undefined)} (#${s.best.id}, ${mdCode(s.best.commit.slice(0, 8))})${change ? ` ${change}` : ""} |`,
    );
  } else lines.push("| best | — |");
  if (s.improvement)
    lines.push(
      `| improvement | ${formatMetric(s.improvement.absolute)} (${(s.improvement.relative * 100).toFixed(2)}%) |`,
    );
  lines.push(`| experiments | ${c.total} (incl. baseline) |`);
  lines.push(`| kept | ${c.kept} (incl. baseline) |`);
  lines.push(`| discarded | ${c.discarded} |`);
  lines.push(`| crashed | ${c.crashed} |`);
  lines.push(`| rejected | ${c.rejected} |`);
  if (c.pending) lines.push(`| pending | ${c.pending} |`);
  lines.push(`| trial time | ${formatComputeTime(s.trialSeconds)} |`);

  const front = frontOf(opts.program, exps);
  if (front) {
    const how =
      front.mode === "pareto"
        ? `pareto over ${front.metrics.map((m) => `${m.direction} ${mdCode(m.metric)}`).join(", ")}`
        : `threshold then optimize: ${mdCode(front.threshold?.metric ?? "")} past ${formatMetric(front.threshold?.bar)}, then ${front.metrics
            .filter((m) => m.metric !== front.threshold?.metric)
            .map((m) => `${m.direction} ${mdCode(m.metric)}`)
            .join(", ")}`;
    lines.push("", "## Front", "");
    lines.push(
      `Several objectives (${how}): the ${front.points.length} of ${front.kept} kept experiments no other kept one dominates, each metric the mean of its full-budget trials. The branch holds the last kept (marked \\*).`,
      "",
    );
    if (front.metrics.length >= 2) lines.push("![front](front.png)", "", "Chart: [front.svg](front.svg)", "");
    lines.push(
      `| # | ${front.metrics.map((m) => mdText(m.metric)).join(" | ")} | trials | commit | hypothesis |`,
    );
    lines.push(`|---:|${front.metrics.map(() => "---:|").join("")}---:|---|---|`);
    for (const p of front.points) {
      lines.push(
        `| ${p.id}${p.head ? " \\*" : ""} | ${front.metrics.map((m) => formatMetric(p.values[m.metric])).join(" | ")} | ${p.trials} | ${mdCode(p.commit.slice(0, 8))} | ${mdText(firstLine(p.hypothesis, 160))} |`,
      );
    }
  }

  const kept = exps.filter((e) => e.decision?.action === "keep");
  lines.push("", "## Kept changes", "");
  if (kept.length <= 1) {
    lines.push(kept.length ? "None yet beyond the baseline." : "Nothing kept yet (not even a baseline).");
  } else {
    const extra = holdout.map((h) => ` ${mdText(h)} (holdout) |`).join("");
    const evidence = evidenceByN(run, exps, opts.notes ?? [], opts.program);
    lines.push(`| # | ${mdText(run.metric)} | change | evidence | commit | hypothesis |${extra}`);
    lines.push(`|---:|---:|---:|---|---|---|${holdout.map(() => "---:|").join("")}`);
    let prev: number | undefined;
    for (const e of kept) {
      const m = objectiveOf(e, run.metric);
      const change = prev !== undefined && m !== undefined ? formatChange(prev, m) : "";
      const hm = holdout.map((h) => ` ${formatMetric(lastResult(e)?.metrics[h])} |`).join("");
      lines.push(
        `| ${e.n} | ${formatMetric(m)} | ${change} | ${evidenceLabel(evidence.get(e.n))} | ${mdCode(e.commit.slice(0, 8))} | ${mdText(e.n === 0 ? "baseline" : firstLine(e.hypothesis, 160))} |${hm}`,
      );
      if (m !== undefined) prev = m;
    }
  }

  // The tree frontier: drawn when the run branched (otherwise the kept changes are the chain).
  const tree = treeOf(run, exps);
  if (tree.branched) {
    const nodes = tree.nodes.filter((x) => x.kind === "node").length;
    lines.push("", "## Tree", "");
    lines.push(
      `Every kept node and the node it grew from (${tree.nodes.length} nodes, ${nodes} kept in the tree without moving the ratchet: they beat their parent, not the best).`,
      "",
    );
    lines.push(...treeMarkdown(tree));
  }

  if (s.imported && opts.imported) {
    const h = s.imported;
    lines.push(
      "",
      "## Prior history (before autolab, not re-measured)",
      "",
      `${h.count} result${h.count === 1 ? "" : "s"} imported from ${h.sources.map(mdCode).join(", ")}: claims another tool recorded on other runs of the code, drawn left of experiment 0 on the chart. None of them is a baseline or the best above, and none counted toward any decision.`,
      "",
      `| # | ${mdText(run.metric)} (claimed) | status there | commit | description |`,
      "|---:|---:|---|---|---|",
    );
    const shown = opts.imported.slice(-30);
    const skip = opts.imported.length - shown.length;
    if (skip) lines.push(`| … | | | | ${skip} earlier not listed |`);
    shown.forEach((r, i) => {
      lines.push(
        `| ${skip + i + 1} | ${formatMetric(r.metrics[run.metric])} | ${mdText(r.status)} | ${r.commit ? mdCode(r.commit.slice(0, 8)) : ""} | ${mdText(firstLine(r.description, 160))} |`,
      );
    });
  }

  if (opts.directives?.length) {
    lines.push("", "## Directives", "");
    for (const d of opts.directives) lines.push(`- ${mdText(firstLine(directiveLine(d), 360))}`);
  }

  if (opts.advice?.length) {
    lines.push("", "## The advisor", "");
    if (s.advisor?.stop) lines.push(`**Stopped:** ${mdText(s.advisor.stop.stoppedBecause)}.`, "");
    for (const a of opts.advice.slice(-20)) {
      const said =
        a.verdict === "ideas"
          ? a.ideas.map((i) => `IDEA: ${mdText(firstLine(i, 200))}`).join("; ")
          : a.verdict === "stop"
            ? `STOP: ${mdText(firstLine(a.reason, 300))}`
            : `answer not used: ${mdText(firstLine(a.reason, 200))}`;
      lines.push(`- after #${a.afterN} (${mdText(a.trigger)}), ${mdText(a.agent)}: ${said}`);
    }
    const revisits = exps.filter((e) => revisitOf(e.hypothesis) !== undefined);
    if (revisits.length)
      lines.push(
        "",
        `Revisits: ${revisits.map((e) => `#${e.n} (of #${revisitOf(e.hypothesis)}, ${e.decision?.action ?? "pending"})`).join(", ")}.`,
      );
  }

  if (s.roles.length) {
    lines.push("", "## Roles", "");
    lines.push("| role | proposals | kept | improvement | compute | value per hour | share |");
    lines.push("|---|---:|---:|---:|---:|---:|---:|");
    for (const r of s.roles) {
      lines.push(
        `| ${mdText(r.role)} | ${r.proposals} | ${r.kept} | ${formatMetric(r.improvement)} | ${formatComputeTime(r.computeS)} | ${formatMetricTo(r.value * 3600, 4)} | ${(r.share * 100).toFixed(0)}% |`,
      );
    }
  }
  if (s.slots.count > 0 && s.slots.utilization !== null) {
    lines.push(
      "",
      `Slots: ${s.slots.count}, utilization ${(s.slots.utilization * 100).toFixed(1)}% in the latest session (busy trial time / (wall time × slots)).`,
    );
  }

  const failed = exps.filter((e) => e.decision?.action === "crash" || e.decision?.action === "reject");
  if (failed.length) {
    lines.push("", "## Crashes and rejections", "");
    for (const e of failed.slice(-20))
      lines.push(
        `- #${e.n} ${e.decision?.action}: ${mdText(firstLine(e.decision?.reason ?? "", 200))} — ${mdText(firstLine(e.hypothesis, 120))}`,
      );
    if (failed.length > 20) lines.push(`- … and ${failed.length - 20} earlier (see \`autolab failures\`)`);
  }
  lines.push("", `_Generated by \`autolab report\` on ${new Date().toISOString()}._`, "");
  return lines.join("\n");
}
