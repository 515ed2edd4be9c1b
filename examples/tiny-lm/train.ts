// biome-ignore-all lint/style/noNonNullAssertion: typed-array reads in the numeric loops are in bounds

// tiny-lm: a character-level language model in plain TypeScript. THE ONLY EDITABLE FILE.
//
// A Bengio-style MLP: the embeddings of the last CONTEXT characters, concatenated, feed one
// tanh hidden layer, then a softmax over the vocabulary. Hand-written backprop, Adam.
// Training stops itself within the budget (AUTOLAB_BUDGET_S seconds, default 10; see
// CPU_FRACTION) and writes out/model.json; evaluate.ts then scores it with loadModel() below.
//
// Run from this directory: `node prepare.ts` once, then `node train.ts`, `node evaluate.ts`.

import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { CharModel } from "./prepare.ts";
import { loadSplit, loadVocab } from "./prepare.ts";

// ---------------------------------------------------------------------------------------
// Hyperparameters: one per line, `const NAME = value;` (tools rewrite these lines; the
// search ranges are in program.md). LEARNING_RATE: Adam step size. BATCH_SIZE: examples per
// step. CONTEXT: characters the model sees. EMBED_DIM: embedding size per character.
// HIDDEN: hidden units. WARMDOWN_RATIO: final fraction of the training time over which the
// learning rate decays linearly to zero (0 = constant learning rate).
const LEARNING_RATE = 0.0003;
const BATCH_SIZE = 32;
const CONTEXT = 3;
const EMBED_DIM = 8;
const HIDDEN = 32;
const WARMDOWN_RATIO = 0.0;
// ---------------------------------------------------------------------------------------

const BETA1 = 0.9;
const BETA2 = 0.999;
const ADAM_EPS = 1e-8;
/** Training stops when this thread has used CPU_FRACTION of the budget in CPU time, so that
 * other processes on the machine change little how much training a run gets, or at
 * WALL_FRACTION of the budget on the wall clock, whichever comes first: the harness kills
 * the run at budget + grace, and saving and exiting take a moment. Both count from process
 * start. */
const CPU_FRACTION = 0.7;
const WALL_FRACTION = 0.85;
/** About this many progress lines per run. */
const PROGRESS_LINES = 20;
const OUT_DIR = "out";
const FORMAT = "tiny-lm-mlp/1";

// ---- seeded randomness -----------------------------------------------------------------

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

function gaussian(rand: () => number): number {
  const u = 1 - rand();
  const v = rand();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}

// ---- linear-algebra kernels (row-major Float32Array, register-blocked for speed) ---------------

/** y[r, o] = b[o] + sum_i x[r, i] * w[o, i]   (x: rows x n, w: m x n, y: rows x m) */
function linear(
  y: Float32Array,
  x: Float32Array,
  w: Float32Array,
  b: Float32Array,
  rows: number,
  n: number,
  m: number,
): void {
  // 4 rows x 2 outputs at a time: each weight and input read feeds several multiply-adds
  let r = 0;
  for (; r + 4 <= rows; r += 4) {
    const x0 = r * n;
    const x1 = x0 + n;
    const x2 = x1 + n;
    const x3 = x2 + n;
    let o = 0;
    for (; o + 2 <= m; o += 2) {
      const wa = o * n;
      const wb = wa + n;
      let a0 = 0,
        a1 = 0,
        a2 = 0,
        a3 = 0,
        c0 = 0,
        c1 = 0,
        c2 = 0,
        c3 = 0;
      for (let i = 0; i < n; i++) {
        const u = w[wa + i]!;
        const v = w[wb + i]!;
        const v0 = x[x0 + i]!;
        const v1 = x[x1 + i]!;
        const v2 = x[x2 + i]!;
        const v3 = x[x3 + i]!;
        a0 += v0 * u;
        a1 += v1 * u;
        a2 += v2 * u;
        a3 += v3 * u;
        c0 += v0 * v;
        c1 += v1 * v;
        c2 += v2 * v;
        c3 += v3 * v;
      }
      const y0 = r * m + o;
      const ba = b[o]!;
      const bb = b[o + 1]!;
      y[y0] = a0 + ba;
      y[y0 + m] = a1 + ba;
      y[y0 + 2 * m] = a2 + ba;
      y[y0 + 3 * m] = a3 + ba;
      y[y0 + 1] = c0 + bb;
      y[y0 + m + 1] = c1 + bb;
      y[y0 + 2 * m + 1] = c2 + bb;
      y[y0 + 3 * m + 1] = c3 + bb;
    }
    for (; o < m; o++) for (let k = r; k < r + 4; k++) y[k * m + o] = b[o]! + dot(x, k * n, w, o * n, n);
  }
  for (; r < rows; r++) for (let o = 0; o < m; o++) y[r * m + o] = b[o]! + dot(x, r * n, w, o * n, n);
}

