import { describe, expect, it } from "vitest";
import { onTree } from "../src/core/decide.ts";
import { AutolabError } from "../src/core/errors.ts";
import {
  chooseNode,
  DEFAULT_FRONTIER,
  type FrontierConfig,
  type FrontierNode,
  frontierRandom,
  isTreeNode,
  treeNodesOf,
} from "../src/core/frontier.ts";
import { climbLadder } from "../src/core/ladder.ts";
import type { ExperimentRecord } from "../src/core/ledger.ts";
import type { LoopDeps } from "../src/core/loop-deps.ts";
import type { Decision, TrialResult } from "../src/core/types.ts";
import { parseProgram } from "../src/program/parse.ts";

const NODES: FrontierNode[] = [
  { n: 0, metric: 10 },
  { n: 2, metric: 6 },
  { n: 3, metric: 8 },
  { n: 5, metric: 4 }, // the best (minimize)
  { n: 7, metric: 9 },
];

const config = (c: Partial<FrontierConfig>): FrontierConfig => ({ ...DEFAULT_FRONTIER, ...c });

/** How often each node is chosen over `draws` proposals, n → count. */
function counts(
  c: FrontierConfig,
  nodes = NODES,
  draws = 4000,
  direction: "minimize" | "maximize" = "minimize",
) {
  const out = new Map<number, number>();
  const best = [...nodes].sort((a, b) =>
    direction === "minimize" ? a.metric - b.metric : b.metric - a.metric,
  )[0]?.n as number;
  for (let i = 0; i < draws; i++) {
    const n = chooseNode(c, nodes, best, direction, frontierRandom(42, i + 1));
    out.set(n, (out.get(n) ?? 0) + 1);
  }
  return out;
}

describe("chooseNode: the strategies", () => {
  it("best always builds on the best", () => {
    expect(counts(config({ strategy: "best" }))).toEqual(new Map([[5, 4000]]));
  });

  it("a tree of one node is that node, whatever the strategy", () => {
    for (const strategy of ["top_k", "epsilon_greedy", "softmax", "pareto"] as const) {
      expect(chooseNode(config({ strategy }), [{ n: 0, metric: 1 }], 0, "minimize", () => 0.99)).toBe(0);
    }
  });

  it("top_k draws only among the k best, each about as often", () => {
    const c = counts(config({ strategy: "top_k", k: 3 }));
    expect([...c.keys()].sort()).toEqual([2, 3, 5]);
    for (const n of [2, 3, 5]) expect(c.get(n)).toBeGreaterThan(4000 / 3 - 150);
  });

  it("top_k follows the direction: maximize ranks the largest first", () => {
    const c = counts(config({ strategy: "top_k", k: 2 }), NODES, 1000, "maximize");
    expect([...c.keys()].sort()).toEqual([0, 7]);
  });

  it("pareto on one objective is top_k", () => {
    const c = counts(config({ strategy: "pareto", k: 2 }));
    expect([...c.keys()].sort()).toEqual([2, 5]);
  });

  it("epsilon_greedy builds on the best but for about epsilon of the proposals", () => {
    const c = counts(config({ strategy: "epsilon_greedy", epsilon: 0.2 }));
    // 80% the best, plus its share of the uniform 20%.
    const others = 4000 - (c.get(5) ?? 0);
    expect(others).toBeGreaterThan(0.2 * 0.8 * 4000 - 120);
    expect(others).toBeLessThan(0.2 * 0.8 * 4000 + 120);
    for (const n of [0, 2, 3, 7]) expect(c.get(n)).toBeGreaterThan(0);
  });

  it("softmax prefers better nodes, and a lower temperature prefers them more", () => {
    const warm = counts(config({ strategy: "softmax", temperature: 1 }));
    const cold = counts(config({ strategy: "softmax", temperature: 0.1 }));
    const share = (c: Map<number, number>, n: number) => (c.get(n) ?? 0) / 4000;
    // Ordered by value: 5 (4) > 2 (6) > 3 (8) > 7 (9) > 0 (10).
    expect(share(warm, 5)).toBeGreaterThan(share(warm, 2));
    expect(share(warm, 2)).toBeGreaterThan(share(warm, 3));
    expect(share(warm, 3)).toBeGreaterThan(share(warm, 0));
    expect(share(cold, 5)).toBeGreaterThan(0.9);
    expect(share(warm, 5)).toBeLessThan(0.5);
  });

  it("softmax over nodes of equal value draws uniformly", () => {
    const flat = NODES.map((x) => ({ ...x, metric: 1 }));
    const c = counts(config({ strategy: "softmax" }), flat, 5000);
    for (const n of [0, 2, 3, 5, 7]) expect(c.get(n)).toBeGreaterThan(800);
  });

  it("is deterministic in (seed, n): a resumed run draws the same node", () => {
    const c = config({ strategy: "softmax", temperature: 1 });
    const draw = (seed: number, n: number) => chooseNode(c, NODES, 5, "minimize", frontierRandom(seed, n));
    const a = Array.from({ length: 50 }, (_, i) => draw(7, i));
    expect(Array.from({ length: 50 }, (_, i) => draw(7, i))).toEqual(a);
    expect(Array.from({ length: 50 }, (_, i) => draw(8, i))).not.toEqual(a);
  });
});

