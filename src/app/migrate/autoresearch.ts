import type { NewImportedResult } from "../../core/ledger.ts";
import type { Direction } from "../../core/types.ts";
import {
  type Checkout,
  finite,
  type Knob,
  type MigrationEnvironment,
  type MigrationPlan,
  pythonCommand,
} from "./plan.ts";

/**
 * karpathy/autoresearch and its forks (autoresearch-mlx, -macos, -win-rtx, …): prepare.py
 * (protected: data, tokenizer, evaluation, TIME_BUDGET), train.py (the one file the agent
 * edits), program.md (the agent's instructions: they become the research directions) and an
 * untracked results.tsv (commit, val_bpb, memory_gb, status, description; tab-separated).
 */

export const AUTORESEARCH_SOURCE = "autoresearch:results.tsv";

/** The files that make a checkout autoresearch's: what is missing of them (empty: recognized). */
export function autoresearchMissing(c: Checkout): string[] {
  return ["program.md", "train.py"].filter((f) => !c.exists(f));
}

export interface ParsedResults {
  /** The header's columns as written. */
  columns: string[];
  /** Columns holding numbers (every column but commit, status and description). */
  metricColumns: string[];
  /** The objective's column: `objective` if given and present, else the first metric column. */
  objective?: string;
  rows: NewImportedResult[];
  /** "results.tsv:LINE: why" for each line that was not imported. */
  problems: string[];
  /** True when the file separates columns by spaces instead of tabs (a fork, or an editor). */
  spaces: boolean;
}

const COMMIT = /^(?:commit|hash|sha|commit_hash|git_commit)$/i;
const STATUS = /^(?:status|decision|outcome|result)$/i;
const DESCRIPTION = /^(?:description|desc|notes?|idea|change|summary)$/i;

/**
 * Parses results.tsv: a header row naming the columns, then one row per experiment. Columns
 * are found by name (commit, status, description; every other column is a metric), so forks
 * that add or reorder columns or rename the metric read too. Rows that do not parse are
 * reported in `problems` and left out; the rest are imported. A crash row's 0.000000
 * placeholders are not values and are left out of its metrics.
 */
