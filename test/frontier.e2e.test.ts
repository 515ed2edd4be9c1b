import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createRun } from "../src/app/create-run.ts";
import { planFinalize } from "../src/app/finalize.ts";
import type { LoopEvent } from "../src/core/events.ts";
import { bestOf } from "../src/core/experiments.ts";
import { isTreeNode } from "../src/core/frontier.ts";
import type { ExperimentRecord } from "../src/core/ledger.ts";
import type { Agent, ProposalContext } from "../src/core/types.ts";
import { findRepo } from "../src/workspace/git-workspace.ts";
import { git, valueProject } from "./helpers/value-project.ts";

/** A researcher that lowers X by one from whatever node it is given, and says which node it saw. */
function stepDown(seen: Array<{ n: number; x: number }>, contexts: string[] = []): Agent {
  return {
    name: "step-down",
    async propose(ctx: ProposalContext) {
      const file = join(ctx.worktree, "value.mjs");
      const x = Number(/X = (-?\d+)/.exec(readFileSync(file, "utf8"))?.[1]);
      seen.push({ n: ctx.best.n, x });
      contexts.push(ctx.contextText);
      writeFileSync(file, `export const X = ${x - 1};\n`);
      return { hypothesis: `X ${x} → ${x - 1}` };
    },
  };
}

/** valueProject (greedy, minimize X) with `frontier` added to program.md and committed. */
function frontierProject(frontier: string): string {
  const dir = valueProject();
  const p = join(dir, "program.md");
  writeFileSync(
    p,
    readFileSync(p, "utf8").replace("acceptance: greedy\n", `acceptance: greedy\n${frontier}\n`),
  );
  git(dir, "commit", "-qam", "frontier");
  return dir;
}

const xOf = (dir: string, e: ExperimentRecord) =>
  Number(/X = (-?\d+)/.exec(git(dir, "show", `${e.commit}:value.mjs`))?.[1]);

