import { AutolabError } from "../../core/errors.ts";
import { lastResult, objectiveOf } from "../../core/experiments.ts";
import type { ExperimentRecord, NewImportedResult, RunRecord } from "../../core/ledger.ts";
import type { Direction } from "../../core/types.ts";
import type { Checkout, MigrationPlan } from "./plan.ts";

/**
 * davebcn87/pi-autoresearch: session files under `.auto/` (prompt.md, measure.sh, checks.sh,
 * config.json, log.jsonl), or the legacy flat names (autoresearch.md, autoresearch.sh,
 * autoresearch.checks.sh, autoresearch.config.json, autoresearch.jsonl). As pi-autoresearch
 * itself decides (extensions/pi-autoresearch/paths.ts): any `.auto/` file means the current
 * layout for all of them; the legacy names count only when `.auto/` has none.
 */

type Kind = "log" | "prompt" | "checks" | "measure" | "config";

const NAMES: Record<Kind, { current: string; legacy: string }> = {
  log: { current: ".auto/log.jsonl", legacy: "autoresearch.jsonl" },
  prompt: { current: ".auto/prompt.md", legacy: "autoresearch.md" },
  checks: { current: ".auto/checks.sh", legacy: "autoresearch.checks.sh" },
  measure: { current: ".auto/measure.sh", legacy: "autoresearch.sh" },
  config: { current: ".auto/config.json", legacy: "autoresearch.config.json" },
};

export type PiLayout = "current" | "legacy";

/** Which layout the checkout has, or undefined when it has neither. */
export function piLayout(c: Checkout): PiLayout | undefined {
  const kinds = Object.keys(NAMES) as Kind[];
  if (kinds.some((k) => c.exists(NAMES[k].current)) || c.exists(".auto/hooks")) return "current";
  if (kinds.some((k) => c.exists(NAMES[k].legacy))) return "legacy";
  return undefined;
}

/** The session file of a kind in the checkout's layout. */
export function piPath(layout: PiLayout, kind: Kind): string {
  return NAMES[kind][layout];
}

interface SegmentConfig {
  name?: string;
  metricName?: string;
  metricUnit?: string;
  direction?: Direction;
}

export interface ParsedLog {
  /** One config per segment (a config line starts a segment once the previous one has runs). */
  segments: SegmentConfig[];
  /** Runs of the segments whose objective is the last segment's. */
  rows: NewImportedResult[];
  /** The objective of the last segment (absent: the log has no config line). */
  metric?: string;
  direction?: Direction;
  /** "file:LINE: why" for lines that could not be read. */
  problems: string[];
  /** What was left out on purpose (other segments' objectives). */
  notes: string[];
  /** Metric names the imported runs carry besides the objective. */
  secondary: string[];
}

const STATUSES = new Set(["keep", "discard", "crash", "checks_failed"]);

const isObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === "object" && !Array.isArray(v);

/**
 * Parses log.jsonl as pi-autoresearch writes it: `{"type":"config", metricName, bestDirection, …}`
 * headers, run lines `{"run", commit, metric, metrics, status, description, segment, …}`, and
 * other lines (`{"type":"hook"}`) that are not results. With several segments, the runs of
 * segments measuring the last segment's metric are imported; the others are named in `notes`.
 */
