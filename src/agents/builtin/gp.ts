/**
 * Gaussian-process Bayesian optimisation for noisy objectives: the built-in optimizer's default
 * sampler once the startup points are in.
 *
 * Model. Each evaluated configuration i contributes the mean ȳ_i of its n_i trials. Knobs are
 * mapped to the unit cube (space.ts unitLayout: log knobs in log space, integers widened by
 * 0.5, a categorical knob one-hot, an inactive conditional knob at a constant 0.5); values are
 * standardised (minimisation; a maximised metric is negated). The GP has a constant mean 0, a
 * Matérn-5/2 kernel with one lengthscale per coordinate (ARD) and signal variance s², and
 * Gaussian trial noise σ_n²: ȳ_i carries noise σ_n²/n_i, and the spread of the repeats around
 * their own mean adds its exact likelihood term (Σ SS_i/(2σ_n²) + (n_i − 1)/2 · log σ_n²), so
 * repeats measure the noise. Hyperparameters are the maximum a posteriori under weak log-normal
 * priors (lengthscale around 0.5, signal around 1, noise around 5% of the variance, all wide),
 * found by Nelder–Mead in log space.
 *
 * Acquisition. Expected improvement of the noise-free value over the best posterior mean at an
 * evaluated configuration (the "plug-in" incumbent of noisy EI: a lucky single draw does not set
 * the bar). It is maximised over random points, points near the best predicted configurations
 * (some with one choice switched) and a local refinement of the best of those; every candidate
 * is scored after rounding and decoding (a choice by argmax), i.e. as the configuration that
 * would actually be written and evaluated. A configuration already evaluated, or the current
 * one, is never proposed when another is available (identity: the active knobs, space.ts keyOf).
 *
 * Leaving a basin (session 13, issue #17). EI around a well-measured local basin keeps proposing
 * there: far points have a mean near the prior's and EI's normal tail makes them lose to small
 * steps next to the incumbent. When the best EI is under 0.2 of the trial noise σ the model
 * estimated (DEFAULT_ESCAPE: the basin is measured out), the proposal is instead the best point
 * of one joint draw from the posterior over 250 random and 150 local candidates (Thompson
 * sampling): another region is proposed with the probability the model gives it of holding
 * something better. `escape: false` is plain EI. UCB, Thompson sampling and portfolios of them
 * taken in turn are options (`acquisition`); measured and not adopted (docs/optimizer.md).
 *
 * Pending configurations (parallel slots: proposed, not yet measured) are "constant liar"
 * fantasies (Ginsbourger et al. 2010): after the hyperparameters are fitted to the real data,
 * the posterior is conditioned on one trial at each pending configuration whose value is the
 * lie, the incumbent above (CL-min for a minimisation). The bar of EI stays where it was and the
 * pending region still looks as good as the best, but its uncertainty is gone, so EI there
 * collapses and the next proposal goes to the next most promising place instead of next door.
 * A pessimistic lie (what counting them as failures did) would repel proposals from the region
 * the model likes best and teach it a cliff that is not there. Fantasies never enter the fit:
 * they must not teach the model a noise level or a lengthscale. A pending configuration is not
 * proposed again while any other configuration exists.
 *
 * Cost is cubic in the configurations modelled: past MAX_MODELLED, the model keeps the best half
 * and the most recent half (a proposal then stays under a few seconds; trials take minutes).
 *
 * Pure and deterministic: the same space, observations and RNG state give the same suggestion.
 */
import { AutolabError } from "../../core/errors.ts";
import type { Direction, Knob } from "../../core/types.ts";
import { mean, normalCdf, sumSquares } from "../../trust/stats.ts";
import type { Rng } from "./rng.ts";
import {
  clamp01,
  type Dim,
  keyOf,
  makeDims,
  type Params,
  proposalPool,
  type UnitLayout,
  unitLayout,
} from "./space.ts";

export interface GpObservation {
  params: Params;
  /**
   * The objective values of the configuration's finished trials (one per seed). Empty or
   * absent with no `value`: the configuration failed (crash, timeout, rejected); it counts as
   * the worst measured value.
   */
  values?: number[];
  /** A single value, when the trials are not known one by one. */
  value?: number;
  /**
   * Proposed and not yet measured (another slot is evaluating it): neither a failure nor a
   * measurement; suggestGp fantasizes it at the constant liar, posteriorBest leaves it out.
   */
  pending?: boolean;
}

