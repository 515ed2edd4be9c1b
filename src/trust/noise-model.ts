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
 *
 * The scale (issue #38). Noise that grows with the value — timings, whose spread is a share of
 * the time — is constant on the log scale, not in the metric's units: pooled in milliseconds
 * over configurations ten times apart, σ is the slow ones' and nothing at the fast end can be
 * kept. `chooseScale` picks the scale from the repeated groups themselves (Box-Cox's likelihood
 * of λ = 0 against λ = 1 with a mean per group; the log scale only when every value is positive
 * and the data favour it clearly), the pool, the F test and the floor are then computed on log
 * values, and σ is reported in the metric's units at a level: `sigma` at the reference,
 * `sigmaOf(model, n, level)` at a configuration's own value (σ_log × |level|, the delta method).
 */
import { formatMetricTo, formatShare } from "../core/format.ts";
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
  /** The scale σ is constant on: chosen from the data ("auto", the default) or pinned. */
  scale?: "auto" | NoiseScale;
}

/**
 * "raw": σ is constant in the metric's own units (additive noise). "log": σ is constant on the
 * log scale, a share of the value (multiplicative noise, timings).
 */
export type NoiseScale = "raw" | "log";

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
  /** Its own σ in metric units at the reference (on the log scale: logSigma × |reference|). */
  sigma: number;
  df: number;
  /** On the log scale: its own σ of log values. */
  logSigma?: number;
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
  /** One sentence: the σ, where it came from, and on which scale it is constant. */
  explain: string;
  /** The scale the pool was computed on (see NoiseScale); σs above are in metric units at `reference`. */
  scale: NoiseScale;
  /** On the log scale: σ of log values (about σ as a share of the value); absent on the raw scale. */
  logSigma?: number;
  /** The level `sigma`, `measured` and `floor` are given at (the best's value). */
  reference: number;
}

const DEFAULTS = { sigmaFloor: 0, relativeSigmaFloor: 1e-6, heteroAlpha: 0.001, scale: "auto" as const };

/**
 * How clearly the data must favour the log scale: twice the log-likelihood ratio of Box-Cox's
 * λ = 0 against λ = 1 above χ²₁'s 95% point. Raw is the default: with levels close together the
 * two scales fit alike and nothing changes.
 */
const LOG_SCALE_LR = 3.841;

/**
 * The scale on which the repeated groups' noise is constant. With a mean per group, Box-Cox's
 * profile log-likelihood of λ = 0 against λ = 1 is N·ln(SS_raw / (ġ²·SS_log)), N the values of
 * the repeated groups, ġ their geometric mean, SS the within-group sums of squares of the values
 * and of their logs. It needs two or more repeated groups whose levels differ (with one, or
 * with equal levels, both scales fit alike) and every value above zero.
 */
