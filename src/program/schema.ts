/**
 * The zod schema of program.md's frontmatter (snake_case, as users write it), plus what the
 * error reporter needs to explain it: the known keys of every section and a valid example of
 * every field. Field-level rules live here; rules across fields are in checks.ts.
 */
import { z } from "zod";
import { isGlob, normalizePath, patternProblem } from "../core/file-patterns.ts";
import { FRONTIER_STRATEGIES } from "../core/frontier.ts";
import type { Knob, ParamValue } from "../core/types.ts";
import { METRIC_NAME, parseConstraint } from "../trust/constraints.ts";
import { parseDuration } from "./duration.ts";

/** A knob names a `NAME = value` line in an editable file, so it must be an identifier. */
export const KNOB_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

const text = z.string().trim().min(1, { error: "must not be empty" });

const metricName = z.string().regex(METRIC_NAME, {
  error: (iss) =>
    `${JSON.stringify(iss.input)} is not a metric name: use letters, digits, _ . - / and start with a letter or _`,
});

/** Why a files entry is unacceptable, or undefined. Paths are relative to the project root. */
function pathProblem(p: string): string | undefined {
  if (p.trim() === "") return "must not be empty";
  if (p.startsWith("/") || p.startsWith("\\") || /^[A-Za-z]:[\\/]/.test(p)) {
    return `${JSON.stringify(p)} is absolute: write it relative to the project root (the directory of program.md)`;
  }
  if (p.split(/[\\/]/).includes("..")) return `${JSON.stringify(p)} leaves the project: ".." is not allowed`;
  return undefined;
}

const relPath = z
  .string()
  .superRefine((p, ctx) => {
    const problem =
      pathProblem(p) ??
      (isGlob(p)
        ? `${JSON.stringify(p)} is a glob: outputs are plain paths (files or directories)`
        : undefined);
    if (problem) ctx.addIssue({ code: "custom", message: problem, input: p });
  })
  .transform(normalizePath);

/** A `files:` entry: a file, a directory or a glob (src/core/file-patterns.ts), inside the project. */
const filePattern = z
  .string()
  .superRefine((p, ctx) => {
    const problem = pathProblem(p) ?? patternProblem(normalizePath(p));
    if (problem) ctx.addIssue({ code: "custom", message: problem, input: p });
  })
  .transform(normalizePath);

/**
 * The one rule for durations: program.md's duration fields and the command line's duration
 * flags (`-b`, `--max-time`, `--interval`) both go through it. Milliseconds, or why not.
 */
export function checkDuration(v: unknown, positive: boolean): { ms: number; problem?: string } {
  let ms: number;
  try {
    ms = typeof v === "string" || typeof v === "number" ? parseDuration(v) : Number.NaN;
  } catch {
    ms = Number.NaN;
  }
  if (Number.isNaN(ms)) return { ms, problem: `${describe(v)} is not a duration` };
  if (positive && ms <= 0) return { ms, problem: "must be longer than zero" };
  return { ms };
}

function toMs(v: unknown, ctx: z.RefinementCtx, positive: boolean): number {
  const { ms, problem } = checkDuration(v, positive);
  if (problem) ctx.addIssue({ code: "custom", input: v, message: problem });
  return ms;
}

// Durations accept a string with a unit or a number of seconds, so they cannot be a plain
// z.string()/z.number(); both helpers parse to milliseconds.
const requiredDuration = z.unknown().transform((v, ctx) => {
  if (v === undefined) {
    ctx.addIssue({ code: "custom", input: v, message: "is required" });
    return 0;
  }
  return toMs(v, ctx, true);
});
const optionalDuration = (positive: boolean) =>
  z
    .unknown()
    .transform((v, ctx) => toMs(v, ctx, positive))
    .optional();

const constraint = z.string().superRefine((expr, ctx) => {
  try {
    parseConstraint(expr);
  } catch (err) {
    ctx.addIssue({ code: "custom", input: expr, message: (err as Error).message });
  }
});

const direction = z.enum(["minimize", "maximize"]);

/**
 * One objective (`metric` + `direction`), or several (`metrics` + `mode`, docs/objectives.md).
 * Which of the two forms, how many metrics, duplicates and the threshold's metric are rules
 * across fields (checks.ts objectiveIssues), so each is reported on its own line.
 */
const objectiveShape = {
  metric: metricName.optional(),
  direction: direction.optional(),
  metrics: z.array(z.strictObject({ metric: metricName, direction })).optional(),
  mode: z.enum(["pareto", "threshold_then_optimize"]).optional(),
  threshold: z.strictObject({ metric: metricName, bar: z.number() }).optional(),
};