/**
 * What a model-guided proposal maximises. "ei": expected improvement over the incumbent.
 * "ucb": the lower confidence bound μ − κσ of the noise-free value (for a minimisation; κ =
 * UCB_KAPPA), which favours uncertain regions. "thompson": the best point of one joint draw
 * from the posterior over the candidates, so a basin is proposed with the probability the model
 * gives it of holding the optimum.
 */
export const ACQUISITIONS = ["ei", "ucb", "thompson"] as const;
export type Acquisition = (typeof ACQUISITIONS)[number];

export interface BasinEscape {
  below: number;
  to: "thompson";
}

/**
 * EI gives way to a Thompson draw once its best is under 0.2 trial-noise σ: measured on the
 * tuning functions (docs/optimizer.md "Where issue #17's target stands").
 */
export const DEFAULT_ESCAPE: BasinEscape = { below: 0.2, to: "thompson" };

export interface GpOptions {
  direction: Direction;
  /**
   * The acquisition, or a portfolio of them taken in turn: the k-th model-guided proposal
   * (k = configurations proposed since the startup) uses entry k mod length. Default "ei".
   * A turn is derived from the history alone, so the proposal stays a pure function of it.
   */
  acquisition?: Acquisition | readonly Acquisition[];
  /**
   * Leaving a measured-out basin: when the best expected improvement is below `below` times the
   * trial noise σ the model estimated, the EI proposal is replaced by a Thompson draw. Default
   * DEFAULT_ESCAPE; false: plain EI (the sampler before session 13).
   */
  escape?: BasinEscape | false;
  /** Configurations evaluated before the GP takes over from uniform random sampling. */
  startup: number;
  /** The configuration in the worktree: never proposed, since a proposal must change something. */
  current?: Params;
}

export interface GpSuggestion {
  params: Params;
  mode: "startup" | "gp";
  /** Configurations the model saw. */
  observed: number;
  /** True when every nearby configuration was evaluated: the suggestion repeats one. */
  repeat: boolean;
  /** In the GP mode: the model's view, in the metric's units. */
  model?: {
    /** The acquisition that chose the proposal. */
    acquisition: Acquisition;
    /** Expected improvement of the proposal over the best predicted value. */
    expectedImprovement: number;
    /** Predicted value of the proposal and of the best evaluated configuration. */
    predicted: number;
    bestPredicted: number;
    /** Trial noise σ the model estimated. */
    noiseSigma: number;
  };
  /** Pending configurations: fantasized at `model.bestPredicted` (constant liar), else only avoided. */
  pending: number;
}

/** Configurations the model is fitted on, at most (cost is cubic in it). */
const MAX_MODELLED = 200;

const RANDOM_CANDIDATES = 1000;
const LOCAL_CANDIDATES = 100;
const TOP_CENTRES = 5;
const REFINE = 10;
const REFINE_STEPS = 20;
/**
 * Trials a pending configuration's fantasy stands for: one, what its first trial will tell the
 * model. A noise-free fantasy (many trials) measured within noise of it (docs/optimizer.md).
 */
const LIE_TRIALS = 1;
/** κ of the "ucb" acquisition, in posterior standard deviations. */
export const UCB_KAPPA = 2.5;
/** Candidates of a Thompson draw: random points, and points near each of the best predicted configurations. */
const THOMPSON_RANDOM = 250;
const THOMPSON_LOCAL = 30;

interface Row {
  u: number[];
  /** Standardised mean, trials, sum of squares around the mean (standardised). */
  y: number;
  n: number;
  ss: number;
}