function dot(a: Float32Array, ao: number, b: Float32Array, bo: number, n: number): number {
  let s = 0;
  for (let i = 0; i < n; i++) s += a[ao + i]! * b[bo + i]!;
  return s;
}

/** a[ao + i] += s * b[bo + i] for i < n */
function axpy(a: Float32Array, ao: number, s: number, b: Float32Array, bo: number, n: number): void {
  for (let i = 0; i < n; i++) a[ao + i] = a[ao + i]! + s * b[bo + i]!;
}

/** dx[r, i] = sum_o dy[r, o] * w[o, i]   (the gradient of linear() with respect to x) */
function linearGradInput(
  dx: Float32Array,
  dy: Float32Array,
  w: Float32Array,
  rows: number,
  n: number,
  m: number,
): void {
  dx.fill(0, 0, rows * n);
  // 2 rows x 4 outputs at a time
  let r = 0;
  for (; r + 2 <= rows; r += 2) {
    const xa = r * n;
    const xb = xa + n;
    const ya = r * m;
    const yb = ya + m;
    let o = 0;
    for (; o + 4 <= m; o += 4) {
      const a0 = dy[ya + o]!,
        a1 = dy[ya + o + 1]!,
        a2 = dy[ya + o + 2]!,
        a3 = dy[ya + o + 3]!;
      const b0 = dy[yb + o]!,
        b1 = dy[yb + o + 1]!,
        b2 = dy[yb + o + 2]!,
        b3 = dy[yb + o + 3]!;
      const w0 = o * n;
      const w1 = w0 + n;
      const w2 = w1 + n;
      const w3 = w2 + n;
      for (let i = 0; i < n; i++) {
        const u0 = w[w0 + i]!;
        const u1 = w[w1 + i]!;
        const u2 = w[w2 + i]!;
        const u3 = w[w3 + i]!;
        dx[xa + i] = dx[xa + i]! + a0 * u0 + a1 * u1 + a2 * u2 + a3 * u3;
        dx[xb + i] = dx[xb + i]! + b0 * u0 + b1 * u1 + b2 * u2 + b3 * u3;
      }
    }
    for (; o < m; o++) {
      axpy(dx, xa, dy[ya + o]!, w, o * n, n);
      axpy(dx, xb, dy[yb + o]!, w, o * n, n);
    }
  }
  for (; r < rows; r++) for (let o = 0; o < m; o++) axpy(dx, r * n, dy[r * m + o]!, w, o * n, n);
}

/** dw[o, i] = sum_r dy[r, o] * x[r, i];  db[o] = sum_r dy[r, o]   (overwrites dw and db) */
function linearGradParams(
  dw: Float32Array,
  db: Float32Array,
  dy: Float32Array,
  x: Float32Array,
  rows: number,
  n: number,
  m: number,
): void {
  dw.fill(0);
  db.fill(0);
  for (let r = 0; r < rows; r++) for (let o = 0; o < m; o++) db[o] = db[o]! + dy[r * m + o]!;
  // 2 outputs x 4 rows at a time
  let o = 0;
  for (; o + 2 <= m; o += 2) {
    const wa = o * n;
    const wb = wa + n;
    let r = 0;
    for (; r + 4 <= rows; r += 4) {
      const a0 = dy[r * m + o]!,
        a1 = dy[(r + 1) * m + o]!,
        a2 = dy[(r + 2) * m + o]!,
        a3 = dy[(r + 3) * m + o]!;
      const b0 = dy[r * m + o + 1]!,
        b1 = dy[(r + 1) * m + o + 1]!,
        b2 = dy[(r + 2) * m + o + 1]!,
        b3 = dy[(r + 3) * m + o + 1]!;
      const x0 = r * n;
      const x1 = x0 + n;
      const x2 = x1 + n;
      const x3 = x2 + n;
      for (let i = 0; i < n; i++) {
        const v0 = x[x0 + i]!;
        const v1 = x[x1 + i]!;
        const v2 = x[x2 + i]!;
        const v3 = x[x3 + i]!;
        dw[wa + i] = dw[wa + i]! + a0 * v0 + a1 * v1 + a2 * v2 + a3 * v3;
        dw[wb + i] = dw[wb + i]! + b0 * v0 + b1 * v1 + b2 * v2 + b3 * v3;
      }
    }
    for (; r < rows; r++) {
      axpy(dw, wa, dy[r * m + o]!, x, r * n, n);
      axpy(dw, wb, dy[r * m + o + 1]!, x, r * n, n);
    }
  }
  for (; o < m; o++) for (let r = 0; r < rows; r++) axpy(dw, o * n, dy[r * m + o]!, x, r * n, n);
}

