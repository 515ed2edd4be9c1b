/**
 * The built-in researcher: a model-based optimizer over the knobs declared in program.md's
 * `search:` (numeric, categorical, conditional) — a Gaussian process with expected improvement
 * that gives way to a Thompson draw once a basin is measured out (gp.ts, the default) or a Tree-structured Parzen Estimator (tpe.ts,
 * `agent: { backend: builtin, args: [--sampler=tpe] }`).
 * Each proposal rewrites knob constant lines in the editable files of the worktree and nothing
 * else, so it needs no LLM, no network and no API key.
 */
import path from "node:path";
import { AutolabError } from "../../core/errors.ts";
import { fileRules, matchedFiles } from "../../core/file-patterns.ts";
import { formatMetricTo } from "../../core/format.ts";
import type {
  Agent,
  ExperimentView,
  Knob,
  Params,
  ParamValue,
  Program,
  Proposal,
  ProposalContext,
} from "../../core/types.ts";
import { readUntrusted, writeUntrusted } from "../../core/untrusted-file.ts";
import {
  ACQUISITIONS,
  type Acquisition,
  type BasinEscape,
  type GpObservation,
  type GpSuggestion,
  suggestGp,
} from "./gp.ts";
import {
  formatKnobValue,
  isCategorical,
  type KnobFile,
  type KnobLocation,
  readKnobs,
  writeKnob,
} from "./knobs.ts";
import { formatLiteral, formatNumber, parseLiteral, showValue } from "./literals.ts";
import { createRng, mixSeed } from "./rng.ts";
import { type Dim, makeDims, validValue } from "./space.ts";
import { defaultStartup, suggestTpe, type TpeObservation, type TpeSuggestion } from "./tpe.ts";

/** The built-in samplers: "gp" (default; docs/optimizer.md says why) or "tpe". */
export const SAMPLERS = ["gp", "tpe"] as const;
export type Sampler = (typeof SAMPLERS)[number];

export interface BuiltinAgentOptions {
  /** Seed of the optimizer (default 0). Same seed and same history give the same proposal. */
  seed?: number;
  /** Configurations evaluated (the baseline included) before the model replaces random sampling. */
  startup?: number;
  /** Default "gp". */
  sampler?: Sampler;
  /** The GP's acquisition, or a portfolio taken in turn (gp.ts GpOptions.acquisition). */
  acquisition?: readonly Acquisition[];
  /** EI's escape to a Thompson draw from a measured-out basin (gp.ts GpOptions.escape); false: off. */
  escape?: BasinEscape | false;
}

type ArgOptions = Pick<BuiltinAgentOptions, "sampler" | "acquisition" | "escape">;

/**
 * The builtin agent's options from program.md's `agent.args`: `--sampler=gp|tpe` (or
 * `--sampler gp`) and `--acquisition=ei|ucb|thompson` or a comma-separated portfolio taken in
 * turn (`--acquisition=ei,thompson,ucb`; the GP only), `--escape=off` or `--escape=0.2` (EI gives
 * way to a Thompson draw when its best is under that many trial-noise σ; the GP only). Anything
 * else is a clear error naming what is accepted.
 */
export function builtinOptionsFromArgs(args: readonly string[]): ArgOptions {
  const out: ArgOptions = {};
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    const m = /^--(sampler|acquisition|escape)(?:=(.*))?$/.exec(arg);
    const value = m ? (m[2] ?? args[++i]) : undefined;
    if (!m) {
      throw new AutolabError(
        "AGENT_CONFIG_INVALID",
        `agent builtin: unknown argument ${JSON.stringify(arg)}`,
        `the builtin agent takes --sampler=${SAMPLERS.join("|")}, --acquisition=${ACQUISITIONS.join("|")} (or a comma-separated portfolio) and --escape=off|<σ>, e.g. agent: { backend: builtin, args: [--sampler=tpe] }`,
      );
    }
    if (m[1] === "acquisition") {
      out.acquisition = acquisitionsOf(value);
      continue;
    }
    if (m[1] === "escape") {
      out.escape = escapeOf(value);
      continue;
    }
    if (!(SAMPLERS as readonly string[]).includes(value ?? "")) {
      throw new AutolabError(
        "AGENT_CONFIG_INVALID",
        `agent builtin: --sampler ${value === undefined ? "needs a value" : `${JSON.stringify(value)} is not a sampler`}`,
        `choose one of ${SAMPLERS.join(", ")} (docs/optimizer.md compares them)`,
      );
    }
    out.sampler = value as Sampler;
  }
  for (const flag of ["acquisition", "escape"] as const) {
    if (out[flag] !== undefined && out.sampler === "tpe") {
      throw new AutolabError(
        "AGENT_CONFIG_INVALID",
        `agent builtin: --${flag} applies to the GP sampler, not to --sampler=tpe`,
        `drop --${flag}, or drop --sampler=tpe (the GP is the default)`,
      );
    }
  }
  return out;
}

