/**
 * The search space in a model's coordinates, shared by the built-in samplers (TPE, GP) and the
 * run's predicted best (src/trust/posterior.ts).
 *
 * - Numeric knobs: log knobs live in log space, integer knobs in [low - 0.5, high + 0.5] and are
 *   rounded, as in Optuna. Every value decoded goes through roundKnobValue, so a configuration
 *   built here is exactly the one written into the files and recorded.
 * - Categorical knobs: a value is one of the choices (TPE models the choice's index, the GP a
 *   one-hot vector).
 * - Conditional knobs (`when:`) are active only while their condition holds. A configuration
 *   made here holds the active knobs only, and a configuration's identity (keyOf) ignores
 *   inactive knobs whatever values the files or the notebook give them.
 */
import { AutolabError } from "../../core/errors.ts";
import type { CategoricalKnob, Knob, NumericKnob, Params, ParamValue } from "../../core/types.ts";
import { isCategorical, roundKnobValue } from "./knobs.ts";
import type { Rng } from "./rng.ts";

export type { Params, ParamValue } from "../../core/types.ts";

/** A numeric knob in the model's coordinates. */
export interface NumericDim {
  kind: "numeric";
  name: string;
  knob: NumericKnob;
  /** Bounds in model space (log space for log knobs, widened by 0.5 for integers). */
  a: number;
  b: number;
  /** low === high for a float knob: nothing to search, the value is fixed. */
  fixed: boolean;
}

export interface CategoricalDim {
  kind: "categorical";
  name: string;
  knob: CategoricalKnob;
  fixed: false;
}

export type Dim = NumericDim | CategoricalDim;

/**
 * The knobs as dims, each after the knobs its condition names (so a configuration can be built
 * in one pass), otherwise in program.md's order. Throws INVALID_KNOB for what program.md's
 * validation rejects, for spaces built in code.
 */
export function makeDims(space: Record<string, Knob>): Dim[] {
  const dims = new Map<string, Dim>();
  const visiting = new Set<string>();
  const visit = (name: string, knob: Knob): void => {
    if (dims.has(name)) return;
    if (visiting.has(name))
      throw new AutolabError("INVALID_KNOB", `knob ${name}: its condition (when:) is a cycle`);
    visiting.add(name);
    for (const parent of Object.keys(knob.when ?? {})) {
      const p = space[parent];
      if (!p || !isCategorical(p)) {
        throw new AutolabError(
          "INVALID_KNOB",
          `knob ${name}: when: names ${parent}, which is not a categorical knob of the search space`,
        );
      }
      visit(parent, p);
    }
    visiting.delete(name);
    dims.set(name, makeDim(name, knob));
  };
  for (const [name, knob] of Object.entries(space)) visit(name, knob);
  return [...dims.values()];
}

function makeDim(name: string, knob: Knob): Dim {
  if (isCategorical(knob)) {
    if (knob.choices.length < 2 || new Set(knob.choices).size !== knob.choices.length) {
      throw new AutolabError("INVALID_KNOB", `knob ${name}: needs at least two distinct choices`);
    }
    return { kind: "categorical", name, knob, fixed: false };
  }
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
    if (low >= high) throw new AutolabError("INVALID_KNOB", `knob ${name}: no integer between low and high`);
  }
  if (knob.log) {
    if (low <= 0) throw new AutolabError("INVALID_KNOB", `knob ${name}: a log-scale knob needs low > 0`);
    low = Math.log(low);
    high = Math.log(high);
  }
  return { kind: "numeric", name, knob, a: low, b: high, fixed: low === high };
}

export function encode(dim: NumericDim, value: number): number {
  const x = Math.min(Math.max(value, dim.knob.low), dim.knob.high);
  return dim.knob.log ? Math.log(x) : x;
}

export function decode(dim: NumericDim, u: number): number {
  return roundKnobValue(dim.knob.log ? Math.exp(u) : u, dim.knob);
}

/** Whether `value` can be the knob's value: a finite number, or one of the choices. */
export function validValue(dim: Dim, value: ParamValue | undefined): value is ParamValue {
  if (value === undefined) return false;
  return dim.kind === "categorical"
    ? dim.knob.choices.includes(value)
    : typeof value === "number" && Number.isFinite(value);
}

/** The names of the knobs active in `params` (dims in makeDims order). */
export function activeNames(dims: Dim[], params: Params): Set<string> {
  const active = new Set<string>();
  for (const d of dims) if (conditionHolds(d, params, active)) active.add(d.name);
  return active;
}

function conditionHolds(dim: Dim, params: Params, active: Set<string>): boolean {
  return Object.entries(dim.knob.when ?? {}).every(
    ([parent, values]) => active.has(parent) && values.includes(params[parent] as ParamValue),
  );
}

/**
 * Builds a configuration knob by knob: `pick` is asked only for the knobs that are active
 * given the values chosen before them. The result holds those knobs only.
 */
export function buildParams(dims: Dim[], pick: (dim: Dim) => ParamValue): Params {
  const p: Params = {};
  const active = new Set<string>();
  for (const d of dims) {
    if (!conditionHolds(d, p, active)) continue;
    active.add(d.name);
    p[d.name] = pick(d);
  }
  return p;
}

/** A configuration's identity: the values of its active knobs, in dim order. */
export function keyOf(dims: Dim[], params: Params): string {
  const active = activeNames(dims, params);
  return dims.map((d) => (active.has(d.name) ? JSON.stringify(params[d.name]) : "-")).join(",");
}

