/**
 * The run's budget: how many experiments (--max-experiments), how many trials (--max-trials) and
 * how much time (--max-time) this invocation may spend. The loop stops when any of them is spent,
 * and the judge is told the share left of the tightest one (JudgeInput.budget): it explores while
 * much is left and confirms at the end (docs/noise.md, "Budget-aware exploration").
 */
import { formatWholeSeconds } from "./format.ts";
import type { ExperimentRecord } from "./ledger.ts";

export interface RunBudget {
  /** Experiments besides the baseline, over the whole run (what --max-experiments counts). */
  experiments?: number;
  /**
   * Trials of every kind, over the whole run: the baseline's, each candidate's, re-measurements
   * of the incumbent and cheaper rungs of a proxy ladder — every trial started and not
   * interrupted (an interrupted trial runs again and is counted then).
   */
  trials?: number;
  /** This invocation's wall-clock window (epoch ms): no trial starts after `end`. */
  time?: { start: number; end: number };
  /**
   * USD the researchers may spend over the whole run (--max-cost): what their proposals
   * reported (usage.costUsd), plus proposals in flight at the mean cost of one.
   */
  cost?: number;
}

/** USD the run's researchers reported (proposals without a price count 0). */
export function costSpent(exps: readonly ExperimentRecord[]): number {
  let usd = 0;
  for (const e of exps) if (Number.isFinite(e.usage?.costUsd)) usd += e.usage?.costUsd as number;
  return usd;
}

/** The mean cost of a priced proposal so far, or undefined before the first reported one. */
export function costPerProposal(exps: readonly ExperimentRecord[]): number | undefined {
  const priced = exps.filter((e) => Number.isFinite(e.usage?.costUsd));
  return priced.length ? costSpent(priced) / priced.length : undefined;
}

/** "$0.42" (cents), "$0.0031" below a cent. */
export function formatUsd(usd: number): string {
  return usd >= 0.01 || usd === 0 ? `$${usd.toFixed(2)}` : `$${Number(usd.toPrecision(2))}`;
}

/** Whether the budget bounds anything (an unbounded run is judged the same way throughout). */
export function isBounded(budget: RunBudget | undefined): budget is RunBudget {
  return (
    budget !== undefined &&
    (budget.experiments !== undefined ||
      budget.trials !== undefined ||
      budget.time !== undefined ||
      budget.cost !== undefined)
  );
}

/** Trials the run has started, interrupted ones excepted (they run again). */
export function trialsUsed(exps: readonly ExperimentRecord[]): number {
  let used = 0;
  for (const e of exps) for (const t of e.trials) if (t.result?.status !== "interrupted") used++;
  return used;
}

/**
 * The share of the budget left, in the unit of the limit that binds (the smallest share):
 * experiments not yet started (`current`, the one being judged, counts as started), trials not
 * yet started, or seconds. Undefined for an unbounded run.
 */
export function budgetLeft(
  budget: RunBudget | undefined,
  exps: readonly ExperimentRecord[],
  current = 0,
  now = Date.now(),
): { left: number; total: number } | undefined {
  if (!isBounded(budget)) return undefined;
  const shares: { left: number; total: number }[] = [];
  if (budget.experiments !== undefined) {
    const started = Math.max(current, exps.filter((e) => e.n > 0).length);
    shares.push({ left: Math.max(0, budget.experiments - started), total: budget.experiments });
  }
  if (budget.trials !== undefined) {
    shares.push({ left: Math.max(0, budget.trials - trialsUsed(exps)), total: budget.trials });
  }
  if (budget.time) {
    const total = Math.max(1, Math.round((budget.time.end - budget.time.start) / 1000));
    shares.push({ left: Math.max(0, Math.round((budget.time.end - now) / 1000)), total });
  }
  if (budget.cost !== undefined && budget.cost > 0) {
    // In cents, so the share is comparable with the other limits' whole units.
    const total = Math.round(budget.cost * 100);
    shares.push({ left: Math.max(0, Math.round((budget.cost - costSpent(exps)) * 100)), total });
  }
  const share = (x: { left: number; total: number }) => (x.total > 0 ? x.left / x.total : 0);
  return shares.reduce((a, b) => (share(b) < share(a) ? b : a));
}

/**
 * Why no new experiment may start (the run ends there), or undefined while the budget lasts.
 * `issued` counts experiments already proposed (a parallel run proposes ahead of its trials).
 */
export function experimentsSpent(
  budget: RunBudget | undefined,
  exps: readonly ExperimentRecord[],
  issued = exps.filter((e) => e.n > 0).length,
  now = Date.now(),
): string | undefined {
  if (!budget) return undefined;
  if (budget.experiments !== undefined && issued >= budget.experiments) {
    return `reached --max-experiments ${budget.experiments}`;
  }
  const cost = costReached(budget, exps, Math.max(0, issued - exps.filter((e) => e.n > 0).length));
  return cost ?? trialsSpent(budget, exps, now);
}

/**
 * Why no new proposal may start on cost: what was spent, plus the proposals in flight and the
 * next one at the mean cost of a proposal, would pass --max-cost. Before any proposal reported a
 * cost, only what was spent counts (the first one sets the estimate).
 */
export function costReached(
  budget: RunBudget | undefined,
  exps: readonly ExperimentRecord[],
  inFlight = 0,
): string | undefined {
  if (budget?.cost === undefined) return undefined;
  const spent = costSpent(exps);
  const each = costPerProposal(exps) ?? 0;
  const expected = spent + (inFlight + 1) * each;
  if (spent < budget.cost && expected <= budget.cost) return undefined;
  const flight = inFlight ? `, ${inFlight} in flight at ~${formatUsd(each)} each` : "";
  return `reached --max-cost ${formatUsd(budget.cost)} (${formatUsd(spent)} spent${flight}; the next proposal would cost ~${formatUsd(each)})`;
}

/**
 * The pre-flight line of a run with --max-cost: what was spent, what a proposal costs so far
 * and how many more fit; or why the cap cannot bind.
 */
export function costPreflight(
  budget: RunBudget | undefined,
  exps: readonly ExperimentRecord[],
  agent: string,
): string | undefined {
  if (budget?.cost === undefined) return undefined;
  const spent = costSpent(exps);
  const each = costPerProposal(exps);
  const head = `cost cap ${formatUsd(budget.cost)} for the researchers (${formatUsd(spent)} spent so far)`;
  if (agent === "builtin")
    return `${head}: the built-in researcher costs nothing, so --max-cost will not stop this run`;
  if (each === undefined)
    return `${head}: no proposal has reported a cost yet; the first one sets the estimate (a researcher that reports no cost, or a model missing from the price table without agent.price, is counted as free)`;
  const more = each > 0 ? Math.max(0, Math.floor((budget.cost - spent) / each)) : Number.POSITIVE_INFINITY;
  return `${head}: ~${formatUsd(each)} per proposal so far, so about ${Number.isFinite(more) ? more : "unlimited"} more proposal${more === 1 ? "" : "s"}`;
}

/** Why no further trial may start, or undefined while trials and time last. */
export function trialsSpent(
  budget: RunBudget | undefined,
  exps: readonly ExperimentRecord[],
  now = Date.now(),
): string | undefined {
  if (!budget) return undefined;
  if (budget.trials !== undefined && trialsUsed(exps) >= budget.trials) {
    return `reached --max-trials ${budget.trials}`;
  }
  if (budget.time && now >= budget.time.end) {
    return `reached --max-time ${formatWholeSeconds(budget.time.end - budget.time.start)}`;
  }
  return undefined;
}
