/**
 * The proxy ladder: optional fidelities (budgets such as 30s, 2m, 10m). Candidates start on
 * the cheapest rung; the best fraction of each rung is promoted to the next; and the rank
 * correlation (Spearman) between adjacent rungs, over candidates measured on both, tells
 * whether the cheap proxy still predicts the expensive one. When it drops below a threshold
 * with enough pairs, an alarm is raised: promotions by the proxy are then no better than luck.
 *
 * Pure functions plus a small in-memory record; the lead wires it to the scheduler and ledger.
 */
import type { Direction } from "../core/types.ts";
import { spearman } from "./stats.ts";

export interface Pair {
  /** Value on the cheaper rung. */
  low: number;
  /** Value of the same candidate on the more expensive rung. */
  high: number;
}

/** Spearman's rank correlation of paired observations (non-finite pairs dropped); NaN below 3 pairs. */
export function rankCorrelation(pairs: readonly Pair[]): number {
  const ok = pairs.filter((p) => Number.isFinite(p.low) && Number.isFinite(p.high));
  if (ok.length < 3) return Number.NaN;
  return spearman(
    ok.map((p) => p.low),
    ok.map((p) => p.high),
  );
}

export interface ProxyCheckOptions {
  /** Alarm when the correlation is below this. Default 0.5. */
  threshold?: number;
  /** Pairs needed before any verdict (rho from a handful of pairs is mostly noise). Default 8. */
  minPairs?: number;
  /** Only the most recent pairs count (a proxy that stops predicting shows up there). Default: all. */
  window?: number;
  /** Names for the reason, e.g. "30s" and "2m". */
  lowName?: string;
  highName?: string;
}

export interface ProxyCheck {
  alarm: boolean;
  /** Spearman's rho over the pairs considered; NaN when too few. */
  rho: number;
  pairs: number;
  reason: string;
}

export function checkProxy(pairs: readonly Pair[], options: ProxyCheckOptions = {}): ProxyCheck {
  const threshold = options.threshold ?? 0.5;
  const minPairs = options.minPairs ?? 8;
  const ok = pairs.filter((p) => Number.isFinite(p.low) && Number.isFinite(p.high));
  const used = options.window ? ok.slice(-options.window) : ok;
  const names = `${options.lowName ?? "the cheap rung"} → ${options.highName ?? "the expensive rung"}`;
  if (used.length < minPairs) {
    return {
      alarm: false,
      rho: used.length >= 3 ? rankCorrelation(used) : Number.NaN,
      pairs: used.length,
      reason: `proxy ${names}: ${used.length} of ${minPairs} paired results needed before judging`,
    };
  }
  const rho = rankCorrelation(used);
  if (Number.isNaN(rho)) {
    return {
      alarm: true,
      rho,
      pairs: used.length,
      reason: `proxy ${names}: one side has no spread over ${used.length} pairs, so it cannot rank candidates`,
    };
  }
  const text = `rank correlation ${rho.toFixed(2)} over ${used.length} candidates`;
  return rho < threshold
    ? {
        alarm: true,
        rho,
        pairs: used.length,
        reason: `proxy ${names} stopped predicting: ${text} < ${threshold}; promote more candidates or drop the cheap rung`,
      }
    : { alarm: false, rho, pairs: used.length, reason: `proxy ${names} holds: ${text}` };
}

/**
 * The best `fraction` of the items (at least one) by value in the given direction; items
 * with non-finite values (failed) are never promoted. Ties keep their input order.
 */
export function promote<T>(
  items: readonly T[],
  value: (item: T) => number,
  fraction: number,
  direction: Direction,
): T[] {
  const sign = direction === "minimize" ? 1 : -1;
  const ok = items
    .map((item, i) => ({ item, i, v: value(item) }))
    .filter((x) => Number.isFinite(x.v))
    .sort((a, b) => sign * (a.v - b.v) || a.i - b.i);
  if (ok.length === 0) return [];
  const k = Math.max(1, Math.min(ok.length, Math.ceil(fraction * ok.length)));
  return ok.slice(0, k).map((x) => x.item);
}

export interface ProxyLadderOptions extends Omit<ProxyCheckOptions, "lowName" | "highName"> {
  /** Rung names from cheapest to most expensive, e.g. ["30s", "2m", "10m"]. */
  rungs: readonly string[];
  direction: Direction;
  /** Fraction of a rung promoted to the next. Default 1/3. */
  promoteFraction?: number;
}

export interface ProxyLadder {
  /** Records a candidate's value on a rung (later values for the same pair replace earlier). */
  record(id: string, rung: number, value: number): void;
  /** Candidates of `rung` that deserve the next rung and have not been measured there yet. */
  promotions(rung: number): string[];
  /** Pairs of values for candidates measured on both rungs, in recording order. */
  pairs(lower: number, upper: number): Pair[];
  /** One check per adjacent pair of rungs. */
  check(): ProxyCheck[];
}

export function createProxyLadder(options: ProxyLadderOptions): ProxyLadder {
  const values = options.rungs.map(() => new Map<string, number>());
  const rung = (i: number): Map<string, number> => {
    const m = values[i];
    if (!m) throw new RangeError(`no rung ${i}: the ladder has ${options.rungs.length}`);
    return m;
  };
  const ladder: ProxyLadder = {
    record(id, i, value) {
      const m = rung(i);
      m.delete(id);
      m.set(id, value);
    },
    promotions(i) {
      if (i + 1 >= options.rungs.length) return [];
      const here = [...rung(i)];
      const next = rung(i + 1);
      const chosen = promote(here, ([, v]) => v, options.promoteFraction ?? 1 / 3, options.direction);
      return chosen.map(([id]) => id).filter((id) => !next.has(id));
    },
    pairs(lower, upper) {
      const hi = rung(upper);
      return [...hi].flatMap(([id, high]) => {
        const low = rung(lower).get(id);
        return low === undefined ? [] : [{ low, high }];
      });
    },
    check() {
      const out: ProxyCheck[] = [];
      for (let i = 0; i + 1 < options.rungs.length; i++) {
        out.push(
          checkProxy(ladder.pairs(i, i + 1), {
            ...options,
            lowName: options.rungs[i] as string,
            highName: options.rungs[i + 1] as string,
          }),
        );
      }
      return out;
    },
  };
  return ladder;
}
