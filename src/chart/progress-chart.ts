/**
 * The progress chart, as people who run autoresearch draw it by hand: every experiment a
 * point (discards grey, keeps green, crashes and rejects marked, pruned ones as open squares at
 * the last value of their learning curve), the running best as a step line, labels on the
 * kept changes. One renderer for the dashboard and the report: this
 * module imports nothing, so the server can hand it to the browser with its types stripped
 * (src/server/app.ts), and the report renders the same SVG to a file and, via resvg, to PNG.
 *
 * Every experiment is exactly one element of class `pt` carrying `data-n`, so tests can count
 * points and the dashboard can find the experiment under the pointer.
 */

/** A decision, "pending" (none yet), or "pruned": discarded when its learning curve was stopped early. */
export type ChartAction = "keep" | "discard" | "crash" | "reject" | "pending" | "pruned";

export interface ChartPoint {
  /** Experiment number (0 is the baseline). */
  n: number;
  /**
   * Objective value; null when the experiment has none (crashes, running trials). For a pruned
   * experiment: the last value of its learning curve (the progress metric, `pruned.metric`).
   */
  metric: number | null;
  action: ChartAction;
  /** First line of the hypothesis, shortened. */
  label: string;
  /**
   * Where a pruned experiment's curve stopped: its `step`-th progress value (counting from 1;
   * 0 when it had none), at fraction `at` of the budget, of the metric named `metric`.
   */
  pruned?: { metric: string | null; step: number; at: number | null };
}

export interface ChartSeries {
  metric: string;
  direction: "minimize" | "maximize";
  /** Oldest first (ascending n). */
  points: ChartPoint[];
  /**
   * Results imported from another tool (`autolab init --from`): claims from before autolab, not
   * re-measured. Drawn left of experiment 0 as their own series, never in the running best.
   */
  prior?: PriorPoint[];
}

/** One imported result: its place in the source (from 1), its claimed value, its status there. */
export interface PriorPoint {
  seq: number;
  /** The claimed objective value; null when the source has none (a crash). */
  metric: number | null;
  /** As the source wrote it: keep, discard, crash, checks_failed, … */
  status: string;
  /** First line of its description, shortened. */
  label: string;
}

/** Where an imported result goes on the x axis: -count … -1, before the baseline at 0. */
export function priorX(series: ChartSeries, p: PriorPoint): number {
  const prior = series.prior ?? [];
  return p.seq - (prior.at(-1)?.seq ?? prior.length) - 1;
}

const PRIOR_LABEL = "imported (not re-measured)";

export interface ChartOptions {
  width?: number;
  height?: number;
  /** A `<title>` per point: native tooltips in a standalone SVG (the dashboard draws its own). */
  titles?: boolean;
  /** How many kept changes get a text label (the largest steps first). */
  maxLabels?: number;
  /** Heading above the plot; default names the metric and the counts. */
  title?: string;
  /** Above this many discards they are drawn as one path (default 1,500). */
  crowd?: number;
}

export const CHART_COLORS: Record<ChartAction | "best" | "prior" | "axis" | "grid" | "text", string> = {
  keep: "#1a9641",
  discard: "#a8a8a8",
  crash: "#d7301f",
  reject: "#f08c00",
  pending: "#2b6cb0",
  pruned: "#7b68b5",
  best: "#1a9641",
  prior: "#8c6d31",
  axis: "#555555",
  grid: "#e6e6e6",
  text: "#222222",
};

const FONT = "DejaVu Sans, Helvetica, Arial, sans-serif";

/** Where everything goes: the renderer draws with it, the dashboard hit-tests with it. */
export interface ChartLayout {
  width: number;
  height: number;
  heading: string;
  twoRows: boolean;
  legendW: number;
  m: { left: number; right: number; top: number; bottom: number };
  plotW: number;
  plotH: number;
  plotBottom: number;
  laneH: number;
  /** Centre line of the "no metric" lane under the plot (crashes, running trials). */
  laneY: number;
  x0: number;
  x1: number;
  y0: number;
  y1: number;
  counts: Record<ChartAction, number>;
  kept: ChartPoint[];
  measured: boolean;
  /** More discards than `crowd`: they are drawn as one path (see renderProgressChart). */
  crowded: boolean;
}