/** A judge of rubric-graded evaluation: an endpoint and model as the llm backend names them (docs/agents.md). */
const rubricJudge = z.strictObject({
  name: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_-]*$/, {
      error: "must be a name of letters, digits, _ and - (it names metrics)",
    })
    .optional(),
  provider: z.enum(["openai-compatible", "anthropic", "openai"]).optional(),
  base_url: z.url({ error: "must be a URL such as http://127.0.0.1:8000/v1" }).optional(),
  model: text,
  api_key_env: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: "must be an environment variable name" })
    .optional(),
});

/** `run.evaluate` as a map: rubric-graded evaluation (docs/learning.md), with an optional command too. */
const rubricEvaluate = z.strictObject({
  command: text.optional(),
  rubric: relPath,
  grade: z.array(relPath).min(1, { error: "must list the file(s) the judges grade" }),
  judges: z.array(rubricJudge).min(1, { error: "must list at least one judge" }),
  panel: z.union([z.number().int().positive(), z.literal("all")]).optional(),
  canary_max: z.number().min(0).max(100).optional(),
  canary_every: z.number().int().positive().optional(),
  judge_timeout: optionalDuration(true),
  disagreement: z.number().gt(0).max(1).optional(),
});
export type RubricEvaluateYaml = z.infer<typeof rubricEvaluate>;

const runShape = {
  setup: text.optional(),
  command: text,
  evaluate: z.union([text, rubricEvaluate]).optional(),
  budget: requiredDuration,
  grace: optionalDuration(false),
  setup_timeout: optionalDuration(true),
  evaluate_timeout: optionalDuration(true),
};

const filesShape = {
  editable: z.array(filePattern).min(1, { error: "must list at least one file the researcher may edit" }),
  protected: z.array(filePattern).default([]),
  holdout: z.array(filePattern).default([]),
};

const metricsShape = {
  holdout: z.array(metricName).default([]),
  progress: metricName.optional(),
};

/**
 * One knob map, numeric (`low`, `high`, `log`, `int`) or categorical (`choices`), either with
 * an optional `when`. One strict object rather than a union, so a misspelt key still gets its
 * "did you mean"; which keys go together is checked below. Conditions that name other knobs
 * are checked across the search map (search-checks.ts).
 */
const knobShape = {
  low: z.number().optional(),
  high: z.number().optional(),
  log: z.boolean().optional(),
  int: z.boolean().optional(),
  choices: z.array(z.unknown()).optional(),
  when: z.record(z.string(), z.unknown()).optional(),
};

const NUMERIC_KEYS = ["low", "high", "log", "int"] as const;

/** Why a YAML value cannot be a choice (text, a number, true/false), or undefined. */
export function choiceProblem(v: unknown): string | undefined {
  if (typeof v === "boolean") return undefined;
  if (typeof v === "number") return Number.isFinite(v) ? undefined : `${v} is not a finite number`;
  if (typeof v === "string") {
    // Choices are written into source code and shown in terminals: no line breaks, no escapes.
    return [...v].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f)
      ? `${JSON.stringify(v)} has a control character (a line break, a tab): a choice is one line of plain text`
      : undefined;
  }
  return `a choice is text, a number or true/false, got ${describe(v)}`;
}

const knob = z
  .strictObject(knobShape)
  .superRefine((k, ctx) => {
    const issue = (path: (string | number)[], message: string) =>
      ctx.addIssue({ code: "custom", path, input: k, message });
    if (k.choices !== undefined) {
      for (const key of NUMERIC_KEYS) {
        if (k[key] !== undefined) {
          issue(
            [key],
            `a categorical knob (choices:) has no ${key}: remove ${key}, or remove choices: for a numeric knob`,
          );
        }
      }
      if (k.choices.length < 2) issue(["choices"], "must list at least two choices to choose between");
      k.choices.forEach((c, i) => {
        const problem = choiceProblem(c);
        if (problem) issue(["choices", i], problem);
        else if (k.choices?.slice(0, i).includes(c)) issue(["choices", i], `${describe(c)} is listed twice`);
      });
    } else {
      if (k.low === undefined) issue(["low"], "is required (or choices: for a categorical knob)");
      if (k.high === undefined) issue(["high"], "is required (or choices: for a categorical knob)");
      if (k.low !== undefined && k.high !== undefined) numericIssues(k.low, k.high, k, issue);
    }
    if (k.when !== undefined && Object.keys(k.when).length === 0) {
      issue(["when"], "names no knob: write e.g. when: { OPTIMIZER: sgd }, or remove when:");
    }
  })
  .transform((k): Knob => {
    const when =
      k.when === undefined
        ? undefined
        : Object.fromEntries(
            Object.entries(k.when).map(([name, v]) => [name, (Array.isArray(v) ? v : [v]) as ParamValue[]]),
          );
    const condition = when ? { when } : {};
    if (k.choices !== undefined) return { choices: k.choices as ParamValue[], ...condition };
    return { low: k.low ?? 0, high: k.high ?? 0, log: k.log ?? false, int: k.int ?? false, ...condition };
  });

