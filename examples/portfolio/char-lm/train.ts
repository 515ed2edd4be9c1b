// biome-ignore-all lint/style/noNonNullAssertion: typed-array and array reads in the numeric loops are in bounds
// char-lm: a character n-gram language model. THE ONLY EDITABLE FILE.
//
// Counts (context, next character) pairs of the training split in hashed tables and predicts
// with interpolated absolute discounting: the order-k estimate
//   p_k(c | h) = (max(n(h, c) - D, 0) + D * types(h) * p_{k-1}(c | h')) / n(h)
// backs off to the shorter context h' (and, below order 0, to the uniform distribution).
// Training reads random chunks of the training split (seeded by AUTOLAB_SEED) until
// TRAIN_CHARS characters are counted or 80% of the budget (AUTOLAB_BUDGET_S) is spent, then
// writes out/model.bin. evaluate.ts (protected) loads it through loadModel() below.
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { type CharModel, loadSplit, loadVocab } from "./prepare.ts";

// ---------------------------------------------------------------------------------------
// Knobs (`const NAME = value;`, rewritten by the built-in optimizer; ranges in program.md).
// ORDER: characters of context (0 = unigram). DISCOUNT: absolute discount D. TRAIN_CHARS:
// how much of the training split to count. TABLE_BITS: log2 of each hashed table's size
// (collisions merge counts). CHUNK: characters per randomly placed training chunk.
const ORDER = 2;
const DISCOUNT = 0.9;
const TRAIN_CHARS = 100000;
const TABLE_BITS = 16;
const CHUNK = 64;
// ---------------------------------------------------------------------------------------

const OUT_DIR = "out";
const MAGIC = 0x6e67726d; // "ngrm"

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

