import type { ImportedResultRecord } from "../core/ledger.ts";

/**
 * Imported results (`autolab init --from`) as status, report and the dashboard summarize them.
 * They are claims another tool recorded: counted and shown apart, never a baseline, never the
 * best, never part of any acceptance decision (docs/migrate.md).
 */
export const PRIOR_HISTORY_NOTE = "before autolab, not re-measured";

export interface PriorHistory {
  /** Always PRIOR_HISTORY_NOTE: whoever shows these numbers shows this with them. */
  note: string;
  count: number;
  /** Sources in import order, e.g. `autoresearch:results.tsv`. */
  sources: string[];
  /** How many results the source marked keep, discard, crash, … */
  statuses: Record<string, number>;
  /** The last result the source kept that has the objective metric: where the user left off. */
  lastKept: { source: string; seq: number; commit: string; metric: number; description: string } | null;
}

export function priorHistoryOf(
  imported: readonly ImportedResultRecord[],
  metric: string,
): PriorHistory | null {
  if (!imported.length) return null;
  const statuses: Record<string, number> = {};
  for (const r of imported) statuses[r.status] = (statuses[r.status] ?? 0) + 1;
  const kept = [...imported].reverse().find((r) => r.status === "keep" && r.metrics[metric] !== undefined);
  return {
    note: PRIOR_HISTORY_NOTE,
    count: imported.length,
    sources: [...new Set(imported.map((r) => r.source))],
    statuses,
    lastKept: kept
      ? {
          source: kept.source,
          seq: kept.seq,
          commit: kept.commit,
          metric: kept.metrics[metric] as number,
          description: kept.description,
        }
      : null,
  };
}
