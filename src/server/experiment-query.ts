import { AutolabError } from "../core/errors.ts";
import { lastResult, objectiveOf } from "../core/experiments.ts";
import type { ExperimentRecord } from "../core/ledger.ts";

export const DECISIONS = ["keep", "discard", "crash", "reject", "pending"] as const;
export const SORT_KEYS = ["n", "metric", "wall", "decision", "created"] as const;

export interface ExperimentQuery {
  decisions?: string[];
  /** Case-insensitive text in hypothesis, mechanism, reason, agent, commit; "#12" finds experiment 12. */
  q?: string;
  /** A SORT_KEYS key, "-" in front for descending. Default "n". Experiments without a value sort last. */
  sort?: string;
  limit?: number;
  offset?: number;
}

/** Parses `?decision=&q=&sort=&limit=&offset=`; bad values are BAD_QUERY errors (HTTP 400). */
export function parseExperimentQuery(params: Record<string, string | undefined>): ExperimentQuery {
  const q: ExperimentQuery = {};
  if (params.decision) {
    const list = params.decision
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
    for (const d of list)
      if (!(DECISIONS as readonly string[]).includes(d))
        throw new AutolabError("BAD_QUERY", `unknown decision "${d}".`, `Use ${DECISIONS.join(", ")}.`);
    q.decisions = list;
  }
  if (params.q) q.q = params.q;
  if (params.sort) {
    const key = params.sort.replace(/^-/, "");
    if (!(SORT_KEYS as readonly string[]).includes(key))
      throw new AutolabError(
        "BAD_QUERY",
        `cannot sort by "${key}".`,
        `Use ${SORT_KEYS.join(", ")} (prefix - to reverse).`,
      );
    q.sort = params.sort;
  }
  for (const k of ["limit", "offset"] as const) {
    const v = params[k];
    if (v === undefined || v === "") continue;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0)
      throw new AutolabError("BAD_QUERY", `${k} must be a whole number ≥ 0.`);
    q[k] = n;
  }
  return q;
}

export function applyExperimentQuery(
  exps: ExperimentRecord[],
  metric: string,
  query: ExperimentQuery,
): { total: number; offset: number; limit: number; page: ExperimentRecord[] } {
  let list = exps;
  if (query.decisions?.length) {
    const want = new Set(query.decisions);
    list = list.filter((e) => want.has(e.decision?.action ?? "pending"));
  }
  if (query.q) {
    const text = query.q.trim().toLowerCase();
    const num = /^#(\d+)$/.exec(text);
    list = num
      ? list.filter((e) => e.n === Number(num[1]))
      : list.filter((e) =>
          [e.hypothesis, e.mechanism, e.decision?.reason, e.agent, e.commit].some((s) =>
            s?.toLowerCase().includes(text),
          ),
        );
  }
  const sort = query.sort ?? "n";
  const desc = sort.startsWith("-");
  const key = sort.replace(/^-/, "");
  if (key !== "n" || desc) {
    const value = (e: ExperimentRecord): number | string | undefined => {
      switch (key) {
        case "metric":
          return objectiveOf(e, metric);
        case "wall":
          return lastResult(e)?.wallS;
        case "decision":
          return e.decision?.action ?? "pending";
        case "created":
          return e.createdAt;
        default:
          return e.n;
      }
    };
    const keyed = list.map((e) => ({ e, v: value(e) }));
    keyed.sort((a, b) => {
      if (a.v === undefined || b.v === undefined) {
        if (a.v === b.v) return a.e.n - b.e.n;
        return a.v === undefined ? 1 : -1;
      }
      const c = a.v < b.v ? -1 : a.v > b.v ? 1 : a.e.n - b.e.n;
      return desc ? -c : c;
    });
    list = keyed.map((k) => k.e);
  }
  const offset = query.offset ?? 0;
  const limit = Math.min(query.limit ?? 100, 10_000);
  return { total: list.length, offset, limit, page: list.slice(offset, offset + limit) };
}
