// biome-ignore-all lint/style/noNonNullAssertion: typed-array and array reads in the numeric loops are in bounds
// poisson: the smoke test, run as each trial's command. PROTECTED.
//
// Solves a small public problem (8 x 8) and prints its relative residual, so a broken solver
// shows in the trial's log at once. The evaluator's problems are larger and unseen.
//   smoke_residual: 1.2e-9
import { apply, makeProblem, stencil } from "./problem.ts";
import { solve } from "./solve.ts";

const p = makeProblem(8, 1);
const { u } = solve(p);
const r = new Float64Array(64);
apply(stencil(p), u, r);
let num = 0;
let den = 0;
for (let c = 0; c < 64; c++) {
  num += (p.b[c]! - r[c]!) ** 2;
  den += p.b[c]! ** 2;
}
const res = Math.sqrt(num / den);
if (!(res < 1e-3)) {
  console.error(`check: the residual of a small problem is ${res}`);
  process.exit(1);
}
console.log(`smoke_residual: ${res.toExponential(2)}`);
