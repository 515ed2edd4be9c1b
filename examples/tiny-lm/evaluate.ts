// tiny-lm: the evaluator. PROTECTED: experiments may not edit this file.
//
// Loads the checkpoint that train.ts wrote (through train.ts's own loadModel) and prints the
// bits per byte of the next-character predictions on the fixed evaluation sample of the
// validation and test splits (see prepare.ts):
//   val_bpb: 2.345678
//   test_bpb: 2.345678
// Run from the example directory, after `node prepare.ts` and `node train.ts`.

import { existsSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import type { CharModel } from "./prepare.ts";
import { evaluateBpb, loadSplit, loadVocab } from "./prepare.ts";

const CHECKPOINT_DIR = "out";

function fail(message: string): never {
  console.error(`evaluate: ${message}`);
  process.exit(1);
}

const t0 = performance.now();
const vocab = loadVocab();
const val = loadSplit("val");
const test = loadSplit("test");

const trainFile = path.join(process.cwd(), "train.ts");
if (!existsSync(trainFile)) fail(`${trainFile} not found: run evaluate from the example directory`);
if (!existsSync(path.join(CHECKPOINT_DIR, "model.json"))) {
  fail(
    `no checkpoint at ${path.join(process.cwd(), CHECKPOINT_DIR, "model.json")}: run \`node train.ts\` first`,
  );
}

// The model code is the experiment's train.ts, in the working directory.
let model: CharModel;
try {
  const mod = (await import(pathToFileURL(trainFile).href)) as { loadModel?: (dir: string) => CharModel };
  if (typeof mod.loadModel !== "function") fail("train.ts does not export loadModel(dir)");
  model = mod.loadModel(CHECKPOINT_DIR);
} catch (err) {
  fail(`could not load the checkpoint: ${err instanceof Error ? err.message : String(err)}`);
}

let valBpb: number;
let testBpb: number;
try {
  valBpb = evaluateBpb(model, val, vocab.size);
  testBpb = evaluateBpb(model, test, vocab.size);
} catch (err) {
  fail(err instanceof Error ? err.message : String(err));
}

console.log(`val_bpb: ${valBpb.toFixed(6)}`);
console.log(`test_bpb: ${testBpb.toFixed(6)}`);
console.log(`eval_seconds: ${((performance.now() - t0) / 1000).toFixed(2)}`);