function numericIssues(
  low: number,
  high: number,
  k: { log?: boolean | undefined; int?: boolean | undefined },
  issue: (path: (string | number)[], message: string) => void,
): void {
  if (!(low < high)) {
    issue(
      ["high"],
      `high (${high}) must be greater than low (${low})${high === low ? ": a knob with one value has nothing to search; leave it out of search: (the file keeps its value)" : ""}`,
    );
  }
  if (k.log && low <= 0) issue(["low"], `a log-scale knob needs low > 0, got ${low}`);
  if (k.int && !(Number.isInteger(low) && Number.isInteger(high))) {
    issue(
      [Number.isInteger(low) ? "high" : "low"],
      `an int knob needs whole-number bounds, got low ${low} and high ${high}`,
    );
  }
}

/** Researchers autolab knows; `command` runs any other CLI from a template. */
export const AGENT_BACKENDS = [
  "builtin",
  "claude",
  "codex",
  "gemini",
  "opencode",
  "pi",
  "qwen",
  "aider",
  "llm",
  "command",
] as const;

const agentShape = {
  backend: z.enum(AGENT_BACKENDS),
  model: text.optional(),
  base_url: z.url({ error: "must be a URL such as http://127.0.0.1:8000/v1" }).optional(),
  provider: z.enum(["openai-compatible", "anthropic", "openai"]).optional(),
  api_key_env: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: "must be an environment variable name" })
    .optional(),
  timeout: optionalDuration(true),
  max_turns: z.number().int().positive().optional(),
  /** USD per million input and output tokens, for a model missing from the price table. */
  price: z.strictObject({ input: z.number().nonnegative(), output: z.number().nonnegative() }).optional(),
  command: text.optional(),
  args: z.array(z.string()).default([]),
  env: z.record(z.string(), z.string()).default({}),
};

/** `agent: claude` is shorthand for `agent: { backend: claude }` (expanded in parse.ts). */
const agent = z.strictObject(agentShape);
/** The `agent:` map, shared with role files (src/org/roles.ts). */
export const agentSchema = agent;
/** The keys of an `agent:` map, for "did you mean" in other files that embed one. */
export const AGENT_KEYS: readonly string[] = Object.keys(agentShape);

const knobName = z.string().regex(KNOB_NAME, {
  error: (iss) =>
    `knob name ${JSON.stringify(iss.input)} is not an identifier ([A-Za-z_][A-Za-z0-9_]*): it must match a NAME = value line in an editable file`,
});

/** `slots.count`'s rule, also `-s, --slots`'s (src/cli/flags.ts). */
export const SLOT_COUNT = z
  .number()
  .int()
  .min(1, { error: "at least 1 slot (1 = one trial at a time, proposals prepared ahead)" })
  .max(256, { error: "at most 256 slots" });

const slotsShape = {
  count: SLOT_COUNT.optional(),
  gpus: z
    .array(
      z.number().int().min(0, { error: "GPU indices are 0 or more (as CUDA_VISIBLE_DEVICES counts them)" }),
    )
    .min(1)
    .optional(),
  proposers: z.number().int().min(1, { error: "at least 1 proposer" }).max(64).optional(),
};

/** The tree frontier (docs/loop.md): which kept node a candidate builds on. */
const frontierShape = {
  strategy: z.enum(FRONTIER_STRATEGIES, {
    error: (iss) =>
      `${describe(iss.input)} is not a frontier strategy: use one of ${FRONTIER_STRATEGIES.join(", ")}`,
  }),
  k: z.number().int().min(1, { error: "top_k draws from the k best nodes: at least 1" }).max(1000).optional(),
  epsilon: z
    .number()
    .min(0, { error: "is a share of proposals: between 0 and 1" })
    .max(1, { error: "is a share of proposals: between 0 and 1" })
    .optional(),
  temperature: z
    .number()
    .gt(0, { error: "must be above 0 (0.25: the worst node drawn e^-4 as often as the best)" })
    .optional(),
};

const orgShape = {
  roles: text.default("org"),
  policy: z.enum(["bandit", "round-robin"]).default("bandit"),
};

/** "8G", "512M", "1.5G" or a number of MiB → MiB. */
const sizeMb = z.union([z.number(), z.string()]).transform((v, ctx) => {
  const mb = parseSizeMb(v);
  if (mb === undefined) {
    ctx.addIssue({
      code: "custom",
      input: v,
      message: `${describe(v)} is not a size: write e.g. 512M, 8G or a number of MiB`,
    });
    return 0;
  }
  return mb;
});