export function chartLayout(series: ChartSeries, options: ChartOptions = {}): ChartLayout {
  const width = options.width ?? 960;
  const height = options.height ?? 440;
  const pts = series.points;
  const counts = { keep: 0, discard: 0, crash: 0, reject: 0, pending: 0, pruned: 0 };
  for (const p of pts) counts[p.action]++;
  const better = series.direction === "minimize" ? "lower is better" : "higher is better";
  const heading =
    options.title ??
    `${series.metric} (${better}) · ${pts.length} experiment${pts.length === 1 ? "" : "s"}, ${counts.keep} kept`;
  // The legend sits right of the heading, or on a line of its own when both do not fit.
  const prior = series.prior ?? [];
  const legendW = legendItems(counts, prior.length > 0).reduce((a, [, t]) => a + legendItemWidth(t), 0);
  const m = { left: 72, right: 24, top: 58, bottom: 54 };
  const twoRows = m.left + heading.length * 8.7 + 24 > width - m.right - legendW;
  if (twoRows) m.top = 78;
  const laneH = 22;
  const plotW = width - m.left - m.right;
  const plotH = height - m.top - m.bottom - laneH;
  const plotBottom = m.top + plotH;
  const kept = pts.filter((p) => p.action === "keep" && p.metric !== null);
  // Imported results sit left of 0 and count for the y range (they are what the user compares
  // against), but never for the running best.
  const priorPts: ChartPoint[] = prior.map((p) => ({
    n: priorX(series, p),
    metric: p.metric,
    action: p.status === "crash" || p.status === "checks_failed" ? "crash" : "discard",
    label: p.label,
  }));
  const [x0, x1] = xDomain([...priorPts, ...pts]);
  const [y0, y1] = yDomain([...priorPts, ...pts], kept);
  return {
    width,
    height,
    heading,
    twoRows,
    legendW,
    m,
    plotW,
    plotH,
    plotBottom,
    laneH,
    laneY: plotBottom + laneH / 2 + 2,
    x0,
    x1,
    y0,
    y1,
    counts,
    kept,
    measured: [...priorPts, ...pts].some((p) => p.metric !== null && p.action !== "crash"),
    crowded: counts.discard > (options.crowd ?? 1500),
  };
}

/** Where a point is drawn (its centre), in SVG user units. */
export function pointPosition(l: ChartLayout, p: ChartPoint): { x: number; y: number } {
  const x = l.m.left + ((p.n - l.x0) / (l.x1 - l.x0 || 1)) * l.plotW;
  if (p.metric === null || p.action === "crash") return { x, y: l.laneY };
  const v = Math.min(l.y1, Math.max(l.y0, p.metric));
  return { x, y: l.m.top + (1 - (v - l.y0) / (l.y1 - l.y0 || 1)) * l.plotH };
}

/**
 * Renders the chart as a standalone SVG document (also valid inline in HTML). Each experiment
 * is one element of class `pt` with `data-n`, except in a crowd (more than `crowd` discards,
 * 1,500 by default): then the discards inside the plot are the dots of one `<path
 * class="cloud">` whose `data-count` says how many, because ten thousand elements take a
 * browser several times longer to lay out and paint than one path. The dashboard finds the
 * experiment under the pointer from the layout (chartLayout, pointPosition), not the DOM.
 */
