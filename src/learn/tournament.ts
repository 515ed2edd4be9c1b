/**
 * `autolab tournament` (issue #15 item 2): N variants of one program's instructions — the
 * markdown body of program.md, what the researcher reads — run under identical budgets and seeds,
 * ranked with confidence (src/learn/tournament-stats.ts).
 *
 * A variant changes the instructions and nothing else. Its frontmatter, if it has one, must be
 * the incumbent's exactly: a variant that changed the evaluator, the budget or the editable files
 * would "win" by measuring something else. Each variant's cells are a one-configuration bench
 * (src/learn/bench.ts) under `<out>/cells/<hash>`, where the hash covers the variant's whole
 * program.md, the budget, the seeds, the re-measurement and the researcher: a variant already run
 * (the incumbent of the last tournament, a loser run again) is never run twice, and a tournament
 * killed mid-way resumes with the cells it has not finished.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, extname, join, relative, resolve, sep } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { parse as parseYaml } from "yaml";
import { AutolabError } from "../core/errors.ts";
import { splitFrontmatter } from "../program/frontmatter.ts";
import { loadProgram } from "../program/index.ts";
import { AGENT_BACKENDS } from "../program/schema.ts";
import { git, gitRaw } from "../workspace/git.ts";
import { type BenchOptions, type CellRecord, runBench } from "./bench.ts";
import type { Suite } from "./suite.ts";
import { rankVariants, type Standings } from "./tournament-stats.ts";

/** Instructions longer than this are refused: a prompt, not a dump. */
export const MAX_INSTRUCTIONS_CHARS = 64 * 1024;

export const INCUMBENT = "incumbent";

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export interface Variant {
  name: string;
  /** Where it came from: program.md (the incumbent), a file, or "written by <model>". */
  source: string;
  /** The instructions: program.md's markdown body. */
  body: string;
}

export interface TournamentOptions {
  /** The program's program.md (absolute or relative to the working directory). */
  program: string;
  /** The incumbent first (the program's own instructions), then the challengers. */
  variants: Variant[];
  seeds: number[];
  budget: Suite["budget"];
  /** Fresh-seed trials of each cell's baseline and best (default 3; 0: the runs' own record). */
  remeasure?: number;
  /** The tournament's directory: variants, cells, report. */
  out: string;
  /** A researcher backend for every variant (default: program.md's `agent:`). */
  agent?: string;
  agents?: BenchOptions["agents"];
  parallel?: number;
  fleet?: string;
  signal?: AbortSignal;
  onLine?: (line: string) => void;
  bootstrap?: { resamples: number; seed: number };
}

export interface TournamentVariant extends Variant {
  /** The variant's whole program.md, as its cells ran it (under `<out>/variants/`). */
  file: string;
  /** Its cells' bench directory, relative to the tournament's. */
  cells: string;
}

export interface TournamentResult {
  program: string;
  unit: "experiments" | "trials";
  budget: Suite["budget"];
  seeds: number[];
  remeasure: number;
  /** Every variant has a cell on every seed. */
  complete: boolean;
  variants: TournamentVariant[];
  /** Each cell with `config` = the variant's name. */
  cells: CellRecord[];
  standings: Standings;
  /** Cells this invocation ran (the rest were already done). */
  ranNow: number;
}

function frontmatterOf(text: string, file: string): { yaml: string; data: unknown; body: string } {
  const split = splitFrontmatter(text);
  if (!split.ok)
    throw new AutolabError(
      "TOURNAMENT_VARIANT_INVALID",
      `${file} has ${split.problem === "missing" ? "no" : "an unclosed"} YAML frontmatter (line ${split.line})`,
      "A tournament runs a program.md with its frontmatter; check it with `autolab check`.",
    );
  return { yaml: split.yaml, data: parseYaml(split.yaml) ?? {}, body: split.body };
}

/** The first top-level field two frontmatters disagree on. */
function firstDifference(a: unknown, b: unknown): string | undefined {
  const ra = (a ?? {}) as Record<string, unknown>;
  const rb = (b ?? {}) as Record<string, unknown>;
  for (const k of [...new Set([...Object.keys(ra), ...Object.keys(rb)])].sort())
    if (!isDeepStrictEqual(ra[k], rb[k])) return k;
  return undefined;
}

/** The program's own instructions: the tournament's incumbent. */
export function incumbentOf(programFile: string): Variant {
  const file = resolve(programFile);
  const { body } = frontmatterOf(readFileSync(file, "utf8"), file);
  return { name: INCUMBENT, source: basename(file), body };
}

/**
 * Checks instructions offered as a variant against the program: the frontmatter, when given,
 * must be the program's exactly; the body must be non-empty, not too long, and new.
 */
