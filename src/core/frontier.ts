/**
 * The tree frontier (program.md `frontier:`, docs/loop.md "The tree frontier"): which kept node
 * the next candidate builds on. Every node of the tree is a kept experiment — a keep (it moved
 * the ratchet) or a tree node (it credibly beat its parent but not the best: decision
 * `treeNode`). `best` is today's single-branch ratchet; the others may branch from any node.
 * Pure: the loop hands in the nodes and a seeded random source (`frontierRandom`).
 */
import { objectiveOf } from "./experiments.ts";
import type { ExperimentRecord } from "./ledger.ts";
import { mulberry32 } from "./random.ts";
import type { Direction } from "./types.ts";

export const FRONTIER_STRATEGIES = ["best", "top_k", "epsilon_greedy", "softmax", "pareto"] as const;
export type FrontierStrategy = (typeof FRONTIER_STRATEGIES)[number];

export interface FrontierConfig {
  strategy: FrontierStrategy;
  /** top_k (and pareto on one objective): a node drawn uniformly from the k best. */
  k: number;
  /** epsilon_greedy: the share of proposals built on a node drawn uniformly from all nodes. */
  epsilon: number;
  /**
   * softmax: a node drawn with weight exp(-gap / temperature), the gap from the best in units
   * of the nodes' range of values (0 = the best, 1 = the worst node).
   */
  temperature: number;
}

/** Chosen by `npm run bench -- frontier` (docs/benchmarks.md "Tree frontier"). */
export const DEFAULT_FRONTIER: FrontierConfig = { strategy: "best", k: 3, epsilon: 0.2, temperature: 0.25 };

export interface FrontierNode {
  n: number;
  /** The node's objective value (its decision's). */
  metric: number;
}

/** A node of the tree: a kept experiment, or one kept as a tree node without moving the ratchet. */
export function isTreeNode(e: ExperimentRecord): boolean {
  return e.decision?.action === "keep" || e.decision?.treeNode === true;
}

/** The tree's nodes with their values, in order of n. */
export function treeNodesOf(exps: readonly ExperimentRecord[], metric: string): FrontierNode[] {
  const out: FrontierNode[] = [];
  for (const e of exps) {
    if (!isTreeNode(e)) continue;
    const v = objectiveOf(e, metric);
    if (v !== undefined) out.push({ n: e.n, metric: v });
  }
  return out;
}

/** Whether `a` is strictly better than `b` in `direction`. */
export function isBetter(a: number, b: number, direction: Direction): boolean {
  return direction === "minimize" ? a < b : a > b;
}

/** The kept node (a keep or a tree node) `exp` grew from, if its parent is one. */
export function parentNodeOf(
  exps: readonly ExperimentRecord[],
  exp: ExperimentRecord,
): ExperimentRecord | undefined {
  return exps.find((e) => e.commit === exp.parentCommit && isTreeNode(e));
}

/**
 * The node the next candidate builds on: `best` when the strategy is `best` or the tree has one
 * node; otherwise drawn by the strategy with `random` (uniform in [0, 1)). Returns a node's n.
 */
export function chooseNode(
  config: FrontierConfig,
  nodes: readonly FrontierNode[],
  best: number,
  direction: Direction,
  random: () => number,
): number {
  if (config.strategy === "best" || nodes.length <= 1) return best;
  // Best first; ties keep the order of n (the earlier node first).
  const ranked = [...nodes].sort((a, b) =>
    direction === "minimize" ? a.metric - b.metric : b.metric - a.metric,
  );
  const pick = (list: readonly FrontierNode[]) =>
    (list[Math.min(list.length - 1, Math.floor(random() * list.length))] as FrontierNode).n;
  switch (config.strategy) {
    case "top_k":
    case "pareto": // one objective: pareto's front is one node; top_k is what it means here
      return pick(ranked.slice(0, Math.max(1, config.k)));
    case "epsilon_greedy":
      return random() < config.epsilon ? pick(nodes) : best;
    case "softmax": {
      const top = ranked[0] as FrontierNode;
      const worst = ranked[ranked.length - 1] as FrontierNode;
      const range = Math.abs(worst.metric - top.metric);
      const weights = ranked.map((node) =>
        range > 0 ? Math.exp(-Math.abs(node.metric - top.metric) / range / config.temperature) : 1,
      );
      const total = weights.reduce((s, w) => s + w, 0);
      let r = random() * total;
      for (let i = 0; i < ranked.length; i++) {
        r -= weights[i] as number;
        if (r < 0) return (ranked[i] as FrontierNode).n;
      }
      return (ranked[ranked.length - 1] as FrontierNode).n;
    }
  }
}

/**
 * The random source of proposal `n` of a run seeded `seed` (mulberry32 over a mix of both): the
 * same notebook chooses the same node again, so a resumed run builds where it would have.
 */
export function frontierRandom(seed: number, n: number): () => number {
  return mulberry32(Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(n + 0x5f356495, 0xc2b2ae35));
}