export function suggestGp(
  space: Record<string, Knob>,
  observations: GpObservation[],
  rng: Rng,
  options: GpOptions,
): GpSuggestion {
  const dims = makeDims(space);
  // The builtin agent refuses an empty search space (NO_SEARCH_SPACE, with a fix) before it asks:
  // reaching this is a caller's bug.
  if (dims.length === 0) throw new AutolabError("INTERNAL", "the search space has no knobs");
  const layout = unitLayout(dims);
  const pool = proposalPool(dims, observations, options.current);
  const n = observations.length;
  const pending = observations.filter((o) => o.pending).length;

  // The model needs two measured configurations and something to vary; before that, random.
  // Pending configurations count towards the startup: they were proposed already.
  const modelled =
    n >= options.startup &&
    layout.width > 0 &&
    observations.filter((o) => !o.pending && valuesOf(o).length > 0).length >= 2;
  if (modelled) {
    const s = gpSuggestion(
      dims,
      layout,
      observations,
      rng,
      options.direction,
      acquisitionAt(options.acquisition, n - options.startup),
      options.escape === undefined ? DEFAULT_ESCAPE : options.escape || undefined,
      pool.isNew,
      pool.remember,
    );
    if (s) return s;
  }
  // Startup, or every configuration the model liked was tried (a small space): a new random one.
  const mode = modelled ? "gp" : "startup";
  const p = pool.randomNew(rng);
  if (p) return { params: p, mode, observed: n, repeat: false, pending };
  return { params: pool.repeat(), mode, observed: n, repeat: true, pending };
}

/** The acquisition of the k-th model-guided proposal (k ≥ 0): a portfolio's entries in turn. */
export function acquisitionAt(a: GpOptions["acquisition"], k: number): Acquisition {
  if (a === undefined) return "ei";
  if (typeof a === "string") return a;
  if (a.length === 0) return "ei";
  return a[((Math.max(0, Math.floor(k)) % a.length) + a.length) % a.length] as Acquisition;
}

function valuesOf(o: GpObservation): number[] {
  const vs = o.values ?? (o.value !== undefined ? [o.value] : []);
  return vs.filter((v) => Number.isFinite(v));
}

/**
 * The evaluated configuration with the best posterior mean of the noise-free value: the one a
 * noisy run should name as its best (a single lucky draw does not win it). Undefined when fewer
 * than two configurations were measured.
 */
export function posteriorBest(
  space: Record<string, Knob>,
  observations: GpObservation[],
  direction: Direction,
): { index: number; predicted: number; sd: number } | undefined {
  const layout = unitLayout(makeDims(space));
  const measured = (o: GpObservation) => !o.pending && valuesOf(o).length > 0;
  if (layout.width === 0 || observations.filter(measured).length < 2) return undefined;
  const m = modelOf(layout, observations, direction);
  let best: { index: number; predicted: number; sd: number } | undefined;
  let bestMu = Number.POSITIVE_INFINITY;
  observations.forEach((o, index) => {
    if (!measured(o)) return;
    const { mu, sd } = m.model.predict(m.toUnit(o.params));
    if (mu < bestMu) {
      bestMu = mu;
      best = { index, predicted: m.sign * (mu * m.scale + m.center), sd: sd * m.scale };
    }
  });
  return best;
}

/**
 * The GP fitted to the observations (pending ones left out), with the maps between metric units
 * and the model's.
 */
function modelOf(layout: UnitLayout, observations: GpObservation[], direction: Direction) {
  const sign = direction === "maximize" ? -1 : 1;
  const toUnit = (p: Params) => layout.toUnit(p);
  // Raw rows: signed means and spreads; failures get the worst mean.
  const raw = observations
    .filter((o) => !o.pending)
    .map((o) => {
      const vs = valuesOf(o).map((v) => sign * v);
      return { u: toUnit(o.params), m: mean(vs), n: vs.length, ss: vs.length ? sumSquares(vs) : 0 };
    });
  const finite = raw.filter((r) => r.n > 0);
  const worst = Math.max(...finite.map((r) => r.m));
  const rows = bestAndNewest(
    raw.map((r) => (r.n > 0 ? r : { ...r, m: worst, n: 1, ss: 0 })),
    MAX_MODELLED,
    (r) => r.m,
  );
  const means = rows.map((r) => r.m);
  const center = mean(means);
  let scale = Math.sqrt(sumSquares(means) / means.length);
  // All means equal (or one row): the within-configuration spread, else 1, sets the unit.
  if (!(scale > 0)) {
    const ssAll = rows.reduce((a, r) => a + r.ss, 0);
    const dfAll = rows.reduce((a, r) => a + r.n - 1, 0);
    scale =
      dfAll > 0 && ssAll > 0 ? Math.sqrt(ssAll / dfAll) : Math.abs(center) > 0 ? Math.abs(center) * 1e-3 : 1;
  }
  const data: Row[] = rows.map((r) => ({
    u: r.u,
    y: (r.m - center) / scale,
    n: r.n,
    ss: r.ss / (scale * scale),
  }));
  return { model: fitGp(data, layout.width), toUnit, sign, center, scale, data };
}

