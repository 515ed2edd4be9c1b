/**
 * A tournament's standings (issue #15 item 2): N variants of one program's instructions, each
 * run on the same seeds under the same budget, ranked by their mean final improvement, with
 * confidence from a seeded paired bootstrap over seeds. Pure: no files, no runs.
 *
 * Pairing is the point: the same seed gives every variant the same baseline measurement and
 * the same luck of the draw in the harness, so the difference between two variants on one
 * seed carries less noise than either's improvement. Each resample draws seeds with
 * replacement and recomputes every variant's mean on those same seeds; from that one set of
 * resamples come each variant's interval, its difference to the incumbent, and how often it
 * is the best (P(best)).
 */
import { mulberry32 } from "../core/random.ts";
import { mean as meanOf } from "../core/stats.ts";
import { tQuantile } from "../trust/stats.ts";

/** One variant's result on one seed: its final improvement in percent (0 when the cell failed). */
export interface TournamentCell {
  variant: string;
  seed: number;
  improvement: number;
  failed?: boolean;
}

export interface Standing {
  variant: string;
  /** 1 = best mean improvement. */
  rank: number;
  /** Mean final improvement (%) over the common seeds, with its 95% bootstrap interval. */
  mean: number;
  lo: number;
  hi: number;
  /** The share of resamples in which this variant had the highest mean (ties share). */
  pBest: number;
  /**
   * The paired difference to the incumbent (percentage points), at the family-wise level
   * (Bonferroni over the challengers); absent for the incumbent itself.
   */
  vsIncumbent?: { mean: number; lo: number; hi: number; level: number; beats: boolean; worse: boolean };
  seeds: number;
  failed: number;
}

export interface Standings {
  incumbent: string;
  /** Seeds every variant has a cell for: the only ones compared. */
  seeds: number[];
  standings: Standing[];
  /** The challenger that beats the incumbent with confidence and has the best mean, if any. */
  winner?: string;
}

function quantile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.floor(p * sorted.length)))] as number;
}

/**
 * Ranks the variants. `variants` lists them in a stable order (the incumbent among them); a
 * variant without a cell on some seed leaves that seed out of the comparison for everyone.
 * A challenger "beats" the incumbent when the lower bound of its paired difference, at the
 * 1 − 0.05/(challengers) level, is above zero — with several challengers one lucky one must not
 * pass as a win. That interval is the wider of the paired bootstrap's and Student's t on the
 * per-seed differences (the bootstrap alone is too narrow on few seeds); on one seed it is
 * unbounded: no verdict.
 */
export function rankVariants(
  cells: readonly TournamentCell[],
  variants: readonly string[],
  incumbent: string,
  resamples = 2000,
  seed = 1,
  /** The interval that decides (bench/tournament.ts compares them): default both, the wider. */
  decide: "both" | "bootstrap" | "t" = "both",
): Standings {
  const by = new Map<string, Map<number, TournamentCell>>();
  for (const v of variants) by.set(v, new Map());
  for (const c of cells) by.get(c.variant)?.set(c.seed, c);
  const allSeeds = [...new Set(cells.map((c) => c.seed))].sort((a, b) => a - b);
  const seeds = allSeeds.filter((s) => variants.every((v) => by.get(v)?.has(s)));
  const value = (v: string, s: number) => by.get(v)?.get(s)?.improvement ?? 0;
  const k = seeds.length;
  const meanOn = (v: string, idx: readonly number[]) =>
    idx.reduce((sum, i) => sum + value(v, seeds[i] as number), 0) / idx.length;
  const identity = seeds.map((_, i) => i);
  const challengers = variants.filter((v) => v !== incumbent);
  const level = challengers.length > 0 ? 1 - 0.05 / challengers.length : 0.95;

  const rand = mulberry32(seed);
  const draws: Record<string, number[]> = {};
  const diffs: Record<string, number[]> = {};
  const best: Record<string, number> = {};
  for (const v of variants) {
    draws[v] = [];
    diffs[v] = [];
    best[v] = 0;
  }
  if (k > 0)
    for (let b = 0; b < resamples; b++) {
      const idx = Array.from({ length: k }, () => Math.min(k - 1, Math.floor(rand() * k)));
      const means = variants.map((v) => meanOn(v, idx));
      const top = Math.max(...means);
      const tied = means.filter((m) => m >= top - 1e-12).length;
      variants.forEach((v, i) => {
        const m = means[i] as number;
        draws[v]?.push(m);
        if (m >= top - 1e-12) best[v] = (best[v] ?? 0) + 1 / tied;
      });
      const inc = means[variants.indexOf(incumbent)] as number;
      variants.forEach((v, i) => {
        diffs[v]?.push((means[i] as number) - inc);
      });
    }

  const standings: Standing[] = variants.map((v) => {
    const d = [...(draws[v] ?? [])].sort((a, b) => a - b);
    const failed = seeds.filter((s) => by.get(v)?.get(s)?.failed).length;
    const s: Standing = {
      variant: v,
      rank: 0,
      mean: k ? meanOn(v, identity) : Number.NaN,
      lo: quantile(d, 0.025),
      hi: quantile(d, 0.975),
      pBest: k ? (best[v] ?? 0) / resamples : Number.NaN,
      seeds: k,
      failed,
    };
    if (v !== incumbent && k) {
      const dd = [...(diffs[v] ?? [])].sort((a, b) => a - b);
      const alpha = 1 - level;
      const paired = seeds.map((sd) => value(v, sd) - value(incumbent, sd));
      const boot = [quantile(dd, alpha / 2), quantile(dd, 1 - alpha / 2)] as const;
      const { mean, lo, hi } = widerInterval(paired, boot, level, decide);
      s.vsIncumbent = { mean, lo, hi, level, beats: lo > 0, worse: hi < 0 };
    }
    return s;
  });
  const order = [...standings].sort(
    (a, b) =>
      (Number.isNaN(b.mean) ? -Infinity : b.mean) - (Number.isNaN(a.mean) ? -Infinity : a.mean) ||
      variants.indexOf(a.variant) - variants.indexOf(b.variant),
  );
  order.forEach((s, i) => {
    s.rank = i + 1;
  });
  const winner = order.find((s) => s.vsIncumbent?.beats)?.variant;
  return { incumbent, seeds, standings: order, ...(winner ? { winner } : {}) };
}

