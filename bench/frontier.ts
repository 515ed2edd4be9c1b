/**
 * The tree frontier (issue #21): on deceptive and multimodal objectives whose noise-free value is
 * known, the true value of the run's best (the ratchet's) at equal budget of trials, for each
 * frontier strategy (src/core/frontier.ts, the code the loop runs) against the single-branch
 * ratchet `best`, many seeds, 95% intervals.
 *
 * The simulated loop is the serial one with the tree: a local researcher (a Gaussian step in the
 * unit cube from the node it is given, as a coding agent edits the code in front of it), noisy
 * trials (trial k of every experiment shares the seed), the default acceptance rule
 * (src/trust/noise-judge.ts) judging each candidate against the node it grew from (re-measuring
 * that node when it asks), and the tree rule of src/core/decide.ts (onTree): a keep that beats
 * the best moves the ratchet, one that does not stays a tree node. The same seed gives every
 * strategy the same start point and noise stream.
 *
 *   npm run bench -- frontier [--seeds=30] [--budgets=150,400] [--first-seed=0]
 */
import { createRng, mixSeed, type Rng } from "../src/agents/builtin/rng.ts";
import { onTree } from "../src/core/decide.ts";
import {
  chooseNode,
  DEFAULT_FRONTIER,
  type FrontierConfig,
  type FrontierNode,
  frontierRandom,
} from "../src/core/frontier.ts";
import type { Judge } from "../src/core/judge.ts";
import type { Decision, TrialResult } from "../src/core/types.ts";
import { createNoiseJudge } from "../src/trust/noise-judge.ts";
import { simProgram, simTrial } from "./_keep-loop.ts";
import { type Estimate, estimate, flags, numberFlag, round, show } from "./_stats.ts";

/** A minimized objective on the unit cube with its noise-free optimum and trial noise σ. */
interface Landscape {
  name: string;
  dims: number;
  f: (u: readonly number[]) => number;
  optimum: number;
  sigma: number;
  /** Where a run starts (its baseline), per seed. */
  start: (rng: Rng) => number[];
}

/**
 * Deceptive: from the start, x falls steeply toward a trap at x = 0 (value 0.2) and gently
 * toward the optimum at x = 1 (value 0); y is a shallow bowl. A hill-climber on the best takes
 * the steep side and stays: from the trap every step toward x = 1 is worse for a long way.
 */
const trap: Landscape = {
  name: "trap",
  dims: 2,
  f: ([x = 0, y = 0]) =>
    (x < 0.3 ? 0.2 + (x / 0.3) * 0.4 : 0.6 - ((x - 0.3) / 0.7) * 0.6) + 0.2 * (y - 0.5) ** 2,
  optimum: 0,
  sigma: 0.01,
  start: (rng) => [0.28 + 0.04 * rng.next(), 0.3 + 0.4 * rng.next()],
};

/** Rastrigin on [-5.12, 5.12]²: a regular grid of local minima around the global one at 0. */
const rastrigin: Landscape = {
  name: "rastrigin",
  dims: 2,
  f: (u) => {
    let s = 10 * u.length;
    for (const v of u) {
      const z = 10.24 * v - 5.12;
      s += z * z - 10 * Math.cos(2 * Math.PI * z);
    }
    return s;
  },
  optimum: 0,
  sigma: 0.5,
  start: (rng) => [rng.next(), rng.next()],
};

/**
 * Schwefel on [-500, 500]²: deceptive — the second-best minima are far from the global one
 * (near the corner 420.97, 420.97), so following the best leads away from it.
 */
const schwefel: Landscape = {
  name: "schwefel",
  dims: 2,
  f: (u) => {
    let s = 418.9829 * u.length;
    for (const v of u) {
      const z = 1000 * v - 500;
      s -= z * Math.sin(Math.sqrt(Math.abs(z)));
    }
    return s;
  },
  optimum: 0,
  sigma: 5,
  start: (rng) => [rng.next(), rng.next()],
};

const LANDSCAPES = [trap, rastrigin, schwefel];

interface Arm {
  label: string;
  frontier: FrontierConfig;
}

const ARMS: Arm[] = [
  { label: "best", frontier: { ...DEFAULT_FRONTIER, strategy: "best" } },
  { label: "top_k k=3", frontier: { ...DEFAULT_FRONTIER, strategy: "top_k", k: 3 } },
  { label: "top_k k=5", frontier: { ...DEFAULT_FRONTIER, strategy: "top_k", k: 5 } },
  {
    label: "epsilon_greedy ε=0.2",
    frontier: { ...DEFAULT_FRONTIER, strategy: "epsilon_greedy", epsilon: 0.2 },
  },
  { label: "softmax T=0.25", frontier: { ...DEFAULT_FRONTIER, strategy: "softmax", temperature: 0.25 } },
  { label: "softmax T=1", frontier: { ...DEFAULT_FRONTIER, strategy: "softmax", temperature: 1 } },
];

interface Node {
  n: number;
  u: number[];
  true: number;
  metric: number;
  trials: TrialResult[];
}

