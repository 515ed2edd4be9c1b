/**
 * The run's noise model: how much one trial's objective value varies around its
 * configuration's true value, from every repeated configuration of the run.
 *
 * Each configuration (an experiment: the baseline, a kept best, a candidate) that ran two or
 * more trials contributes its sum of squared deviations around its own mean (a change that moves
 * the mean does not inflate σ). They are pooled, with an optional prior (σ₀ with ν₀ degrees of
 * freedom, as if ν₀ more repeats had been seen):
 *
 *     σ² = (ν₀·σ₀² + Σᵢ SSᵢ) / (ν₀ + Σᵢ (nᵢ − 1))
 *
 * and the model is fitted again after every trial. Where one configuration's noise is clearly
 * larger than the rest (a one-sided F test of its variance against the others' pooled one at
 * `heteroAlpha`), it is left out of the pool and decisions about it use its own, larger σ; a
 * configuration whose repeats happened to agree (or were identical) gets the pooled σ, never
 * less: identical repeats in one place never outweigh the spread seen elsewhere.
 *
 * Below `floor` (relative to the best's value: the 6 significant digits metrics are shown with)
 * a measured σ is raised to it, and the explanation says so. When at least two configurations
 * were repeated and every repeat was identical, the objective is deterministic: decisions compare
 * exact values. With one repeated configuration, or none, σ is unknown and the judge measures
 * before it decides. Values that are not finite are left out; they never make a σ of 0.
 */
import { formatMetricTo } from "../core/format.ts";
import { fCdf, sumSquares } from "./stats.ts";

/** One configuration's finite objective values (trials of one experiment at the full budget). */
export interface ConfigValues {
  /** Experiment number (the candidate being judged may use any number not taken). */
  n: number;
  values: readonly number[];
}

export interface NoiseModelOptions {
  /** Absolute floor for σ in metric units. Default 0. */
  sigmaFloor?: number;
  /** Floor for σ relative to |reference|. Default 1e-6 (6 significant digits). */
  relativeSigmaFloor?: number;
  /** A prior for σ: `sigma` as if seen on `df` degrees of freedom of repeats. Default none. */
  prior?: { sigma: number; df: number };
  /**
   * One-sided significance of the F test that calls a configuration's noise clearly larger than
   * the rest's. Default 0.01.
   */
  heteroAlpha?: number;
}

/** Where σ came from. */
export type NoiseSource =
  /** Pooled from repeated trials (with the prior, if any). */
  | "pooled"
  /** Nothing repeated yet: the prior alone. */
  | "prior"
  /** Measured below the floor (nearly identical repeats): the floor. */
  | "floor"
  /** Every repeat of two or more configurations identical: exact comparisons. */
  | "deterministic"
  /** Not known yet: nothing repeated, or one configuration with identical repeats. */
  | "unknown";

export interface NoisierConfig {
  n: number;
  sigma: number;
  df: number;
}

export interface NoiseModel {
  /** σ for a configuration with no evidence of more noise; NaN when unknown, 0 when deterministic. */
  sigma: number;
  /** Degrees of freedom behind `sigma` (repeats pooled, plus the prior's). */
  df: number;
  /** Pooled σ of the repeats alone (NaN when nothing varied). */
  measured: number;
  floor: number;
  source: NoiseSource;
  /** Repeated configurations and their trials that the pool rests on. */
  configs: number;
  trials: number;
  /** Configurations whose noise is clearly larger: decisions about them use their own σ. */
  noisier: NoisierConfig[];
  /**
   * Configurations whose repeats (at least EXACT_REPEATS) were all identical while others
   * varied: their value is exact (σ 0 for them), they are left out of the pool and never
   * re-measured.
   */
  exact: number[];
  /** One sentence: the σ and where it came from. */
  explain: string;
}

const DEFAULTS = { sigmaFloor: 0, relativeSigmaFloor: 1e-6, heteroAlpha: 0.001 };

/**
 * Identical repeats a configuration needs, while other configurations vary, before its value is
 * taken as exact: two equal draws of a metric printed with few digits happen by chance, three
 * rarely.
 */
export const EXACT_REPEATS = 3;

/** The finite values of each configuration, merged by experiment number (later entries win). */
function clean(groups: readonly ConfigValues[]): ConfigValues[] {
  const byN = new Map<number, ConfigValues>();
  for (const g of groups) byN.set(g.n, { n: g.n, values: g.values.filter(Number.isFinite) });
  return [...byN.values()];
}