function gpSuggestion(
  dims: Dim[],
  layout: UnitLayout,
  observations: GpObservation[],
  rng: Rng,
  direction: Direction,
  acquisition: Acquisition,
  basinEscape: BasinEscape | undefined,
  isNew: (p: Params) => boolean,
  remember: (p: Params) => void,
): GpSuggestion | undefined {
  const fitted = modelOf(layout, observations, direction);
  const { toUnit, sign, center, scale, data } = fitted;

  // The incumbent: the best posterior mean at an evaluated configuration.
  let incumbent = Number.POSITIVE_INFINITY;
  let centres: { u: number[]; mu: number }[] = [];
  for (const r of data) {
    const { mu } = fitted.model.predict(r.u);
    centres.push({ u: r.u, mu });
    if (mu < incumbent) incumbent = mu;
  }
  centres = centres.sort((a, b) => a.mu - b.mu).slice(0, TOP_CENTRES);
  // Constant liar: each pending configuration as one trial at the incumbent (see the header).
  const lies: Row[] = observations
    .filter((o) => o.pending)
    .map((o) => ({ u: toUnit(o.params), y: incumbent, n: LIE_TRIALS, ss: 0 }));
  const model = lies.length ? fitted.model.given(lies) : fitted.model;

  // Candidates in the unit cube, scored after rounding (and decoding choices) to the real
  // configurations they stand for: inactive knobs then sit at their constant coordinates.
  // `a` is what the search maximises: EI, or −(μ − κσ) for "ucb".
  const scored = new Map<string, { p: Params; u: number[]; ei: number; mu: number; a: number }>();
  const score = (u: number[]) => {
    const p = layout.fromUnit(u);
    const key = keyOf(dims, p);
    const hit = scored.get(key);
    if (hit) return hit;
    const ur = toUnit(p);
    const { mu, sd } = model.predict(ur);
    const ei = expectedImprovement(incumbent, mu, sd);
    const entry = { p, u: ur, ei, mu, a: acquisition === "ucb" ? -(mu - UCB_KAPPA * sd) : ei };
    scored.set(key, entry);
    return entry;
  };
  const d = layout.width;
  const categorical = dims.some((x) => x.kind === "categorical");
  type Entry = { p: Params; u: number[]; ei: number; mu: number; a: number };
  /** Random points, then points around the best predicted configurations, scored; the entries they gave. */
  const candidates = (randomCount: number, localCount: number): Entry[] => {
    const out: Entry[] = [];
    for (let i = 0; i < randomCount; i++) out.push(score(Array.from({ length: d }, () => rng.next())));
    for (const c of centres) {
      for (let i = 0; i < localCount; i++) {
        // Small steps keep a one-hot choice; every fourth neighbour switches one choice instead.
        const step = i % 2 === 0 ? 0.05 : 0.15;
        const from = categorical && i % 4 === 3 ? layout.switchChoice(c.u, rng) : c.u;
        out.push(score(from.map((x) => clamp01(x + step * rng.normal()))));
      }
    }
    return out;
  };
  /** Thompson sampling: one joint draw of the noise-free values at new candidates; its best. */
  const thompsonPick = (): Entry | undefined => {
    const fresh = [...new Set(candidates(THOMPSON_RANDOM, THOMPSON_LOCAL))].filter((e) => isNew(e.p));
    if (!fresh.length) return undefined;
    const draw = model.draw(
      fresh.map((e) => e.u),
      rng,
    );
    let at = 0;
    draw.forEach((v, i) => {
      if (v < (draw[at] as number)) at = i;
    });
    return fresh[at];
  };
  let pick: Entry | undefined;
  let used = acquisition;
  let ranked: Entry[] = [];
  if (acquisition === "thompson") pick = thompsonPick();
  else {
    candidates(RANDOM_CANDIDATES, LOCAL_CANDIDATES);
    const starts = [...scored.values()]
      .filter((e) => isNew(e.p))
      .sort((a, b) => b.a - a.a)
      .slice(0, REFINE);
    for (const start of starts) {
      let at = start;
      let step = 0.05;
      for (let k = 0; k < REFINE_STEPS; k++) {
        const next = score(at.u.map((x) => clamp01(x + step * rng.normal())));
        if (next.a > at.a && isNew(next.p)) at = next;
        else step *= 0.7;
      }
    }
    ranked = [...scored.values()].sort((a, b) => b.a - a.a);
    pick = ranked.find((e) => isNew(e.p));
    // A basin measured out: the best EI is below the bar, so a draw from the posterior decides.
    if (pick && basinEscape && acquisition === "ei" && pick.ei < basinEscape.below * Math.sqrt(model.noise)) {
      const drawn = thompsonPick();
      if (drawn) {
        pick = drawn;
        used = basinEscape.to;
      }
    }
  }
  if (!pick) {
    for (const e of (ranked.length ? ranked : [...scored.values()]).slice(0, 1)) remember(e.p);
    return undefined;
  }
  const bestPredicted = sign * (incumbent * scale + center);
  return {
    params: pick.p,
    mode: "gp",
    observed: observations.length,
    repeat: false,
    model: {
      acquisition: used,
      expectedImprovement: pick.ei * scale,
      predicted: sign * (pick.mu * scale + center),
      bestPredicted,
      noiseSigma: Math.sqrt(model.noise) * scale,
    },
    pending: lies.length,
  };
}

