/**
 * A tournament's report: the standings (mean improvement with its interval, the paired
 * difference to the incumbent, P(best)), the best-so-far curves per variant, the cells, and
 * for `--evolve` each generation's challenger and what became of it. report.md, curves.svg,
 * report.json; every text a researcher or a writer model produced is escaped.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { budgetText, cell, pct, renderCurves } from "./bench-report.ts";
import { meanCurve } from "./bench-stats.ts";
import type { TournamentResult } from "./tournament.ts";

/** One generation of `--evolve`. */
export interface Generation {
  n: number;
  /** The challenger's name, or none when the writer produced nothing usable. */
  challenger?: string;
  /** Why there was no challenger (the writer's failure), or how the tournament went. */
  outcome: "replaced" | "kept" | "no challenger" | "incomplete";
  line: string;
}

export interface TournamentSummary extends Omit<TournamentResult, "variants"> {
  variants: { name: string; source: string; file: string; cells: string }[];
  generations?: Generation[];
}

function pp(x: number): string {
  return Number.isFinite(x) ? `${x >= 0 ? "+" : ""}${x.toFixed(2)}` : "–";
}

export function tournamentSummary(
  r: TournamentResult,
  out: string,
  generations?: Generation[],
): TournamentSummary {
  return {
    ...r,
    variants: r.variants.map((v) => ({
      name: v.name,
      source: v.source,
      file: relative(out, v.file),
      cells: v.cells,
    })),
    ...(generations ? { generations } : {}),
  };
}

export function renderTournamentMarkdown(s: TournamentSummary): string {
  const budget = budgetText(s.budget);
  const lines = [
    `# Tournament: ${cell(s.program)}`,
    "",
    `${s.variants.length} variants of the instructions, each run on seeds ${s.seeds.join(", ")} under ${budget}; ${s.cells.length} cells${s.complete ? "" : " (incomplete: run the tournament again to finish it)"}.`,
    s.remeasure > 0
      ? `Each cell's baseline and best kept commit were measured again on ${s.remeasure} seeds the run never used; the improvements below use those values.`
      : "Improvements are each run's own record (re-measurement off).",
    "",
    "## Standings",
    "",
    "| rank | variant | mean improvement | 95% CI | vs incumbent (pp) | interval | verdict | P(best) |",
    "|---|---|---|---|---|---|---|---|",
  ];
  for (const x of s.standings.standings) {
    const v = x.vsIncumbent;
    const verdict = !v ? "incumbent" : v.beats ? "beats it" : v.worse ? "worse" : "no clear difference";
    lines.push(
      `| ${x.rank} | ${cell(x.variant)} | ${pct(x.mean)} | [${pct(x.lo)}, ${pct(x.hi)}] | ${v ? pp(v.mean) : ""} | ${v ? `[${pp(v.lo)}, ${pp(v.hi)}] at ${(100 * v.level).toFixed(1)}%` : ""} | ${verdict} | ${Number.isFinite(x.pBest) ? x.pBest.toFixed(2) : "–"} |`,
    );
  }
  lines.push(
    "",
    "Paired by seed: each resample draws seeds with replacement and recomputes every variant's mean on the same seeds. A challenger beats the incumbent when the lower bound of its paired difference is above zero at the family-wise level (95% split over the challengers, Bonferroni). P(best) is the share of resamples in which the variant had the highest mean.",
    "",
    "![best so far](curves.svg)",
    "",
  );
  if (s.generations?.length) {
    lines.push("## Generations (--evolve)", "");
    for (const g of s.generations) lines.push(`${g.n}. ${cell(g.line)}`);
    lines.push("");
  }
  lines.push("## Variants", "", "| variant | source | program.md as run |", "|---|---|---|");
  for (const v of s.variants) lines.push(`| ${cell(v.name)} | ${cell(v.source)} | ${cell(v.file)} |`);
  lines.push(
    "",
    "## Cells",
    "",
    "| variant | seed | baseline | best | improvement | experiments | trials |",
    "|---|---|---|---|---|---|---|",
  );
  const num = (x: number | undefined) => (x === undefined ? "–" : String(Number(x.toPrecision(6))));
  for (const c of s.cells)
    lines.push(
      `| ${cell(c.config)} | ${c.seed} | ${num(c.baseline)} | ${num(c.best)} | ${c.status === "ok" ? pct(c.improvement) : `failed: ${cell((c.error ?? "").replace(/\s+/g, " ").slice(0, 200))}`} | ${c.experiments} | ${c.trials} |`,
    );
  return `${lines.join("\n")}\n`;
}

/** report.md, curves.svg and report.json in `dir`; returns the files written. */
export function writeTournamentReport(s: TournamentSummary, dir: string): string[] {
  mkdirSync(dir, { recursive: true });
  const curves: Record<string, [number, number][]> = {};
  for (const v of s.variants) {
    const mine = s.cells.filter((c) => c.config === v.name);
    if (mine.length) curves[v.name] = meanCurve(mine);
  }
  const svg = join(dir, "curves.svg");
  writeFileSync(
    svg,
    renderCurves("Best so far vs compute per variant (mean improvement, %)", s.unit, curves),
  );
  const md = join(dir, "report.md");
  writeFileSync(md, renderTournamentMarkdown(s));
  const json = join(dir, "report.json");
  writeFileSync(json, `${JSON.stringify(s, null, 1)}\n`);
  return [md, svg, json];
}
