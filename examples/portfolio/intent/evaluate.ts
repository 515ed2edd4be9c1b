// intent (portfolio): the evaluator. PROTECTED: experiments may not edit this file.
//
// Reads the intents classify.ts predicted (out/preds.json: { val: string[], test: string[] },
// one per line of val.jsonl and test.jsonl) and scores them against the labels, which only
// this script reads (holdout files):
//   val_accuracy: 0.8123     the objective
//   val_macro_f1: 0.8011     the mean over the five intents of F1
//   test_accuracy: ...       the same on the test messages (holdout metrics: never shown to agents)
//   test_macro_f1: ...
// Predictions of the wrong shape or outside the five intents fail the evaluation (exit 1).
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { DATA_DIR, LABELS } from "./prepare.ts";

function fail(message: string): never {
  console.error(`evaluate: ${message}`);
  process.exit(1);
}

function score(p: unknown, y: string[], name: string): { accuracy: number; f1: number } {
  if (!Array.isArray(p) || p.length !== y.length)
    fail(`out/preds.json: "${name}" must be an array of ${y.length} intents`);
  p.forEach((v, i) => {
    if (!(LABELS as readonly unknown[]).includes(v))
      fail(`out/preds.json: "${name}"[${i}] is ${JSON.stringify(v)}, not one of ${LABELS.join(", ")}`);
  });
  const right = p.filter((v, i) => v === y[i]).length;
  const f1s = LABELS.map((l) => {
    const tp = p.filter((v, i) => v === l && y[i] === l).length;
    const fp = p.filter((v, i) => v === l && y[i] !== l).length;
    const fn = p.filter((v, i) => v !== l && y[i] === l).length;
    return tp === 0 ? 0 : (2 * tp) / (2 * tp + fp + fn);
  });
  return { accuracy: right / y.length, f1: f1s.reduce((a, b) => a + b, 0) / f1s.length };
}

const file = path.join(process.cwd(), "out", "preds.json");
if (!existsSync(file)) fail(`no ${file}: run \`node classify.ts\` first`);
let preds: { val?: unknown; test?: unknown };
try {
  preds = JSON.parse(readFileSync(file, "utf8"));
} catch (err) {
  fail(`out/preds.json is not JSON: ${err instanceof Error ? err.message : err}`);
}
const labels = (f: string) => JSON.parse(readFileSync(path.join(DATA_DIR, f), "utf8")) as string[];
const val = score(preds.val, labels("val_labels.json"), "val");
const test = score(preds.test, labels("test_labels.json"), "test");
console.log(`val_accuracy: ${val.accuracy.toFixed(4)}`);
console.log(`val_macro_f1: ${val.f1.toFixed(4)}`);
console.log(`test_accuracy: ${test.accuracy.toFixed(4)}`);
console.log(`test_macro_f1: ${test.f1.toFixed(4)}`);