export function randomParams(dims: Dim[], rng: Rng): Params {
  return buildParams(dims, (d) =>
    d.kind === "numeric"
      ? decode(d, rng.uniform(d.a, d.b))
      : (d.knob.choices[rng.int(d.knob.choices.length)] as ParamValue),
  );
}

/**
 * The GP's coordinates in the unit cube: one per numeric knob that is not fixed, and k
 * one-hot coordinates per categorical knob with k choices (decoded by argmax, so a random point
 * of the cube picks each choice equally often). An inactive knob's coordinates are all 0.5:
 * constant, so configurations that differ only in inactive knobs are at distance 0 and the
 * inactive values never reach the kernel.
 */
export interface UnitLayout {
  width: number;
  toUnit(params: Params): number[];
  /** The configuration a point of the cube stands for (rounded, active knobs only). */
  fromUnit(u: readonly number[]): Params;
  /** `u` with one categorical knob (chosen by rng) switched to another choice; u when there is none. */
  switchChoice(u: readonly number[], rng: Rng): number[];
}

const INACTIVE = 0.5;

export function unitLayout(dims: Dim[]): UnitLayout {
  const offsets = new Map<string, number>();
  let width = 0;
  for (const d of dims) {
    if (d.kind === "numeric" && d.fixed) continue;
    offsets.set(d.name, width);
    width += d.kind === "categorical" ? d.knob.choices.length : 1;
  }
  const categorical = dims.filter((d): d is CategoricalDim => d.kind === "categorical");
  return {
    width,
    toUnit(params) {
      const u = new Array<number>(width).fill(INACTIVE);
      const active = activeNames(dims, params);
      for (const d of dims) {
        const at = offsets.get(d.name);
        const v = params[d.name];
        if (at === undefined || !active.has(d.name) || !validValue(d, v)) continue;
        if (d.kind === "numeric") u[at] = (encode(d, v as number) - d.a) / (d.b - d.a);
        else for (let i = 0; i < d.knob.choices.length; i++) u[at + i] = d.knob.choices[i] === v ? 1 : 0;
      }
      return u;
    },
    fromUnit(u) {
      return buildParams(dims, (d) => {
        const at = offsets.get(d.name) ?? 0;
        if (d.kind === "categorical")
          return d.knob.choices[chosen(u, at, d.knob.choices.length)] as ParamValue;
        return decode(d, d.fixed ? d.a : d.a + clamp01(u[at] as number) * (d.b - d.a));
      });
    },
    switchChoice(u, rng) {
      const out = [...u];
      const d = categorical[rng.int(categorical.length)];
      if (!d) return out;
      const at = offsets.get(d.name) as number;
      const k = d.knob.choices.length;
      const next = (chosen(u, at, k) + 1 + rng.int(k - 1)) % k;
      for (let i = 0; i < k; i++) out[at + i] = i === next ? 1 : 0;
      return out;
    },
  };
}

/** The choice a one-hot block of k coordinates at `at` stands for: its largest (the first on ties). */
function chosen(u: readonly number[], at: number, k: number): number {
  let best = 0;
  for (let i = 1; i < k; i++) if ((u[at + i] as number) > (u[at + best] as number)) best = i;
  return best;
}

export function clamp01(x: number): number {
  return Math.min(Math.max(x, 0), 1);
}

/** Random draws a sampler makes for a new configuration before settling for a repeat. */
const RANDOM_TRIES = 200;

/**
 * What a sampler may propose: a configuration neither evaluated nor pending, never the current
 * one; when nothing new is left, a repeat — an evaluated configuration, a pending one only as
 * the last resort. Shared by the GP and TPE samplers.
 */
export interface ProposalPool {
  isNew(p: Params): boolean;
  /** Notes a configuration that is not new as a possible repeat (the current one never is). */
  remember(p: Params): void;
  /** A random new configuration (those drawn on the way remembered), or undefined. */
  randomNew(rng: Rng): Params | undefined;
  /** The repeat to propose when nothing is new; SEARCH_EXHAUSTED when there is none. */
  repeat(): Params;
}

export function proposalPool(
  dims: Dim[],
  observations: readonly { params: Params; pending?: boolean }[],
  current: Params | undefined,
): ProposalPool {
  const seen = new Set(observations.map((o) => keyOf(dims, o.params)));
  const pendingKeys = new Set(observations.filter((o) => o.pending).map((o) => keyOf(dims, o.params)));
  const currentKey = current ? keyOf(dims, current) : undefined;
  if (currentKey !== undefined) seen.add(currentKey);
  const fallbacks: { evaluated?: Params; pending?: Params } = {};
  const pool: ProposalPool = {
    isNew: (p) => !seen.has(keyOf(dims, p)),
    remember: (p) => {
      const key = keyOf(dims, p);
      if (key === currentKey) return;
      if (pendingKeys.has(key)) fallbacks.pending ??= p;
      else fallbacks.evaluated ??= p;
    },
    randomNew: (rng) => {
      for (let i = 0; i < RANDOM_TRIES; i++) {
        const p = randomParams(dims, rng);
        if (pool.isNew(p)) return p;
        pool.remember(p);
      }
      return undefined;
    },
    repeat: () => {
      const fallback = fallbacks.evaluated ?? fallbacks.pending;
      if (fallback) return fallback;
      throw new AutolabError(
        "SEARCH_EXHAUSTED",
        "the search space has no configuration other than the current one",
        "widen the low/high ranges of the knobs in search: in program.md",
      );
    },
  };
  return pool;
}