export function checkVariantText(
  programFile: string,
  text: string,
  what: string,
  others: readonly Variant[],
): string {
  const program = frontmatterOf(readFileSync(programFile, "utf8"), programFile);
  let body = text.replace(/^\uFEFF/, "");
  if (/^\s*---\s*(\r?\n|$)/.test(body)) {
    const v = frontmatterOf(body, what);
    const field = firstDifference(program.data, v.data);
    if (field !== undefined)
      throw new AutolabError(
        "TOURNAMENT_VARIANT_INVALID",
        `${what} changes ${JSON.stringify(field)} in the frontmatter: a tournament varies the instructions (the markdown body) and nothing else`,
        "Keep the frontmatter identical to program.md's, or give only the instructions (a markdown file without frontmatter). To compare settings, use `autolab bench` configurations.",
      );
    body = v.body;
  }
  body = body.trim();
  if (!body)
    throw new AutolabError(
      "TOURNAMENT_VARIANT_INVALID",
      `${what} has no instructions (its markdown body is empty)`,
      "Write the instructions the researcher should follow in the variant's body.",
    );
  if (body.length > MAX_INSTRUCTIONS_CHARS)
    throw new AutolabError(
      "TOURNAMENT_VARIANT_INVALID",
      `${what} has ${body.length} characters of instructions; at most ${MAX_INSTRUCTIONS_CHARS}`,
      "Shorten the instructions: the researcher reads them in every context.",
    );
  const same = others.find((o) => o.body.trim() === body);
  if (same)
    throw new AutolabError(
      "TOURNAMENT_VARIANT_INVALID",
      `${what} has the same instructions as ${same.name} (${same.source})`,
      "Give each variant different instructions: identical ones only spend the budget twice.",
    );
  return body;
}

/** A variant file given on the command line (a whole program.md, or only its body). */
export function readVariant(programFile: string, path: string, others: readonly Variant[]): Variant {
  const file = resolve(path);
  if (!existsSync(file) || !statSync(file).isFile())
    throw new AutolabError(
      "TOURNAMENT_VARIANT_INVALID",
      `no variant file at ${file}`,
      "Pass files holding the instructions to compare: autolab tournament variants/terse.md variants/detailed.md",
    );
  const body = checkVariantText(programFile, readFileSync(file, "utf8"), path, others);
  let name = basename(file, extname(file))
    .replace(/[^A-Za-z0-9._-]/g, "-")
    .replace(/^[^A-Za-z0-9]+/, "");
  if (!NAME.test(name) || name === INCUMBENT) name = `variant-${others.length}`;
  const taken = new Set(others.map((o) => o.name));
  const stem = name.slice(0, 56);
  for (let i = 2; taken.has(name); i++) name = `${stem}-${i}`;
  return { name, source: path, body };
}

const sha = (s: string) => createHash("sha256").update(s).digest("hex");

/** The variant's whole program.md: the program's frontmatter, verbatim, and the variant's body. */
function variantProgram(programFile: string, body: string): string {
  const { yaml } = frontmatterOf(readFileSync(programFile, "utf8"), programFile);
  return `---\n${yaml}\n---\n${body.trim()}\n`;
}

/**
 * The committed project the cells clone, program.md left out (each cell writes its own): cells
 * of the same instructions on other code are other cells.
 */
async function codeKey(programFile: string, onLine?: (line: string) => void): Promise<string> {
  const dir = dirname(programFile);
  const top = await gitRaw(dir, ["rev-parse", "--show-toplevel"]);
  const head = await gitRaw(dir, ["rev-parse", "--verify", "-q", "HEAD"]);
  if (top.code !== 0 || head.code !== 0)
    throw new AutolabError(
      "TOURNAMENT_VARIANT_INVALID",
      `${programFile} is not in a git repository with a commit: a tournament's cells clone the committed project`,
      "Commit the project first (autolab init makes a repository).",
    );
  const root = top.stdout.trim();
  const dirty = (await git(root, ["status", "--porcelain", "--untracked-files=no"]))
    .split("\n")
    .filter((l) => l.trim() && !l.endsWith(relative(root, programFile).split(sep).join("/")));
  if (dirty.length)
    onLine?.(
      `warning: ${dirty.length} uncommitted change${dirty.length === 1 ? "" : "s"} (${dirty[0]?.slice(3)}${dirty.length > 1 ? ", …" : ""}) ${dirty.length === 1 ? "is" : "are"} not in the cells: they clone the last commit`,
    );
  const self = relative(root, programFile).split(sep).join("/");
  const tree = await git(root, ["ls-tree", "-r", "--full-tree", "HEAD"]);
  return sha(
    tree
      .split("\n")
      .filter((l) => !l.endsWith(`\t${self}`))
      .join("\n"),
  );
}

