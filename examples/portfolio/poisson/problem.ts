// biome-ignore-all lint/style/noNonNullAssertion: typed-array and array reads in the numeric loops are in bounds
// poisson: the problem. PROTECTED: experiments may not edit this file.
//
// -div(k grad u) = f on the unit square, u = 0 on the boundary, discretised with the
// 5-point finite-volume stencil on an n x n grid of interior cells: for cell (i, j) (row i,
// column j, index i * n + j),
//   (A u)_ij = sum over its four faces of k_face * (u_ij - u_neighbour)     (u = 0 outside)
// where k_face is the harmonic mean of the two cells' k (a boundary face: the cell's own k,
// doubled: the boundary is half a cell away). A is symmetric positive definite; the
// coefficient jumps by a factor of 100 across inclusions, so plain iterations converge slowly.
// Imported by solve.ts (to build the stencil) and evaluate.ts (to check the answer).

export interface Problem {
  n: number;
  /** cell coefficients k, n * n, all >= 1 */
  k: Float64Array;
  /** right-hand side f times the cell area, n * n */
  b: Float64Array;
}

/** The matrix as five arrays over the cells: diagonal and the four neighbour couplings
 * (west, east, north, south; 0 on the boundary, so every neighbour index is then unused). */
export interface Stencil {
  n: number;
  diag: Float64Array;
  w: Float64Array;
  e: Float64Array;
  no: Float64Array;
  s: Float64Array;
}

export function stencil(p: Problem): Stencil {
  const { n, k } = p;
  const N = n * n;
  const st = {
    n,
    diag: new Float64Array(N),
    w: new Float64Array(N),
    e: new Float64Array(N),
    no: new Float64Array(N),
    s: new Float64Array(N),
  };
  const face = (a: number, b: number) => (2 * a * b) / (a + b);
  for (let i = 0; i < n; i++)
    for (let j = 0; j < n; j++) {
      const c = i * n + j;
      const kc = k[c]!;
      const cw = j > 0 ? face(kc, k[c - 1]!) : 0;
      const ce = j < n - 1 ? face(kc, k[c + 1]!) : 0;
      const cn = i > 0 ? face(kc, k[c - n]!) : 0;
      const cs = i < n - 1 ? face(kc, k[c + n]!) : 0;
      st.w[c] = cw;
      st.e[c] = ce;
      st.no[c] = cn;
      st.s[c] = cs;
      const boundary = (j === 0 ? 1 : 0) + (j === n - 1 ? 1 : 0) + (i === 0 ? 1 : 0) + (i === n - 1 ? 1 : 0);
      st.diag[c] = cw + ce + cn + cs + 2 * kc * boundary;
    }
  return st;
}

/** out = A x */
export function apply(st: Stencil, x: Float64Array, out: Float64Array): void {
  const { n, diag, w, e, no, s } = st;
  for (let i = 0; i < n; i++)
    for (let j = 0; j < n; j++) {
      const c = i * n + j;
      let v = diag[c]! * x[c]!;
      if (j > 0) v -= w[c]! * x[c - 1]!;
      if (j < n - 1) v -= e[c]! * x[c + 1]!;
      if (i > 0) v -= no[c]! * x[c - n]!;
      if (i < n - 1) v -= s[c]! * x[c + n]!;
      out[c] = v;
    }
}

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

/** A problem: the grid and the inclusions are fixed; the right-hand side's random part comes
 * from the seed. */
export function makeProblem(n: number, seed: number): Problem {
  const k = new Float64Array(n * n).fill(1);
  const inclusions = [
    [0.3, 0.3, 0.15],
    [0.7, 0.6, 0.2],
    [0.4, 0.75, 0.1],
  ] as const;
  for (let i = 0; i < n; i++)
    for (let j = 0; j < n; j++) {
      const y = (i + 0.5) / n;
      const x = (j + 0.5) / n;
      for (const [cx, cy, r] of inclusions) if ((x - cx) ** 2 + (y - cy) ** 2 < r * r) k[i * n + j] = 100;
    }
  const rand = mulberry32(seed);
  const b = new Float64Array(n * n);
  for (let c = 0; c < n * n; c++) b[c] = (1 + (rand() - 0.5)) / (n * n);
  return { n, k, b };
}