export function parsePiLog(
  text: string,
  file = ".auto/log.jsonl",
  /** The objective where no config line names one (prompt.md's Primary metric). */
  fallbackMetric = "metric",
): ParsedLog {
  const source = `pi-autoresearch:${file}`;
  const problems: string[] = [];
  const segments: SegmentConfig[] = [{}];
  const runs: { entry: Record<string, unknown>; segment: number; line: number }[] = [];
  let segmentHasRuns = false;
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = (lines[i] ?? "").trim();
    if (!line) continue;
    let entry: unknown;
    try {
      entry = JSON.parse(line);
    } catch {
      problems.push(`${file}:${i + 1}: not a JSON line`);
      continue;
    }
    if (!isObject(entry)) {
      problems.push(`${file}:${i + 1}: not a JSON object`);
      continue;
    }
    if (entry.type === "config") {
      const config: SegmentConfig = {};
      if (typeof entry.name === "string") config.name = entry.name;
      if (typeof entry.metricName === "string") config.metricName = entry.metricName;
      if (typeof entry.metricUnit === "string") config.metricUnit = entry.metricUnit;
      config.direction = entry.bestDirection === "higher" ? "maximize" : "minimize";
      if (segmentHasRuns) segments.push(config);
      else segments[segments.length - 1] = config;
      segmentHasRuns = false;
      continue;
    }
    if (typeof entry.run !== "number") continue; // hooks and anything newer: not results
    runs.push({ entry, segment: segments.length - 1, line: i + 1 });
    segmentHasRuns = true;
  }
  const last = segments[segments.length - 1] as SegmentConfig;
  const metric = last.metricName;
  const nameOf = (s: number) => segments[s]?.metricName ?? fallbackMetric;
  const name = metric ?? fallbackMetric;
  const wanted = (s: number) => nameOf(s) === name;
  const notes: string[] = [];
  if (segments.length > 1) {
    const kept = segments.map((_, s) => s).filter(wanted);
    const left = segments.map((_, s) => s).filter((s) => !wanted(s));
    notes.push(
      `${file} has ${segments.length} segments (each config line starts one): imported segment${kept.length > 1 ? "s" : ""} ${kept.join(", ")} (${name})` +
        (left.length
          ? `; left out segment${left.length > 1 ? "s" : ""} ${left.map((s) => `${s} (${nameOf(s)})`).join(", ")}: another objective, not comparable.`
          : "."),
    );
  }
  const rows: NewImportedResult[] = [];
  const secondary = new Set<string>();
  for (const { entry, segment, line } of runs) {
    if (!wanted(segment)) continue;
    const where = `${file}:${line}`;
    const status = typeof entry.status === "string" ? entry.status : "keep";
    if (!STATUSES.has(status)) {
      problems.push(
        `${where}: status ${JSON.stringify(status)} is not keep, discard, crash or checks_failed`,
      );
      continue;
    }
    const failed = status === "crash" || status === "checks_failed";
    const metrics: Record<string, number> = {};
    const m = entry.metric;
    if (typeof m === "number" && Number.isFinite(m) && !(failed && m === 0)) metrics[name] = m;
    else if (!failed && m !== undefined && m !== null) {
      problems.push(`${where}: metric ${JSON.stringify(m)} is not a finite number`);
      continue;
    }
    if (isObject(entry.metrics)) {
      for (const [k, v] of Object.entries(entry.metrics)) {
        if (k === name || typeof v !== "number" || !Number.isFinite(v)) continue;
        if (["__proto__", "constructor", "prototype"].includes(k)) continue;
        metrics[k] = v;
        secondary.add(k);
      }
    }
    rows.push({
      source,
      seq: rows.length + 1,
      commit: typeof entry.commit === "string" ? entry.commit : "",
      metrics,
      status,
      description: typeof entry.description === "string" ? entry.description : "",
      segment,
    });
  }
  return {
    segments,
    rows,
    ...(metric !== undefined ? { metric } : {}),
    ...(last.direction ? { direction: last.direction } : {}),
    problems,
    notes,
    secondary: [...secondary],
  };
}

/** `- **Primary**: total_ms (ms, lower is better)` in prompt.md, as autoresearch-create writes it. */
export function objectiveFromPrompt(text: string): { metric: string; direction: Direction } | undefined {
  const m = /\*\*Primary\*\*:?\s*`?([\p{L}_][\p{L}\p{N}_.µ-]*)`?\s*\(([^)]*)\)/u.exec(text);
  if (!m) return undefined;
  return { metric: m[1] as string, direction: /higher/i.test(m[2] as string) ? "maximize" : "minimize" };
}