/** One run: the true value of the ratchet's best after `budget` trials (baseline included). */
export function runTree(
  land: Landscape,
  frontier: FrontierConfig,
  seed: number,
  budget: number,
  judge: Judge,
): number {
  const program = simProgram();
  const startRng = createRng(mixSeed(seed, 1));
  const proposeRng = createRng(mixSeed(seed, 2));
  const noiseRng = createRng(mixSeed(seed, 3));
  const noise = () => land.sigma * noiseRng.normal();
  let used = 0;
  const start = land.start(startRng);
  const baseTrue = land.f(start);
  const baseTrials = Array.from({ length: judge.baselineTrials }, (_, k) =>
    simTrial(baseTrue + noise(), seed + k),
  );
  used += baseTrials.length;
  const values = (ts: TrialResult[]) => ts.map((t) => t.metrics.value as number);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const nodes: Node[] = [
    { n: 0, u: start, true: baseTrue, metric: mean(values(baseTrials)), trials: baseTrials },
  ];
  const groups = new Map<number, number[]>([[0, values(baseTrials)]]);
  let best = nodes[0] as Node;
  let n = 0;
  outer: while (used < budget) {
    n++;
    const frontierNodes: FrontierNode[] = nodes.map((x) => ({ n: x.n, metric: x.metric }));
    const parentN = chooseNode(frontier, frontierNodes, best.n, "minimize", frontierRandom(seed, n));
    const parent = nodes.find((x) => x.n === parentN) as Node;
    const u = parent.u.map((x) => Math.min(1, Math.max(0, x + 0.05 * proposeRng.normal())));
    const trueValue = land.f(u);
    const trials: TrialResult[] = [];
    let decision: Decision | undefined;
    let next = true;
    while (!decision) {
      if (next) {
        if (used >= budget) break outer;
        trials.push(simTrial(trueValue + noise(), seed + trials.length));
        used++;
      }
      next = true;
      const verdict = judge.decide({
        program,
        trials,
        best: { n: parent.n, metric: parent.metric, values: values(parent.trials), trials: parent.trials },
        baseline: groups.get(0) ?? [],
        run: [...groups].map(([g, vs]) => ({ n: g, values: vs })),
      });
      if (verdict.action !== "more") decision = verdict;
      else if (verdict.incumbent && parent.trials.length < 24) {
        if (used >= budget) break outer;
        parent.trials = [...parent.trials, simTrial(parent.true + noise(), seed + parent.trials.length)];
        groups.set(parent.n, values(parent.trials));
        used++;
        next = false;
      } else if (trials.length >= judge.maxTrials) decision = { action: "discard", reason: verdict.reason };
    }
    groups.set(n, values(trials));
    if (decision.action !== "keep") continue;
    const d = parent.n === best.n ? decision : onTree(decision, best.n, best.metric, "minimize");
    const node: Node = { n, u, true: trueValue, metric: decision.metric as number, trials };
    if (d.action === "keep") {
      nodes.push(node);
      best = node;
    } else if (d.treeNode) nodes.push(node);
  }
  return best.true - land.optimum;
}

export async function main(args: string[]): Promise<unknown> {
  const f = flags(args);
  const seeds = numberFlag(f, "seeds", 30);
  const first = numberFlag(f, "first-seed", 0);
  const budgets = (f.budgets ?? "150,400").split(",").map(Number);
  const figures: Record<string, unknown> = { seeds, budgets };
  console.log(
    `tree frontier: true regret of the ratchet's best (lower is better), ${seeds} seeds, mean ± 95% CI`,
  );
  console.log("paired difference vs best: negative = the strategy reaches a better true value\n");
  for (const land of LANDSCAPES) {
    for (const budget of budgets) {
      const regrets = new Map<string, number[]>();
      for (const arm of ARMS) {
        const out: number[] = [];
        for (let s = first; s < first + seeds; s++)
          out.push(runTree(land, arm.frontier, s, budget, createNoiseJudge()));
        regrets.set(arm.label, out);
      }
      const base = regrets.get("best") as number[];
      console.log(`${land.name}, ${budget} trials`);
      const rows: Record<string, { regret: Estimate; vsBest: Estimate }> = {};
      for (const arm of ARMS) {
        const r = regrets.get(arm.label) as number[];
        const diff = estimate(r.map((x, i) => x - (base[i] as number)));
        const reg = estimate(r);
        rows[arm.label] = {
          regret: { mean: round(reg.mean), ci: round(reg.ci) },
          vsBest: { mean: round(diff.mean), ci: round(diff.ci) },
        };
        const sig =
          arm.label === "best"
            ? ""
            : Math.abs(diff.mean) > diff.ci
              ? diff.mean < 0
                ? "  better"
                : "  worse"
              : "";
        console.log(
          `  ${arm.label.padEnd(22)} regret ${show(reg).padEnd(18)} vs best ${arm.label === "best" ? "—" : show(diff)}${sig}`,
        );
      }
      figures[`${land.name}@${budget}`] = rows;
    }
  }
  return figures;
}