export function parseResultsTsv(text: string, file = "results.tsv", objective?: string): ParsedResults {
  const lines = text.replace(/^\uFEFF/, "").split(/\r?\n/);
  const problems: string[] = [];
  let h = 0;
  while (h < lines.length && ((lines[h] ?? "").trim() === "" || (lines[h] ?? "").trimStart().startsWith("#")))
    h++;
  const header = lines[h];
  const empty: ParsedResults = { columns: [], metricColumns: [], rows: [], problems, spaces: false };
  if (header === undefined) return empty;
  const spaces = !header.includes("\t");
  const split = (line: string) => (spaces ? line.trim().split(/\s+/) : line.split("\t").map((c) => c.trim()));
  const columns = split(header);
  const commitAt = columns.findIndex((c) => COMMIT.test(c));
  const statusAt = columns.findIndex((c) => STATUS.test(c));
  const descriptionAt = columns.findIndex((c) => DESCRIPTION.test(c));
  if (commitAt < 0 || statusAt < 0) {
    problems.push(
      `${file}:${h + 1}: the first line is not a header naming a commit and a status column (found: ${columns.slice(0, 6).join(", ")}); expected e.g. "commit<TAB>val_bpb<TAB>memory_gb<TAB>status<TAB>description".`,
    );
    return { ...empty, columns };
  }
  const metricColumns = columns.filter((_, i) => i !== commitAt && i !== statusAt && i !== descriptionAt);
  const target = objective && metricColumns.includes(objective) ? objective : metricColumns[0];
  // Every column up to the last one that is not the description must be there.
  const needed = Math.max(...columns.map((_, i) => (i === descriptionAt ? -1 : i))) + 1;
  const rows: NewImportedResult[] = [];
  for (let i = h + 1; i < lines.length; i++) {
    const line = lines[i] ?? "";
    if (line.trim() === "" || line.trimStart().startsWith("#")) continue;
    const where = `${file}:${i + 1}`;
    let cells = split(line);
    // The description is free text: a row with more cells than the header holds the rest of it
    // (spaces, or a stray tab in it), when it is the last column.
    if (descriptionAt === columns.length - 1 && cells.length > columns.length) {
      const rest = spaces
        ? line.trim().split(/\s+/).slice(descriptionAt).join(" ")
        : cells.slice(descriptionAt).join(" ");
      cells = [...cells.slice(0, descriptionAt), rest];
    }
    if (cells.length < needed) {
      problems.push(`${where}: ${cells.length} field(s), the header has ${columns.length}`);
      continue;
    }
    const status = (cells[statusAt] ?? "").toLowerCase();
    if (!/^[a-z][a-z_-]*$/.test(status)) {
      problems.push(
        `${where}: status ${JSON.stringify(cells[statusAt] ?? "")} is not a word such as keep, discard or crash`,
      );
      continue;
    }
    const crash = status === "crash";
    const metrics: Record<string, number> = {};
    let bad: string | undefined;
    for (const name of metricColumns) {
      const cell = cells[columns.indexOf(name)];
      const v = finite(cell);
      if (v === undefined) {
        if (name === target && !crash && cell !== undefined && cell !== "" && cell !== "-")
          bad = `${name} ${JSON.stringify(cell)} is not a number`;
        continue;
      }
      if (crash && v === 0) continue;
      metrics[name] = v;
    }
    if (bad) {
      problems.push(`${where}: ${bad}`);
      continue;
    }
    rows.push({
      source: AUTORESEARCH_SOURCE,
      seq: rows.length + 1,
      commit: cells[commitAt] ?? "",
      metrics,
      status,
      description: descriptionAt >= 0 ? (cells[descriptionAt] ?? "") : "",
    });
  }
  return { columns, metricColumns, ...(target ? { objective: target } : {}), rows, problems, spaces };
}

/** "get the lowest val_bpb", "the highest accuracy": the objective program.md names, if any. */
export function objectiveFromProgram(text: string): { metric: string; direction: Direction } | undefined {
  const m = /\b(lowest|highest|minimi[sz]e|maximi[sz]e|lower|higher)\s+`?([A-Za-z_][A-Za-z0-9_.]*)`?/i.exec(
    text,
  );
  if (!m) return undefined;
  const word = (m[1] as string).toLowerCase();
  const direction: Direction =
    word === "lowest" || word.startsWith("minimi") || word === "lower" ? "minimize" : "maximize";
  return { metric: (m[2] as string).replace(/\.+$/, ""), direction };
}

/** The command program.md launches the editable script with (`uv run train.py`), if it names one. */
export function commandFromProgram(text: string, script = "train.py"): string | undefined {
  const esc = script.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const m = new RegExp(String.raw`\x60((?:uv run|python3?)\s+(?:\S+/)?${esc})(?=[\s\x60])`).exec(text);
  return m?.[1];
}

/** Seconds of training time: prepare.py's `TIME_BUDGET = 300`, or program.md's "time budget of 5 minutes". */
export function budgetSeconds(
  prepare: string | undefined,
  program: string,
): { s: number; from: string } | undefined {
  const t = prepare && /^TIME_BUDGET\s*=\s*(\d+(?:\.\d+)?)/m.exec(prepare);
  if (t) return { s: Number(t[1]), from: `prepare.py's TIME_BUDGET = ${t[1]}` };
  const p = /time budget of\s*\**\s*(\d+(?:\.\d+)?)\s*(minutes?|min|seconds?|s)\b/i.exec(program);
  if (p) {
    const s = Number(p[1]) * (/^m/i.test(p[2] as string) ? 60 : 1);
    return { s, from: `program.md's "time budget of ${p[1]} ${p[2]}"` };
  }
  return undefined;
}