/** The text under a `## <title>` heading, up to the next heading of that level or higher. */
export function section(text: string, title: RegExp): string {
  const lines = text.split(/\r?\n/);
  const start = lines.findIndex((l) => /^#{1,3}\s/.test(l) && title.test(l.replace(/^#+\s*/, "")));
  if (start < 0) return "";
  const out: string[] = [];
  for (const l of lines.slice(start + 1)) {
    if (/^#{1,3}\s/.test(l)) break;
    out.push(l);
  }
  return out.join("\n");
}

/** Paths a section names (in backticks, or leading a list item) that exist in the checkout. */
export function pathsIn(text: string, c: Checkout): string[] {
  const found: string[] = [];
  const candidates = [
    ...[...text.matchAll(/`([^`\s]+)`/g)].map((m) => m[1] as string),
    ...[...text.matchAll(/^\s*[-*]\s+([^\s:`—–(]+)/gm)].map((m) => m[1] as string),
  ];
  for (const raw of candidates) {
    const p = raw.replace(/^\.\//, "").replace(/[.,;:]+$/, "");
    if (!p || p.startsWith("/") || p.split("/").includes("..")) continue;
    if (p.startsWith(".auto/") || p.startsWith("autoresearch.")) continue;
    if (c.exists(p) && !found.includes(p)) found.push(p);
  }
  return found;
}

/**
 * Paths prompt.md names anywhere, in prose too ("we optimize src/sort.ts and bench.ts"): tokens
 * shaped like a relative file path that exist in the checkout, session files left out.
 */