/**
 * The interval that decides a paired comparison, here and in the bench's verdict (issue #38):
 * the wider of a percentile bootstrap's `boot` and Student's t on `units`, the paired
 * differences of the independent units the claim is about (seeds of one program in a
 * tournament, programs in a bench), both two-sided at `level`. The percentile bootstrap is too
 * narrow on a handful of units — over 2–3 programs it called a null difference a win 8.45% of
 * the time at a nominal 2.5% — and t is honest there; on many units they agree. One unit
 * bounds nothing: t is infinite, so nothing is decided. `decide` picks one side alone
 * (bench/tournament.ts compares them).
 */
export function widerInterval(
  units: readonly number[],
  boot: readonly [number, number],
  level: number,
  decide: "both" | "bootstrap" | "t" = "both",
): { mean: number; lo: number; hi: number; t: readonly [number, number] } {
  const k = units.length;
  const mean = k ? meanOf(units) : Number.NaN;
  const half =
    k >= 2
      ? tQuantile(1 - (1 - level) / 2, k - 1) *
        Math.sqrt(units.reduce((a, d) => a + (d - mean) ** 2, 0) / (k - 1) / k)
      : Number.POSITIVE_INFINITY;
  const t = [mean - half, mean + half] as const;
  const [lo, hi] =
    decide === "bootstrap" ? boot : decide === "t" ? t : [Math.min(boot[0], t[0]), Math.max(boot[1], t[1])];
  return { mean, lo, hi, t };
}

function signed(x: number, digits = 2): string {
  if (!Number.isFinite(x)) return "–";
  const s = x.toFixed(digits);
  return x >= 0 ? `+${s}` : s;
}

/** One line per variant, best first: what `autolab tournament` prints. */
export function standingLines(s: Standings): string[] {
  const width = Math.max(...s.standings.map((x) => x.variant.length), 9);
  return s.standings.map((x) => {
    const head = `${String(x.rank).padStart(2)}. ${x.variant.padEnd(width)}  ${signed(x.mean)}% [${signed(x.lo)}, ${signed(x.hi)}]  P(best) ${Number.isFinite(x.pBest) ? x.pBest.toFixed(2) : "–"}`;
    const failed = x.failed ? `  (${x.failed} failed cell${x.failed === 1 ? "" : "s"})` : "";
    if (!x.vsIncumbent) return `${head}  (incumbent)${failed}`;
    const v = x.vsIncumbent;
    const verdict = v.beats
      ? "beats the incumbent"
      : v.worse
        ? "worse than the incumbent"
        : "no clear difference";
    return `${head}  vs incumbent ${signed(v.mean)} [${signed(v.lo)}, ${signed(v.hi)}] at ${(100 * v.level).toFixed(1)}%: ${verdict}${failed}`;
  });
}
