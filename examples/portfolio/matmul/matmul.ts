// biome-ignore-all lint/style/noNonNullAssertion: typed-array and array reads in the numeric loops are in bounds
// matmul: the function to make faster. THE ONLY EDITABLE FILE.
//
// matmul(a, b, n) returns the n x n product c = a * b of two n x n matrices stored row-major
// in Float64Arrays (a[i * n + k] is row i, column k), as a new Float64Array. evaluate.ts
// (protected) checks every entry of every product against its own, on matrices no researcher
// sees, and times the calls.
//
// The knobs choose the loop order (which array each inner loop walks along a row and which
// it strides down a column), whether b is transposed first, and cache blocking. One of them
// (FLOAT32) is faster on some machines but not exact enough: the evaluator rejects it.

// ---------------------------------------------------------------------------------------
// Knobs: `const NAME = value;` lines, rewritten by the built-in optimizer (ranges in program.md).
// LOOP_ORDER: the nesting of the i (row of c), j (column of c) and k (the sum) loops.
// TRANSPOSE_B: copy b transposed first (only for "ijk": its inner loop then reads rows).
// BLOCKED: a blocked i-k-j product in BLOCK x BLOCK tiles (LOOP_ORDER, TRANSPOSE_B ignored).
// FLOAT32: accumulate in single precision (fast, WRONG: the check wants 1e-9).
const LOOP_ORDER = "ijk";
const TRANSPOSE_B = false;
const BLOCKED = false;
const BLOCK = 64;
const FLOAT32 = false;
// ---------------------------------------------------------------------------------------

export function matmul(a: Float64Array, b: Float64Array, n: number): Float64Array {
  if (FLOAT32) return single(a, b, n);
  if (BLOCKED) return blocked(a, b, n, Math.max(1, BLOCK));
  const c = new Float64Array(n * n);
  switch (LOOP_ORDER as string) {
    case "ijk": {
      if (TRANSPOSE_B) {
        const bt = new Float64Array(n * n);
        for (let k = 0; k < n; k++) for (let j = 0; j < n; j++) bt[j * n + k] = b[k * n + j]!;
        for (let i = 0; i < n; i++)
          for (let j = 0; j < n; j++) {
            let s = 0;
            for (let k = 0; k < n; k++) s += a[i * n + k]! * bt[j * n + k]!;
            c[i * n + j] = s;
          }
        return c;
      }
      for (let i = 0; i < n; i++)
        for (let j = 0; j < n; j++) {
          let s = 0;
          for (let k = 0; k < n; k++) s += a[i * n + k]! * b[k * n + j]!;
          c[i * n + j] = s;
        }
      return c;
    }
    case "ikj":
      for (let i = 0; i < n; i++)
        for (let k = 0; k < n; k++) {
          const x = a[i * n + k]!;
          for (let j = 0; j < n; j++) c[i * n + j] = c[i * n + j]! + x * b[k * n + j]!;
        }
      return c;
    case "jki":
      for (let j = 0; j < n; j++)
        for (let k = 0; k < n; k++) {
          const x = b[k * n + j]!;
          for (let i = 0; i < n; i++) c[i * n + j] = c[i * n + j]! + a[i * n + k]! * x;
        }
      return c;
    case "kij":
      for (let k = 0; k < n; k++)
        for (let i = 0; i < n; i++) {
          const x = a[i * n + k]!;
          for (let j = 0; j < n; j++) c[i * n + j] = c[i * n + j]! + x * b[k * n + j]!;
        }
      return c;
    default:
      throw new Error(`unknown LOOP_ORDER ${LOOP_ORDER}`);
  }
}

function blocked(a: Float64Array, b: Float64Array, n: number, t: number): Float64Array {
  const c = new Float64Array(n * n);
  for (let ii = 0; ii < n; ii += t)
    for (let kk = 0; kk < n; kk += t)
      for (let jj = 0; jj < n; jj += t) {
        const iEnd = Math.min(ii + t, n);
        const kEnd = Math.min(kk + t, n);
        const jEnd = Math.min(jj + t, n);
        for (let i = ii; i < iEnd; i++)
          for (let k = kk; k < kEnd; k++) {
            const x = a[i * n + k]!;
            for (let j = jj; j < jEnd; j++) c[i * n + j] = c[i * n + j]! + x * b[k * n + j]!;
          }
      }
  return c;
}

function single(a: Float64Array, b: Float64Array, n: number): Float64Array {
  const a32 = Float32Array.from(a);
  const b32 = Float32Array.from(b);
  const c32 = new Float32Array(n * n);
  for (let i = 0; i < n; i++)
    for (let k = 0; k < n; k++) {
      const x = a32[i * n + k]!;
      for (let j = 0; j < n; j++) c32[i * n + j] = c32[i * n + j]! + x * b32[k * n + j]!;
    }
  return Float64Array.from(c32);
}
