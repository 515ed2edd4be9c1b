// biome-ignore-all lint/style/noNonNullAssertion: typed-array and array reads in the numeric loops are in bounds
// intent: a text classifier. THE ONLY EDITABLE FILE.
//
// Learns the intent of a customer message (billing, shipping, technical, account, cancel)
// from data/train.jsonl and writes its predictions for the validation and test messages to
// out/preds.json for evaluate.ts. Two models: multinomial naive Bayes and an averaged
// perceptron (its passes over the data are shuffled by AUTOLAB_SEED).
import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { LABELS, readJsonl } from "./prepare.ts";

// ---------------------------------------------------------------------------------------
// Knobs (`const NAME = value;`, rewritten by the built-in optimizer; ranges in program.md).
// MODEL: naive_bayes or perceptron. FEATURES: words, words_bigrams, char3 (character
// trigrams inside words), words_char3. LOWERCASE / STRIP_PUNCT: normalise first.
// ALPHA: naive Bayes' additive smoothing. EPOCHS: the perceptron's passes.
const MODEL = "naive_bayes";
const FEATURES = "words";
const LOWERCASE = false;
const STRIP_PUNCT = false;
const ALPHA = 1.0;
const EPOCHS = 5;
// ---------------------------------------------------------------------------------------

type Label = (typeof LABELS)[number];

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

export function features(text: string): string[] {
  let t = LOWERCASE ? text.toLowerCase() : text;
  if (STRIP_PUNCT) t = t.replace(/[^\p{L}\p{N}\s]/gu, " ");
  const words = t.split(/\s+/).filter(Boolean);
  const out: string[] = [];
  const kind = FEATURES as string;
  if (kind === "words" || kind === "words_bigrams" || kind === "words_char3")
    out.push(...words.map((w) => `w:${w}`));
  if (kind === "words_bigrams")
    for (let i = 1; i < words.length; i++) out.push(`b:${words[i - 1]} ${words[i]}`);
  if (kind === "char3" || kind === "words_char3")
    for (const w of words) {
      const p = `^${w}$`;
      for (let i = 0; i + 3 <= p.length; i++) out.push(`c:${p.slice(i, i + 3)}`);
    }
  if (!["words", "words_bigrams", "char3", "words_char3"].includes(kind))
    throw new Error(`unknown FEATURES ${FEATURES}`);
  return out;
}

function naiveBayes(train: { f: string[]; y: Label }[]): (f: string[]) => Label {
  const counts = new Map<Label, Map<string, number>>(LABELS.map((l) => [l, new Map()]));
  const totals = new Map<Label, number>(LABELS.map((l) => [l, 0]));
  const docs = new Map<Label, number>(LABELS.map((l) => [l, 0]));
  const vocab = new Set<string>();
  for (const { f, y } of train) {
    docs.set(y, docs.get(y)! + 1);
    const m = counts.get(y)!;
    for (const x of f) {
      m.set(x, (m.get(x) ?? 0) + 1);
      totals.set(y, totals.get(y)! + 1);
      vocab.add(x);
    }
  }
  const V = vocab.size;
  return (f) => {
    let best: Label = LABELS[0];
    let bestScore = -Infinity;
    for (const l of LABELS) {
      let s = Math.log((docs.get(l)! + 1) / (train.length + LABELS.length));
      const m = counts.get(l)!;
      const denom = totals.get(l)! + ALPHA * V;
      for (const x of f) if (vocab.has(x)) s += Math.log(((m.get(x) ?? 0) + ALPHA) / denom);
      if (s > bestScore) {
        bestScore = s;
        best = l;
      }
    }
    return best;
  };
}

function perceptron(train: { f: string[]; y: Label }[], rand: () => number): (f: string[]) => Label {
  const w = new Map<string, Float64Array>(); // current weights, per feature, per label
  const sum = new Map<string, Float64Array>(); // their running sum (averaging)
  const row = (m: Map<string, Float64Array>, x: string) => {
    let r = m.get(x);
    if (!r) {
      r = new Float64Array(LABELS.length);
      m.set(x, r);
    }
    return r;
  };
  const scoreWith = (m: Map<string, Float64Array>, f: string[]) => {
    const s = new Float64Array(LABELS.length);
    for (const x of f) {
      const r = m.get(x);
      if (r) for (let k = 0; k < s.length; k++) s[k]! += r[k]!;
    }
    let best = 0;
    for (let k = 1; k < s.length; k++) if (s[k]! > s[best]!) best = k;
    return best;
  };
  const order = train.map((_, i) => i);
  let steps = 0;
  // sum accumulates w lazily: sum += w * (steps since last change), kept exact with a stamp
  const stamp = new Map<string, number>();
  const touch = (x: string) => {
    const last = stamp.get(x) ?? 0;
    const r = row(w, x);
    const s = row(sum, x);
    for (let k = 0; k < r.length; k++) s[k]! += r[k]! * (steps - last);
    stamp.set(x, steps);
    return r;
  };
  for (let e = 0; e < EPOCHS; e++) {
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    for (const i of order) {
      const { f, y } = train[i]!;
      const guess = scoreWith(w, f);
      const truth = LABELS.indexOf(y);
      if (guess !== truth)
        for (const x of f) {
          const r = touch(x);
          r[truth]! += 1;
          r[guess]! -= 1;
        }
      steps++;
    }
  }
  for (const x of w.keys()) touch(x);
  return (f) => LABELS[scoreWith(sum, f)]!;
}

function main(): void {
  const seed = Number(process.env.AUTOLAB_SEED ?? "0");
  const rand = mulberry32(Number.isFinite(seed) ? seed : 0);
  const train = readJsonl("train.jsonl").map((r) => ({ f: features(r.text), y: r.label as Label }));
  const predict = (MODEL as string) === "perceptron" ? perceptron(train, rand) : naiveBayes(train);
  const trainAcc = train.filter((r) => predict(r.f) === r.y).length / train.length;
  const out = {
    val: readJsonl("val.jsonl").map((r) => predict(features(r.text))),
    test: readJsonl("test.jsonl").map((r) => predict(features(r.text))),
  };
  mkdirSync("out", { recursive: true });
  writeFileSync(path.join("out", "preds.json.tmp"), JSON.stringify(out));
  renameSync(path.join("out", "preds.json.tmp"), path.join("out", "preds.json"));
  console.log(`train_accuracy: ${trainAcc.toFixed(4)}`);
}

if (import.meta.main) main();
