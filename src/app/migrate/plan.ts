import type { NewImportedResult } from "../../core/ledger.ts";
import type { Direction } from "../../core/types.ts";

/**
 * What `autolab init --from <tool>` found in a checkout and will write: the program.md frontmatter
 * (as settings; rendered by renderFrontmatter), the research directions, the imported history
 * and what it could not read. Built by pure functions (autoresearch.ts, pi-autoresearch.ts) from
 * a Checkout, so the detection is tested on fixture files without git or a notebook; init.ts
 * does the writing.
 */
export type MigrationSource = "autoresearch" | "pi-autoresearch";

export const MIGRATION_SOURCES: readonly MigrationSource[] = ["autoresearch", "pi-autoresearch"];

/** Read access to a checkout's files by relative path (tests hand in a map). */
export interface Checkout {
  /** The checkout's directory name, for program.md's `name:`. */
  name: string;
  exists(path: string): boolean;
  /** A file's text, or undefined when it is absent or not a file. */
  read(path: string): string | undefined;
}

/** What the machine has, for the command: `uv run` needs uv. */
export interface MigrationEnvironment {
  hasExecutable(name: string): boolean;
}

export interface Knob {
  name: string;
  low: number;
  high: number;
  log: boolean;
  int: boolean;
}

export interface ProgramSettings {
  name: string;
  metric: string;
  direction: Direction;
  command: string;
  /** Milliseconds of wall clock a trial gets. */
  budgetMs: number;
  /** Beyond the budget before the harness kills it (startup, evaluation); undefined: autolab's default. */
  graceMs?: number;
  editable: string[];
  protected: string[];
  /** Metrics the source tracked besides the objective (recorded with every trial anyway). */
  secondary: string[];
  /** Knobs for the built-in agent; empty: a coding agent (`agent: claude`). */
  search: Knob[];
  /** Lines written as YAML comments after the settings (where a value came from, what to review). */
  comments: string[];
}

export interface MigrationPlan {
  source: MigrationSource;
  settings: ProgramSettings;
  /** The research directions: the text of the file they came from, verbatim. */
  directions: string;
  /**
   * A note written above the verbatim directions, for the researcher (autoresearch: which of
   * upstream's own loop instructions are the harness's job, not the researcher's).
   */
  preface?: string;
  /** The file the directions came from (program.md for autoresearch: it gains the frontmatter). */
  directionsFrom: string;
  /** The file the history came from (absent: none found). */
  historyFrom?: string;
  history: NewImportedResult[];
  /** Lines of the history that could not be read, as "file:line: why". */
  problems: string[];
  /** What was detected and assumed, for the person (the CLI prints them). */
  notes: string[];
  /** Files the command needs that init commits with program.md (added even where .gitignore names them). */
  commitFiles: string[];
  /** A limit the source had on experiments (pi-autoresearch's maxIterations): `autolab run -n`. */
  maxExperiments?: number;
}

/** program.md's text: the frontmatter, the preface if any, then the directions exactly as they were. */
export function programText(plan: MigrationPlan): string {
  return `---\n${renderFrontmatter(plan.settings, plan.source)}---\n${plan.preface ?? ""}${plan.directions}`;
}

/** YAML of the settings. Strings are JSON-quoted (valid YAML, and no file name can break the document). */
export function renderFrontmatter(s: ProgramSettings, source: MigrationSource): string {
  const q = (v: string) => JSON.stringify(v);
  const list = (xs: string[]) => `[${xs.map(q).join(", ")}]`;
  const lines = [
    `# Written by autolab init --from ${source} (docs/migrate.md). Review, then commit changes.`,
    `name: ${q(s.name)}`,
    `objective: { metric: ${q(s.metric)}, direction: ${s.direction} }`,
    "run:",
    `  command: ${q(s.command)}`,
    `  budget: ${duration(s.budgetMs)}`,
  ];
  if (s.graceMs !== undefined) lines.push(`  grace: ${duration(s.graceMs)}`);
  lines.push("files:", `  editable: ${list(s.editable)}`, `  protected: ${list(s.protected)}`);
  if (s.secondary.length) {
    lines.push(
      `# Secondary metrics (every trial records all it prints): ${s.secondary.join(", ")}. To make one a hard limit:`,
      `# constraints: [${q(`${s.secondary[0]} <= <limit>`)}]`,
    );
  }
  if (s.search.length) {
    lines.push(
      "# The built-in optimizer tunes these constants of the editable code (ranges guessed around",
      "# today's values: review them). For a coding agent that reads the directions below, as",
      `# ${source} used one: agent: claude (docs/agents.md).`,
      "agent: builtin",
      "search:",
    );
    for (const k of s.search) {
      const opts = [`low: ${num(k.low)}`, `high: ${num(k.high)}`];
      if (k.log) opts.push("log: true");
      if (k.int) opts.push("int: true");
      lines.push(`  ${k.name}: { ${opts.join(", ")} }`);
    }
  } else {
    lines.push(
      `# A coding agent reads the directions below, as ${source} used one (docs/agents.md lists the others).`,
      "agent: claude",
    );
  }
  for (const c of s.comments) lines.push(`# ${c.replace(/\r?\n/g, " ")}`);
  return `${lines.join("\n")}\n`;
}

/** A number YAML reads back as the same number (3e-4 stays a number; 1e21 stays finite). */
function num(v: number): string {
  const s = String(v);
  return /e/i.test(s) && !s.includes(".") ? s.replace(/e/i, ".0e") : s;
}

/** Milliseconds as program.md writes durations: 5m, 90s, 250ms. */
export function duration(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}

/**
 * The command to run a Python script as the source ran it: `uv run x.py` where uv is installed,
 * else `python3 x.py` (saying so in notes).
 */
export function pythonCommand(wanted: string, env: MigrationEnvironment, notes: string[]): string {
  const m = /^uv run (?:python3? )?(\S+\.py)(.*)$/.exec(wanted.trim());
  if (!m) return wanted;
  if (env.hasExecutable("uv")) return wanted;
  const fallback = `python3 ${m[1]}${m[2] ?? ""}`;
  notes.push(
    `uv is not installed here: the command is "${fallback}" instead of "${wanted}" (install uv and change run.command to use the project's environment).`,
  );
  return fallback;
}

/** Where a text names a number with a finite value; undefined otherwise. */
export function finite(token: string | undefined): number | undefined {
  if (token === undefined) return undefined;
  const t = token.trim();
  if (!/^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/.test(t)) return undefined;
  const v = Number(t);
  return Number.isFinite(v) ? v : undefined;
}