/** In place: each row of logits (rows x v) becomes log-probabilities. */
function logSoftmax(z: Float32Array, rows: number, v: number): void {
  for (let r = 0; r < rows; r++) {
    const o = r * v;
    let max = -Infinity;
    for (let k = 0; k < v; k++) if (z[o + k]! > max) max = z[o + k]!;
    let sum = 0;
    for (let k = 0; k < v; k++) sum += Math.exp(z[o + k]! - max);
    const lse = max + Math.log(sum);
    for (let k = 0; k < v; k++) z[o + k] = z[o + k]! - lse;
  }
}

// ---- the model ---------------------------------------------------------------------------

interface Config {
  vocabSize: number;
  context: number;
  embedDim: number;
  hidden: number;
}

/** Weights are stored [out x in], like torch.nn.Linear. */
interface Params {
  /** embeddings [vocab x embedDim] */
  emb: Float32Array;
  /** input to hidden [hidden x context*embedDim] */
  w1: Float32Array;
  b1: Float32Array;
  /** hidden to output [vocab x hidden] */
  w2: Float32Array;
  b2: Float32Array;
}

const PARAM_NAMES = ["emb", "w1", "b1", "w2", "b2"] as const;

function zeroParams(c: Config): Params {
  const inDim = c.context * c.embedDim;
  return {
    emb: new Float32Array(c.vocabSize * c.embedDim),
    w1: new Float32Array(c.hidden * inDim),
    b1: new Float32Array(c.hidden),
    w2: new Float32Array(c.vocabSize * c.hidden),
    b2: new Float32Array(c.vocabSize),
  };
}

function initParams(c: Config, rand: () => number, unigram: Float64Array): Params {
  const p = zeroParams(c);
  for (let i = 0; i < p.emb.length; i++) p.emb[i] = gaussian(rand);
  const std1 = 1 / Math.sqrt(c.context * c.embedDim);
  for (let i = 0; i < p.w1.length; i++) p.w1[i] = gaussian(rand) * std1;
  const std2 = 0.1 / Math.sqrt(c.hidden);
  for (let i = 0; i < p.w2.length; i++) p.w2[i] = gaussian(rand) * std2;
  // Start from the unigram distribution.
  for (let v = 0; v < c.vocabSize; v++) p.b2[v] = Math.log(unigram[v]!);
  return p;
}

/** Activations for a batch of `rows` examples. */
interface Acts {
  x: Float32Array;
  h: Float32Array;
  out: Float32Array;
}

function allocActs(c: Config, rows: number): Acts {
  return {
    x: new Float32Array(rows * c.context * c.embedDim),
    h: new Float32Array(rows * c.hidden),
    out: new Float32Array(rows * c.vocabSize),
  };
}

/** Forward pass: ctx holds `rows` contexts of c.context ids; a.out gets log-probabilities. */
function forward(c: Config, p: Params, ctx: Uint8Array, rows: number, a: Acts): void {
  const D = c.embedDim;
  const inDim = c.context * D;
  for (let r = 0; r < rows; r++) {
    for (let k = 0; k < c.context; k++) {
      const src = ctx[r * c.context + k]! * D;
      a.x.set(p.emb.subarray(src, src + D), r * inDim + k * D);
    }
  }
  linear(a.h, a.x, p.w1, p.b1, rows, inDim, c.hidden);
  for (let i = 0; i < rows * c.hidden; i++) a.h[i] = Math.tanh(a.h[i]!);
  linear(a.out, a.h, p.w2, p.b2, rows, c.hidden, c.vocabSize);
  logSoftmax(a.out, rows, c.vocabSize);
}