/** program.md's "If a run exceeds 10 minutes, kill it": when the harness should kill a trial. */
export function killAfterSeconds(program: string): number | undefined {
  const m = /exceeds\s+(\d+(?:\.\d+)?)\s*(minutes?|min|seconds?|s)\b/i.exec(program);
  return m ? Number(m[1]) * (/^m/i.test(m[2] as string) ? 60 : 1) : undefined;
}

/** Names of constants that are no hyperparameters (hardware peaks, seeds, the time budget). */
const NOT_A_KNOB = /FLOPS|SEED|BUDGET|VOCAB|EVAL|SHARD|CACHE|DEVICE_ID|PORT|VERBOSE|DEBUG/;

/**
 * Knobs for the built-in optimizer: train.py's top-level `NAME = <plain number>` constants
 * (DEPTH = 8, MATRIX_LR = 0.04), each given a range around today's value — integers from half
 * to double, rates a factor of four either way on a log scale, ratios and fractions 0 to 1.
 * Zeros, ones, negatives and expressions (2**19) are left alone.
 */
export function knobsFromScript(text: string): Knob[] {
  const knobs: Knob[] = [];
  for (const m of text.matchAll(
    /^([A-Z][A-Z0-9_]*)\s*=\s*([-+]?\d[\d_]*(?:\.\d*)?(?:[eE][-+]?\d+)?)\s*(?:#.*)?$/gm,
  )) {
    const name = m[1] as string;
    const literal = (m[2] as string).replaceAll("_", "");
    const v = Number(literal);
    if (NOT_A_KNOB.test(name) || !Number.isFinite(v) || v <= 0 || v === 1) continue;
    if (knobs.some((k) => k.name === name)) continue;
    const isInt = /^\d+$/.test(literal);
    if (isInt) {
      knobs.push({ name, low: Math.max(1, Math.floor(v / 2)), high: v * 2, log: true, int: true });
    } else if (v < 1 && /RATIO|FRAC|DROPOUT|BETA|MOMENTUM/.test(name)) {
      knobs.push({ name, low: 0, high: 1, log: false, int: false });
    } else {
      knobs.push({ name, low: round4(v / 4), high: round4(v * 4), log: true, int: false });
    }
  }
  return knobs;
}

const round4 = (v: number) => Number(v.toPrecision(4));

/**
 * Lines of upstream's program.md that drive autoresearch's own loop (make the branch, commit,
 * reset, log to results.tsv, never stop). Under autolab the harness does each of these; a
 * researcher that follows them fights the harness.
 */
const LOOP_LINE =
  /LOOP FOREVER|NEVER STOP|\bgit (reset|commit|checkout|branch|switch)\b|\b(create|make) (a |the )?(fresh |new )?branch\b|results\.tsv|\bkill it\b|run\.log/i;

export function loopInstructions(program: string): string[] {
  return program
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== "" && LOOP_LINE.test(l));
}

/** The note above upstream's text: what the harness does instead, and the lines it replaces. */
export function loopPreface(lines: string[]): string {
  const quoted = lines.map((l) => `> - ${l.length > 160 ? `${l.slice(0, 157)}…` : l}`).join("\n");
  return [
    "> **autolab runs the experiment loop** (this note was added by `autolab init --from autoresearch`;",
    "> the text after it is upstream's program.md, unchanged). The harness makes the branch, runs and",
    "> times each experiment, scores it, keeps or reverts it with git and records it in its notebook.",
    "> Your job is one change per experiment, to the editable files. These lines below belong to",
    "> autoresearch's own loop and are **not the researcher's job** here:",
    quoted,
    "",
    "",
  ].join("\n");
}

/**
 * The migration of an autoresearch checkout: program.md's text becomes the directions (the file
 * gains frontmatter above it), results.tsv the imported history.
 */
