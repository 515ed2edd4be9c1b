/**
 * The search space in a model's coordinates, shared by the built-in samplers (TPE, GP): log
 * knobs live in log space, integer knobs in [low - 0.5, high + 0.5] and are rounded, as in
 * Optuna. Every value decoded goes through roundKnobValue, so a configuration built here is
 * exactly the one written into the files and recorded.
 */
import { AutolabError } from "../../core/errors.ts";
import type { Knob } from "../../core/types.ts";
import { roundKnobValue } from "./knobs.ts";
import type { Rng } from "./rng.ts";

export type Params = Record<string, number>;

/** One knob in the model's coordinates. */
export interface Dim {
  name: string;
  knob: Knob;
  /** Bounds in model space (log space for log knobs, widened by 0.5 for integers). */
  a: number;
  b: number;
  /** low === high for a float knob: nothing to search, the value is fixed. */
  fixed: boolean;
}

export function makeDims(space: Record<string, Knob>): Dim[] {
  return Object.entries(space).map(([name, knob]) => {
    if (!(Number.isFinite(knob.low) && Number.isFinite(knob.high) && knob.low <= knob.high)) {
      throw new AutolabError(
        "INVALID_KNOB",
        `knob ${name}: low (${knob.low}) must not exceed high (${knob.high})`,
      );
    }
    let low = knob.low;
    let high = knob.high;
    if (knob.int) {
      low = Math.ceil(low) - 0.5;
      high = Math.floor(high) + 0.5;
      if (low >= high)
        throw new AutolabError("INVALID_KNOB", `knob ${name}: no integer between low and high`);
    }
    if (knob.log) {
      if (low <= 0) throw new AutolabError("INVALID_KNOB", `knob ${name}: a log-scale knob needs low > 0`);
      low = Math.log(low);
      high = Math.log(high);
    }
    return { name, knob, a: low, b: high, fixed: low === high };
  });
}

export function encode(dim: Dim, value: number): number {
  const x = Math.min(Math.max(value, dim.knob.low), dim.knob.high);
  return dim.knob.log ? Math.log(x) : x;
}

export function decode(dim: Dim, u: number): number {
  return roundKnobValue(dim.knob.log ? Math.exp(u) : u, dim.knob);
}

/** A configuration's identity: its rounded values in knob order. */
export function keyOf(dims: Dim[], params: Params): string {
  return dims.map((d) => params[d.name]).join(",");
}

export function paramsOf(dims: Dim[], u: number[]): Params {
  const p: Params = {};
  dims.forEach((dim, j) => {
    p[dim.name] = decode(dim, u[j] as number);
  });
  return p;
}

export function randomParams(dims: Dim[], rng: Rng): Params {
  return paramsOf(
    dims,
    dims.map((d) => rng.uniform(d.a, d.b)),
  );
}