const INV_SQRT_2PI = 1 / Math.sqrt(2 * Math.PI);

/** EI of a minimisation below `best`, for a posterior N(mu, sd²). */
function expectedImprovement(best: number, mu: number, sd: number): number {
  if (!(sd > 1e-12)) return Math.max(best - mu, 0);
  const z = (best - mu) / sd;
  return (best - mu) * normalCdf(z) + sd * Math.exp(-0.5 * z * z) * INV_SQRT_2PI;
}

// --- the Gaussian process -----------------------------------------------------------------

interface GpModel {
  /** Trial noise variance (standardised units). */
  noise: number;
  predict(u: number[]): { mu: number; sd: number };
  /** The posterior with these rows added, hyperparameters unchanged (fantasies: constant liar). */
  given(rows: Row[]): GpModel;
  /** One joint draw of the noise-free values at these points (Thompson sampling). */
  draw(us: number[][], rng: Rng): number[];
}

/** Fitted hyperparameters: inverse squared lengthscales, signal and noise variance. */
interface Hyper {
  inv: number[];
  s2: number;
  noise: number;
}

const SQRT5 = Math.sqrt(5);

function matern52(r2: number): number {
  const r = Math.sqrt(r2);
  return (1 + SQRT5 * r + (5 / 3) * r2) * Math.exp(-SQRT5 * r);
}

/** The kernel between two points of the cube (the fit's `covariance` caches the distances instead). */
function kernel(a: readonly number[], b: readonly number[], { inv, s2 }: Hyper): number {
  let r2 = 0;
  for (let j = 0; j < inv.length; j++) {
    const diff = (a[j] as number) - (b[j] as number);
    r2 += diff * diff * (inv[j] as number);
  }
  return s2 * matern52(r2);
}

/** Log-normal priors (mean of the log, sd of the log) on lengthscale, signal variance, noise variance. */
const PRIOR = {
  lengthscale: [Math.log(0.5), 1],
  signal: [0, 1.5],
  noise: [Math.log(0.05), 2.5],
} as const;
const JITTER = 1e-8;

/**
 * Configurations the hyperparameters are fitted on, at most: past it the best half and the
 * newest half (each likelihood evaluation is a Cholesky factorisation, cubic in the rows, and
 * Nelder–Mead makes a few hundred); the posterior then conditions on every modelled row.
 */