/** `--escape`'s value: off, or EI's bar in trial-noise σ (a number ≥ 0). */
function escapeOf(value: string | undefined): BasinEscape | false {
  if (value === "off") return false;
  const below = value === undefined || value.trim() === "" ? Number.NaN : Number(value);
  if (!(Number.isFinite(below) && below >= 0)) {
    throw new AutolabError(
      "AGENT_CONFIG_INVALID",
      `agent builtin: --escape ${value === undefined ? "needs a value" : `${JSON.stringify(value)} is neither off nor a number ≥ 0`}`,
      "use --escape=off for plain expected improvement, or --escape=0.2 (the default: EI's bar in trial-noise σ below which a Thompson draw decides; docs/optimizer.md)",
    );
  }
  return { below, to: "thompson" };
}

/** `--acquisition`'s value: one acquisition or a comma-separated portfolio of them. */
function acquisitionsOf(value: string | undefined): Acquisition[] {
  const parts = (value ?? "").split(",").map((x) => x.trim());
  const bad = parts.find((x) => !(ACQUISITIONS as readonly string[]).includes(x));
  if (value === undefined || bad !== undefined) {
    throw new AutolabError(
      "AGENT_CONFIG_INVALID",
      `agent builtin: --acquisition ${value === undefined ? "needs a value" : `${JSON.stringify(bad)} is not an acquisition`}`,
      `choose ${ACQUISITIONS.join(", ")}, or several separated by commas to take them in turn, e.g. --acquisition=ei,thompson,ucb (docs/optimizer.md)`,
    );
  }
  return parts as Acquisition[];
}

export function createBuiltinAgent(opts: BuiltinAgentOptions = {}): Agent {
  return {
    name: "builtin",
    instant: true,
    propose: (ctx) => propose(ctx, opts),
    paramsOf: (worktree, program) =>
      Object.keys(program.search).length ? readKnobParams(worktree, program) : Promise.resolve({}),
  };
}

const SEARCH_EXAMPLE = [
  "search:",
  "  LEARNING_RATE: { low: 1e-4, high: 1e-1, log: true }",
  "  HIDDEN: { low: 16, high: 512, int: true, log: true }",
].join("\n");