/** Sizes as people write them: 512M, 8G, 1.5T, or a number of MiB. Undefined when unreadable or not positive. */
export function parseSizeMb(v: unknown): number | undefined {
  if (typeof v === "number") return Number.isFinite(v) && v > 0 ? v : undefined;
  if (typeof v !== "string") return undefined;
  const m = /^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*$/i.exec(v);
  if (!m) return undefined;
  const scale = { "": 1, K: 1 / 1024, M: 1, G: 1024, T: 1024 * 1024 }[(m[2] ?? "").toUpperCase()] ?? 1;
  const mb = Number(m[1]) * scale;
  return mb > 0 ? mb : undefined;
}

const limitsShape = {
  memory: sizeMb.optional(),
  processes: z.number().int().min(1).optional(),
  file_size: sizeMb.optional(),
  cpu_time: optionalDuration(true),
};

/** A cache path: relative to the project, absolute, or under the home directory (~/). */
const cachePath = z.string().superRefine((p, ctx) => {
  if (p.trim() === "") ctx.addIssue({ code: "custom", input: p, message: "must not be empty" });
  else if (!p.startsWith("/") && !p.startsWith("~/") && p.split(/[\\/]/).includes("..")) {
    ctx.addIssue({
      code: "custom",
      input: p,
      message: `${JSON.stringify(p)} leaves the project: ".." is not allowed`,
    });
  }
});

/** How trials and researchers are confined (docs/security.md). `sandbox: off` is shorthand for `{ enabled: false }`. */
const sandboxShape = {
  enabled: z.boolean().default(true),
  /** Refuse to run when no sandbox can be made (instead of running unsandboxed with a warning). */
  required: z.boolean().default(false),
  network: z.boolean().default(false),
  caches: z.array(cachePath).default([]),
  env: z
    .array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: "must be an environment variable name" }))
    .default([]),
  limits: z.strictObject(limitsShape).default({}),
};

/** The proxy ladder: cheaper budgets a candidate must pass before its trial at run.budget. */
const ladderShape = {
  budgets: z
    .array(requiredDuration)
    .min(1, { error: "must list at least one budget cheaper than run.budget" }),
  promote: z
    .number()
    .gt(0, { error: "must be a fraction above 0 and at most 1 (0.3 promotes the best 30%)" })
    .max(1, { error: "must be a fraction above 0 and at most 1 (0.3 promotes the best 30%)" })
    .default(1 / 3),
  alarm_below: z
    .number()
    .min(-1, { error: "is a rank correlation: between -1 and 1" })
    .max(1, { error: "is a rank correlation: between -1 and 1" })
    .default(0.2),
  min_pairs: z
    .number()
    .int()
    .min(3, { error: "must be at least 3 (a rank correlation needs 3 pairs)" })
    .default(12),
};

/** Iteration hooks (docs/program.md "Hooks"): commands around each experiment, in a trial's sandbox. */
const hooksShape = {
  before: text.optional(),
  after: text.optional(),
  budget: optionalDuration(true),
};

/** The advisor: a researcher backend asked for ideas or a stop verdict when the run stalls (docs/advisor.md). */
const advisorShape = {
  agent: agent.refine((a) => a.backend !== "builtin", {
    error:
      "the built-in optimizer cannot advise (it only tunes knobs): name a researcher backend such as claude, llm or command",
  }),
  after_discards: z
    .number()
    .int()
    .min(1, { error: "must be at least 1 (discards in a row before the advisor is asked)" })
    .optional(),
  plateau: z
    .number()
    .int()
    .min(1, { error: "must be at least 1 (experiments without a keep before the advisor is asked)" })
    .optional(),
};

/**
 * sbatch options autolab sets itself for every trial job (src/runner/slurm/): `extra_args` may not
 * set them. Long forms with or without `=value`, short forms alone or with the value attached.
 */
export const SLURM_RESERVED_ARGS: ReadonlyArray<{ long: string; short?: string; why: string }> = [
  { long: "--time", short: "-t", why: "autolab sets it to run.budget + grace" },
  { long: "--output", short: "-o", why: "the job's stdout goes to the trial's log directory" },
  { long: "--error", short: "-e", why: "the job's stderr goes to the trial's log directory" },
  {
    long: "--job-name",
    short: "-J",
    why: "the job is named after the trial's token (reap finds it by name)",
  },
  { long: "--chdir", short: "-D", why: "the job runs in the trial's worktree" },
  { long: "--export", why: "the trial's environment is the sandbox's (sandbox.env in program.md)" },
  { long: "--parsable", why: "autolab reads the job id from it" },
  { long: "--wrap", why: "autolab writes the job's script" },
  { long: "--array", short: "-a", why: "one trial is one job" },
  { long: "--wait", short: "-W", why: "autolab polls the job itself" },
];