export function renderProgressChart(series: ChartSeries, options: ChartOptions = {}): string {
  const l = chartLayout(series, options);
  const {
    width,
    height,
    heading,
    twoRows,
    legendW,
    m,
    plotW,
    plotH,
    plotBottom,
    laneH,
    laneY,
    x0,
    x1,
    y0,
    y1,
  } = l;
  const { kept, measured } = l;
  const maxLabels = options.maxLabels ?? 12;
  const pts = series.points;
  const sx = (n: number) => m.left + ((n - x0) / (x1 - x0 || 1)) * plotW;
  const sy = (v: number) => m.top + (1 - (v - y0) / (y1 - y0 || 1)) * plotH;

  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" class="progress-chart" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="${FONT}" font-size="12">`,
  );
  out.push(`<rect width="${width}" height="${height}" fill="#ffffff"/>`);
  out.push(
    `<text x="${m.left}" y="22" font-size="15" font-weight="bold" fill="${CHART_COLORS.text}">${esc(heading)}</text>`,
  );
  const prior = series.prior ?? [];
  const items = legendItems(l.counts, prior.length > 0);
  out.push(twoRows ? legend(items, m.left, 46) : legend(items, width - m.right - legendW, 22));

  // Grid, ticks and axes (no y ticks before anything is measured: the scale would be made up).
  const yTicks = measured ? niceTicks(y0, y1, Math.max(3, Math.round(plotH / 60))) : [];
  for (const t of yTicks) {
    const y = r(sy(t));
    out.push(
      `<line x1="${m.left}" x2="${m.left + plotW}" y1="${y}" y2="${y}" stroke="${CHART_COLORS.grid}"/>`,
      `<text x="${m.left - 8}" y="${y + 4}" text-anchor="end" fill="${CHART_COLORS.axis}">${esc(fmt(t))}</text>`,
    );
  }
  // Experiment numbers only: left of 0 are the imported results, which have none.
  const xTicks = niceTicks(x0, x1, Math.max(2, Math.round(plotW / 90))).filter(
    (t) => Number.isInteger(t) && (t >= 0 || !prior.length),
  );
  const axisY = plotBottom + laneH;
  for (const t of xTicks) {
    const x = r(sx(t));
    out.push(
      `<line x1="${x}" x2="${x}" y1="${axisY}" y2="${axisY + 5}" stroke="${CHART_COLORS.axis}"/>`,
      `<text x="${x}" y="${axisY + 18}" text-anchor="middle" fill="${CHART_COLORS.axis}">${t}</text>`,
    );
  }
  out.push(
    `<line x1="${m.left}" x2="${m.left + plotW}" y1="${axisY}" y2="${axisY}" stroke="${CHART_COLORS.axis}"/>`,
    `<line x1="${m.left}" x2="${m.left}" y1="${m.top}" y2="${axisY}" stroke="${CHART_COLORS.axis}"/>`,
    `<rect x="${m.left}" y="${plotBottom}" width="${plotW}" height="${laneH}" fill="#fafafa"/>`,
    `<text x="${m.left - 8}" y="${laneY + 4}" text-anchor="end" font-size="10" fill="${CHART_COLORS.axis}">no metric</text>`,
    `<text x="${m.left + plotW / 2}" y="${height - 8}" text-anchor="middle" fill="${CHART_COLORS.axis}">experiment #</text>`,
    `<text transform="translate(16 ${m.top + plotH / 2}) rotate(-90)" text-anchor="middle" fill="${CHART_COLORS.axis}">${esc(series.metric)}</text>`,
  );

  if (prior.length) {
    // The imported results: their own group, left of a dashed line before experiment 0.
    const xs = r(sx(-0.5));
    out.push(
      `<g class="prior" fill="none" stroke="${CHART_COLORS.prior}" stroke-width="1.5">`,
      `<line class="prior-divider" x1="${xs}" x2="${xs}" y1="${m.top}" y2="${plotBottom + laneH}" stroke-dasharray="4 3"/>`,
      `<text x="${r(xs - 4)}" y="${m.top + 12}" text-anchor="end" font-size="10" stroke="none" fill="${CHART_COLORS.prior}">before autolab, not re-measured</text>`,
    );
    for (const p of prior) {
      const cx = r(sx(priorX(series, p)));
      const failed = p.metric === null;
      const cy = r(failed ? laneY : sy(Math.min(y1, Math.max(y0, p.metric as number))));
      const s = 4.5;
      const title = options.titles
        ? `<title>imported ${p.seq}: ${esc(p.status)}${failed ? "" : ` ${esc(fmt(p.metric as number))}`} — ${esc(p.label)} (before autolab, not re-measured)</title>`
        : "";
      const d = `M${cx},${r(cy - s)}L${r(cx + s)},${cy}L${cx},${r(cy + s)}L${r(cx - s)},${cy}Z`;
      out.push(
        `<path class="prior-pt ${p.status === "keep" ? "prior-keep" : "prior-other"}" data-seq="${p.seq}" d="${d}"${p.status === "keep" ? ` fill="${CHART_COLORS.prior}" fill-opacity="0.35"` : ""}${title ? `>${title}</path>` : "/>"}`,
      );
    }
    out.push("</g>");
  }

  if (pts.length === 0) {
    out.push(
      `<text x="${m.left + plotW / 2}" y="${m.top + plotH / 2}" text-anchor="middle" font-size="14" fill="${CHART_COLORS.axis}">${prior.length ? "no autolab experiments yet" : "no experiments yet"}</text>`,
    );
  } else if (kept.length === 0 && pts.every((p) => p.metric === null)) {
    out.push(
      `<text x="${m.left + plotW / 2}" y="${m.top + plotH / 2}" text-anchor="middle" font-size="14" fill="${CHART_COLORS.axis}">nothing measured yet</text>`,
    );
  }

  // Running best: a step line through the kept experiments, on to the newest experiment.
  if (kept.length) {
    const first = kept[0] as ChartPoint;
    let d = `M${r(sx(first.n))},${r(sy(first.metric as number))}`;
    for (const k of kept.slice(1)) d += `H${r(sx(k.n))}V${r(sy(k.metric as number))}`;
    d += `H${r(sx(x1Last(pts)))}`;
    out.push(
      `<path class="best-line" d="${d}" fill="none" stroke="${CHART_COLORS.best}" stroke-width="2" stroke-opacity="0.8"/>`,
    );
  }

  // Points: discards first so keeps are drawn on top; smaller grey dots in a crowd.
  const many = pts.length > 2000;
  const order: ChartAction[] = ["discard", "pruned", "pending", "reject", "crash", "keep"];
  out.push(`<g class="points">`);
  for (const action of order) {
    out.push(`<g class="${action}s" ${GROUP_ATTRS[action]}>`);
    let cloud = "";
    let inCloud = 0;
    for (const p of pts) {
      if (p.action !== action) continue;
      if (l.crowded && action === "discard" && p.metric !== null && p.metric >= y0 && p.metric <= y1) {
        // A zero-length stroke with round caps is a dot.
        cloud += `M${r(sx(p.n))},${r(sy(p.metric))}h0`;
        inCloud++;
        continue;
      }
      out.push(pointSvg(p, sx(p.n), sy, y0, y1, laneY, many, options.titles ?? false));
    }
    if (inCloud)
      out.push(
        `<path class="cloud" data-count="${inCloud}" d="${cloud}" fill="none" stroke="${CHART_COLORS.discard}" stroke-width="4.5" stroke-linecap="round"/>`,
      );
    out.push("</g>");
  }
  out.push("</g>");

  // Labels on the kept changes with the largest steps (the baseline first). A label ends just
  // left of its point, on the side of the best line where no earlier experiment can be (below
  // it when lower is better); one that would cover another label or point, or leave the plot,
  // moves to a second line or is left out.
  const placed: Box[] = [];
  for (const p of pts) {
    if (p.metric === null || p.action === "crash" || p.metric < y0 || p.metric > y1) continue;
    placed.push({ x: sx(p.n) - 4, y: sy(p.metric) - 4, w: 8, h: 8 });
  }
  const pointBoxes = placed.length;
  const side = series.direction === "minimize" ? 1 : -1;
  out.push(`<g class="labels" font-size="11" fill="${CHART_COLORS.keep}">`);
  for (const p of labelOrder(kept, series.direction).slice(0, maxLabels * 4)) {
    if (placed.length - pointBoxes >= maxLabels) break;
    const text = p.n === 0 ? "baseline" : `#${p.n} ${shorten(p.label, 34)}`;
    const w = text.length * 6.3;
    const px = sx(p.n);
    const py = sy(p.metric as number);
    const near = side > 0 ? py + 5 : py - 19;
    const candidates: Box[] = [
      { x: px - 7 - w, y: near, w, h: 14 },
      { x: px - 7 - w, y: near + side * 14, w, h: 14 },
      { x: px + 7, y: near, w, h: 14 },
      { x: px + 7, y: near + side * 14, w, h: 14 },
    ];
    const fit = candidates.find(
      (b) =>
        b.x >= m.left + 2 &&
        b.x + b.w <= m.left + plotW - 2 &&
        b.y >= m.top &&
        b.y + b.h <= plotBottom - 2 &&
        !placed.some((o) => overlaps(o, b)),
    );
    if (!fit) continue;
    placed.push(fit);
    out.push(`<text class="lbl" data-n="${p.n}" x="${r(fit.x)}" y="${r(fit.y + 11)}">${esc(text)}</text>`);
  }
  out.push("</g>");
  out.push("</svg>");
  return out.join("\n");
}

