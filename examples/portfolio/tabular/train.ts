// biome-ignore-all lint/style/noNonNullAssertion: typed-array and array reads in the numeric loops are in bounds
// tabular: gradient-boosted decision trees for a binary label. THE ONLY EDITABLE FILE.
//
// Reads data/train.csv, fits an ensemble of regression trees on the gradient of the log-loss
// (Newton steps: leaf value = -sum(g) / (sum(h) + L2)), and writes the predicted
// probabilities of the validation and test rows to out/preds.json for evaluate.ts. Each
// tree sees a random SUBSAMPLE of the rows (seeded by AUTOLAB_SEED). Features are bucketed
// into at most BINS quantile bins once, so a split search is a pass over histograms.
import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { readCsv } from "./prepare.ts";

// ---------------------------------------------------------------------------------------
// Knobs (`const NAME = value;`, rewritten by the built-in optimizer; ranges in program.md).
const N_TREES = 20;
const MAX_DEPTH = 1;
const LEARNING_RATE = 0.1;
const SUBSAMPLE = 0.8;
const MIN_LEAF = 20;
const L2 = 1;
const BINS = 16;
// ---------------------------------------------------------------------------------------

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Node = { leaf: number } | { feature: number; threshold: number; left: Node; right: Node };

/** Bin edges per feature: quantiles of the training column. */
function binEdges(x: number[][], bins: number): number[][] {
  const d = x[0]!.length;
  return Array.from({ length: d }, (_, j) => {
    const col = x.map((r) => r[j]!).sort((a, b) => a - b);
    const edges: number[] = [];
    for (let b = 1; b < bins; b++) {
      const v = col[Math.floor((b * col.length) / bins)]!;
      if (edges.length === 0 || v > edges[edges.length - 1]!) edges.push(v);
    }
    return edges;
  });
}

function binOf(edges: number[], v: number): number {
  let lo = 0;
  let hi = edges.length;
  while (lo < hi) {
    const m = (lo + hi) >> 1;
    if (v < edges[m]!) hi = m;
    else lo = m + 1;
  }
  return lo;
}

function predictTree(node: Node, r: readonly number[]): number {
  let n = node;
  while (!("leaf" in n)) n = r[n.feature]! < n.threshold ? n.left : n.right;
  return n.leaf;
}

function build(
  rows: number[],
  depth: number,
  binned: Uint8Array[],
  edges: number[][],
  g: Float64Array,
  h: Float64Array,
): Node {
  let G = 0;
  let H = 0;
  for (const i of rows) {
    G += g[i]!;
    H += h[i]!;
  }
  const leaf = { leaf: (-G / (H + L2)) * LEARNING_RATE };
  if (depth >= MAX_DEPTH || rows.length < 2 * MIN_LEAF) return leaf;
  const parent = (G * G) / (H + L2);
  let best = { gain: 1e-9, feature: -1, bin: 0 };
  for (let j = 0; j < edges.length; j++) {
    const nb = edges[j]!.length + 1;
    const hg = new Float64Array(nb);
    const hh = new Float64Array(nb);
    const hc = new Int32Array(nb);
    const col = binned[j]!;
    for (const i of rows) {
      const b = col[i]!;
      hg[b]! += g[i]!;
      hh[b]! += h[i]!;
      hc[b]!++;
    }
    let gl = 0;
    let hl = 0;
    let cl = 0;
    for (let b = 0; b < nb - 1; b++) {
      gl += hg[b]!;
      hl += hh[b]!;
      cl += hc[b]!;
      if (cl < MIN_LEAF || rows.length - cl < MIN_LEAF) continue;
      const gr = G - gl;
      const hr = H - hl;
      const gain = (gl * gl) / (hl + L2) + (gr * gr) / (hr + L2) - parent;
      if (gain > best.gain) best = { gain, feature: j, bin: b };
    }
  }
  if (best.feature < 0) return leaf;
  const col = binned[best.feature]!;
  const left = rows.filter((i) => col[i]! <= best.bin);
  const right = rows.filter((i) => col[i]! > best.bin);
  return {
    feature: best.feature,
    threshold: edges[best.feature]![best.bin]!, // bin <= b  <=>  value < edges[b]
    left: build(left, depth + 1, binned, edges, g, h),
    right: build(right, depth + 1, binned, edges, g, h),
  };
}

function train(): void {
  const seed = Number(process.env.AUTOLAB_SEED ?? "0");
  const rand = mulberry32(Number.isFinite(seed) ? seed : 0);
  const { x, y } = readCsv("train.csv");
  const n = x.length;
  const edges = binEdges(x, BINS);
  const binned = edges.map((e, j) => Uint8Array.from(x, (r) => binOf(e, r[j]!)));
  const mean = y.reduce((a, b) => a + b, 0) / n;
  const base = Math.log(mean / (1 - mean));
  const f = new Float64Array(n).fill(base);
  const g = new Float64Array(n);
  const h = new Float64Array(n);
  const trees: Node[] = [];
  for (let t = 0; t < N_TREES; t++) {
    for (let i = 0; i < n; i++) {
      const p = 1 / (1 + Math.exp(-f[i]!));
      g[i] = p - y[i]!;
      h[i] = Math.max(1e-6, p * (1 - p));
    }
    const rows: number[] = [];
    for (let i = 0; i < n; i++) if (rand() < SUBSAMPLE) rows.push(i);
    const tree = build(rows, 0, binned, edges, g, h);
    trees.push(tree);
    for (let i = 0; i < n; i++) f[i] = f[i]! + predictTree(tree, x[i]!);
  }
  const predict = (r: number[]) => {
    let s = base;
    for (const tree of trees) s += predictTree(tree, r);
    return 1 / (1 + Math.exp(-s));
  };
  let trainLoss = 0;
  for (let i = 0; i < n; i++) {
    const p = Math.min(1 - 1e-6, Math.max(1e-6, 1 / (1 + Math.exp(-f[i]!))));
    trainLoss -= y[i] === 1 ? Math.log(p) : Math.log(1 - p);
  }
  const out = {
    val: readCsv("val_x.csv").x.map(predict),
    test: readCsv("test_x.csv").x.map(predict),
  };
  mkdirSync("out", { recursive: true });
  writeFileSync(path.join("out", "preds.json.tmp"), JSON.stringify(out));
  renameSync(path.join("out", "preds.json.tmp"), path.join("out", "preds.json"));
  console.log(`train_logloss: ${(trainLoss / n).toFixed(5)}`);
  console.log(`trees: ${trees.length}`);
}

if (import.meta.main) train();