const MAX_FITTED = 80;

/** Fits the hyperparameters (MAP) and returns the posterior. */
function fitGp(data: Row[], d: number): GpModel {
  return posterior(data, fitHyperparameters(subsetForFit(data), d));
}

/** The best half by mean and the newest half of the rows, in their order. */
function subsetForFit(data: Row[]): Row[] {
  return bestAndNewest(data, MAX_FITTED, (r) => r.y);
}

/** At most `max` rows, in their order: the best half by `y` (lowest) and the newest of the rest. */
function bestAndNewest<T>(rows: T[], max: number, y: (r: T) => number): T[] {
  if (rows.length <= max) return rows;
  const keep = new Set(
    rows
      .map((r, i) => ({ y: y(r), i }))
      .sort((a, b) => a.y - b.y)
      .slice(0, max / 2)
      .map((x) => x.i),
  );
  for (let i = rows.length - 1; i >= 0 && keep.size < max; i--) keep.add(i);
  return rows.filter((_, i) => keep.has(i));
}

/** The covariance of `data` for the hyperparameter search: distances per dimension computed once, K refilled per candidate. */
function covariance(data: Row[], d: number) {
  const n = data.length;
  // Squared distances per dimension, flat [dim][i*n+k].
  const dist = Array.from({ length: d }, (_, j) => {
    const out = new Float64Array(n * n);
    for (let i = 0; i < n; i++) {
      for (let k = 0; k < i; k++) {
        const diff = ((data[i] as Row).u[j] as number) - ((data[k] as Row).u[j] as number);
        out[i * n + k] = diff * diff;
        out[k * n + i] = diff * diff;
      }
    }
    return out;
  });
  const K = new Float64Array(n * n);
  /** Fills K's lower triangle for hyperparameters h. */
  const build = ({ inv, s2, noise }: Hyper) => {
    for (let i = 0; i < n; i++) {
      for (let k = 0; k <= i; k++) {
        let v: number;
        if (i === k) v = s2 + noise / (data[i] as Row).n + JITTER;
        else {
          let r2 = 0;
          for (let j = 0; j < d; j++)
            r2 += ((dist[j] as Float64Array)[i * n + k] as number) * (inv[j] as number);
          v = s2 * matern52(r2);
        }
        K[i * n + k] = v;
      }
    }
  };
  return { K, build };
}

/** Keeps log-hyperparameters inside sane bounds (lengthscales, signal variance, noise variance). */
function bounded(theta: readonly number[], d: number): number[] {
  return theta.map((t, i) => {
    if (i < d) return Math.min(Math.max(t, Math.log(0.01)), Math.log(20));
    if (i === d) return Math.min(Math.max(t, Math.log(1e-3)), Math.log(100));
    return Math.min(Math.max(t, Math.log(1e-6)), Math.log(10));
  });
}

/** MAP log-hyperparameters: the marginal likelihood, the within-repeat term and the priors. */
function fitHyperparameters(data: Row[], d: number): Hyper {
  const n = data.length;
  const { K, build } = covariance(data, d);
  const y = Float64Array.from(data, (r) => r.y);
  const withinSs = data.reduce((a, r) => a + r.ss, 0);
  const withinDf = data.reduce((a, r) => a + r.n - 1, 0);
  const objective = (theta: number[]): number => {
    const h = hyperOf(theta, d);
    build(h);
    const { noise } = h;
    if (!cholesky(K, n)) return Number.POSITIVE_INFINITY;
    const alpha = solveChol(K, n, y);
    let quad = 0;
    let logDet = 0;
    for (let i = 0; i < n; i++) {
      quad += (y[i] as number) * (alpha[i] as number);
      logDet += Math.log(K[i * n + i] as number);
    }
    let nll = 0.5 * quad + logDet + withinSs / (2 * noise) + 0.5 * withinDf * Math.log(noise);
    const pen = (t: number, [m, s]: readonly [number, number]) => 0.5 * ((t - m) / s) ** 2;
    for (let j = 0; j < d; j++) nll += pen(theta[j] as number, PRIOR.lengthscale);
    nll += pen(theta[d] as number, PRIOR.signal) + pen(theta[d + 1] as number, PRIOR.noise);
    return Number.isFinite(nll) ? nll : Number.POSITIVE_INFINITY;
  };
  const f = (theta: number[]) => objective(bounded(theta, d));
  const starts = [
    [...new Array<number>(d).fill(Math.log(0.5)), 0, Math.log(0.05)],
    [...new Array<number>(d).fill(Math.log(0.2)), 0, Math.log(0.3)],
  ];
  let best = { x: starts[0] as number[], f: Number.POSITIVE_INFINITY };
  for (const s of starts) {
    const r = nelderMead(f, s, 0.7, 60 + 20 * d);
    if (r.f < best.f) best = r;
  }
  return hyperOf(bounded(best.x, d), d);
}