function mix(h: number, x: number): number {
  h = Math.imul(h ^ (x + 0x9e3779b9), 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** An open-addressing table of counts keyed by 32-bit hashes (0: an empty slot). When it is
 * 90% full, new keys are dropped: a table too small for the data loses counts. */
class CountTable {
  readonly keys: Uint32Array;
  readonly a: Int32Array;
  readonly b: Int32Array;
  readonly mask: number;
  used = 0;
  constructor(bits: number) {
    this.keys = new Uint32Array(1 << bits);
    this.a = new Int32Array(1 << bits);
    this.b = new Int32Array(1 << bits);
    this.mask = (1 << bits) - 1;
  }
  /** The slot of key, or -1 when absent. */
  find(key: number): number {
    const k = key || 1;
    for (let i = k & this.mask; ; i = (i + 1) & this.mask) {
      const s = this.keys[i]!;
      if (s === k) return i;
      if (s === 0) return -1;
    }
  }
  /** The slot of key, added when absent (-1 when the table is full). */
  slot(key: number): number {
    const k = key || 1;
    for (let i = k & this.mask; ; i = (i + 1) & this.mask) {
      const s = this.keys[i]!;
      if (s === k) return i;
      if (s === 0) {
        if (this.used >= this.keys.length * 0.9) return -1;
        this.keys[i] = k;
        this.used++;
        return i;
      }
    }
  }
}

interface Tables {
  order: number;
  bits: number;
  discount: number;
  /** n(h, c) (in a) by hash of (order, h, c) */
  pair: CountTable;
  /** n(h) (in a) and types(h) (in b) by hash of (order, h) */
  ctx: CountTable;
}

function newTables(order: number, bits: number, discount: number): Tables {
  return { order, bits, discount, pair: new CountTable(bits), ctx: new CountTable(bits) };
}

/** Hashes of the contexts of length 0..order ending just before position t of ids. */
function contextHashes(ids: Uint8Array, t: number, order: number, out: Uint32Array): void {
  let h = mix(0x1234567, 0);
  out[0] = h;
  for (let k = 1; k <= order; k++) {
    const c = t - k >= 0 ? ids[t - k]! : 255; // 255: before the start
    h = mix(h, c + 1 + k * 257);
    out[k] = h;
  }
}

function count(tb: Tables, ids: Uint8Array, from: number, to: number): void {
  const hs = new Uint32Array(tb.order + 1);
  for (let t = from; t < to; t++) {
    contextHashes(ids, t, tb.order, hs);
    const c = ids[t]!;
    for (let k = 0; k <= tb.order; k++) {
      const hc = tb.ctx.slot(hs[k]!);
      const hp = tb.pair.slot(mix(hs[k]!, c + 7));
      if (hc < 0 || hp < 0) continue; // full: this count is lost
      if (tb.pair.a[hp] === 0) tb.ctx.b[hc]!++;
      tb.pair.a[hp]!++;
      tb.ctx.a[hc]!++;
    }
  }
}

function predictor(tb: Tables, vocabSize: number): CharModel {
  const D = tb.discount;
  return {
    contextSize: tb.order,
    logProbs(contexts: readonly Uint8Array[]): Float32Array {
      const out = new Float32Array(contexts.length * vocabSize);
      const hs = new Uint32Array(tb.order + 1);
      contexts.forEach((ctx, r) => {
        contextHashes(ctx, ctx.length, tb.order, hs);
        for (let v = 0; v < vocabSize; v++) {
          let p = 1 / vocabSize;
          for (let k = 0; k <= tb.order; k++) {
            const hc = tb.ctx.find(hs[k]!);
            // an unseen context (or one whose counts a full table dropped): longer ones are too
            if (hc < 0 || tb.ctx.a[hc] === 0) break;
            const hp = tb.pair.find(mix(hs[k]!, v + 7));
            const nc = hp < 0 ? 0 : tb.pair.a[hp]!;
            p = (Math.max(nc - D, 0) + D * tb.ctx.b[hc]! * p) / tb.ctx.a[hc]!;
          }
          out[r * vocabSize + v] = Math.log(p);
        }
      });
      return out;
    },
  };
}

export function loadModel(dir: string = OUT_DIR): CharModel {
  const file = path.join(dir, "model.bin");
  if (!existsSync(file)) throw new Error(`no checkpoint at ${file}: run \`node train.ts\` first`);
  const buf = readFileSync(file);
  const bytes = new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength).slice(); // aligned copy
  const head = new Int32Array(bytes.buffer, 0, 5);
  if (head[0] !== MAGIC) throw new Error(`${file}: not a char-lm checkpoint`);
  const order = head[1]!;
  const bits = head[2]!;
  const vocabSize = head[3]!;
  const discount = new Float32Array(bytes.buffer, 16, 1)[0]!;
  const tb = newTables(order, bits, discount);
  const size = 1 << bits;
  let o = 20;
  for (const t of [tb.pair.keys, tb.pair.a, tb.ctx.keys, tb.ctx.a, tb.ctx.b]) {
    if (o + size * 4 > bytes.length) throw new Error(`${file}: truncated`);
    t.set(new Uint32Array(bytes.buffer.slice(o, o + size * 4)) as never);
    o += size * 4;
  }
  return predictor(tb, vocabSize);
}

function save(tb: Tables, vocabSize: number): void {
  mkdirSync(OUT_DIR, { recursive: true });
  const head = new Int32Array([MAGIC, tb.order, tb.bits, vocabSize, 0]);
  new Float32Array(head.buffer, 16, 1)[0] = tb.discount;
  const parts = [head, tb.pair.keys, tb.pair.a, tb.ctx.keys, tb.ctx.a, tb.ctx.b].map((a) =>
    Buffer.from(a.buffer, a.byteOffset, a.byteLength),
  );
  const tmp = path.join(OUT_DIR, "model.bin.tmp");
  writeFileSync(tmp, Buffer.concat(parts));
  renameSync(tmp, path.join(OUT_DIR, "model.bin"));
}

function train(): void {
  const budgetS = Number(process.env.AUTOLAB_BUDGET_S ?? "3");
  const seed = Number(process.env.AUTOLAB_SEED ?? "0");
  const rand = mulberry32(Number.isFinite(seed) ? seed : 0);
  const vocab = loadVocab();
  const data = loadSplit("train");
  const tb = newTables(ORDER, TABLE_BITS, DISCOUNT);
  const deadline = budgetS * 1000 * 0.8;
  let counted = 0;
  while (counted < TRAIN_CHARS && performance.now() < deadline) {
    const from = Math.floor(rand() * (data.length - CHUNK));
    const n = Math.min(CHUNK, TRAIN_CHARS - counted);
    count(tb, data, from, from + n);
    counted += n;
  }
  save(tb, vocab.size);
  console.log(`chars_counted: ${counted}`);
  console.log(`train_seconds: ${(performance.now() / 1000).toFixed(2)}`);
}

if (import.meta.main) train();