/** The reserved option an `extra_args` item sets, or undefined. */
export function reservedSlurmArg(arg: string): (typeof SLURM_RESERVED_ARGS)[number] | undefined {
  return SLURM_RESERVED_ARGS.find(
    (r) =>
      arg === r.long ||
      arg.startsWith(`${r.long}=`) ||
      (r.short !== undefined && !arg.startsWith("--") && arg.startsWith(r.short)),
  );
}

/** A partition, gres or account: one word, no whitespace or control characters. */
const slurmWord = z
  .string()
  .trim()
  .min(1, { error: "must not be empty" })
  .regex(/^[^\s\p{Cc}]+$/u, { error: "must be one word (no spaces or control characters)" });

/** `executor: { slurm: { … } }`: every trial one sbatch job (docs/distributed.md "Slurm"). */
const slurmShape = {
  partition: slurmWord.optional(),
  gres: slurmWord.optional(),
  account: slurmWord.optional(),
  extra_args: z
    .array(
      z
        .string()
        .min(1, { error: "must not be empty" })
        .superRefine((arg, ctx) => {
          if (!arg.startsWith("-")) {
            ctx.addIssue({
              code: "custom",
              input: arg,
              message: `${JSON.stringify(arg)} is not an sbatch option: write each option with its value after = (--mem=16G)`,
            });
            return;
          }
          const r = reservedSlurmArg(arg);
          if (r)
            ctx.addIssue({
              code: "custom",
              input: arg,
              message: `${JSON.stringify(arg)} sets ${r.long}, which autolab sets itself: ${r.why}`,
            });
        }),
    )
    .default([]),
  pending_limit: optionalDuration(true),
};

/** `executor.fleet`: trials on a worker fleet (src/fleet/). The URL carries no password (program.md is committed). */
const fleetShape = {
  db: z
    .string()
    .regex(/^postgres(ql)?:\/\//, { error: "must be a postgres:// URL" })
    .refine((u) => !/^[a-z]+:\/\/[^/@:]*:[^@/]*@/i.test(u), {
      error: "must not carry a password (program.md is committed): use PGPASSWORD or ~/.pgpass",
    }),
};
/** Where trials run besides this machine: one of a Slurm cluster or a worker fleet. */
const executorShape = {
  slurm: z.strictObject(slurmShape).optional(),
  fleet: z.strictObject(fleetShape).optional(),
};

const topShape = {
  name: text,
  objective: z.strictObject(objectiveShape),
  run: z.strictObject(runShape),
  files: z.strictObject(filesShape),
  metrics: z.strictObject(metricsShape).default({ holdout: [] }),
  constraints: z.array(constraint).default([]),
  acceptance: z.enum(["noise", "greedy", "greedy-final", "posterior"]).default("noise"),
  agent: agent.default({ backend: "builtin", args: [], env: {} }),
  search: z.record(knobName, knob).default({}),
  /** `slots: 4` is shorthand for `slots: { count: 4 }` (expanded in parse.ts). */
  slots: z.strictObject(slotsShape).default({}),
  /** `org: org/` is shorthand for `org: { roles: org/ }` (expanded in parse.ts). */
  org: z.strictObject(orgShape).optional(),
  /** `frontier: top_k` is shorthand for `frontier: { strategy: top_k }` (expanded in parse.ts). */
  frontier: z.strictObject(frontierShape).optional(),
  /** `ladder: [30s, 2m]` is shorthand for `ladder: { budgets: [30s, 2m] }` (expanded in parse.ts). */
  ladder: z.strictObject(ladderShape).optional(),
  /** `advisor: claude` is shorthand for `advisor: { agent: claude }` (expanded in parse.ts). */
  advisor: z.strictObject(advisorShape).optional(),
  /** What the command writes for the evaluate step (a checkpoint, predictions): all evaluate sees besides the committed files and setup's. */
  outputs: z.array(relPath).default([]),
  hooks: z
    .strictObject(hooksShape)
    .refine((h) => h.before !== undefined || h.after !== undefined, {
      error: "names no hook: give `before:`, `after:` or both",
    })
    .optional(),
  /** Where trials run; absent: this machine. `slurm:` with nothing under it means `slurm: {}` (parse.ts). */
  executor: z
    .strictObject(executorShape)
    .refine((e) => (e.slurm === undefined) !== (e.fleet === undefined), {
      error: "names where trials run: give `slurm:` or `fleet:`, one of them",
    })
    .optional(),
  /** Prior work from other runs on this machine in the researcher's context (docs/program.md). */
  prior_work: z
    .union([z.boolean(), z.enum(["project", "machine"])], {
      error:
        "is true or project (this project's other runs, the default), machine (share with other projects that opted in) or false",
    })
    .default(true),
  /**
   * The notebook on PostgreSQL (docs/distributed.md); read by app/lab.ts's locateNotebook.
   * Never with a password: program.md is committed (PGPASSWORD or ~/.pgpass carry it).
   */
  db: z
    .string()
    .refine((v) => /^postgres(ql)?:\/\//i.test(v.trim()), {
      error: (iss) =>
        `${describe(iss.input)} is not a postgres:// URL (the default notebook, .autolab/lab.db, needs no db:)`,
    })
    .refine((v) => !/^postgres(ql)?:\/\/[^/@]*:[^@/]*@/i.test(v.trim()), {
      error: "holds a password, and program.md is committed: put the password in PGPASSWORD or ~/.pgpass",
    })
    .optional(),
  /** `sandbox: off` is shorthand for `sandbox: { enabled: false }` (expanded in parse.ts). */
  sandbox: z
    .strictObject(sandboxShape)
    .default({ enabled: true, required: false, network: false, caches: [], env: [], limits: {} }),
};