/** Log-hyperparameters (lengthscales, signal variance, noise variance) as the kernel uses them. */
function hyperOf(theta: readonly number[], d: number): Hyper {
  return {
    inv: theta.slice(0, d).map((t) => Math.exp(-2 * t)),
    s2: Math.exp(theta[d] as number),
    noise: Math.exp(theta[d + 1] as number),
  };
}

/** The GP posterior given the rows and fixed hyperparameters. */
function posterior(data: Row[], h: Hyper): GpModel {
  const { s2, noise } = h;
  const n = data.length;
  const K = new Float64Array(n * n);
  for (let i = 0; i < n; i++) {
    const ui = (data[i] as Row).u;
    for (let k = 0; k < i; k++) K[i * n + k] = kernel(ui, (data[k] as Row).u, h);
    K[i * n + i] = s2 + noise / (data[i] as Row).n + JITTER;
  }
  if (!cholesky(K, n)) throw new Error("gp: the fitted covariance is not positive definite");
  const alpha = solveChol(
    K,
    n,
    Float64Array.from(data, (r) => r.y),
  );
  const L = K;
  return {
    noise,
    given: (rows) => posterior([...data, ...rows], h),
    draw(us: number[][], rng: Rng): number[] {
      const m = us.length;
      // V = L⁻¹ K(data, us), column by column; mean = K(us, data) α; cov = K(us, us) − VᵀV.
      const V = new Float64Array(n * m);
      const mus = new Float64Array(m);
      for (let c = 0; c < m; c++) {
        const u = us[c] as number[];
        let mu = 0;
        for (let i = 0; i < n; i++) {
          const kv = kernel(u, (data[i] as Row).u, h);
          mu += kv * (alpha[i] as number);
          let t = kv;
          for (let k = 0; k < i; k++) t -= (L[i * n + k] as number) * (V[k * m + c] as number);
          V[i * m + c] = t / (L[i * n + i] as number);
        }
        mus[c] = mu;
      }
      const C = new Float64Array(m * m);
      const fill = (jitter: number) => {
        for (let a = 0; a < m; a++) {
          const ua = us[a] as number[];
          for (let b = 0; b <= a; b++) {
            let v = a === b ? s2 + jitter : kernel(ua, us[b] as number[], h);
            for (let i = 0; i < n; i++) v -= (V[i * m + a] as number) * (V[i * m + b] as number);
            C[a * m + b] = v;
          }
        }
      };
      // Candidates a rounding apart are nearly collinear: a growing jitter until it factorises.
      let jitter = 1e-8 * s2;
      fill(jitter);
      while (!cholesky(C, m)) {
        jitter *= 10;
        if (jitter > s2) throw new Error("gp: the candidates' posterior covariance is not positive definite");
        fill(jitter);
      }
      const z = Array.from({ length: m }, () => rng.normal());
      const out = new Array<number>(m);
      for (let a = 0; a < m; a++) {
        let v = mus[a] as number;
        for (let b = 0; b <= a; b++) v += (C[a * m + b] as number) * (z[b] as number);
        out[a] = v;
      }
      return out;
    },
    predict(u: number[]) {
      const kStar = new Float64Array(n);
      let mu = 0;
      for (let i = 0; i < n; i++) {
        const kv = kernel(u, (data[i] as Row).u, h);
        kStar[i] = kv;
        mu += kv * (alpha[i] as number);
      }
      // v = L⁻¹ k*, var = s² − v·v
      let vv = 0;
      for (let i = 0; i < n; i++) {
        let s = kStar[i] as number;
        for (let k = 0; k < i; k++) s -= (L[i * n + k] as number) * (kStar[k] as number);
        const v = s / (L[i * n + i] as number);
        kStar[i] = v;
        vv += v * v;
      }
      return { mu, sd: Math.sqrt(Math.max(s2 - vv, 0)) };
    },
  };
}

