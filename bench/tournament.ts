/**
 * The tournament's verdict rule with known truth (issue #15 item 2; src/learn/tournament-stats.ts):
 * how often a challenger is declared to beat the incumbent when no variant is better (false
 * wins, family-wise: target ≤ 5%), and how often a truly better one is found (power), by the
 * number of seeds, the number of challengers and the interval that decides (the paired
 * bootstrap alone, Student's t alone, or the wider of the two: the default).
 *
 * Per-seed improvement of variant v on seed s: μ_v + a_s + e_vs — a_s shared by every variant on
 * that seed (the same baseline measurement and data order; σ 1), e_vs the variant's own run noise
 * (σ 1, normal, or Student's t with 3 degrees of freedom scaled to σ 1: heavy tails).
 *
 *   npm run bench -- tournament [--tournaments=2000] [--resamples=500] [--first-seed=1]
 */
import { mulberry32 } from "../src/core/random.ts";
import { rankVariants, type TournamentCell } from "../src/learn/tournament-stats.ts";

function arg(args: string[], name: string, fallback: number): number {
  const a = args.find((x) => x.startsWith(`--${name}=`));
  return a ? Number(a.split("=")[1]) : fallback;
}

function gaussian(rand: () => number): number {
  const u = Math.max(rand(), 1e-12);
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rand());
}

/** Student's t with 3 degrees of freedom, scaled to variance 1 (its variance is 3). */
function t3(rand: () => number): number {
  const z = gaussian(rand);
  let chi = 0;
  for (let i = 0; i < 3; i++) chi += gaussian(rand) ** 2;
  return z / Math.sqrt(chi / 3) / Math.sqrt(3);
}

export async function main(args: string[]) {
  const n = arg(args, "tournaments", 2000);
  const resamples = arg(args, "resamples", 500);
  const first = arg(args, "first-seed", 1);
  const rules = ["bootstrap", "t", "both"] as const;
  const rows: Record<string, unknown>[] = [];
  const started = performance.now();
  for (const noise of ["normal", "t3"] as const)
    for (const seeds of [3, 5, 10])
      for (const challengers of [1, 3])
        for (const delta of [0, 1, 2]) {
          const wins: Record<string, number> = { bootstrap: 0, t: 0, both: 0 };
          const rand = mulberry32(first * 1_000_003 + seeds * 101 + challengers * 7 + delta * 13);
          for (let i = 0; i < n; i++) {
            const variants = ["incumbent", ...Array.from({ length: challengers }, (_, j) => `c${j}`)];
            const cells: TournamentCell[] = [];
            const shared = Array.from({ length: seeds }, () => gaussian(rand));
            for (const v of variants)
              for (let s = 0; s < seeds; s++) {
                const mu = v === "c0" ? delta : 0;
                const e = noise === "normal" ? gaussian(rand) : t3(rand);
                cells.push({ variant: v, seed: s + 1, improvement: mu + (shared[s] as number) + e });
              }
            for (const rule of rules) {
              const st = rankVariants(cells, variants, "incumbent", resamples, i + 1, rule);
              // Null: any winner is false. Power: the truly better one must be the winner.
              if (delta === 0 ? st.winner !== undefined : st.winner === "c0")
                wins[rule] = (wins[rule] ?? 0) + 1;
            }
          }
          const rate = (r: string) => (wins[r] ?? 0) / n;
          const row = {
            noise,
            seeds,
            challengers,
            delta,
            bootstrap: rate("bootstrap"),
            t: rate("t"),
            both: rate("both"),
          };
          rows.push(row);
          console.log(
            `${noise.padEnd(6)} seeds ${String(seeds).padStart(2)} challengers ${challengers} Δ ${delta}σ: ${delta === 0 ? "false wins" : "found    "} bootstrap ${(row.bootstrap * 100).toFixed(1)}%  t ${(row.t * 100).toFixed(1)}%  both ${(row.both * 100).toFixed(1)}%`,
          );
        }
  return { tournaments: n, resamples, seconds: (performance.now() - started) / 1000, rows };
}