async function propose(ctx: ProposalContext, opts: BuiltinAgentOptions): Promise<Proposal> {
  ctx.signal?.throwIfAborted();
  const space = ctx.program.search;
  const names = Object.keys(space);
  if (names.length === 0) {
    throw new AutolabError(
      "NO_SEARCH_SPACE",
      `the builtin agent tunes the knobs listed under search: in program.md, and ${ctx.program.path} lists none`,
      `add knobs that are \`NAME = value\` lines in an editable file, e.g.\n${SEARCH_EXAMPLE}\nor choose an agent that edits code (agent: claude, codex, llm, ...)`,
    );
  }

  const files = await readEditableFiles(ctx.worktree, ctx.program.files);
  const locations = readKnobs(files, space);
  const dims = makeDims(space);
  // The worktree is at the current best, so these are the best's values unless the ledger says otherwise.
  const current = paramsOf(locations);
  const bestParams: Params = { ...current };
  for (const d of dims) {
    const v = ctx.best.params?.[d.name];
    if (validValue(d, v)) bestParams[d.name] = v;
  }

  const { observations, failed, pending } = buildObservations(ctx, dims, current, bestParams);
  const startup = opts.startup ?? defaultStartup(names.length);
  const rng = createRng(mixSeed(opts.seed ?? 0, ctx.history.length));
  const direction = ctx.program.objective.direction;
  const options = { direction, startup, current };
  const s =
    (opts.sampler ?? "gp") === "gp"
      ? suggestGp(space, observations, rng, {
          ...options,
          ...(opts.acquisition ? { acquisition: opts.acquisition } : {}),
          ...(opts.escape !== undefined ? { escape: opts.escape } : {}),
        })
      : suggestTpe(space, observations, rng, options);
  let mechanism: string;
  if (s.mode === "startup")
    mechanism =
      observations.length < startup
        ? `random exploration (startup ${observations.length + 1} of ${startup})`
        : "random exploration (the model needs two measured configurations first)";
  else {
    mechanism =
      "good" in s
        ? `TPE: sampled from the density of the best ${s.good} of ${s.observed} observed configurations`
        : gpMechanism(s);
    if (failed > 0) mechanism += ` (${failed} failed counted as worst)`;
    if (pending > 0) mechanism += `; ${pendingMechanism(pending, s)}`;
  }

  // The suggestion sets the active knobs; an inactive one keeps its line (and value) as it is.
  const params: Params = { ...current, ...s.params };
  const changed = names.filter((name) => params[name] !== current[name]);
  const literals = new Map<string, string>();
  for (const name of changed) {
    const literal = literalFor(
      space[name] as Knob,
      params[name] as ParamValue,
      locations.get(name) as KnobLocation,
    );
    // The recorded value must be exactly what the file will say.
    if (parseLiteral(literal) !== params[name]) {
      throw new Error(`builtin agent: ${name} = ${literal} does not parse back to ${String(params[name])}`);
    }
    literals.set(name, literal);
  }
  for (const file of files) {
    let text = file.text;
    for (const name of changed) {
      if (locations.get(name)?.file === file.path) text = writeKnob(text, name, literals.get(name) as string);
    }
    if (text !== file.text) writeUntrusted(path.join(ctx.worktree, file.path), Buffer.from(text, "latin1"));
  }

  const hypothesis = changed
    .map((name) => {
      const knob = space[name] as Knob;
      const from = current[name] as ParamValue;
      if (isCategorical(knob)) return `${name} ${showValue(from)} → ${showValue(params[name] as ParamValue)}`;
      const int = knob.int && Number.isInteger(from);
      return `${name} ${formatNumber(from as number, int)} → ${literals.get(name)}`;
    })
    .join(", ");
  if (s.repeat) mechanism += "; every nearby configuration was tried, so this re-measures an earlier one";
  return { hypothesis, mechanism, params };
}

/** The literal written for a knob's new value: a rounded number, or a choice in the line's style. */
function literalFor(knob: Knob, value: ParamValue, at: KnobLocation): string {
  return isCategorical(knob) ? formatLiteral(value, at) : formatKnobValue(value as number, knob);
}

/** A model's number in the metric's units, as status shows metrics (significant digits only). */

/** How the configurations other slots are evaluating right now entered the model. */
function pendingMechanism(pending: number, s: GpSuggestion | TpeSuggestion): string {
  const what = `${pending} pending configuration${pending === 1 ? "" : "s"}`;
  if ("good" in s) return `${what} counted with the worse group (constant liar)`;
  if (s.model)
    return `${what} fantasized at the best predicted value ${formatMetricTo(s.model.bestPredicted, 6)} (constant liar)`;
  return `${what} not repeated`;
}

/** What the GP saw and expects, in the metric's units (significant digits only). */
function gpMechanism(g: GpSuggestion): string {
  if (!g.model)
    return `GP: every configuration it preferred was tried; a random one of ${g.observed} observed`;
  const m = g.model;
  const how =
    m.acquisition === "thompson"
      ? "the best of one draw from the posterior (Thompson sampling); "
      : m.acquisition === "ucb"
        ? "the best optimistic bound (UCB); "
        : "";
  return `GP: ${how}expected improvement ${formatMetricTo(m.expectedImprovement, 3)} over the best predicted value ${formatMetricTo(m.bestPredicted, 6)}; this one is predicted ${formatMetricTo(m.predicted, 6)} (model of ${g.observed} configurations, trial noise σ ≈ ${formatMetricTo(m.noiseSigma, 2)})`;
}

/**
 * The knob values in a worktree's editable files. For the harness: recording them as the
 * baseline's params keeps the baseline an observation after the best has moved on (an
 * experiment without params cannot be placed in the search space).
 */
export async function readKnobParams(worktree: string, program: Program): Promise<Params> {
  const files = await readEditableFiles(worktree, program.files);
  return paramsOf(readKnobs(files, program.search));
}

