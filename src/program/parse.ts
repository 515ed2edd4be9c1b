/**
 * program.md → Program. The frontmatter is the contract and is validated strictly: unknown
 * keys are errors (a misspelt `budgett` must not silently fall back to a default), and every
 * problem is reported at once, each with its file:line, field path and a valid example.
 */
import { readFileSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { AutolabError } from "../core/errors.ts";
import { DEFAULT_FRONTIER, type FrontierConfig } from "../core/frontier.ts";
import type { AgentConfig, Direction, ObjectiveMetric, Program, SlurmConfig } from "../core/types.ts";
import { crossFieldIssues, type ProgramIssue } from "./checks.ts";
import { parseFrontmatterYaml, splitFrontmatter } from "./frontmatter.ts";
import { locateLine } from "./locate.ts";
import { exampleFor, fromZod, showPath } from "./report.ts";
import { loadRubricEvaluation, rubricIssues } from "./rubric-evaluate.ts";
import { type Frontmatter, frontmatterSchema, MINIMAL_PROGRAM } from "./schema.ts";

const DOCS_HINT = "every field is described in docs/program.md";
const MIN_GRACE_MS = 2_000;
const MAX_GRACE_MS = 30_000;
const DEFAULT_SETUP_TIMEOUT_MS = 10 * 60_000;
/** Discards in a row before the advisor is asked, when program.md's `advisor:` names no trigger count. */
export const DEFAULT_ADVISOR_AFTER_DISCARDS = 8;
const DEFAULT_EVALUATE_TIMEOUT_MS = 2 * 60_000;

/** Default grace: 10% of the budget, at least 2s (process trees need time to die), at most 30s. */
export function defaultGraceMs(budgetMs: number): number {
  return Math.min(MAX_GRACE_MS, Math.max(MIN_GRACE_MS, Math.round(budgetMs * 0.1)));
}

function indent(text: string, by: string): string {
  return text.replace(/^/gm, by);
}

interface LocatedIssue extends ProgramIssue {
  line: number;
}

function invalid(file: string, issues: LocatedIssue[]): AutolabError {
  const sorted = [...issues].sort((a, b) => a.line - b.line);
  const count = sorted.length === 1 ? "1 problem" : `${sorted.length} problems`;
  const blocks = sorted.map((issue) => {
    const head = `  ${file}:${issue.line}  ${showPath(issue.path)}: ${issue.message}`;
    const example = issue.example ?? exampleFor(issue.path);
    return example === undefined ? head : `${head}\n    example:\n${indent(example, "      ")}`;
  });
  return new AutolabError(
    "PROGRAM_INVALID",
    `${file}: invalid program (${count}):\n${blocks.join("\n")}`,
    DOCS_HINT,
  );
}

/**
 * Parses and validates the text of a program.md. `path` names the file in messages (as
 * given) and becomes Program.path (absolute). Throws AutolabError PROGRAM_INVALID.
 */
export function parseProgram(text: string, path: string): Program {
  const split = splitFrontmatter(text);
  if (!split.ok) {
    const what =
      split.problem === "missing"
        ? "has no frontmatter: it must start with a line `---`, then the YAML contract, then a line `---`, then the research directions"
        : `has no closing \`---\` after the frontmatter opened on line ${split.line}`;
    throw new AutolabError(
      "PROGRAM_INVALID",
      `${path}:${split.line}  ${what}. A minimal program.md:\n\n${MINIMAL_PROGRAM}`,
      DOCS_HINT,
    );
  }

  const { doc, lineCounter, toFileLine, raw } = parseFrontmatterYaml(split, path, "PROGRAM_INVALID");
  if (raw && typeof raw === "object") {
    // `slots: 4` and `org: org/` are shorthands for the maps.
    const r = raw as { slots?: unknown; org?: unknown };
    if (typeof r.slots === "number") r.slots = { count: r.slots };
    if (typeof r.org === "string") r.org = { roles: r.org };
    // `frontier: top_k` is shorthand for `frontier: { strategy: top_k }`.
    const f = raw as { frontier?: unknown };
    if (typeof f.frontier === "string") f.frontier = { strategy: f.frontier };
    // `ladder: [30s, 2m]` is shorthand for `ladder: { budgets: [30s, 2m] }`.
    const l = raw as { ladder?: unknown };
    if (Array.isArray(l.ladder)) l.ladder = { budgets: l.ladder };
    // `advisor: claude` is shorthand for `advisor: { agent: { backend: claude } }`; its agent
    // takes the `agent:` shorthand too.
    const a = raw as { advisor?: unknown };
    if (typeof a.advisor === "string") a.advisor = { agent: a.advisor };
    const adv = a.advisor as { agent?: unknown } | undefined;
    if (adv && typeof adv === "object" && typeof adv.agent === "string") adv.agent = { backend: adv.agent };
    // `sandbox: off` / `sandbox: on` are shorthands for `sandbox: { enabled: false | true }`.
    const sb = raw as { sandbox?: unknown };
    if (sb.sandbox === false || sb.sandbox === "off") sb.sandbox = { enabled: false };
    else if (sb.sandbox === true || sb.sandbox === "on") sb.sandbox = { enabled: true };
    // `executor: { slurm: }` (nothing under it) means the defaults: `slurm: {}`.
    const ex = (raw as { executor?: unknown }).executor;
    if (ex && typeof ex === "object" && "slurm" in ex && (ex as { slurm: unknown }).slurm === null)
      (ex as { slurm: unknown }).slurm = {};
  }
  const parsed = frontmatterSchema.safeParse(raw);
  const issues = [
    ...(parsed.success ? [] : fromZod(parsed.error.issues, raw)),
    ...crossFieldIssues(raw),
    ...rubricIssues(raw, dirname(resolve(path))),
  ];
  if (!parsed.success || issues.length > 0) {
    const located = issues.map((issue) => ({
      ...issue,
      line: toFileLine(locateLine(doc, lineCounter, issue.path)),
    }));
    throw invalid(path, located);
  }

  const fm = parsed.data;
  const budgetMs = fm.run.budget;
  const ev = fm.run.evaluate;
  const evaluate = typeof ev === "string" ? ev : ev?.command;
  const rubric = typeof ev === "object" ? loadRubricEvaluation(ev, dirname(resolve(path))) : undefined;
  return {
    path: resolve(path),
    name: fm.name,
    ...toObjectives(fm.objective),
    run: {
      ...(fm.run.setup !== undefined && { setup: fm.run.setup }),
      command: fm.run.command,
      ...(evaluate !== undefined && { evaluate }),
      ...(rubric && { rubric }),
      budgetMs,
      graceMs: fm.run.grace ?? defaultGraceMs(budgetMs),
      setupTimeoutMs: fm.run.setup_timeout ?? DEFAULT_SETUP_TIMEOUT_MS,
      evaluateTimeoutMs: fm.run.evaluate_timeout ?? DEFAULT_EVALUATE_TIMEOUT_MS,
    },
    files: { editable: fm.files.editable, protected: fm.files.protected, holdout: fm.files.holdout },
    outputs: fm.outputs,
    sandbox: {
      enabled: fm.sandbox.enabled,
      required: fm.sandbox.required,
      network: fm.sandbox.network,
      caches: fm.sandbox.caches,
      env: fm.sandbox.env,
      limits: {
        ...(fm.sandbox.limits.memory !== undefined && { memoryMb: fm.sandbox.limits.memory }),
        ...(fm.sandbox.limits.processes !== undefined && { processes: fm.sandbox.limits.processes }),
        ...(fm.sandbox.limits.file_size !== undefined && { fileSizeMb: fm.sandbox.limits.file_size }),
        ...(fm.sandbox.limits.cpu_time !== undefined && {
          cpuSeconds: Math.ceil(fm.sandbox.limits.cpu_time / 1000),
        }),
      },
    },
    metrics: {
      holdout: fm.metrics.holdout,
      ...(fm.metrics.progress !== undefined && { progress: fm.metrics.progress }),
    },
    constraints: fm.constraints,
    acceptance: fm.acceptance,
    agent: toAgentConfig(fm.agent),
    search: fm.search,
    ...(Object.keys(fm.slots).length ? { slots: toSlots(fm.slots) } : {}),
    ...(fm.org ? { org: { roles: fm.org.roles, policy: fm.org.policy } } : {}),
    ...(fm.ladder ? { ladder: toLadder(fm.ladder, fm.run.grace) } : {}),
    ...(fm.hooks && (fm.hooks.before !== undefined || fm.hooks.after !== undefined)
      ? { hooks: toHooks(fm.hooks) }
      : {}),
    ...(fm.frontier ? { frontier: toFrontier(fm.frontier) } : {}),
    ...(fm.advisor
      ? {
          advisor: {
            agent: toAgentConfig(fm.advisor.agent),
            afterDiscards: fm.advisor.after_discards ?? DEFAULT_ADVISOR_AFTER_DISCARDS,
            ...(fm.advisor.plateau !== undefined && { plateau: fm.advisor.plateau }),
          },
        }
      : {}),
    ...(fm.executor?.slurm ? { executor: { slurm: toSlurm(fm.executor.slurm) } } : {}),
    directions: split.body,
    ...(fm.prior_work === false
      ? { priorWork: false }
      : fm.prior_work === "machine"
        ? { priorWork: "machine" }
        : {}),
    ...(fm.executor?.fleet ? { executor: { fleet: { db: fm.executor.fleet.db } } } : {}),
  };
}

/**
 * `objective:` → the primary objective (the one metric, or the first listed) and, with several,
 * `objectives` (the checks already made sure the form is whole).
 */
function toObjectives(o: Frontmatter["objective"]): Pick<Program, "objective" | "objectives"> {
  if (!o.metrics) {
    return { objective: { metric: o.metric as string, direction: o.direction as Direction } };
  }
  const metrics = o.metrics.map((m) => ({ metric: m.metric, direction: m.direction }));
  return {
    objective: metrics[0] as ObjectiveMetric,
    objectives: {
      metrics,
      mode: o.mode ?? "pareto",
      ...(o.threshold ? { threshold: { metric: o.threshold.metric, bar: o.threshold.bar } } : {}),
    },
  };
}

/** How many trials run at once, and on which GPUs: `gpus` fixes the count unless `count` is given too. */
function toSlots(s: Frontmatter["slots"]): NonNullable<Program["slots"]> {
  const count = s.count ?? s.gpus?.length ?? 1;
  return { count, ...(s.gpus ? { gpus: s.gpus } : {}), proposers: s.proposers ?? count };
}

/** How long a trial's Slurm job may stay pending before it is cancelled (program.md `executor.slurm.pending_limit`). */
export const DEFAULT_SLURM_PENDING_LIMIT_MS = 10 * 60_000;

function toSlurm(s: NonNullable<NonNullable<Frontmatter["executor"]>["slurm"]>): SlurmConfig {
  return {
    ...(s.partition !== undefined && { partition: s.partition }),
    ...(s.gres !== undefined && { gres: s.gres }),
    ...(s.account !== undefined && { account: s.account }),
    extraArgs: s.extra_args,
    pendingLimitMs: s.pending_limit ?? DEFAULT_SLURM_PENDING_LIMIT_MS,
  };
}

/** Default time limit of each hook (program.md `hooks.budget`). */
export const DEFAULT_HOOK_BUDGET_MS = 30_000;

/** A hook is killed at its budget + the default grace of that budget, like a trial. */
function toHooks(h: NonNullable<Frontmatter["hooks"]>): NonNullable<Program["hooks"]> {
  const budgetMs = h.budget ?? DEFAULT_HOOK_BUDGET_MS;
  return {
    ...(h.before !== undefined ? { before: h.before } : {}),
    ...(h.after !== undefined ? { after: h.after } : {}),
    budgetMs,
    graceMs: defaultGraceMs(budgetMs),
  };
}

/** The strategy with its defaults filled in (src/core/frontier.ts DEFAULT_FRONTIER). */
function toFrontier(f: NonNullable<Frontmatter["frontier"]>): FrontierConfig {
  return {
    strategy: f.strategy,
    k: f.k ?? DEFAULT_FRONTIER.k,
    epsilon: f.epsilon ?? DEFAULT_FRONTIER.epsilon,
    temperature: f.temperature ?? DEFAULT_FRONTIER.temperature,
  };
}

/** Each rung gets run.grace when it is given, else the default grace of its own budget. */
function toLadder(
  l: NonNullable<Frontmatter["ladder"]>,
  grace: number | undefined,
): NonNullable<Program["ladder"]> {
  return {
    rungs: l.budgets.map((budgetMs) => ({ budgetMs, graceMs: grace ?? defaultGraceMs(budgetMs) })),
    promote: l.promote,
    alarmBelow: l.alarm_below,
    minPairs: l.min_pairs,
  };
}

/**
 * Reads and parses a program.md. A directory means its program.md. A missing file throws
 * AutolabError PROGRAM_NOT_FOUND, which tells the user to run `autolab init`.
 */
export function loadProgram(path: string): Program {
  let file = resolve(path);
  let shown = path;
  try {
    if (statSync(file).isDirectory()) {
      file = join(file, "program.md");
      shown = join(path, "program.md");
    }
  } catch {
    // Missing: reported by the read below, with the path the user gave.
  }
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") {
      throw new AutolabError(
        "PROGRAM_NOT_FOUND",
        `no program found at ${file} — run \`autolab init\` to create a program.md, or point to an existing one`,
        "`autolab init` writes a program.md you can edit; docs/program.md describes every field",
      );
    }
    throw new AutolabError("PROGRAM_UNREADABLE", `cannot read ${file}: ${(err as Error).message}`);
  }
  return parseProgram(text, shown);
}

/** The validated `agent:` map (snake_case) → AgentConfig. Also used for role files. */
export function toAgentConfig(a: Frontmatter["agent"]): AgentConfig {
  const full = a as Partial<Record<string, unknown>> & {
    backend: string;
    args: string[];
    env: Record<string, string>;
  };
  return {
    backend: full.backend,
    ...(typeof full.model === "string" && { model: full.model }),
    ...(typeof full.base_url === "string" && { baseUrl: full.base_url }),
    ...(typeof full.provider === "string" && { provider: full.provider }),
    ...(typeof full.api_key_env === "string" && { apiKeyEnv: full.api_key_env }),
    ...(typeof full.timeout === "number" && { timeoutMs: full.timeout }),
    ...(typeof full.max_turns === "number" && { maxTurns: full.max_turns }),
    ...(full.price !== undefined && { price: full.price as { input: number; output: number } }),
    ...(typeof full.command === "string" && { command: full.command }),
    args: full.args,
    env: full.env,
  };
}
