// sgd-noisy (portfolio): the evaluator. PROTECTED: experiments may not edit this file.
//
// Reads the predicted probabilities train.ts wrote to out/preds.json ({ val: number[],
// test: number[] }, one per row of val_x.csv and test_x.csv) and scores them against the
// labels, which only this script reads (holdout files):
//   val_logloss: 0.5123     mean negative log-likelihood, probabilities clipped to [1e-6, 1 - 1e-6]
//   val_accuracy: 0.7510    threshold 0.5
//   test_logloss: ...       the same on the test rows (a holdout metric: never shown to agents)
//   test_accuracy: ...
// Predictions of the wrong shape or not numbers in [0, 1] fail the evaluation (exit 1).
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { DATA_DIR } from "./prepare.ts";

function fail(message: string): never {
  console.error(`evaluate: ${message}`);
  process.exit(1);
}

function score(p: unknown, y: number[], name: string): { logloss: number; accuracy: number } {
  if (!Array.isArray(p) || p.length !== y.length)
    fail(`out/preds.json: "${name}" must be an array of ${y.length} probabilities`);
  let nll = 0;
  let right = 0;
  p.forEach((v, i) => {
    if (typeof v !== "number" || !(v >= 0 && v <= 1))
      fail(`out/preds.json: "${name}"[${i}] is ${JSON.stringify(v)}, not a probability`);
    const q = Math.min(1 - 1e-6, Math.max(1e-6, v));
    nll -= y[i] === 1 ? Math.log(q) : Math.log(1 - q);
    if ((v >= 0.5 ? 1 : 0) === y[i]) right++;
  });
  return { logloss: nll / y.length, accuracy: right / y.length };
}

const file = path.join(process.cwd(), "out", "preds.json");
if (!existsSync(file)) fail(`no ${file}: run \`node train.ts\` first`);
let preds: { val?: unknown; test?: unknown };
try {
  preds = JSON.parse(readFileSync(file, "utf8"));
} catch (err) {
  fail(`out/preds.json is not JSON: ${err instanceof Error ? err.message : err}`);
}
const label = (f: string) => JSON.parse(readFileSync(path.join(DATA_DIR, f), "utf8")) as number[];
const val = score(preds.val, label("val_y.json"), "val");
const test = score(preds.test, label("test_y.json"), "test");
console.log(`val_logloss: ${val.logloss.toFixed(5)}`);
console.log(`val_accuracy: ${val.accuracy.toFixed(4)}`);
console.log(`test_logloss: ${test.logloss.toFixed(5)}`);
console.log(`test_accuracy: ${test.accuracy.toFixed(4)}`);