function paramsOf(locations: Map<string, KnobLocation>): Params {
  const params: Params = {};
  for (const [name, loc] of locations) params[name] = loc.value;
  return params;
}

/**
 * Reads the editable files as latin1: one char per byte, so writing back gives byte-identical
 * files even when they are not valid UTF-8. Knob lines are ASCII. Entries may be files,
 * directories or globs (src/core/file-patterns.ts): every file they match that is not protected
 * or holdout, symlinks and anything outside the worktree skipped (readKnobs then names the files
 * searched). A file found through a directory or glob is skipped when large (data, checkpoints).
 */
async function readEditableFiles(worktree: string, files: Program["files"]): Promise<KnobFile[]> {
  const root = path.resolve(worktree);
  const rules = fileRules(files);
  const named = new Set(files.editable);
  const out: KnobFile[] = [];
  for (const rel of matchedFiles(root, files.editable, rules.editable)) {
    // Through the one door (src/core/untrusted-file.ts): a FIFO or symlink a trial left in the
    // worktree is skipped, never waited on or followed; a file over the cap is skipped (it is
    // written back whole, so it is never read in part).
    const r = readUntrusted(path.join(root, rel), {
      maxBytes: named.has(rel) ? MAX_NAMED_FILE_BYTES : MAX_FOUND_FILE_BYTES,
    });
    if (r.ok && !r.truncated) out.push({ path: rel, text: r.bytes.toString("latin1") });
  }
  return out;
}

/** Files an editable directory or glob holds beyond this size are not searched for knobs. */
const MAX_FOUND_FILE_BYTES = 4 * 1024 * 1024;
/** A file named in files.editable is searched for knobs up to this size. */
const MAX_NAMED_FILE_BYTES = 256 * 1024 * 1024;

/** The objective value of a past experiment, or undefined when it failed or has no result yet. */
function measuredValue(e: ExperimentView): number | undefined {
  if (e.action === "crash" || e.action === "reject") return undefined;
  return e.metric !== undefined && Number.isFinite(e.metric) ? e.metric : undefined;
}

/**
 * Observations in chronological order. Experiments without params (a baseline, or a code
 * change by another agent) cannot be placed in the space and are left out, except the best,
 * whose configuration is the one in the files. Missing knobs (a knob added to search: later)
 * and values the knob cannot take now (a choice since removed) take the worktree's value. An
 * experiment without a decision and without a finished full-budget trial is pending (parallel
 * slots are evaluating it, or it waits for one): the samplers take it as a constant liar, not as
 * a failure. One with finished trials is measured as far as it goes.
 */
function buildObservations(
  ctx: ProposalContext,
  dims: Dim[],
  current: Params,
  bestParams: Params,
): { observations: (TpeObservation & GpObservation)[]; failed: number; pending: number } {
  const observations: (TpeObservation & GpObservation)[] = [];
  let bestSeen = false;
  const bestMetric = Number.isFinite(ctx.best.metric) ? ctx.best.metric : undefined;
  for (const e of [...ctx.history].sort((x, y) => x.n - y.n)) {
    const isBest = e.n === ctx.best.n;
    if (!e.params && !isBest) continue;
    const params: Params = {};
    for (const d of dims) {
      const v = e.params ? e.params[d.name] : bestParams[d.name];
      params[d.name] = validValue(d, v) ? v : (current[d.name] as ParamValue);
    }
    bestSeen ||= isBest;
    // (The baseline is the best while its first trials run in a parallel run: pending too.)
    if (e.action === undefined && !e.values?.length && !(isBest && bestMetric !== undefined)) {
      observations.push({ params, values: [], pending: true });
      continue;
    }
    const value = isBest ? (bestMetric ?? measuredValue(e)) : measuredValue(e);
    // The GP models every trial (repeats measure the noise); a failed experiment has none.
    const values = value === undefined ? [] : e.values?.length ? e.values : [value];
    observations.push({ params, value, values });
  }
  if (!bestSeen) {
    observations.unshift({
      params: bestParams,
      value: bestMetric,
      values: bestMetric === undefined ? [] : [bestMetric],
    });
  }
  const pending = observations.filter((o) => o.pending).length;
  const failed = observations.filter((o) => o.value === undefined && !o.pending).length;
  return { observations, failed, pending };
}