interface Box {
  x: number;
  y: number;
  w: number;
  h: number;
}

function overlaps(a: Box, b: Box): boolean {
  return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

/**
 * One point. Colours and strokes come from its group (see GROUP_ATTRS), so each of 10,000
 * points carries only its class, number and position.
 */
function pointSvg(
  p: ChartPoint,
  x: number,
  sy: (v: number) => number,
  y0: number,
  y1: number,
  laneY: number,
  many: boolean,
  titles: boolean,
): string {
  const metric = p.metric;
  const cx = r(x);
  const title = titles ? `<title>#${p.n} ${esc(pointSummary(p))} — ${esc(p.label)}</title>` : "";
  const el = (tag: string, attrs: string) =>
    `<${tag} class="pt ${p.action}" data-n="${p.n}" ${attrs}${title ? `>${title}</${tag}>` : "/>"}`;
  if (metric === null || p.action === "crash") {
    const y = r(laneY);
    if (p.action === "pending") return el("circle", `cx="${cx}" cy="${y}" r="4"`);
    const s = 3.5;
    // A cross is strokes: groups that fill their points (discards, rejects) would leave it invisible.
    const stroke =
      p.action === "crash" ? "" : ` stroke="${CHART_COLORS[p.action]}" stroke-width="2" fill="none"`;
    return el(
      "path",
      `d="M${r(cx - s)},${r(y - s)}L${r(cx + s)},${r(y + s)}M${r(cx - s)},${r(y + s)}L${r(cx + s)},${r(y - s)}"${stroke}`,
    );
  }
  const cy = r(sy(Math.min(y1, Math.max(y0, metric))));
  if (metric > y1 || metric < y0) {
    // Off the chart: a small triangle on the edge, pointing where the value is.
    const s = 4;
    const d =
      metric > y1
        ? `M${cx},${cy - s}L${r(cx + s)},${cy + s}L${r(cx - s)},${cy + s}Z`
        : `M${cx},${cy + s}L${r(cx + s)},${cy - s}L${r(cx - s)},${cy - s}Z`;
    return el("path", `data-clipped="1" d="${d}"`);
  }
  switch (p.action) {
    case "keep":
      return el("circle", `cx="${cx}" cy="${cy}" r="5.5"`);
    case "reject": {
      const s = 4.5;
      return el("path", `d="M${cx},${r(cy - s)}L${r(cx + s)},${cy}L${cx},${r(cy + s)}L${r(cx - s)},${cy}Z"`);
    }
    case "pending":
      return el("circle", `cx="${cx}" cy="${cy}" r="4"`);
    case "pruned":
      return el("rect", `x="${r(cx - 3.5)}" y="${r(cy - 3.5)}" width="7" height="7"`);
    default:
      return el("circle", `cx="${cx}" cy="${cy}" r="${many ? 2.5 : 3.5}"`);
  }
}

const GROUP_ATTRS: Record<ChartAction, string> = {
  discard: `fill="${CHART_COLORS.discard}"`,
  pending: `fill="none" stroke="${CHART_COLORS.pending}" stroke-width="1.5"`,
  pruned: `fill="#ffffff" stroke="${CHART_COLORS.pruned}" stroke-width="1.5"`,
  reject: `fill="${CHART_COLORS.reject}"`,
  crash: `fill="none" stroke="${CHART_COLORS.crash}" stroke-width="2"`,
  keep: `fill="${CHART_COLORS.keep}" stroke="#ffffff" stroke-width="1"`,
};

const LEGEND: [ChartAction | "best" | "prior", string][] = [
  ["keep", "kept"],
  ["discard", "discarded"],
  ["pruned", "pruned"],
  ["crash", "crashed"],
  ["reject", "rejected"],
  ["pending", "running"],
  ["best", "best so far"],
  ["prior", PRIOR_LABEL],
];

/** The legend's entries: "pruned" only in runs that pruned something (most have no learning curve). */
function legendItems(
  counts: Record<ChartAction, number>,
  prior: boolean,
): [ChartAction | "best" | "prior", string][] {
  return LEGEND.filter(([k]) => (k !== "pruned" || counts.pruned > 0) && (k !== "prior" || prior));
}

/**
 * What a point is, in words, for tooltips (the SVG's `<title>`, the dashboard's): "keep 2.71",
 * "pruned at step 7 (38% of the budget), train_loss 3.02".
 */
export function pointSummary(p: ChartPoint): string {
  if (p.action === "pruned") {
    const at = p.pruned?.at;
    const where = p.pruned?.step
      ? `pruned at step ${p.pruned.step}${at !== null && at !== undefined ? ` (${Math.round(at * 100)}% of the budget)` : ""}`
      : "pruned";
    return p.metric === null ? where : `${where}, ${p.pruned?.metric ?? "progress"} ${fmt(p.metric)}`;
  }
  return `${p.action}${p.metric === null ? "" : ` ${fmt(p.metric)}`}`;
}

function legendItemWidth(text: string): number {
  return 22 + text.length * 6.6;
}

function legend(items: [ChartAction | "best" | "prior", string][], left: number, y: number): string {
  const widths = items.map(([, t]) => legendItemWidth(t));
  let x = left;
  const out = [`<g class="legend" font-size="11" fill="${CHART_COLORS.text}">`];
  for (const [i, [k, t]] of items.entries()) {
    const cy = y - 4;
    if (k === "best")
      out.push(
        `<line x1="${r(x)}" x2="${r(x + 14)}" y1="${cy}" y2="${cy}" stroke="${CHART_COLORS.best}" stroke-width="2"/>`,
      );
    else if (k === "crash")
      out.push(
        `<path d="M${r(x + 3)},${cy - 4}L${r(x + 11)},${cy + 4}M${r(x + 3)},${cy + 4}L${r(x + 11)},${cy - 4}" stroke="${CHART_COLORS.crash}" stroke-width="2"/>`,
      );
    else if (k === "reject")
      out.push(
        `<path d="M${r(x + 7)},${cy - 5}L${r(x + 12)},${cy}L${r(x + 7)},${cy + 5}L${r(x + 2)},${cy}Z" fill="${CHART_COLORS.reject}"/>`,
      );
    else if (k === "pending")
      out.push(
        `<circle cx="${r(x + 7)}" cy="${cy}" r="4" fill="none" stroke="${CHART_COLORS.pending}" stroke-width="1.5"/>`,
      );
    else if (k === "pruned")
      out.push(`<rect x="${r(x + 3.5)}" y="${cy - 3.5}" width="7" height="7" ${GROUP_ATTRS.pruned}/>`);
    else if (k === "prior")
      out.push(
        `<path d="M${r(x + 7)},${cy - 5}L${r(x + 12)},${cy}L${r(x + 7)},${cy + 5}L${r(x + 2)},${cy}Z" fill="${CHART_COLORS.prior}" fill-opacity="0.35" stroke="${CHART_COLORS.prior}" stroke-width="1.5"/>`,
      );
    else out.push(`<circle cx="${r(x + 7)}" cy="${cy}" r="4.5" fill="${CHART_COLORS[k]}"/>`);
    out.push(`<text x="${r(x + 18)}" y="${y}">${t}</text>`);
    x += widths[i] ?? 0;
  }
  out.push("</g>");
  return out.join("");
}

function xDomain(pts: ChartPoint[]): [number, number] {
  if (pts.length === 0) return [0, 10];
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  for (const p of pts) {
    if (p.n < lo) lo = p.n;
    if (p.n > hi) hi = p.n;
  }
  const pad = Math.max(0.5, (hi - lo) * 0.02);
  return [lo - pad, Math.max(hi + pad, lo + 4)];
}

function x1Last(pts: ChartPoint[]): number {
  let hi = 0;
  for (const p of pts) if (p.n > hi) hi = p.n;
  return hi;
}

/**
 * The y range: every kept value, and the bulk of the others (2nd–98th percentile once there
 * are enough), so one diverged run does not flatten the curve. Values outside are drawn as
 * triangles on the edge.
 */
function yDomain(pts: ChartPoint[], kept: ChartPoint[]): [number, number] {
  const vals: number[] = [];
  for (const p of pts)
    if (p.metric !== null && Number.isFinite(p.metric) && p.action !== "crash") vals.push(p.metric);
  if (vals.length === 0) return [0, 1];
  vals.sort((a, b) => a - b);
  const q = (f: number) =>
    vals[Math.min(vals.length - 1, Math.max(0, Math.round(f * (vals.length - 1))))] as number;
  let lo = vals.length >= 20 ? q(0.02) : (vals[0] as number);
  let hi = vals.length >= 20 ? q(0.98) : (vals[vals.length - 1] as number);
  for (const k of kept) {
    const v = k.metric as number;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (hi === lo) {
    const d = Math.abs(lo) * 0.05 || 1;
    return [lo - d, hi + d];
  }
  const pad = (hi - lo) * 0.08;
  return [lo - pad, hi + pad];
}

/** Kept experiments in the order they deserve a label: the baseline, then the largest steps. */
function labelOrder(kept: ChartPoint[], direction: ChartSeries["direction"]): ChartPoint[] {
  const steps = kept.slice(1).map((p, i) => {
    const prev = (kept[i] as ChartPoint).metric as number;
    const gain = direction === "minimize" ? prev - (p.metric as number) : (p.metric as number) - prev;
    return { p, gain };
  });
  steps.sort((a, b) => b.gain - a.gain || a.p.n - b.p.n);
  return kept.length ? [kept[0] as ChartPoint, ...steps.map((s) => s.p)] : [];
}

/** About `count` round tick values covering [lo, hi]. */
export function niceTicks(lo: number, hi: number, count: number): number[] {
  const span = hi - lo;
  if (!(span > 0) || !Number.isFinite(span)) return [lo];
  const raw = span / Math.max(1, count);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const norm = raw / mag;
  const step = (norm >= 5 ? 10 : norm >= 2 ? 5 : norm >= 1 ? 2 : 1) * mag;
  const ticks: number[] = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push(Number(t.toPrecision(12)));
  }
  return ticks;
}

function fmt(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  const a = Math.abs(x);
  if (a !== 0 && (a < 1e-4 || a >= 1e7)) return x.toExponential(2);
  return String(Number(x.toPrecision(6)));
}

function shorten(s: string, max: number): string {
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

function r(x: number): number {
  return Math.round(x * 10) / 10;
}

function esc(s: string): string {
  return s
    .replace(NOT_XML, "\ufffd")
    .replace(/[&<>"]/g, (c) => (c === "&" ? "&amp;" : c === "<" ? "&lt;" : c === ">" ? "&gt;" : "&quot;"));
}

/** Characters XML forbids (C0 controls but tab, newline and CR; U+FFFE, U+FFFF): an SVG with one does not parse. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const NOT_XML = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/g;