/** Fits the model to every configuration of the run; `reference` (the best's value) scales the floor. */
export function fitNoise(
  groups: readonly ConfigValues[],
  reference: number,
  options: NoiseModelOptions = {},
): NoiseModel {
  const o = { ...DEFAULTS, ...options };
  const floor = Math.max(
    o.sigmaFloor,
    o.relativeSigmaFloor * Math.abs(Number.isFinite(reference) ? reference : 0),
  );
  const all = clean(groups)
    .filter((g) => g.values.length >= 2)
    .map((g) => {
      // Identical values are tested as such: their mean can differ from them in the last bit.
      const same = g.values.every((v) => v === g.values[0]);
      return { n: g.n, ss: same ? 0 : sumSquares(g.values), df: g.values.length - 1 };
    });
  // A configuration whose repeats were identical while others varied is exact (deterministic
  // itself): its zeros would pull the pool's σ down for everyone else, so it is left out.
  const varied = all.some((g) => g.ss > 0);
  const exact = varied ? all.filter((g) => g.ss === 0 && g.df + 1 >= EXACT_REPEATS).map((g) => g.n) : [];
  const repeated = all.filter((g) => !exact.includes(g.n));
  const prior = o.prior && o.prior.sigma > 0 && o.prior.df > 0 ? o.prior : undefined;
  const priorSs = prior ? prior.df * prior.sigma ** 2 : 0;
  const priorDf = prior?.df ?? 0;

  // Configurations clearly noisier than the rest are tested one at a time against the others.
  const noisier: NoisierConfig[] = [];
  let pool = repeated;
  for (const g of [...repeated].sort((a, b) => b.ss / b.df - a.ss / a.df)) {
    const rest = pool.filter((r) => r.n !== g.n);
    const restDf = rest.reduce((a, r) => a + r.df, 0) + priorDf;
    const restVar = (rest.reduce((a, r) => a + r.ss, 0) + priorSs) / restDf;
    if (!(restDf > 0 && restVar > 0)) break;
    const f = g.ss / g.df / restVar;
    if (1 - fCdf(f, g.df, restDf) >= o.heteroAlpha) break;
    noisier.push({ n: g.n, sigma: Math.sqrt(g.ss / g.df), df: g.df });
    pool = rest;
  }
  const ss = pool.reduce((a, r) => a + r.ss, 0);
  const dfRepeats = pool.reduce((a, r) => a + r.df, 0);
  const trials = pool.reduce((a, r) => a + r.df + 1, 0);
  const configs = pool.length;
  const measured = dfRepeats > 0 && ss > 0 ? Math.sqrt(ss / dfRepeats) : dfRepeats > 0 ? 0 : Number.NaN;
  const base = { measured, floor, configs, trials, noisier, exact };
  const from = `${configs} configuration${configs === 1 ? "" : "s"} and ${trials} trials`;
  const priorText = prior
    ? ` and the prior σ ${formatMetricTo(prior.sigma, 3)} (${prior.df} degrees of freedom)`
    : "";

  if (dfRepeats === 0 || (ss === 0 && !prior)) {
    if (dfRepeats === 0 && prior) {
      return {
        ...base,
        sigma: Math.max(prior.sigma, floor),
        df: prior.df,
        source: "prior",
        explain: `σ ${formatMetricTo(Math.max(prior.sigma, floor), 3)} is the prior (nothing repeated yet)`,
      };
    }
    if (ss === 0 && configs >= 2 && noisier.length === 0) {
      return {
        ...base,
        sigma: 0,
        df: dfRepeats,
        source: "deterministic",
        explain: `deterministic: repeats of ${from} were identical, so values are compared exactly`,
      };
    }
    return {
      ...base,
      sigma: Number.NaN,
      df: 0,
      source: "unknown",
      explain:
        dfRepeats === 0
          ? "σ unknown: nothing was repeated yet"
          : `σ unknown: the repeats of one configuration were identical (${trials} trials), which alone does not make the objective deterministic`,
    };
  }
  const pooled = Math.sqrt((ss + priorSs) / (dfRepeats + priorDf));
  const noisierText = noisier.length
    ? `; ${noisier.map((c) => `#${c.n}`).join(", ")} ${noisier.length === 1 ? "is" : "are"} clearly noisier (σ ${noisier.map((c) => formatMetricTo(c.sigma, 3)).join(", ")}) and ${noisier.length === 1 ? "is" : "are"} judged with ${noisier.length === 1 ? "its" : "their"} own`
    : "";
  const named = exact.filter((n) => n >= 0);
  const exactText = named.length
    ? `; ${named.map((n) => `#${n}`).join(", ")} repeated ${named.length === 1 ? "its" : "their"} value exactly, so ${named.length === 1 ? "it is" : "they are"} taken as exact`
    : "";
  if (pooled < floor) {
    return {
      ...base,
      sigma: floor,
      df: dfRepeats + priorDf,
      source: "floor",
      explain: `σ ${formatMetricTo(floor, 3)} is the floor (1e-6 of the best, the digits metrics are shown with): the repeats of ${from} were ${ss === 0 ? "identical" : `nearly identical (σ ${formatMetricTo(Math.sqrt(ss / dfRepeats), 3)})`}${noisierText}${exactText}`,
    };
  }
  return {
    ...base,
    sigma: pooled,
    df: dfRepeats + priorDf,
    source: "pooled",
    explain: `σ ${formatMetricTo(pooled, 3)} pooled from ${from}${priorText}${noisierText}${exactText}`,
  };
}

/**
 * σ and its degrees of freedom for decisions about configuration n: its own when clearly noisier,
 * 0 when its value is exact (`exact`: then nothing is gained by repeating it).
 */
export function sigmaOf(
  model: NoiseModel,
  n: number,
): { sigma: number; df: number; own: boolean; exact: boolean } {
  if (model.exact.includes(n)) return { sigma: 0, df: 0, own: true, exact: true };
  const own = model.noisier.find((c) => c.n === n);
  if (own) return { sigma: Math.max(own.sigma, model.floor), df: own.df, own: true, exact: false };
  return { sigma: model.sigma, df: model.df, own: false, exact: false };
}

/** Every value identical across the run (a constant metric): nothing can ever be better. */
export function constantMetric(groups: readonly ConfigValues[]): boolean {
  const all = clean(groups).flatMap((g) => g.values);
  return all.length >= 2 && all.every((v) => v === all[0]);
}