describe("the tree frontier in a real run", () => {
  it("grows candidates from kept nodes other than the best, records the parent, and the ratchet follows only the best", async () => {
    const dir = frontierProject("frontier: { strategy: top_k, k: 3 }");
    const seen: Array<{ n: number; x: number }> = [];
    const contexts: string[] = [];
    const events: LoopEvent[] = [];
    const outcome = await createRun({
      program: dir,
      tag: "t",
      maxExperiments: 8,
      agent: stepDown(seen, contexts),
      onEvent: (e) => events.push(e),
    });
    const exps = outcome.lab.ledger.listExperiments(outcome.lab.ledger.getRun("t")?.id as number);
    outcome.lab.ledger.close();
    expect(exps).toHaveLength(9);

    let branchedFromNonBest = 0;
    for (const e of exps.slice(1)) {
      const before = exps.filter((x) => x.n < e.n);
      const parent = before.find((x) => x.commit === e.parentCommit);
      // The parent is recorded, and it is a kept node of the tree (a keep or a tree node).
      expect(parent, `#${e.n}'s parent`).toBeDefined();
      expect(isTreeNode(parent as ExperimentRecord)).toBe(true);
      // The researcher was told the node it builds on, and its worktree was at that node.
      expect(seen[e.n - 1]).toEqual({ n: parent?.n, x: xOf(dir, parent as ExperimentRecord) });
      expect(xOf(dir, e)).toBe(xOf(dir, parent as ExperimentRecord) - 1);
      const best = bestOf(before) as ExperimentRecord;
      if (parent?.n !== best.n) {
        branchedFromNonBest++;
        expect(events).toContainEqual({
          type: "proposal_started",
          n: e.n,
          agent: "step-down",
          parent: parent?.n,
        });
        // The researcher's notebook says where it builds (views.ts), beside the best.
        expect(contexts[e.n - 1]).toContain(`You build on kept node #${parent?.n} score = `);
      } else {
        expect(contexts[e.n - 1]).not.toContain("You build on kept node");
      }
      // Every candidate beats its parent (X - 1): kept when it beats the best too, else a tree node.
      if (xOf(dir, e) < (best.decision?.metric as number)) {
        expect(e.decision).toMatchObject({ action: "keep" });
        expect(e.decision?.treeNode).toBeUndefined();
      } else {
        expect(e.decision).toMatchObject({ action: "discard", treeNode: true, metric: xOf(dir, e) });
        expect(e.decision?.reason).toMatch(/^kept in the tree: .*; the best #\d+ \(.*\) stays$/);
      }
    }
    expect(branchedFromNonBest).toBeGreaterThan(0);
    expect(exps.some((e) => e.decision?.treeNode)).toBe(true);
    // The ratchet branch is the best (the last keep); the user's checkout is untouched.
    expect(git(dir, "rev-parse", "autolab/t")).toBe(bestOf(exps)?.commit);
    expect(readFileSync(join(dir, "value.mjs"), "utf8")).toBe("export const X = 5;\n");
  });

  it("a candidate left undecided on a tree node is judged against that node when the run resumes", async () => {
    const dir = frontierProject("frontier: { strategy: top_k, k: 3 }");
    const first = await createRun({ program: dir, tag: "t", maxExperiments: 8, agent: stepDown([]) });
    const ledger = first.lab.ledger;
    const run = ledger.getRun("t");
    if (!run) throw new Error("no run");
    const before = ledger.listExperiments(run.id);
    const node = before.find((e) => e.decision?.treeNode);
    if (!node) throw new Error("the first session made no tree node");
    // As a crash after the experiment row leaves it: commit + ref + row, no trial, no decision.
    const wt = join(dir, ".autolab", "worktrees", "t");
    git(wt, "checkout", "-q", "--detach", node.commit);
    const x = xOf(dir, node) - 1;
    writeFileSync(join(wt, "value.mjs"), `export const X = ${x};\n`);
    git(wt, "commit", "-qam", "candidate on a tree node");
    const sha = git(wt, "rev-parse", "HEAD");
    const n = before.length;
    git(dir, "update-ref", `refs/autolab/t/${n}`, sha);
    ledger.addExperiment({
      runId: run.id,
      n,
      agent: "step-down",
      parentCommit: node.commit,
      commit: sha,
      ref: `refs/autolab/t/${n}`,
      hypothesis: `X ${x + 1} → ${x}`,
      diff: { files: 1, insertions: 1, deletions: 1 },
    });
    ledger.close();

    const again = await createRun({ program: dir, tag: "t", maxExperiments: n, agent: stepDown([]) });
    const exps = again.lab.ledger.listExperiments(run.id);
    again.lab.ledger.close();
    expect(exps).toHaveLength(n + 1);
    const resumed = exps[n] as ExperimentRecord;
    const best = bestOf(before) as ExperimentRecord;
    // Not "stale": judged against #node (X one lower beats it), kept or a tree node by the best.
    expect(resumed.decision?.reason).not.toMatch(/stale/);
    expect(resumed.parentCommit).toBe(node.commit);
    if (x < (best.decision?.metric as number)) expect(resumed.decision?.action).toBe("keep");
    else expect(resumed.decision).toMatchObject({ action: "discard", treeNode: true });
    expect(git(dir, "rev-parse", "autolab/t")).toBe(bestOf(exps)?.commit);
  });

  it("with the noise-aware rule (the default) on a noisy objective: a candidate on a tree node is judged against that node", async () => {
    const dir = valueProject({ acceptance: "noise", noise: 0.05 });
    const p = join(dir, "program.md");
    writeFileSync(
      p,
      readFileSync(p, "utf8").replace(
        "acceptance: noise\n",
        "acceptance: noise\nfrontier: { strategy: epsilon_greedy, epsilon: 0.5 }\n",
      ),
    );
    git(dir, "commit", "-qam", "frontier");
    const outcome = await createRun({ program: dir, tag: "t", maxExperiments: 6, agent: stepDown([]) });
    const exps = outcome.lab.ledger.listExperiments(outcome.lab.ledger.getRun("t")?.id as number);
    outcome.lab.ledger.close();
    expect(exps).toHaveLength(7);
    let onTreeNodes = 0;
    for (const e of exps.slice(1)) {
      expect(e.decision?.reason).not.toMatch(/stale/);
      const parent = exps.find((x) => x.commit === e.parentCommit && x.n < e.n);
      expect(parent && isTreeNode(parent)).toBe(true);
      // The rule names its incumbent: the node the candidate grew from, a tree node included.
      if (parent?.decision?.treeNode) {
        onTreeNodes++;
        expect(e.decision?.reason).toContain(`trials, #${parent.n})`);
      }
    }
    expect(onTreeNodes).toBeGreaterThan(0);
    expect(git(dir, "rev-parse", "autolab/t")).toBe(bestOf(exps)?.commit);
  });

  it("frontier: best (the default) never branches: every candidate builds on the best", async () => {
    const dir = frontierProject("frontier: best");
    const seen: Array<{ n: number; x: number }> = [];
    const outcome = await createRun({ program: dir, tag: "t", maxExperiments: 4, agent: stepDown(seen) });
    const exps = outcome.lab.ledger.listExperiments(outcome.lab.ledger.getRun("t")?.id as number);
    outcome.lab.ledger.close();
    expect(exps.map((e) => e.decision?.action)).toEqual(["keep", "keep", "keep", "keep", "keep"]);
    expect(seen.map((s) => s.n)).toEqual([0, 1, 2, 3]);
    expect(exps.some((e) => e.decision?.treeNode)).toBe(false);
  });

  it("pareto on one objective says it draws like top_k, and branches like it", async () => {
    const dir = frontierProject("frontier: { strategy: pareto, k: 3 }");
    const events: LoopEvent[] = [];
    const outcome = await createRun({
      program: dir,
      tag: "t",
      maxExperiments: 5,
      agent: stepDown([]),
      onEvent: (e) => events.push(e),
    });
    const exps = outcome.lab.ledger.listExperiments(outcome.lab.ledger.getRun("t")?.id as number);
    outcome.lab.ledger.close();
    expect(events).toContainEqual({
      type: "warning",
      message: "frontier: pareto needs several objectives; with one (score) it draws like top_k (k = 3)",
    });
    expect(exps).toHaveLength(6);
    for (const e of exps.slice(1))
      expect(exps.some((x) => x.commit === e.parentCommit && isTreeNode(x))).toBe(true);
  });

  it("--slots with a branching frontier runs the scheduler, which branches too", async () => {
    const dir = frontierProject("frontier: { strategy: top_k, k: 3 }");
    const events: LoopEvent[] = [];
    const outcome = await createRun({
      program: dir,
      tag: "t",
      maxExperiments: 6,
      slots: 2,
      agent: stepDown([]),
      onEvent: (e) => events.push(e),
    });
    const exps = outcome.lab.ledger.listExperiments(outcome.run.id);
    outcome.lab.ledger.close();
    expect(exps).toHaveLength(7);
    // Two slots ran trials; every candidate grew from a kept node and nothing was merged.
    expect(new Set(exps.flatMap((e) => e.trials.map((t) => t.slot)))).toEqual(new Set([0, 1]));
    for (const e of exps.slice(1)) {
      expect(exps.some((x) => x.n < e.n && x.commit === e.parentCommit && isTreeNode(x))).toBe(true);
      expect(e.rebaseOf).toBeUndefined();
    }
    expect(git(dir, "rev-parse", "autolab/t")).toBe(bestOf(exps)?.commit);
  });
});

describe("finalize on a run that branched", () => {
  it("plans the best's own ancestry: each change against the node it grew from, never a sibling branch undone", async () => {
    const dir = frontierProject("frontier: { strategy: top_k, k: 3 }");
    const outcome = await createRun({ program: dir, tag: "t", maxExperiments: 8, agent: stepDown([]) });
    const exps = outcome.lab.ledger.listExperiments(outcome.run.id);
    outcome.lab.ledger.close();
    const keeps = exps.filter((e) => e.n > 0 && e.decision?.action === "keep");
    // This run moved the ratchet sideways at least once: a keep grown on a node other than the keep before it.
    const sideways = keeps.filter((e, i) => e.parentCommit !== (keeps[i - 1]?.commit ?? exps[0]?.commit));
    expect(sideways.length).toBeGreaterThan(0);
    const plan = await planFinalize(await findRepo(dir), outcome.run, exps);
    const byN = new Map(exps.map((e) => [e.n, e]));
    // A chain from the base to the best, each change diffed from its own parent node.
    expect(plan.changes.at(-1)?.commit).toBe(bestOf(exps)?.commit);
    for (const [i, c] of plan.changes.entries()) {
      expect(c.parent, `#${c.n}`).toBe(i === 0 ? outcome.run.baseCommit : plan.changes[i - 1]?.commit);
      if (i > 0) expect(c.parent).toBe(byN.get(c.n)?.parentCommit);
      expect(isTreeNode(byN.get(c.n) as ExperimentRecord)).toBe(true);
    }
    // The last branch (all of the best's changes) holds exactly the best's tree.
    const last = plan.branches.find((b) => b.n === plan.changes.at(-1)?.n);
    expect(git(dir, "rev-parse", `${last?.tip}^{tree}`)).toBe(
      git(dir, "rev-parse", `${bestOf(exps)?.commit}^{tree}`),
    );
  });
});
