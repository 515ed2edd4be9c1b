// biome-ignore-all lint/style/noNonNullAssertion: typed-array and array reads in the numeric loops are in bounds
// sgd-noisy: a one-hidden-layer network trained by minibatch SGD. THE ONLY EDITABLE FILE.
//
// Reads data/train.csv (400 rows), standardises the features, fits a tanh network with a
// sigmoid output by minibatch SGD with momentum and weight decay on the log-loss, and writes
// the predicted probabilities of the validation and test rows to out/preds.json for
// evaluate.ts. AUTOLAB_SEED draws the initial weights and the order of the minibatches, and
// with 400 rows and a large step that moves the result as much as a good change of knobs does.
import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { readCsv } from "./prepare.ts";

// ---------------------------------------------------------------------------------------
// Knobs (`const NAME = value;`, rewritten by the built-in optimizer; ranges in program.md).
const HIDDEN = 8;
const LEARNING_RATE = 0.1;
const EPOCHS = 10;
const BATCH_SIZE = 16;
const MOMENTUM = 0.9;
const WEIGHT_DECAY = 0.0001;
const INIT_SCALE = 1;
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

function train(): void {
  const seed = Number(process.env.AUTOLAB_SEED ?? "0");
  const rand = mulberry32(Number.isFinite(seed) ? seed : 0);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
  const { x: rawX, y } = readCsv("train.csv");
  const n = rawX.length;
  const d = rawX[0]!.length;
  const h = Math.max(1, Math.round(HIDDEN));
  // Standardise with the training rows' mean and spread (the same transform for val and test).
  const mu = Array.from({ length: d }, (_, j) => rawX.reduce((s, r) => s + r[j]!, 0) / n);
  const sd = Array.from({ length: d }, (_, j) =>
    Math.sqrt(rawX.reduce((s, r) => s + (r[j]! - mu[j]!) ** 2, 0) / n || 1),
  );
  const norm = (r: readonly number[]) => Float64Array.from(r, (v, j) => (v - mu[j]!) / sd[j]!);
  const x = rawX.map(norm);

  // Parameters: W1 (h × d), b1 (h), w2 (h), b2; velocities of the same shapes.
  const W1 = Float64Array.from({ length: h * d }, () => (gauss() * INIT_SCALE) / Math.sqrt(d));
  const b1 = new Float64Array(h);
  const w2 = Float64Array.from({ length: h }, () => (gauss() * INIT_SCALE) / Math.sqrt(h));
  let b2 = 0;
  const vW1 = new Float64Array(h * d);
  const vb1 = new Float64Array(h);
  const vw2 = new Float64Array(h);
  let vb2 = 0;
  const gW1 = new Float64Array(h * d);
  const gb1 = new Float64Array(h);
  const gw2 = new Float64Array(h);
  const a = new Float64Array(h);

  const forward = (r: Float64Array): number => {
    let s = b2;
    for (let k = 0; k < h; k++) {
      let z = b1[k]!;
      for (let j = 0; j < d; j++) z += W1[k * d + j]! * r[j]!;
      a[k] = Math.tanh(z);
      s += w2[k]! * a[k]!;
    }
    return 1 / (1 + Math.exp(-s));
  };

  const batch = Math.max(1, Math.min(n, Math.round(BATCH_SIZE)));
  const order = Array.from({ length: n }, (_, i) => i);
  let loss = 0;
  for (let epoch = 0; epoch < Math.round(EPOCHS); epoch++) {
    for (let i = n - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    loss = 0;
    for (let start = 0; start < n; start += batch) {
      const rows = order.slice(start, start + batch);
      gW1.fill(0);
      gb1.fill(0);
      gw2.fill(0);
      let gb2 = 0;
      for (const i of rows) {
        const r = x[i]!;
        const p = forward(r);
        const q = Math.min(1 - 1e-7, Math.max(1e-7, p));
        loss -= y[i] === 1 ? Math.log(q) : Math.log(1 - q);
        const e = p - y[i]!; // d loss / d logit
        gb2 += e;
        for (let k = 0; k < h; k++) {
          gw2[k]! += e * a[k]!;
          const dz = e * w2[k]! * (1 - a[k]! * a[k]!);
          gb1[k]! += dz;
          for (let j = 0; j < d; j++) gW1[k * d + j]! += dz * r[j]!;
        }
      }
      const m = rows.length;
      for (let k = 0; k < h * d; k++) {
        vW1[k] = MOMENTUM * vW1[k]! - LEARNING_RATE * (gW1[k]! / m + WEIGHT_DECAY * W1[k]!);
        W1[k]! += vW1[k]!;
      }
      for (let k = 0; k < h; k++) {
        vb1[k] = MOMENTUM * vb1[k]! - LEARNING_RATE * (gb1[k]! / m);
        b1[k]! += vb1[k]!;
        vw2[k] = MOMENTUM * vw2[k]! - LEARNING_RATE * (gw2[k]! / m + WEIGHT_DECAY * w2[k]!);
        w2[k]! += vw2[k]!;
      }
      vb2 = MOMENTUM * vb2 - LEARNING_RATE * (gb2 / m);
      b2 += vb2;
    }
  }
  const predict = (r: number[]) => {
    const p = forward(norm(r));
    return Number.isFinite(p) ? p : 0.5; // a diverged network predicts the coin flip
  };
  const out = {
    val: readCsv("val_x.csv").x.map(predict),
    test: readCsv("test_x.csv").x.map(predict),
  };
  mkdirSync("out", { recursive: true });
  writeFileSync(path.join("out", "preds.json.tmp"), JSON.stringify(out));
  renameSync(path.join("out", "preds.json.tmp"), path.join("out", "preds.json"));
  console.log(`train_logloss: ${(loss / n).toFixed(5)}`);
}

if (import.meta.main) train();