export const frontmatterSchema = z.strictObject(topShape);
export type Frontmatter = z.output<typeof frontmatterSchema>;

/** Known keys and examples of one kind of file (program.md, a role file), for the reporter. */
export interface Vocabulary {
  knownKeys: Record<string, readonly string[]>;
  examples: Record<string, string>;
}

/**
 * Known keys per section, by generalized path ("search.*" is any knob). Used for
 * "did you mean" and for "this key belongs under run:".
 */
export const KNOWN_KEYS: Record<string, readonly string[]> = {
  "": Object.keys(topShape),
  objective: Object.keys(objectiveShape),
  "objective.metrics": ["metric", "direction"],
  "objective.threshold": ["metric", "bar"],
  run: Object.keys(runShape),
  "run.evaluate": Object.keys(rubricEvaluate.shape),
  "run.evaluate.judges": Object.keys(rubricJudge.shape),
  files: Object.keys(filesShape),
  metrics: Object.keys(metricsShape),
  agent: Object.keys(agentShape),
  "search.*": Object.keys(knobShape),
  slots: Object.keys(slotsShape),
  org: Object.keys(orgShape),
  frontier: Object.keys(frontierShape),
  ladder: Object.keys(ladderShape),
  hooks: Object.keys(hooksShape),
  advisor: Object.keys(advisorShape),
  "advisor.agent": Object.keys(agentShape),
  sandbox: Object.keys(sandboxShape),
  "sandbox.limits": Object.keys(limitsShape),
  executor: Object.keys(executorShape),
  "executor.slurm": Object.keys(slurmShape),
  "executor.fleet": Object.keys(fleetShape),
};

export const MINIMAL_PROGRAM = `---
name: my-experiment
objective: { metric: val_loss, direction: minimize }
run:
  command: node train.ts
  budget: 30s
files:
  editable: [train.ts]
---
Research directions for the agents go here.`;

const KNOB_EXAMPLE = [
  "LEARNING_RATE: { low: 1e-4, high: 1e-1, log: true }",
  "HIDDEN: { low: 16, high: 512, int: true }",
  "OPTIMIZER: { choices: [adam, sgd, lion] }                     # text, numbers or true/false",
  "MOMENTUM: { low: 0.5, high: 0.99, when: { OPTIMIZER: sgd } }  # tuned only while OPTIMIZER is sgd",
].join("\n");

