/**
 * The run's tree (the tree frontier, docs/loop.md): its kept nodes — keeps and tree nodes — each
 * with the node it grew from, its value and whether it is the best. With `frontier: best` the
 * tree is a chain (the kept changes in order). Read by `autolab report`, GET /api/tree and the
 * dashboard's tree view; pure.
 */
import { bestOf, objectiveOf } from "../core/experiments.ts";
import { firstLine, formatMetric } from "../core/format.ts";
import { isTreeNode } from "../core/frontier.ts";
import type { ExperimentRecord, RunRecord } from "../core/ledger.ts";
import { mdText } from "./markdown.ts";

export interface TreeNodeJson {
  n: number;
  /** The kept node it grew from (its parent commit's), null for the baseline. */
  parent: number | null;
  /** Its objective value (the decision's), null when none was measured. */
  metric: number | null;
  /** "keep": it moved the ratchet; "node": kept in the tree only (beat its parent, not the best). */
  kind: "keep" | "node";
  /** The run's best now (the ratchet's commit). */
  best: boolean;
  /** The hypothesis's first line (researcher text: escape it wherever it is shown). */
  hypothesis: string;
}

export interface TreeJson {
  run: string;
  metric: string;
  direction: RunRecord["direction"];
  /** Whether any node grew from a node other than the best of its time (else it is a chain). */
  branched: boolean;
  /** In order of n: a parent always comes before its children. */
  nodes: TreeNodeJson[];
}

export function treeOf(run: RunRecord, exps: readonly ExperimentRecord[]): TreeJson {
  const best = bestOf([...exps]);
  const byCommit = new Map<string, ExperimentRecord>();
  const nodes: TreeNodeJson[] = [];
  let branched = false;
  let lastKeep: ExperimentRecord | undefined;
  for (const e of exps) {
    if (!isTreeNode(e)) continue;
    const parent = e.n === 0 ? undefined : byCommit.get(e.parentCommit);
    if (e.decision?.treeNode || (parent && lastKeep && parent.n !== lastKeep.n)) branched = true;
    nodes.push({
      n: e.n,
      parent: parent?.n ?? null,
      metric: objectiveOf(e, run.metric) ?? null,
      kind: e.decision?.action === "keep" ? "keep" : "node",
      best: e.n === best?.n,
      hypothesis: firstLine(e.hypothesis),
    });
    byCommit.set(e.commit, e);
    if (e.decision?.action === "keep") lastKeep = e;
  }
  return { run: run.tag, metric: run.metric, direction: run.direction, branched, nodes };
}

/**
 * The tree as a Markdown nested list, children under their parent in order of n: `#n value —
 * hypothesis`, the best marked, tree nodes (not on the ratchet) marked. Researcher text escaped.
 */
export function treeMarkdown(tree: TreeJson): string[] {
  const children = new Map<number | null, TreeNodeJson[]>();
  for (const node of tree.nodes) {
    const list = children.get(node.parent) ?? [];
    list.push(node);
    children.set(node.parent, list);
  }
  const lines: string[] = [];
  const walk = (parent: number | null, depth: number) => {
    for (const node of children.get(parent) ?? []) {
      const value = node.metric === null ? "—" : formatMetric(node.metric);
      const mark = node.best ? " **(best)**" : node.kind === "node" ? " _(tree node)_" : "";
      lines.push(
        `${"  ".repeat(depth)}- #${node.n} ${mdText(tree.metric)} ${value}${mark} — ${mdText(node.hypothesis)}`,
      );
      walk(node.n, depth + 1);
    }
  };
  walk(null, 0);
  return lines;
}
