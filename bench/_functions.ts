/**
 * Standard black-box test functions with known optima, for the trust and optimizer
 * benchmarks. Every function is minimized and defined on its own knob space; `unit` maps a
 * point of the unit cube into that space (log knobs in log space), so a simulation can
 * propose in the cube and the optimizer benchmark can search the real knobs.
 */
import type { NumericKnob } from "../src/core/types.ts";

export type Point = Record<string, number>;

export interface TestFunction {
  name: string;
  space: Record<string, NumericKnob>;
  f: (p: Point) => number;
  /** The noise-free minimum. */
  optimum: number;
}

const knob = (low: number, high: number, extra: Partial<NumericKnob> = {}): NumericKnob => ({
  low,
  high,
  log: false,
  int: false,
  ...extra,
});

/** Branin–Hoo on [-5, 10] × [0, 15]; minimum 0.397887 at three points. */
export const branin: TestFunction = {
  name: "branin",
  space: { X1: knob(-5, 10), X2: knob(0, 15) },
  optimum: 0.397887,
  f: (p) => {
    const x1 = p.X1 as number;
    const x2 = p.X2 as number;
    const b = 5.1 / (4 * Math.PI ** 2);
    const c = 5 / Math.PI;
    const t = 1 / (8 * Math.PI);
    return (x2 - b * x1 * x1 + c * x1 - 6) ** 2 + 10 * (1 - t) * Math.cos(x1) + 10;
  },
};

const H3_A = [
  [3, 10, 30],
  [0.1, 10, 35],
  [3, 10, 30],
  [0.1, 10, 35],
];
const H3_P = [
  [0.3689, 0.117, 0.2673],
  [0.4699, 0.4387, 0.747],
  [0.1091, 0.8732, 0.5547],
  [0.03815, 0.5743, 0.8828],
];
const H_ALPHA = [1, 1.2, 3, 3.2];

/** Hartmann-3 on [0, 1]³; minimum −3.86278. */
export const hartmann3: TestFunction = {
  name: "hartmann3",
  space: { X1: knob(0, 1), X2: knob(0, 1), X3: knob(0, 1) },
  optimum: -3.86278,
  f: (p) => {
    const x = [p.X1 as number, p.X2 as number, p.X3 as number];
    let s = 0;
    for (let i = 0; i < 4; i++) {
      let inner = 0;
      for (let j = 0; j < 3; j++) {
        inner +=
          ((H3_A[i] as number[])[j] as number) *
          ((x[j] as number) - ((H3_P[i] as number[])[j] as number)) ** 2;
      }
      s -= (H_ALPHA[i] as number) * Math.exp(-inner);
    }
    return s;
  },
};

/** Rosenbrock in 2-D on [-2, 2]², on a log scale: log(1 + f); minimum 0 at (1, 1). */
export const logRosenbrock: TestFunction = {
  name: "log-rosenbrock",
  space: { X1: knob(-2, 2), X2: knob(-2, 2) },
  optimum: 0,
  f: (p) => {
    const x = p.X1 as number;
    const y = p.X2 as number;
    return Math.log1p(100 * (y - x * x) ** 2 + (1 - x) ** 2);
  },
};

/**
 * A hyperparameter-like quadratic in log space (learning rate, width, dropout), the shape
 * test/tpe.test.ts uses: minimum 0 at LR 3e-3, HIDDEN 96, DROPOUT 0.1.
 */
export const logQuadratic: TestFunction = {
  name: "log-quadratic",
  space: {
    LR: knob(1e-5, 1, { log: true }),
    HIDDEN: knob(8, 1024, { log: true, int: true }),
    DROPOUT: knob(0, 0.5),
  },
  optimum: 0,
  f: (p) => {
    const lr = Math.log10(p.LR as number) - Math.log10(3e-3);
    const hidden = (Math.log2(p.HIDDEN as number) - Math.log2(96)) / 2;
    const dropout = ((p.DROPOUT as number) - 0.1) * 4;
    return lr * lr + hidden * hidden + dropout * dropout;
  },
};

/**
 * Styblinski–Tang in 6-D on [-5, 5]⁶, averaged over the dimensions: 2⁶ local minima, the global
 * one −39.16617 at every xᵢ = −2.903534. A 6-knob tuning function (the held-out set has a 6-D
 * one, Hartmann-6; defaults for six knobs are tuned here, never there).
 */
export const styblinskiTang6: TestFunction = {
  name: "styblinski-tang-6",
  space: Object.fromEntries([1, 2, 3, 4, 5, 6].map((i) => [`X${i}`, knob(-5, 5)])),
  optimum: -39.16617,
  f: (p) => {
    let s = 0;
    for (let i = 1; i <= 6; i++) {
      const x = p[`X${i}`] as number;
      s += x ** 4 - 16 * x * x + 5 * x;
    }
    return s / 12;
  },
};

const WELLS6 = [
  {
    depth: 3.0,
    width: [0.308, 0.364, 0.28, 0.392, 0.336, 0.364],
    centre: [0.78, 0.22, 0.66, 0.35, 0.86, 0.15],
  },
  { depth: 2.2, width: [0.49, 0.42, 0.56, 0.42, 0.49, 0.56], centre: [0.3, 0.7, 0.3, 0.6, 0.25, 0.7] },
  { depth: 2.0, width: [0.308, 0.35, 0.28, 0.308, 0.35, 0.28], centre: [0.2, 0.2, 0.8, 0.85, 0.6, 0.4] },
  { depth: 1.6, width: [0.35, 0.28, 0.42, 0.35, 0.35, 0.35], centre: [0.65, 0.8, 0.15, 0.2, 0.5, 0.85] },
];

/**
 * Four Gaussian wells in [0, 1]⁶ (f = −Σ depth·exp(−½ Σⱼ ((xⱼ − centreⱼ)/widthⱼ)²)), built to
 * trap a sampler in a basin: the deepest well (3.0) is narrower than a broad decoy (2.2), which
 * catches 60% of local searches started at random points, the global basin 13% (Nelder–Mead
 * from 200 random starts). Minimum −3.209068 near (0.758, 0.242, 0.657, 0.376, 0.839, 0.173);
 * the decoy's floor is −2.83, 2.5σ above it at the σ 0.15 it is run at (bench/tune.ts). A
 * tuning function (issue #17's sampler step, session 13); nothing held out resembles it beyond
 * being multi-basin.
 */
export const wells6: TestFunction = {
  name: "wells-6",
  space: Object.fromEntries([1, 2, 3, 4, 5, 6].map((i) => [`X${i}`, knob(0, 1)])),
  optimum: -3.209068,
  f: (p) => {
    let s = 0;
    for (const { depth, width, centre } of WELLS6) {
      let q = 0;
      for (let j = 0; j < 6; j++) {
        q += (((p[`X${j + 1}`] as number) - (centre[j] as number)) / (width[j] as number)) ** 2;
      }
      s -= depth * Math.exp(-0.5 * q);
    }
    return s;
  },
};

/** Maps a point of the unit cube into the function's knob space (log knobs in log space). */
export function fromUnit(space: Record<string, NumericKnob>, u: readonly number[]): Point {
  const p: Point = {};
  Object.entries(space).forEach(([name, k], i) => {
    const t = Math.min(1, Math.max(0, u[i] ?? 0));
    let v = k.log
      ? Math.exp(Math.log(k.low) + t * (Math.log(k.high) - Math.log(k.low)))
      : k.low + t * (k.high - k.low);
    if (k.int) v = Math.round(v);
    p[name] = v;
  });
  return p;
}
