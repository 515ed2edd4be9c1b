import type { Params } from "../../src/agents/builtin/space.ts";
import type { Knob } from "../../src/core/types.ts";

/** Three knobs of a training script: a log float, a log integer, a linear float. */
export const SPACE: Record<string, Knob> = {
  LR: { low: 1e-5, high: 1, log: true, int: false },
  HIDDEN: { low: 8, high: 1024, log: true, int: true },
  DROPOUT: { low: 0, high: 0.5, log: false, int: false },
};

/** A shifted quadratic in log space: optimum at LR 3e-3, HIDDEN 96, DROPOUT 0.1; minimum 0. */
export function logQuadratic(p: Params): number {
  const lr = Math.log10(p.LR as number) - Math.log10(3e-3);
  const hidden = (Math.log2(p.HIDDEN as number) - Math.log2(96)) / 2;
  const dropout = ((p.DROPOUT as number) - 0.1) * 4;
  return lr * lr + hidden * hidden + dropout * dropout;
}
