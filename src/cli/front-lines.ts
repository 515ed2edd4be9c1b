import type { StatusFront } from "../app/front.ts";
import { formatMetric } from "../core/format.ts";

/**
 * status's "Front" section: the mode, then one line per kept non-dominated experiment with each
 * objective metric; `*` marks the one the branch holds (the last kept).
 */
export function frontLines(f: StatusFront): string[] {
  const how =
    f.mode === "pareto"
      ? `pareto over ${f.metrics.map((m) => `${m.direction} ${m.metric}`).join(", ")}`
      : `threshold_then_optimize: ${f.threshold ? `${f.threshold.metric} ${f.metrics.find((m) => m.metric === f.threshold?.metric)?.direction === "minimize" ? "≤" : "≥"} ${formatMetric(f.threshold.bar)}, then ` : ""}${f.metrics
          .filter((m) => m.metric !== f.threshold?.metric)
          .map((m) => `${m.direction} ${m.metric}`)
          .join(", ")}`;
  const lines = [
    `Front (${how}): ${f.points.length} of ${f.kept} kept experiment${f.kept === 1 ? "" : "s"} non-dominated`,
  ];
  const widths = f.metrics.map((m) =>
    Math.max(m.metric.length, ...f.points.map((p) => formatMetric(p.values[m.metric]).length)),
  );
  lines.push(
    `      #  ${f.metrics.map((m, i) => m.metric.padStart(widths[i] as number)).join("  ")}  trials  change`,
  );
  for (const p of f.points) {
    const cells = f.metrics.map((m, i) => formatMetric(p.values[m.metric]).padStart(widths[i] as number));
    lines.push(
      `  ${p.head ? "*" : " "} ${String(p.id).padStart(4)}  ${cells.join("  ")}  ${String(p.trials).padStart(6)}  ${p.hypothesis}`,
    );
  }
  if (f.points.length === 1) lines.push("  (one point: nothing has traded one objective for another yet)");
  if (f.points.some((p) => p.head)) lines.push("  * the branch holds it (the last kept)");
  else if (f.head !== null) {
    lines.push(
      `  the branch holds #${f.head} (the last kept), no longer on the front: a kept experiment is as good on every objective and better on one (by their means)`,
    );
  }
  return lines;
}