/** Load out/model.json (written by training) as a next-character model. */
export function loadModel(dir: string = OUT_DIR): CharModel {
  const file = path.join(dir, "model.json");
  if (!existsSync(file)) throw new Error(`no checkpoint at ${file}: run \`node train.ts\` first`);
  const json = JSON.parse(readFileSync(file, "utf8")) as {
    format: string;
    config: Config;
    params: Record<string, string>;
  };
  if (json.format !== FORMAT) throw new Error(`${file}: unknown format ${json.format}, expected ${FORMAT}`);
  const c = json.config;
  const p = zeroParams(c);
  for (const name of PARAM_NAMES) {
    const bytes = Buffer.from(json.params[name] ?? "", "base64");
    if (bytes.length !== p[name].byteLength) throw new Error(`${file}: parameter ${name} has the wrong size`);
    new Uint8Array(p[name].buffer).set(bytes);
  }
  return {
    contextSize: c.context,
    logProbs(contexts: readonly Uint8Array[]): Float32Array {
      const rows = contexts.length;
      const C = c.context;
      const ctx = new Uint8Array(rows * C);
      contexts.forEach((context, r) => {
        // the last C ids, left-padded with id 0 (the newline) at the start of a text
        const k = Math.min(C, context.length);
        ctx.set(context.subarray(context.length - k), r * C + C - k);
      });
      const acts = allocActs(c, rows);
      forward(c, p, ctx, rows, acts);
      return acts.out;
    },
  };
}

function saveModel(dir: string, c: Config, p: Params): void {
  mkdirSync(dir, { recursive: true });
  const params: Record<string, string> = {};
  for (const name of PARAM_NAMES) {
    const a = p[name];
    params[name] = Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString("base64");
  }
  const tmp = path.join(dir, "model.json.tmp");
  writeFileSync(tmp, JSON.stringify({ format: FORMAT, config: c, params }));
  renameSync(tmp, path.join(dir, "model.json")); // atomic: never a half-written checkpoint
}

// ---- training ----------------------------------------------------------------------------

/** CPU time used by this thread, in ms (process.threadCpuUsage: Node >= 23.9). */
function threadCpuMs(): number {
  const u = process.threadCpuUsage();
  return (u.user + u.system) / 1000;
}

