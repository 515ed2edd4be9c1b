/**
 * The front of a run with several objectives as a scatter (docs/objectives.md): every kept
 * experiment a point at (first metric, second metric), the non-dominated ones filled and joined
 * by a line, the one the branch holds ringed. Like progress-chart.ts it imports nothing, and
 * every text in it is escaped (labels are researcher text).
 */

export interface FrontChartPoint {
  n: number;
  x: number;
  y: number;
  /** On the front (no kept experiment dominates it). */
  front: boolean;
  /** The last kept: the branch holds it. */
  head: boolean;
}

export interface FrontChartInput {
  x: { metric: string; direction: "minimize" | "maximize" };
  y: { metric: string; direction: "minimize" | "maximize" };
  points: FrontChartPoint[];
  /** A bar on one of the axes (threshold_then_optimize). */
  bar?: { metric: string; value: number };
  title?: string;
}

/** Characters XML forbids (C0 controls but tab, newline and CR; U+FFFE, U+FFFF). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const NOT_XML = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/g;

/** Text for SVG: characters XML cannot hold replaced, markup and quotes as character references. */
export function esc(s: string): string {
  return s.replace(NOT_XML, "\ufffd").replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function tick(v: number): string {
  return Number(v.toPrecision(4)).toString();
}

/** An SVG of the front (width × height CSS pixels). */
export function renderFrontChart(input: FrontChartInput, size = { width: 640, height: 420 }): string {
  const { width, height } = size;
  const pad = { left: 70, right: 20, top: input.title ? 40 : 20, bottom: 50 };
  const pts = input.points.filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y));
  const xs = pts.map((p) => p.x);
  const ys = pts.map((p) => p.y);
  if (input.bar?.metric === input.x.metric) xs.push(input.bar.value);
  if (input.bar?.metric === input.y.metric) ys.push(input.bar.value);
  const range = (vs: number[]): [number, number] => {
    if (!vs.length) return [0, 1];
    let lo = Math.min(...vs);
    let hi = Math.max(...vs);
    if (lo === hi) {
      const d = Math.abs(lo) * 0.05 || 1;
      lo -= d;
      hi += d;
    }
    const m = (hi - lo) * 0.08;
    return [lo - m, hi + m];
  };
  const [x0, x1] = range(xs);
  const [y0, y1] = range(ys);
  const px = (x: number) => pad.left + ((x - x0) / (x1 - x0)) * (width - pad.left - pad.right);
  const py = (y: number) => height - pad.bottom - ((y - y0) / (y1 - y0)) * (height - pad.top - pad.bottom);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="DejaVu Sans, sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
  ];
  if (input.title) out.push(`<text x="${pad.left}" y="22" font-size="14">${esc(input.title)}</text>`);
  const axisY = height - pad.bottom;
  out.push(
    `<line x1="${pad.left}" y1="${axisY}" x2="${width - pad.right}" y2="${axisY}" stroke="#888"/>`,
    `<line x1="${pad.left}" y1="${pad.top}" x2="${pad.left}" y2="${axisY}" stroke="#888"/>`,
  );
  for (let i = 0; i <= 4; i++) {
    const xv = x0 + ((x1 - x0) * i) / 4;
    const yv = y0 + ((y1 - y0) * i) / 4;
    out.push(
      `<text x="${px(xv)}" y="${axisY + 16}" text-anchor="middle" fill="#555">${esc(tick(xv))}</text>`,
      `<text x="${pad.left - 6}" y="${py(yv) + 4}" text-anchor="end" fill="#555">${esc(tick(yv))}</text>`,
    );
  }
  const better = (d: "minimize" | "maximize") => (d === "minimize" ? "lower is better" : "higher is better");
  out.push(
    `<text x="${(pad.left + width - pad.right) / 2}" y="${height - 12}" text-anchor="middle">${esc(`${input.x.metric} (${better(input.x.direction)})`)}</text>`,
    `<text transform="translate(16 ${(pad.top + axisY) / 2}) rotate(-90)" text-anchor="middle">${esc(`${input.y.metric} (${better(input.y.direction)})`)}</text>`,
  );
  if (input.bar) {
    const b = input.bar;
    if (b.metric === input.x.metric) {
      out.push(
        `<line class="bar" x1="${px(b.value)}" y1="${pad.top}" x2="${px(b.value)}" y2="${axisY}" stroke="#d62728" stroke-dasharray="4 3"/>`,
      );
    } else if (b.metric === input.y.metric) {
      out.push(
        `<line class="bar" x1="${pad.left}" y1="${py(b.value)}" x2="${width - pad.right}" y2="${py(b.value)}" stroke="#d62728" stroke-dasharray="4 3"/>`,
      );
    }
  }
  const front = pts.filter((p) => p.front).sort((a, b) => a.x - b.x);
  if (front.length > 1) {
    out.push(
      `<polyline fill="none" stroke="#2ca02c" stroke-width="1.5" points="${front.map((p) => `${px(p.x)},${py(p.y)}`).join(" ")}"/>`,
    );
  }
  for (const p of pts) {
    out.push(
      `<circle class="pt" data-n="${p.n}" cx="${px(p.x)}" cy="${py(p.y)}" r="5" fill="${p.front ? "#2ca02c" : "#ffffff"}" stroke="${p.front ? "#2ca02c" : "#999"}" stroke-width="1.5"/>`,
      `<text x="${px(p.x) + 8}" y="${py(p.y) - 6}" fill="#333">#${p.n}</text>`,
    );
    if (p.head) {
      out.push(
        `<circle cx="${px(p.x)}" cy="${py(p.y)}" r="9" fill="none" stroke="#1f77b4" stroke-width="1.5"/>`,
      );
    }
  }
  out.push("</svg>");
  return out.join("\n");
}
