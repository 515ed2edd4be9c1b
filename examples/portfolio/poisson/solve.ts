// biome-ignore-all lint/style/noNonNullAssertion: typed-array and array reads in the numeric loops are in bounds
// poisson: the solver. THE ONLY EDITABLE FILE.
//
// solve(problem) returns u with A u = b (problem.ts: the stencil, apply). evaluate.ts
// (protected) times the call and computes the relative residual ||b - A u|| / ||b|| itself;
// program.md's constraint wants it at most 1e-6.

import { apply, type Problem, stencil } from "./problem.ts";

// ---------------------------------------------------------------------------------------
// Knobs (`const NAME = value;`, rewritten by the built-in optimizer; ranges in program.md).
// METHOD: jacobi, gauss_seidel, sor (over-relaxed Gauss-Seidel with OMEGA), cg (conjugate
// gradients), pcg (CG with the Jacobi preconditioner). TOLERANCE: stop when the solver's own
// relative residual is below it. MAX_ITERS: stop anyway.
const METHOD = "sor";
const OMEGA = 1.8;
const TOLERANCE = 1e-8;
const MAX_ITERS = 50000;
// ---------------------------------------------------------------------------------------

export function solve(p: Problem): { u: Float64Array; iterations: number } {
  const st = stencil(p);
  const N = p.n * p.n;
  const u = new Float64Array(N);
  const r = new Float64Array(N);
  const bnorm = Math.sqrt(dot(p.b, p.b));
  const relres = () => {
    apply(st, u, r);
    for (let c = 0; c < N; c++) r[c] = p.b[c]! - r[c]!;
    return Math.sqrt(dot(r, r)) / bnorm;
  };
  const { n, diag, w, e, no, s } = st;
  const sweep = (omega: number) => {
    for (let i = 0; i < n; i++)
      for (let j = 0; j < n; j++) {
        const c = i * n + j;
        let v = p.b[c]!;
        if (j > 0) v += w[c]! * u[c - 1]!;
        if (j < n - 1) v += e[c]! * u[c + 1]!;
        if (i > 0) v += no[c]! * u[c - n]!;
        if (i < n - 1) v += s[c]! * u[c + n]!;
        u[c] = (1 - omega) * u[c]! + (omega * v) / diag[c]!;
      }
  };
  switch (METHOD as string) {
    case "jacobi": {
      const next = new Float64Array(N);
      for (let it = 1; it <= MAX_ITERS; it++) {
        apply(st, u, r);
        for (let c = 0; c < N; c++) next[c] = u[c]! + (p.b[c]! - r[c]!) / diag[c]!;
        u.set(next);
        if (it % 50 === 0 && relres() < TOLERANCE) return { u, iterations: it };
      }
      return { u, iterations: MAX_ITERS };
    }
    case "gauss_seidel":
    case "sor": {
      const omega = (METHOD as string) === "sor" ? OMEGA : 1;
      for (let it = 1; it <= MAX_ITERS; it++) {
        sweep(omega);
        if (it % 20 === 0 && relres() < TOLERANCE) return { u, iterations: it };
      }
      return { u, iterations: MAX_ITERS };
    }
    case "cg":
    case "pcg": {
      const z = new Float64Array(N);
      const d = new Float64Array(N);
      const q = new Float64Array(N);
      r.set(p.b);
      const precondition = () => {
        for (let c = 0; c < N; c++) z[c] = (METHOD as string) === "pcg" ? r[c]! / diag[c]! : r[c]!;
      };
      precondition();
      d.set(z);
      let rz = dot(r, z);
      for (let it = 1; it <= MAX_ITERS; it++) {
        apply(st, d, q);
        const alpha = rz / dot(d, q);
        for (let c = 0; c < N; c++) {
          u[c] = u[c]! + alpha * d[c]!;
          r[c] = r[c]! - alpha * q[c]!;
        }
        if (Math.sqrt(dot(r, r)) / bnorm < TOLERANCE) return { u, iterations: it };
        precondition();
        const rz1 = dot(r, z);
        const beta = rz1 / rz;
        rz = rz1;
        for (let c = 0; c < N; c++) d[c] = z[c]! + beta * d[c]!;
      }
      return { u, iterations: MAX_ITERS };
    }
    default:
      throw new Error(`unknown METHOD ${METHOD}`);
  }
}

function dot(a: Float64Array, b: Float64Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
}