export function planAutoresearch(c: Checkout, env: MigrationEnvironment): MigrationPlan {
  const program = c.read("program.md") ?? "";
  const prepare = c.read("prepare.py");
  const train = c.read("train.py") ?? "";
  const notes: string[] = [];
  const comments: string[] = [];

  const stated = objectiveFromProgram(program);
  const tsv = c.read("results.tsv");
  const parsed = tsv === undefined ? undefined : parseResultsTsv(tsv, "results.tsv", stated?.metric);
  let metric = stated?.metric ?? parsed?.objective ?? "val_bpb";
  if (parsed?.objective && parsed.objective !== metric) metric = parsed.objective;
  const direction: Direction = stated?.metric === metric ? stated.direction : "minimize";
  if (!stated) notes.push(`program.md names no "lowest <metric>": the objective is to minimize ${metric}.`);
  comments.push(
    `objective: ${stated ? `program.md asks for the ${stated.direction === "minimize" ? "lowest" : "highest"} ${stated.metric}` : "assumed"}${parsed?.objective ? `; results.tsv's column ${parsed.objective}` : ""}.`,
  );

  const wanted = commandFromProgram(program) ?? "uv run train.py";
  const command = pythonCommand(wanted, env, notes);
  comments.push(
    `command: ${commandFromProgram(program) ? "as program.md launches train.py" : "autoresearch's default"}: ${wanted}.`,
  );

  const budget = budgetSeconds(prepare, program);
  const budgetMs = Math.round((budget?.s ?? 300) * 1000);
  if (!budget) notes.push("No TIME_BUDGET in prepare.py nor a time budget in program.md: assumed 5 minutes.");
  const killAt = killAfterSeconds(program);
  // Startup, compilation and the evaluation come on top of the training time: the harness kills
  // at budget + grace, where program.md says to give up on a run (else twice the budget).
  const graceMs = killAt !== undefined && killAt * 1000 > budgetMs ? killAt * 1000 - budgetMs : budgetMs;
  comments.push(
    `budget: ${budget?.from ?? "assumed"} (training time); grace: ${killAt !== undefined ? `program.md gives up on a run after ${killAt / 60} minutes` : "as long again, for startup and evaluation"}.`,
  );

  const secondary = [
    ...(parsed?.metricColumns ?? []).filter((m) => m !== metric),
    ...(/peak_vram_mb/.test(train) ? ["peak_vram_mb"] : []),
  ];
  const protectedFiles = ["prepare.py", "pyproject.toml", "uv.lock"].filter((f) => c.exists(f));

  // The metric is train.py's own print: nothing protected recomputes it (upstream has no
  // separate evaluator), and upstream's data step is a manual one-off autolab does not run.
  notes.push(
    `${metric} is self-reported: train.py prints it and nothing protected recomputes it. For a score the researcher cannot fake, add a protected run.evaluate that scores the checkpoint (docs/program.md).`,
  );
  if (prepare !== undefined)
    notes.push(
      "prepare.py (upstream's data and tokenizer step) is not run by autolab: run it once before `autolab run` (uv run prepare.py), or name it as run.setup in program.md.",
    );
  const loop = loopInstructions(program);
  if (loop.length)
    notes.push(
      `${loop.length} line(s) of program.md drive autoresearch's own loop (branch, commit, reset, log, never stop): a note above them tells the researcher they are the harness's job.`,
    );

  if (tsv === undefined) notes.push("No results.tsv: no prior history to import.");
  else if (parsed?.spaces)
    notes.push(
      "results.tsv separates columns with spaces, not tabs: each description was read as the rest of its line.",
    );

  return {
    source: "autoresearch",
    settings: {
      name: c.name,
      metric,
      direction,
      command,
      budgetMs,
      graceMs,
      editable: ["train.py"],
      protected: protectedFiles,
      secondary: [...new Set(secondary)],
      search: knobsFromScript(train),
      comments,
    },
    directions: program,
    ...(loop.length ? { preface: loopPreface(loop) } : {}),
    directionsFrom: "program.md",
    ...(tsv !== undefined ? { historyFrom: "results.tsv" } : {}),
    history: parsed?.rows ?? [],
    problems: parsed?.problems ?? [],
    notes,
    commitFiles: [],
  };
}