/** At most `n` of the calls run at once; the rest wait their turn, first come first served. */
function limiter(n: number): <T>(f: () => Promise<T>) => Promise<T> {
  let active = 0;
  const waiting: (() => void)[] = [];
  return async (f) => {
    // A place is taken here, or handed over by the call that frees it (never two at once).
    if (active < n) active++;
    else await new Promise<void>((r) => waiting.push(r));
    try {
      return await f();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else active--;
    }
  };
}

/** Runs (or resumes) every variant's cells, then ranks them. */
export async function runTournament(opts: TournamentOptions): Promise<TournamentResult> {
  const programFile = resolve(opts.program);
  const program = loadProgram(programFile);
  if (opts.variants[0]?.name !== INCUMBENT)
    throw new Error("runTournament: the first variant must be the incumbent");
  const remeasure = opts.remeasure ?? 3;
  const bootstrap = opts.bootstrap ?? { resamples: 2000, seed: 1 };
  if (
    opts.agent !== undefined &&
    !opts.agents?.[opts.agent] &&
    !(AGENT_BACKENDS as readonly string[]).includes(opts.agent)
  )
    throw new AutolabError(
      "AGENT_UNKNOWN",
      `no researcher named ${JSON.stringify(opts.agent)}`,
      `Pass --agent one of ${AGENT_BACKENDS.join(", ")}, or leave it out to use program.md's agent:.`,
    );
  const researcher = opts.agent ?? program.agent.backend;
  if (researcher === "builtin")
    opts.onLine?.(
      "warning: the built-in optimizer does not read the instructions; every variant will score alike. Name a researcher that reads them (--agent, or agent: in program.md).",
    );
  mkdirSync(join(opts.out, "variants"), { recursive: true });
  const code = await codeKey(programFile, opts.onLine);
  const variants: TournamentVariant[] = [];
  const gate = limiter(Math.max(1, opts.parallel ?? 1));
  const runs = opts.variants.map(async (v) => {
    const text = variantProgram(programFile, v.body);
    const key = sha(
      JSON.stringify({ text, code, budget: opts.budget, seeds: opts.seeds, remeasure, researcher }),
    ).slice(0, 16);
    const file = join(opts.out, "variants", `${key}.md`);
    if (!existsSync(file)) writeFileSync(file, text);
    const rel = join("cells", key);
    variants.push({ ...v, file, cells: rel });
    // One configuration, always named "variant": the same instructions reuse their cells
    // whatever they are called in this tournament (a challenger that won is the next incumbent).
    const suite: Suite = {
      name: `tournament-${v.name}`,
      file: programFile,
      programs: [{ name: "program", split: "held-out", programFile }],
      configurations: [
        { name: "variant", program_md: file, ...(opts.agent !== undefined ? { agent: opts.agent } : {}) },
      ],
      budget: opts.budget,
      seeds: opts.seeds,
      layers: [],
      order: "grid",
      remeasure,
      bootstrap,
      hash: key,
    };
    return {
      v,
      run: await runBench(suite, {
        out: join(opts.out, rel),
        parallel: Math.max(1, opts.parallel ?? 1),
        gate,
        ...(opts.fleet ? { fleet: opts.fleet } : {}),
        ...(opts.agents ? { agents: opts.agents } : {}),
        ...(opts.signal ? { signal: opts.signal } : {}),
        onLine: (line) => opts.onLine?.(line.replace(/^cell variant\/program\//, `${v.name} seed `)),
      }),
    };
  });
  const cells: CellRecord[] = [];
  let ranNow = 0;
  let unit: "experiments" | "trials" = "experiments";
  // In the variants' order, whatever order their cells finished in.
  for (const { v, run } of await Promise.all(runs)) {
    unit = run.unit;
    ranNow += run.ranNow;
    for (const c of run.cells) cells.push({ ...c, config: v.name, program: program.name });
  }
  const order = opts.variants.map((v) => v.name);
  variants.sort((a, b) => order.indexOf(a.name) - order.indexOf(b.name));
  const names = opts.variants.map((v) => v.name);
  const standings = rankVariants(
    cells.map((c) => ({
      variant: c.config,
      seed: c.seed,
      improvement: c.improvement,
      ...(c.status === "failed" ? { failed: true } : {}),
    })),
    names,
    INCUMBENT,
    bootstrap.resamples,
    bootstrap.seed,
  );
  return {
    program: programFile,
    unit,
    budget: opts.budget,
    seeds: opts.seeds,
    remeasure,
    complete: cells.length === names.length * opts.seeds.length,
    variants,
    cells,
    standings,
    ranNow,
  };
}

/** The tournament's default directory: `.autolab/tournament` beside program.md. */
export function defaultTournamentDir(programFile: string): string {
  return join(dirname(resolve(programFile)), ".autolab", "tournament");
}