/** In-place lower Cholesky factor of the lower triangle of A (n×n, row-major). False if not positive definite. */
function cholesky(A: Float64Array, n: number): boolean {
  for (let j = 0; j < n; j++) {
    let s = A[j * n + j] as number;
    for (let k = 0; k < j; k++) s -= (A[j * n + k] as number) ** 2;
    if (!(s > 0)) return false;
    const l = Math.sqrt(s);
    A[j * n + j] = l;
    for (let i = j + 1; i < n; i++) {
      let t = A[i * n + j] as number;
      for (let k = 0; k < j; k++) t -= (A[i * n + k] as number) * (A[j * n + k] as number);
      A[i * n + j] = t / l;
    }
  }
  return true;
}

/** Solves (L Lᵀ) x = b for the factor in L's lower triangle. */
function solveChol(L: Float64Array, n: number, b: Float64Array): Float64Array {
  const z = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    let s = b[i] as number;
    for (let k = 0; k < i; k++) s -= (L[i * n + k] as number) * (z[k] as number);
    z[i] = s / (L[i * n + i] as number);
  }
  const x = new Float64Array(n);
  for (let i = n - 1; i >= 0; i--) {
    let s = z[i] as number;
    for (let k = i + 1; k < n; k++) s -= (L[k * n + i] as number) * (x[k] as number);
    x[i] = s / (L[i * n + i] as number);
  }
  return x;
}

/** Nelder–Mead minimisation (standard coefficients), at most maxEvals evaluations. */
export function nelderMead(
  f: (x: number[]) => number,
  x0: number[],
  step: number,
  maxEvals: number,
): { x: number[]; f: number } {
  const m = x0.length;
  let simplex = [x0, ...x0.map((_, i) => x0.map((v, j) => (j === i ? v + step : v)))].map((x) => ({
    x,
    f: f(x),
  }));
  let evals = simplex.length;
  while (evals < maxEvals) {
    simplex.sort((a, b) => a.f - b.f);
    const best = simplex[0] as { x: number[]; f: number };
    const worst = simplex[m] as { x: number[]; f: number };
    const second = simplex[m - 1] as { x: number[]; f: number };
    if (Math.abs(worst.f - best.f) < 1e-7) break;
    const centroid = x0.map((_, j) => simplex.slice(0, m).reduce((a, p) => a + (p.x[j] as number), 0) / m);
    const along = (t: number) => centroid.map((c, j) => c + t * ((worst.x[j] as number) - c));
    const reflected = along(-1);
    const fr = f(reflected);
    evals++;
    if (fr < best.f) {
      const expanded = along(-2);
      const fe = f(expanded);
      evals++;
      simplex[m] = fe < fr ? { x: expanded, f: fe } : { x: reflected, f: fr };
    } else if (fr < second.f) {
      simplex[m] = { x: reflected, f: fr };
    } else {
      const contracted = fr < worst.f ? along(-0.5) : along(0.5);
      const fc = f(contracted);
      evals++;
      if (fc < Math.min(fr, worst.f)) simplex[m] = { x: contracted, f: fc };
      else {
        simplex = simplex.map((p, i) =>
          i === 0
            ? p
            : { x: p.x.map((v, j) => (best.x[j] as number) + 0.5 * (v - (best.x[j] as number))), f: 0 },
        );
        for (let i = 1; i <= m; i++) {
          const p = simplex[i] as { x: number[]; f: number };
          p.f = f(p.x);
        }
        evals += m;
      }
    }
  }
  simplex.sort((a, b) => a.f - b.f);
  return simplex[0] as { x: number[]; f: number };
}