export function pathsInProse(text: string, c: Checkout): string[] {
  const tokens = [...text.matchAll(/(?:^|[\s(`'"])((?:\.\/)?[\w@+-][\w@+./-]*\.[A-Za-z0-9]+)/g)].map(
    (m) => m[1] as string,
  );
  return pathsIn(tokens.map((t) => `\`${t}\``).join(" "), c);
}

/** The commits of the kept runs of log.jsonl (what the session changed and kept). */
export function keptCommits(c: Checkout): string[] {
  const layout = piLayout(c);
  const log = layout ? c.read(piPath(layout, "log")) : undefined;
  if (log === undefined) return [];
  return parsePiLog(log)
    .rows.filter((r) => r.status === "keep" && /^[0-9a-f]{7,40}$/i.test(r.commit))
    .map((r) => r.commit);
}

/** What the planner may learn from git beyond the files (init reads it; tests pass it). */
export interface PiHistory {
  /** Files the kept runs' commits changed (`git show --name-only`), for "Files in Scope" left unsaid. */
  keptFiles?: string[];
}

/** pi-autoresearch's run_experiment kills a command after 600 s unless told otherwise. */
const PI_TIMEOUT_MS = 600_000;

/**
 * The migration of a pi-autoresearch session: prompt.md becomes the directions of a new
 * program.md, measure.sh (then checks.sh) the command, config.json's maxIterations a limit on
 * experiments, log.jsonl the imported history.
 */
export function planPiAutoresearch(c: Checkout, history: PiHistory = {}): MigrationPlan {
  const layout = piLayout(c);
  if (!layout) throw new Error("planPiAutoresearch: not a pi-autoresearch checkout"); // init checks first
  const path = (k: Kind) => piPath(layout, k);
  const notes: string[] = [];
  const comments: string[] = [];
  const prompt = c.read(path("prompt"));
  const measure = c.read(path("measure"));
  if (prompt === undefined || measure === undefined) {
    const missing = [path("prompt"), path("measure")].filter((p) => c.read(p) === undefined);
    throw new AutolabError(
      "IMPORT_UNRECOGNIZED",
      `this pi-autoresearch session has no ${missing.join(" and no ")}: autolab needs the session document (the research directions) and the benchmark script (the command).`,
      `Found: ${
        (Object.keys(NAMES) as Kind[])
          .map(path)
          .filter((p) => c.exists(p))
          .join(", ") || "nothing else"
      }. Write the missing file${missing.length > 1 ? "s" : ""} as /skill:autoresearch-create would, or start with plain \`autolab init\`.`,
    );
  }
  if (layout === "legacy")
    notes.push("Legacy flat autoresearch.* session files read (pi-autoresearch now keeps them in .auto/).");

  const stated = objectiveFromPrompt(prompt);
  const logText = c.read(path("log"));
  const log = logText === undefined ? undefined : parsePiLog(logText, path("log"), stated?.metric);
  if (log) notes.push(...log.notes);
  else notes.push(`No ${path("log")}: no prior history to import.`);
  const metric = log?.metric ?? stated?.metric;
  if (!metric) {
    throw new AutolabError(
      "IMPORT_UNRECOGNIZED",
      `neither ${path("log")} (a config line with metricName) nor ${path("prompt")} ("**Primary**: <metric> (…, lower is better)") names the metric to optimize.`,
      `Add the line under "## Metrics" in ${path("prompt")}, or start with plain \`autolab init\`.`,
    );
  }
  const direction: Direction = (log?.metric ? log.direction : stated?.direction) ?? "minimize";
  comments.push(
    `objective: ${log?.metric ? `the last config line of ${path("log")}` : `${path("prompt")}'s Primary metric`}.`,
  );

  const checks = c.read(path("checks"));
  const command = `bash ${path("measure")}${checks !== undefined ? ` && bash ${path("checks")}` : ""}`;
  comments.push(
    `command: ${path("measure")} prints METRIC name=value lines${checks !== undefined ? `; ${path("checks")} runs after it and a failure fails the trial (its time counts toward the budget)` : ""}.`,
  );

  const offLimitsNamed = pathsIn(section(prompt, /off limits/i), c);
  let editable = pathsIn(section(prompt, /files in scope/i), c);
  if (!editable.length) {
    // No "## Files in Scope" list: the files the session's kept runs changed (git knows), those
    // prompt.md names in prose, or both where both say something (the intersection is surest).
    const session = new Set(Object.keys(NAMES).map((k) => path(k as Kind)));
    const usable = (p: string) => !session.has(p) && !offLimitsNamed.includes(p) && c.exists(p);
    const kept = (history.keptFiles ?? []).filter(usable);
    const prose = pathsInProse(prompt, c).filter(usable);
    const both = kept.filter((p) => prose.includes(p));
    editable = both.length ? both : kept.length ? kept : prose;
    if (editable.length)
      notes.push(
        `${path("prompt")} has no "## Files in Scope" list: editable files are ${editable.join(", ")}, ${both.length ? "named in its text and changed by the kept runs" : kept.length ? "the files the kept runs' commits changed" : "the files its text names"}. Review files.editable in program.md.`,
      );
  }
  if (!editable.length) {
    throw new AutolabError(
      "IMPORT_UNRECOGNIZED",
      `${path("prompt")} names no existing file under "## Files in Scope", nor in its text, and no kept run's commit changed one: autolab needs to know which files the researcher may edit.`,
      `List them there (e.g. "- \`src/sort.ts\` — the sort"), or start with plain \`autolab init\`.`,
    );
  }
  const offLimits = offLimitsNamed.filter((p) => !editable.includes(p));
  if (c.exists(".auto/hooks"))
    notes.push(
      ".auto/hooks/ is not carried over: autolab runs its own hooks around each experiment (program.md's hooks:, docs/program.md). Port what yours do there.",
    );
  const scripts = [path("measure"), ...(checks !== undefined ? [path("checks")] : [])];

  const config = c.read(path("config"));
  let maxExperiments: number | undefined;
  if (config !== undefined) {
    try {
      const parsed = JSON.parse(config) as unknown;
      if (isObject(parsed)) {
        const mi = parsed.maxIterations;
        if (typeof mi === "number" && mi > 0) {
          maxExperiments = Math.floor(mi);
          comments.push(
            `${path("config")} allowed ${maxExperiments} iterations: autolab run -n ${maxExperiments}.`,
          );
        }
        if (typeof parsed.workingDir === "string" && parsed.workingDir !== "." && parsed.workingDir !== "")
          notes.push(
            `${path("config")} sets workingDir ${JSON.stringify(parsed.workingDir)}: the experiments ran there; run autolab init --from pi-autoresearch in that directory if it is another one.`,
          );
      }
    } catch {
      notes.push(`${path("config")} is not valid JSON: its limits were not read.`);
    }
  }
  comments.push("budget: pi-autoresearch's run_experiment timeout (600 s by default).");

  return {
    source: "pi-autoresearch",
    settings: {
      name: log?.segments.at(-1)?.name ?? c.name,
      metric,
      direction,
      command,
      budgetMs: PI_TIMEOUT_MS,
      editable,
      protected: [...scripts, ...offLimits],
      secondary: log?.secondary ?? [],
      search: [],
      comments,
    },
    directions: prompt,
    directionsFrom: path("prompt"),
    ...(logText !== undefined ? { historyFrom: path("log") } : {}),
    history: log?.rows ?? [],
    problems: log?.problems ?? [],
    notes,
    commitFiles: scripts,
    ...(maxExperiments !== undefined ? { maxExperiments } : {}),
  };
}

/**
 * A run as pi-autoresearch's log.jsonl (`autolab export --format log-jsonl`): a config line,
 * then one run line per decided experiment — keep, discard and crash as they are, a rejection
 * (a constraint, the scope, tampering) as checks_failed: it was measured and blocked from
 * keep. Crashes carry metric 0, as pi-autoresearch writes them. Holdout metrics stay out: the
 * file is meant for another tool's agent to read.
 */
export function piLogJsonl(
  run: Pick<RunRecord, "programName" | "metric" | "direction">,
  exps: readonly ExperimentRecord[],
  holdout: readonly string[] = [],
  /** Appended to an existing log: its next run number and segment (piLogContinuation). */
  start: { run: number; segment: number } = { run: 0, segment: 0 },
): string {
  const lines = [
    JSON.stringify({
      type: "config",
      name: run.programName,
      metricName: run.metric,
      metricUnit: "",
      bestDirection: run.direction === "maximize" ? "higher" : "lower",
    }),
  ];
  let i = start.run;
  for (const e of exps) {
    // A researcher that failed before proposing ran nothing: pi-autoresearch logs runs only.
    if (!e.decision || (e.decision.action === "crash" && e.trials.length === 0)) continue;
    const action = e.decision.action;
    const status = action === "reject" ? "checks_failed" : action;
    const m = objectiveOf(e, run.metric);
    const metrics: Record<string, number> = {};
    for (const [k, v] of Object.entries(lastResult(e)?.metrics ?? {})) {
      if (k !== run.metric && Number.isFinite(v) && !holdout.includes(k)) metrics[k] = v;
    }
    lines.push(
      JSON.stringify({
        run: i++,
        commit: e.commit.slice(0, 7),
        metric: status === "crash" || m === undefined ? 0 : m,
        metrics,
        status,
        description: e.n === 0 ? "baseline" : e.hypothesis,
        timestamp: Date.parse(e.decision.decidedAt),
        segment: start.segment,
        confidence: null,
      }),
    );
  }
  return `${lines.join("\n")}\n`;
}

/**
 * Where a segment appended to an existing log.jsonl continues: the run number after the log's
 * last, and the segment after its last (by the lines' `segment` fields, else by its config lines).
 * The user's lines (hooks, other segments) are never rewritten: the addition starts with its own
 * config line, which pi-autoresearch reads as a new segment.
 */
export function piLogContinuation(text: string): { run: number; segment: number } {
  let run = 0;
  let segment = 0;
  let configs = 0;
  for (const line of text.split("\n")) {
    let entry: unknown;
    try {
      entry = JSON.parse(line);
    } catch {
      continue;
    }
    if (!isObject(entry)) continue;
    if (entry.type === "config") configs++;
    if (typeof entry.run === "number" && Number.isFinite(entry.run)) run = Math.max(run, entry.run + 1);
    if (typeof entry.segment === "number" && Number.isFinite(entry.segment))
      segment = Math.max(segment, entry.segment + 1);
  }
  return { run, segment: Math.max(segment, configs) };
}