export function chooseScale(groups: readonly ConfigValues[]): { scale: NoiseScale; lr: number } {
  const all = clean(groups);
  const repeated = all.filter((g) => g.values.length >= 2);
  const values = repeated.flatMap((g) => g.values);
  // Every value of the run, repeated or not, must be positive: a log is taken of each.
  if (repeated.length < 2 || all.some((g) => g.values.some((v) => !(v > 0))))
    return { scale: "raw", lr: Number.NaN };
  const ssRaw = repeated.reduce((a, g) => a + sumSquares(g.values), 0);
  const ssLog = repeated.reduce((a, g) => a + sumSquares(g.values.map(Math.log)), 0);
  if (!(ssRaw > 0 && ssLog > 0)) return { scale: "raw", lr: Number.NaN };
  const logG = values.reduce((a, v) => a + Math.log(v), 0) / values.length;
  const lr = values.length * (Math.log(ssRaw) - Math.log(ssLog) - 2 * logG);
  return { scale: lr > LOG_SCALE_LR ? "log" : "raw", lr };
}

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
  const level = Math.abs(Number.isFinite(reference) ? reference : 0);
  const positive = clean(groups).every((g) => g.values.every((v) => v > 0));
  const scale: NoiseScale =
    o.scale === "auto"
      ? level > 0
        ? chooseScale(groups).scale
        : "raw"
      : o.scale === "log" && positive && level > 0
        ? "log"
        : "raw";
  const log = scale === "log";
  // On the log scale everything below is in log units (a share of the value) until `toMetric`.
  const toMetric = (x: number) => (log ? x * level : x);
  const floor = log
    ? Math.max(o.sigmaFloor / level, o.relativeSigmaFloor)
    : Math.max(o.sigmaFloor, o.relativeSigmaFloor * level);
  const all = clean(groups)
    .filter((g) => g.values.length >= 2)
    .map((g) => {
      // Identical values are tested as such: their mean can differ from them in the last bit.
      const same = g.values.every((v) => v === g.values[0]);
      return {
        n: g.n,
        ss: same ? 0 : sumSquares(log ? g.values.map(Math.log) : g.values),
        df: g.values.length - 1,
      };
    });
  // A configuration whose repeats were identical while others varied is exact (deterministic
  // itself): its zeros would pull the pool's σ down for everyone else, so it is left out.
  const varied = all.some((g) => g.ss > 0);
  const exact = varied ? all.filter((g) => g.ss === 0 && g.df + 1 >= EXACT_REPEATS).map((g) => g.n) : [];
  const repeated = all.filter((g) => !exact.includes(g.n));
  const given = o.prior && o.prior.sigma > 0 && o.prior.df > 0 ? o.prior : undefined;
  // A prior is in metric units at the reference: on the log scale, a share of it.
  const prior = given && log ? { sigma: given.sigma / level, df: given.df } : given;
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
    const own = Math.sqrt(g.ss / g.df);
    noisier.push({ n: g.n, sigma: toMetric(own), df: g.df, ...(log ? { logSigma: own } : {}) });
    pool = rest;
  }
  const ss = pool.reduce((a, r) => a + r.ss, 0);
  const dfRepeats = pool.reduce((a, r) => a + r.df, 0);
  const trials = pool.reduce((a, r) => a + r.df + 1, 0);
  const configs = pool.length;
  const measured = dfRepeats > 0 && ss > 0 ? Math.sqrt(ss / dfRepeats) : dfRepeats > 0 ? 0 : Number.NaN;
  const base = {
    measured: toMetric(measured),
    floor: toMetric(floor),
    configs,
    trials,
    noisier,
    exact,
    scale,
    reference,
  };
  const from = `${configs} configuration${configs === 1 ? "" : "s"} and ${trials} trials`;
  const priorText = given
    ? ` and the prior σ ${formatMetricTo(given.sigma, 3)} (${given.df} degrees of freedom)`
    : "";
  /** σ in the metric's units, and on the log scale as the share of the value it is. */
  const sigmaText = (x: number) =>
    log ? `${formatMetricTo(toMetric(x), 3)} (${formatShare(x)} of the value)` : formatMetricTo(x, 3);
  const scaleText = log
    ? "; on the log scale: the spread grows with the value, so σ is a share of each configuration's value"
    : "";

  if (dfRepeats === 0 || (ss === 0 && !prior)) {
    if (dfRepeats === 0 && prior) {
      return {
        ...base,
        sigma: toMetric(Math.max(prior.sigma, floor)),
        ...(log ? { logSigma: Math.max(prior.sigma, floor) } : {}),
        df: prior.df,
        source: "prior",
        explain: `σ ${sigmaText(Math.max(prior.sigma, floor))} is the prior (nothing repeated yet)`,
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
    ? `; ${noisier.map((c) => `#${c.n}`).join(", ")} ${noisier.length === 1 ? "is" : "are"} clearly noisier (σ ${noisier.map((c) => (c.logSigma !== undefined ? sigmaText(c.logSigma) : formatMetricTo(c.sigma, 3))).join(", ")}) and ${noisier.length === 1 ? "is" : "are"} judged with ${noisier.length === 1 ? "its" : "their"} own`
    : "";
  const named = exact.filter((n) => n >= 0);
  const exactText = named.length
    ? `; ${named.map((n) => `#${n}`).join(", ")} repeated ${named.length === 1 ? "its" : "their"} value exactly, so ${named.length === 1 ? "it is" : "they are"} taken as exact`
    : "";
  if (pooled < floor) {
    return {
      ...base,
      sigma: toMetric(floor),
      ...(log ? { logSigma: floor } : {}),
      df: dfRepeats + priorDf,
      source: "floor",
      explain: `σ ${formatMetricTo(toMetric(floor), 3)} is the floor (1e-6 of the best, the digits metrics are shown with): the repeats of ${from} were ${ss === 0 ? "identical" : `nearly identical (σ ${sigmaText(Math.sqrt(ss / dfRepeats))})`}${noisierText}${exactText}${scaleText}`,
    };
  }
  return {
    ...base,
    sigma: toMetric(pooled),
    ...(log ? { logSigma: pooled } : {}),
    df: dfRepeats + priorDf,
    source: "pooled",
    explain: `σ ${sigmaText(pooled)} pooled from ${from}${priorText}${noisierText}${exactText}${scaleText}`,
  };
}

/**
 * σ and its degrees of freedom for decisions about configuration n: its own when clearly noisier,
 * 0 when its value is exact (`exact`: then nothing is gained by repeating it).
 */
export function sigmaOf(
  model: NoiseModel,
  n: number,
  /**
   * The configuration's value (its mean): on the log scale σ is a share of it, so a fast
   * configuration's σ is smaller than a slow one's. Default: the reference. Ignored on the raw scale.
   */
  level?: number,
): { sigma: number; df: number; own: boolean; exact: boolean } {
  if (model.exact.includes(n)) return { sigma: 0, df: 0, own: true, exact: true };
  const own = model.noisier.find((c) => c.n === n);
  // σ given at the reference, moved to `level` on the log scale (σ_log × |level|).
  const at = (x: number) => {
    if (model.scale !== "log" || level === undefined || !Number.isFinite(level)) return x;
    const ref = Math.abs(model.reference);
    return ref > 0 ? (x * Math.abs(level)) / ref : x;
  };
  if (own) return { sigma: at(Math.max(own.sigma, model.floor)), df: own.df, own: true, exact: false };
  return { sigma: at(model.sigma), df: model.df, own: false, exact: false };
}

/** Every value identical across the run (a constant metric): nothing can ever be better. */
export function constantMetric(groups: readonly ConfigValues[]): boolean {
  const all = clean(groups).flatMap((g) => g.values);
  return all.length >= 2 && all.every((v) => v === all[0]);
}
