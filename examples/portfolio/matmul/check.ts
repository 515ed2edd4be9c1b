// biome-ignore-all lint/style/noNonNullAssertion: typed-array and array reads in the numeric loops are in bounds
// matmul: the smoke test, run as each trial's command. PROTECTED.
//
// Multiplies a few small public matrices and checks the products, so a broken implementation
// shows in the trial's log at once. Passing it proves little: the evaluator's matrices are
// larger, unseen, and checked to 1e-9.
//   smoke_ms: 1.234
import { matmul } from "./matmul.ts";

let bad = 0;
const t0 = performance.now();
for (const n of [1, 2, 3, 7, 16]) {
  const a = Float64Array.from({ length: n * n }, (_, i) => (i % 5) - 2);
  const b = Float64Array.from({ length: n * n }, (_, i) => (i % 3) + 0.5);
  const c = matmul(a, b, n);
  for (let i = 0; i < n; i++)
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let k = 0; k < n; k++) s += a[i * n + k]! * b[k * n + j]!;
      if (!(c instanceof Float64Array) || Math.abs(c[i * n + j]! - s) > 1e-6) bad++;
    }
}
if (bad) {
  console.error(`check: ${bad} wrong entries`);
  process.exit(1);
}
console.log(`smoke_ms: ${(performance.now() - t0).toFixed(3)}`);