describe("the tree's nodes", () => {
  const exp = (n: number, decision?: ExperimentRecord["decision"]): ExperimentRecord =>
    ({ n, trials: [], ...(decision ? { decision } : {}) }) as unknown as ExperimentRecord;
  const at = "2026-01-01T00:00:00Z";
  const exps = [
    exp(0, { action: "keep", reason: "baseline", metric: 5, decidedAt: at }),
    exp(1, { action: "discard", reason: "worse", metric: 6, decidedAt: at }),
    exp(2, { action: "discard", reason: "kept in the tree", metric: 5.5, treeNode: true, decidedAt: at }),
    exp(3, { action: "keep", reason: "better", metric: 4, decidedAt: at }),
    exp(4),
  ];

  it("are the keeps and the tree nodes, with their values", () => {
    expect(exps.map(isTreeNode)).toEqual([true, false, true, true, false]);
    expect(treeNodesOf(exps, "loss")).toEqual([
      { n: 0, metric: 5 },
      { n: 2, metric: 5.5 },
      { n: 3, metric: 4 },
    ]);
  });
});

describe("onTree: a keep against a kept node that is not the best", () => {
  const keep = {
    action: "keep" as const,
    reason: "credible gain over #2",
    metric: 3,
    mechanismConfirmed: true,
  };

  it("moves the ratchet when it beats the best too", () => {
    const d = onTree(keep, 5, 3.5, "minimize");
    expect(d.action).toBe("keep");
    expect(d.treeNode).toBeUndefined();
    expect(d.reason).toBe("credible gain over #2; beats the best #5 (3.5) too");
  });

  it("stays a tree node (a discard) when the best is better", () => {
    const d = onTree(keep, 5, 2.5, "minimize");
    expect(d).toMatchObject({ action: "discard", treeNode: true, metric: 3 });
    expect(d.reason).toBe("kept in the tree: credible gain over #2; the best #5 (2.5) stays");
  });

  it("a tie does not move the ratchet; the direction counts", () => {
    expect(onTree(keep, 5, 3, "minimize").action).toBe("discard");
    expect(onTree(keep, 5, 2.5, "maximize").action).toBe("keep");
  });

  it("stays a tree node when it beats the best but the best came later (parallel: keeps go in order of n)", () => {
    const d = onTree(keep, 9, 3.5, "minimize", true);
    expect(d).toMatchObject({ action: "discard", treeNode: true, metric: 3 });
    expect(d.reason).toBe(
      "kept in the tree: credible gain over #2; it beats the best #9 (3.5) too, but #9 was kept while it ran and keeps go in order of number: the best #9 stays",
    );
    // Not beating the best, the order does not matter.
    expect(onTree(keep, 9, 2.5, "minimize", true).reason).toBe(
      "kept in the tree: credible gain over #2; the best #9 (2.5) stays",
    );
  });
});

const PROGRAM = (frontier: string, extra = "") => `---
name: f
objective: { metric: loss, direction: minimize }
run:
  command: node train.ts
  budget: 10s
files:
  editable: [train.ts]
${frontier}
${extra}---
`;

function failure(text: string): AutolabError {
  try {
    parseProgram(text, "lab/program.md");
  } catch (err) {
    expect(err).toBeInstanceOf(AutolabError);
    expect((err as AutolabError).code).toBe("PROGRAM_INVALID");
    return err as AutolabError;
  }
  throw new Error("expected the program to be rejected");
}