function train(): void {
  const budgetS = Number(process.env.AUTOLAB_BUDGET_S ?? "10");
  if (!(budgetS > 0))
    throw new Error(`AUTOLAB_BUDGET_S must be a positive number, not ${process.env.AUTOLAB_BUDGET_S}`);
  const seed = Number(process.env.AUTOLAB_SEED ?? "0");
  const rand = mulberry32(Number.isFinite(seed) ? seed : 0);

  const vocab = loadVocab();
  const data = loadSplit("train");
  const c: Config = { vocabSize: vocab.size, context: CONTEXT, embedDim: EMBED_DIM, hidden: HIDDEN };
  const { vocabSize: V, context: C, embedDim: D, hidden: H } = c;
  const inDim = C * D;
  const B = BATCH_SIZE;

  const unigram = new Float64Array(V).fill(1);
  for (let i = 0; i < data.length; i++) unigram[data[i]!]!++;
  for (let v = 0; v < V; v++) unigram[v] = unigram[v]! / (data.length + V);

  const p = initParams(c, rand, unigram);
  const g = zeroParams(c); // gradients
  const m = zeroParams(c); // Adam first moments
  const s = zeroParams(c); // Adam second moments
  const numParams = PARAM_NAMES.reduce((n, k) => n + p[k].length, 0);

  const acts = allocActs(c, B);
  const dOut = new Float32Array(B * V);
  const dH = new Float32Array(B * H);
  const dX = new Float32Array(B * inDim);
  const ctx = new Uint8Array(B * C);
  const targets = new Uint8Array(B);

  // progress in [0, 1]: the larger of the CPU-time and the wall-clock fractions used
  const wallStart = performance.now(); // ms since process start
  const cpuStart = threadCpuMs();
  const wallSpan = Math.max(1, budgetS * 1000 * WALL_FRACTION - wallStart);
  const cpuSpan = Math.max(1, budgetS * 1000 * CPU_FRACTION - cpuStart);
  const trainingProgress = () =>
    Math.max((performance.now() - wallStart) / wallSpan, (threadCpuMs() - cpuStart) / cpuSpan);
  let nextReport = 1 / PROGRESS_LINES;
  let step = 0;
  let ema = 0;
  let emaWeight = 0;
  let progress = 0;

  while (progress < 1) {
    let lr = LEARNING_RATE;
    if (WARMDOWN_RATIO > 0 && progress > 1 - WARMDOWN_RATIO) {
      lr *= Math.max(0, (1 - progress) / WARMDOWN_RATIO);
    }

    // a batch of random (context, next character) pairs
    for (let b = 0; b < B; b++) {
      const t = C + Math.floor(rand() * (data.length - C));
      ctx.set(data.subarray(t - C, t), b * C);
      targets[b] = data[t]!;
    }

    forward(c, p, ctx, B, acts);

    // loss = mean cross-entropy; dOut = d loss / d logits = (softmax - onehot) / B
    let lossSum = 0;
    for (let b = 0; b < B; b++) {
      const o = b * V;
      for (let v = 0; v < V; v++) {
        const pv = Math.exp(acts.out[o + v]!);
        dOut[o + v] = pv < 1e-30 ? 0 : pv / B; // no float32 denormals: they are slow
      }
      const y = targets[b]!;
      lossSum -= acts.out[o + y]!;
      dOut[o + y] = dOut[o + y]! - 1 / B;
    }

    // backward
    linearGradParams(g.w2, g.b2, dOut, acts.h, B, H, V);
    linearGradInput(dH, dOut, p.w2, B, H, V);
    for (let i = 0; i < B * H; i++) dH[i] = dH[i]! * (1 - acts.h[i]! * acts.h[i]!);
    linearGradParams(g.w1, g.b1, dH, acts.x, B, inDim, H);
    linearGradInput(dX, dH, p.w1, B, inDim, H);
    g.emb.fill(0);
    for (let b = 0; b < B; b++) {
      for (let k = 0; k < C; k++) {
        const dst = ctx[b * C + k]! * D;
        const src = b * inDim + k * D;
        for (let d = 0; d < D; d++) g.emb[dst + d] = g.emb[dst + d]! + dX[src + d]!;
      }
    }

    // Adam
    step++;
    const stepSize = (lr * Math.sqrt(1 - BETA2 ** step)) / (1 - BETA1 ** step);
    for (const name of PARAM_NAMES) {
      const w = p[name];
      const gw = g[name];
      const mw = m[name];
      const sw = s[name];
      for (let i = 0; i < w.length; i++) {
        const gi = gw[i]!;
        let mi = BETA1 * mw[i]! + (1 - BETA1) * gi;
        let si = BETA2 * sw[i]! + (1 - BETA2) * gi * gi;
        if (Math.abs(mi) < 1e-30) mi = 0; // no float32 denormals
        if (si < 1e-30) si = 0;
        mw[i] = mi;
        sw[i] = si;
        w[i] = w[i]! - (stepSize * mi) / (Math.sqrt(si) + ADAM_EPS);
      }
    }

    const loss = lossSum / B / Math.LN2; // bits per character
    if (!Number.isFinite(loss)) {
      console.error(`train: the loss is ${loss} at step ${step}; stopping`);
      process.exit(1);
    }
    ema = 0.98 * ema + 0.02 * loss;
    emaWeight = 0.98 * emaWeight + 0.02;
    progress = trainingProgress();
    if (progress >= nextReport && progress < 1) {
      console.log(`METRIC train_loss=${(ema / emaWeight).toFixed(4)}`);
      nextReport += 1 / PROGRESS_LINES;
    }
  }

  const trainingSeconds = (performance.now() - wallStart) / 1000;
  const trainingCpuSeconds = (threadCpuMs() - cpuStart) / 1000;
  saveModel(OUT_DIR, c, p);
  const trainLoss = emaWeight > 0 ? ema / emaWeight : Number.NaN;
  console.log(`METRIC train_loss=${trainLoss.toFixed(4)}`);
  console.log("---");
  console.log(`train_loss:           ${trainLoss.toFixed(6)}`);
  console.log(`training_seconds:     ${trainingSeconds.toFixed(2)}`);
  console.log(`training_cpu_seconds: ${trainingCpuSeconds.toFixed(2)}`);
  console.log(`total_seconds:        ${(performance.now() / 1000).toFixed(2)}`);
  console.log(`steps:                ${step}`);
  console.log(`examples_seen:        ${step * B}`);
  console.log(`num_params:           ${numParams}`);
}

if (import.meta.main) train();
