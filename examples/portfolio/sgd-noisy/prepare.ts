// biome-ignore-all lint/style/noNonNullAssertion: array reads in the loops are in bounds
// sgd-noisy (portfolio): the data. PROTECTED: experiments may not edit this file.
//
// Writes a fixed synthetic binary-classification dataset under ./data (the same bytes on
// every machine: its own seed, not the trial's):
//   train.csv        features x0..x7 and the label y (400 rows: few, so training is noisy)
//   val_x.csv        features of the validation rows (1,000)   val_y.json: their labels
//   test_x.csv       features of the test rows (2,000)         test_y.json: their labels
// The label is drawn from a logistic model of a smooth non-linear function of the features (a
// ring, a product, a sine, two features that are noise): a linear model leaves accuracy on
// the table and a small network can find some of it. val_y.json and test_y.json are holdout
// files: only evaluate.ts reads them.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

export const DATA_DIR = path.join(process.cwd(), "data");
export const FEATURES = 8;
const ROWS = { train: 400, val: 1000, test: 2000 } as const;
const VERSION = "sgd-noisy-1";

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

/** The true log-odds of y = 1. */
export function logit(x: readonly number[]): number {
  const [x0, x1, x2, x3, x4, x5] = x as [number, number, number, number, number, number];
  return 1.5 * (1.2 - x0 * x0 - x1 * x1) + 1.2 * x2 * x3 + 1.5 * Math.sin(1.5 * x4) + 0.8 * x5;
}

function rows(n: number, rand: () => number): { x: number[][]; y: number[] } {
  const gauss = () => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
  const x: number[][] = [];
  const y: number[] = [];
  for (let i = 0; i < n; i++) {
    const r = Array.from({ length: FEATURES }, gauss);
    x.push(r.map((v) => Math.round(v * 1e4) / 1e4));
    y.push(rand() < 1 / (1 + Math.exp(-logit(r))) ? 1 : 0);
  }
  return { x, y };
}

const csv = (x: number[][], y?: number[]) =>
  `${[...Array.from({ length: FEATURES }, (_, j) => `x${j}`), ...(y ? ["y"] : [])].join(",")}\n${x
    .map((r, i) => [...r, ...(y ? [y[i]] : [])].join(","))
    .join("\n")}\n`;

export function prepare(): boolean {
  const stamp = path.join(DATA_DIR, "version.txt");
  if (existsSync(stamp) && readFileSync(stamp, "utf8") === VERSION) return false;
  mkdirSync(DATA_DIR, { recursive: true });
  const rand = mulberry32(0x5_6d_01);
  const train = rows(ROWS.train, rand);
  const val = rows(ROWS.val, rand);
  const test = rows(ROWS.test, rand);
  writeFileSync(path.join(DATA_DIR, "train.csv"), csv(train.x, train.y));
  writeFileSync(path.join(DATA_DIR, "val_x.csv"), csv(val.x));
  writeFileSync(path.join(DATA_DIR, "test_x.csv"), csv(test.x));
  writeFileSync(path.join(DATA_DIR, "val_y.json"), JSON.stringify(val.y));
  writeFileSync(path.join(DATA_DIR, "test_y.json"), JSON.stringify(test.y));
  writeFileSync(stamp, VERSION);
  return true;
}

/** Rows of a CSV written above: features, and the label when the file has one. */
export function readCsv(file: string): { x: number[][]; y: number[] } {
  const [header, ...lines] = readFileSync(path.join(DATA_DIR, file), "utf8").trim().split("\n");
  const hasY = header!.endsWith(",y");
  const x: number[][] = [];
  const y: number[] = [];
  for (const line of lines) {
    const v = line.split(",").map(Number);
    if (hasY) y.push(v.pop()!);
    x.push(v);
  }
  return { x, y };
}

if (import.meta.main) console.log(`prepare: ${prepare() ? "wrote" : "up to date"} ${DATA_DIR}`);