describe("program.md frontier:", () => {
  it("is absent by default (best), and a bare strategy takes the defaults", () => {
    expect(parseProgram(PROGRAM(""), "p.md").frontier).toBeUndefined();
    expect(parseProgram(PROGRAM("frontier: top_k"), "p.md").frontier).toEqual({
      ...DEFAULT_FRONTIER,
      strategy: "top_k",
    });
  });

  it("takes a map with the strategy's settings", () => {
    const p = parseProgram(
      PROGRAM("frontier: { strategy: softmax, temperature: 0.5, k: 4, epsilon: 0.1 }"),
      "p.md",
    );
    expect(p.frontier).toEqual({ strategy: "softmax", k: 4, epsilon: 0.1, temperature: 0.5 });
  });

  it("an unknown strategy is reported at its line with the strategies", () => {
    const err = failure(PROGRAM("frontier: beam"));
    const line = err.message.split("\n").find((l) => l.includes("lab/program.md:9  frontier.strategy:"));
    expect(line, err.message).toContain('"beam" is not one of best, top_k, epsilon_greedy, softmax, pareto');
    expect(line).toContain("best, top_k, epsilon_greedy, softmax, pareto");
  });

  it("settings out of range and unknown settings are reported with their lines", () => {
    const err = failure(PROGRAM("frontier:\n  strategy: top_k\n  k: 0\n  epsilon: 1.5\n  temprature: 2"));
    expect(err.message).toContain(
      "lab/program.md:11  frontier.k: top_k draws from the k best nodes: at least 1",
    );
    expect(err.message).toContain(
      "lab/program.md:12  frontier.epsilon: is a share of proposals: between 0 and 1",
    );
    expect(err.message).toMatch(
      /lab\/program\.md:13 {2}frontier\.temprature: .*did you mean "temperature"\?/,
    );
  });

  it("a branching strategy goes with slots: and org: (parallel runs branch too)", () => {
    const p = parseProgram(PROGRAM("frontier: softmax", "slots: 2\n"), "p.md");
    expect(p.frontier?.strategy).toBe("softmax");
    expect(p.slots?.count).toBe(2);
    const o = parseProgram(PROGRAM("frontier: { strategy: top_k, k: 2 }", "org: org/\n"), "p.md");
    expect(o.frontier).toMatchObject({ strategy: "top_k", k: 2 });
    expect(o.org).toBeDefined();
  });
});

describe("the proxy ladder on a tree", () => {
  const program = parseProgram(
    `---
name: t
objective: { metric: loss, direction: minimize }
run: { command: "true", budget: 5s }
files: { editable: [a.txt] }
agent: builtin
ladder: { budgets: [1s], promote: 0.3 }
frontier: top_k
---
`,
    "/p/program.md",
  );
  /** An experiment with one ok trial on the 1 s rung, decided as given. */
  const node = (n: number, rung: number, decision: object, parent = "c0"): ExperimentRecord =>
    ({
      id: n + 1,
      n,
      commit: `c${n}`,
      parentCommit: parent,
      trials: [{ budgetMs: 1000, result: { status: "ok", metrics: { loss: rung } } }],
      decision: { reason: "", mechanismConfirmed: null, decidedAt: "2026-11-25", ...decision },
    }) as unknown as ExperimentRecord;

  it("ranks a candidate grown on a tree node against that node on the rung, not the best", async () => {
    const exps = [
      node(0, 6, { action: "keep", metric: 5 }),
      node(1, 2, { action: "keep", metric: 1 }), // the best: far ahead on the rung
      node(2, 5, { action: "discard", treeNode: true, metric: 4 }), // a tree node off the baseline
    ];
    const candidate = {
      id: 4,
      n: 3,
      commit: "c3",
      parentCommit: "c2",
      trials: [],
    } as unknown as ExperimentRecord;
    const deps = {
      program,
      run: { id: 1 },
      ledger: { getExperiment: () => undefined, listExperiments: () => exps },
    } as unknown as LoopDeps;
    const rungTrial = async () => ({ status: "ok", metrics: { loss: 4.5 } }) as unknown as TrialResult;
    // 4.5 ranks 3 of 4 on the rung (top 30%: 2 promoted), but beats its parent #2 (5) there.
    expect(await climbLadder(deps, candidate, () => {}, rungTrial)).toBe("top");
    // Built on the best instead, the same value is not promoted, and the reason names the best.
    const onBest = { ...candidate, parentCommit: "c1" } as ExperimentRecord;
    const decision = await climbLadder(deps, onBest, () => {}, rungTrial);
    expect(decision).toMatchObject({ action: "discard" });
    expect((decision as { reason: string }).reason).toMatch(/the best, #1, has 2 there/);
  });
});

describe("onTree: moving the ratchet takes a credible win over the best", () => {
  it("a candidate ahead of the best by a point value the judge did not keep is a tree node, saying why", () => {
    const keep: Decision = {
      action: "keep",
      reason: "better than #2",
      metric: 2.9,
      mechanismConfirmed: true,
    };
    const d = onTree(keep, 5, 3, "minimize", false, "inside the noise: margin 0.4σ");
    expect(d).toMatchObject({ action: "discard", treeNode: true, metric: 2.9 });
    expect(d.reason).toBe(
      "kept in the tree: better than #2; ahead of the best #5 (3), but not credibly (inside the noise: margin 0.4σ): the best stays",
    );
    // Without the judge's objection it moves the ratchet, as before.
    expect(onTree(keep, 5, 3, "minimize").action).toBe("keep");
  });
});