/** A valid example per generalized field path; the reporter uses the longest matching prefix. */
export const EXAMPLES: Record<string, string> = {
  "": MINIMAL_PROGRAM,
  name: "name: tiny-lm",
  objective: "objective: { metric: val_bpb, direction: minimize }   # or maximize",
  "objective.metrics":
    "metrics:\n  - { metric: val_loss, direction: minimize }\n  - { metric: latency_ms, direction: minimize }\nmode: pareto   # or threshold_then_optimize (with threshold:)",
  "objective.mode": "mode: pareto   # or threshold_then_optimize",
  "objective.threshold":
    "threshold: { metric: accuracy, bar: 0.9 }   # reach accuracy ≥ 0.9 (its direction), then optimize the other metric",
  run: "run:\n  setup: node prepare.ts      # optional\n  command: node train.ts\n  evaluate: node evaluate.ts   # optional\n  budget: 30s",
  "run.setup": "setup: node prepare.ts",
  "run.command": "command: node train.ts",
  "run.evaluate":
    "evaluate: node evaluate.ts\n# or graded by LLM judges against a rubric (docs/learning.md):\n# evaluate: { rubric: rubric.md, grade: [writeup.md], judges: [{ base_url: http://127.0.0.1:8000/v1, model: qwen }] }",
  "run.evaluate.rubric": "rubric: rubric.md   # protected; docs/learning.md describes its format",
  "run.evaluate.grade": "grade: [out/writeup.md]   # committed files or declared outputs",
  "run.evaluate.judges":
    "judges:\n  - { name: qwen, base_url: http://127.0.0.1:8000/v1, model: Qwen/Qwen2.5-32B-Instruct }\n  - { name: claude, provider: anthropic, model: claude-sonnet-4-5 }",
  "run.evaluate.panel": "panel: 2   # judges per trial, rotated; or: all",
  "run.evaluate.canary_max": "canary_max: 30   # a judge scoring the canary above this is flagged",
  "run.evaluate.canary_every": "canary_every: 1   # grade the canary on every trial",
  "run.evaluate.judge_timeout": "judge_timeout: 60s",
  "run.evaluate.disagreement": "disagreement: 0.5   # share of a criterion's scale",
  "run.budget": "budget: 30s   # or 500ms, 2m, 1h, 1m30s, or a number of seconds",
  "run.grace": "grace: 5s   # default: 10% of budget, between 2s and 30s",
  "run.setup_timeout": "setup_timeout: 10m",
  "run.evaluate_timeout": "evaluate_timeout: 2m",
  files: "files:\n  editable: [train.ts]\n  protected: [prepare.ts, evaluate.ts]",
  "files.editable": "editable: [train.ts]   # or a directory (model/), or a glob (src/**/*.py)",
  "files.protected": "protected: [prepare.ts, evaluate.ts]   # files, directories or globs",
  "files.holdout":
    "holdout: [data/test.txt]   # hidden from the command and from researchers; only evaluate reads them",
  db: "db: postgres://autolab@db.lab.internal/autolab?schema=nanogpt   # the notebook on PostgreSQL (password: PGPASSWORD or ~/.pgpass)",
  prior_work:
    "prior_work: machine   # default project: the closest results of this project's other runs go into the researcher's context; machine: share with (and see) other projects that opted in; false: none",
  outputs:
    "outputs: [out/model.json]   # what the command writes for the evaluate step (files or directories)",
  sandbox:
    "sandbox:\n  network: false            # default; true lets trials reach the network\n  caches: [~/.cache/torch]  # writable in every trial, kept between trials\n  env: [HF_HOME]            # environment variables passed into trials\n  limits: { memory: 16G, processes: 4096, file_size: 20G, cpu_time: 2h }\n# or: sandbox: off   (run trials and researchers unsandboxed)",
  "sandbox.enabled": "enabled: true   # or: sandbox: off",
  "sandbox.required": "required: true   # refuse to run when no sandbox can be made",
  "sandbox.network": "network: true   # trials may reach the network (default: off)",
  "sandbox.caches": "caches: [~/.cache/torch, .cache]   # writable, kept between trials",
  "sandbox.env": "env: [HF_HOME, WANDB_MODE]   # passed into trials from autolab's environment",
  "sandbox.limits": "limits: { memory: 16G, processes: 4096, file_size: 20G, cpu_time: 2h }",
  "sandbox.limits.memory": "memory: 16G",
  "sandbox.limits.processes": "processes: 4096",
  "sandbox.limits.file_size": "file_size: 20G",
  "sandbox.limits.cpu_time": "cpu_time: 2h",
  hooks:
    "hooks:\n  before: node summarize-logs.ts   # before each proposal; its output reaches the researcher\n  after: node plot.ts              # after each decision (AUTOLAB_N, AUTOLAB_DECISION, AUTOLAB_METRIC)\n  budget: 30s                      # each hook's time limit (default 30s)",
  "hooks.before": "before: node summarize-logs.ts   # runs before each proposal, in the worktree at the best",
  "hooks.after": "after: node plot.ts   # runs after each decision",
  "hooks.budget": "budget: 30s   # each hook's time limit, killed at budget + grace (default 30s)",
  metrics: "metrics:\n  holdout: [test_bpb]\n  progress: train_loss",
  "metrics.holdout": "holdout: [test_bpb]",
  "metrics.progress": "progress: train_loss",
  constraints: 'constraints: ["peak_rss_mb <= 4096", "wall_s < 60"]',
  acceptance:
    "acceptance: noise   # default: keep only improvements credible against the baseline's noise; greedy = autoresearch's keep-if-better; greedy-final = greedy with the answer re-measured at the end of the budget; posterior = build on the best posterior mean (docs/trust.md)",
  agent:
    "agent: builtin   # or claude, codex, gemini, opencode, pi, qwen, aider, llm, command\n# or: agent: { backend: claude, model: claude-sonnet-4-5, timeout: 15m }",
  "agent.backend": `backend: claude   # one of ${AGENT_BACKENDS.join(", ")}`,
  "agent.base_url": "base_url: http://127.0.0.1:8000/v1",
  "agent.provider": "provider: openai-compatible   # or anthropic, openai (backend llm)",
  "agent.api_key_env": "api_key_env: OPENROUTER_API_KEY",
  "agent.timeout": "timeout: 15m",
  "agent.max_turns": "max_turns: 30",
  "agent.command": 'command: "mytool --prompt-file {prompt_file} --cwd {workdir}"',
  search: `search:\n${KNOB_EXAMPLE.replace(/^/gm, "  ")}`,
  "executor.fleet": "fleet: { db: postgres://autolab@db-host/autolab }",
  "executor.fleet.db": "db: postgres://autolab@db-host/autolab   # no password here: PGPASSWORD or ~/.pgpass",
  slots: "slots: 4   # trials at once on CPU slots; or: slots: { gpus: [0, 1, 2, 3] } (one GPU per trial)",
  "slots.count": "count: 4",
  "slots.gpus": "gpus: [0, 1, 2, 3]   # each trial gets CUDA_VISIBLE_DEVICES=<its GPU>",
  "slots.proposers": "proposers: 2   # proposals prepared at once (default: one per slot)",
  org: "org: org/   # role files org/*.md; or: org: { roles: org/, policy: bandit }   # or round-robin",
  "org.roles": "roles: org/",
  frontier:
    "frontier: top_k   # which kept node a candidate builds on: best (default), top_k, epsilon_greedy, softmax, pareto\n# or: frontier: { strategy: top_k, k: 3 }",
  "frontier.strategy": `strategy: top_k   # one of ${FRONTIER_STRATEGIES.join(", ")}`,
  "frontier.k": "k: 3   # top_k: build on one of the 3 best kept nodes",
  "frontier.epsilon": "epsilon: 0.2   # epsilon_greedy: 20% of proposals build on any kept node",
  "frontier.temperature": "temperature: 0.25   # softmax: lower builds on the best more often",
  "org.policy": "policy: bandit   # or round-robin",
  advisor:
    "advisor:\n  agent: { backend: claude }   # any researcher backend but builtin\n  after_discards: 8            # discards in a row before it is asked (default 8)\n  plateau: 20                  # or: experiments without a keep (default: off)",
  "advisor.agent": "agent: { backend: claude, model: claude-sonnet-4-5 }   # or: agent: llm",
  "advisor.after_discards": "after_discards: 8   # discards in a row before the advisor is asked",
  "advisor.plateau": "plateau: 20   # experiments decided without a keep before the advisor is asked",
  ladder:
    "ladder:\n  budgets: [30s, 2m]   # cheaper rungs, ascending, each below run.budget (the top rung)\n  promote: 0.3         # fraction of each rung that climbs on (default 1/3)",
  "ladder.budgets":
    "budgets: [30s, 2m]   # ascending, each below run.budget: with budget: 10m the rungs are 30s, 2m, 10m",
  "ladder.promote": "promote: 0.3   # the best 30% of a rung climb to the next (default 1/3)",
  "ladder.alarm_below":
    "alarm_below: 0.2   # proxy alarm when adjacent rungs' rank correlation falls below (default 0.2)",
  "ladder.min_pairs":
    "min_pairs: 12   # candidates measured on both rungs before the alarm judges (default 12)",
  executor:
    "executor:\n  slurm:                 # each trial one sbatch job (docs/distributed.md)\n    partition: gpu\n    gres: gpu:1\n    pending_limit: 10m   # a job pending longer is cancelled (default 10m)\n# or: executor: { fleet: { db: postgres://autolab@db-host/autolab } }   # trials run on `autolab worker`s",
  "executor.slurm":
    "slurm: { partition: gpu, gres: gpu:1, account: mylab, extra_args: [--mem=16G], pending_limit: 10m }",
  "executor.slurm.partition": "partition: gpu",
  "executor.slurm.gres": "gres: gpu:1",
  "executor.slurm.account": "account: mylab",
  "executor.slurm.extra_args":
    "extra_args: [--mem=16G, --constraint=a100]   # one sbatch option per item, never through a shell",
  "executor.slurm.pending_limit":
    "pending_limit: 10m   # a job still pending after this is cancelled and recorded (default 10m)",
  "search.*": KNOB_EXAMPLE,
  "search.*.choices":
    "OPTIMIZER: { choices: [adam, sgd, lion] }   # at least two, each text, a number or true/false",
  "search.*.when":
    "MOMENTUM: { low: 0.5, high: 0.99, when: { OPTIMIZER: sgd } }   # or when: { OPTIMIZER: [sgd, lion] }; names categorical knobs",
};

/** A value as an error message shows it (text quoted, so a choice "1" and 1 differ). */
export function describe(v: unknown): string {
  if (v === undefined) return "nothing";
  if (v === null) return "an empty value";
  if (typeof v === "string") return JSON.stringify(v);
  if (Array.isArray(v)) return "a list";
  if (typeof v === "object") return "a map";
  return String(v);
}
