/**
 * A bench suite (issue #15 item 1): which configurations of the lab to compare, on which
 * programs (each marked tuning or held-out), under which equal budget, over how many seeds,
 * and which pairs of configurations ("layers") get a verdict. A YAML file, or a markdown file
 * whose YAML frontmatter is the suite (its body is free text for people). Validated here with
 * zod; every problem names the field and the fix.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { basename, dirname, extname, join, resolve } from "node:path";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { AutolabError } from "../core/errors.ts";
import { splitFrontmatter } from "../program/frontmatter.ts";
import { checkDuration } from "../program/schema.ts";

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const nameRule = z.string().regex(NAME, "a name of letters, digits, '.', '_' or '-' (64 at most)");

const ProgramEntry = z
  .object({
    path: z.string().min(1),
    split: z.enum(["tuning", "held-out"]),
    name: nameRule.optional(),
  })
  .strict();

const Configuration = z
  .object({
    /** The acceptance rule (program.md `acceptance:`). */
    acceptance: z.enum(["noise", "greedy", "greedy-final", "posterior"]).optional(),
    /** The researcher (program.md `agent:`): a backend name, or a name the embedder maps to an Agent. */
    agent: z.string().min(1).optional(),
    /** An organization (program.md `org:`), or false: a single researcher (program.md's `org:` removed). */
    org: z
      .union([
        z.literal(false),
        z.string().min(1),
        z.object({ roles: z.string().min(1), policy: z.enum(["bandit", "round-robin"]).optional() }).strict(),
      ])
      .optional(),
    /** Trials at once (program.md `slots:`). */
    slots: z.number().int().positive().optional(),
    /** A program.md variant (path relative to the suite) that replaces each program's program.md. */
    program_md: z.string().min(1).optional(),
    /** Any other program.md frontmatter fields, set as given. */
    set: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();

const Budget = z
  .object({
    experiments: z.number().int().positive().optional(),
    trials: z.number().int().positive().optional(),
    time: z.union([z.string(), z.number()]).optional(),
  })
  .strict()
  .refine((b) => b.experiments !== undefined || b.trials !== undefined || b.time !== undefined, {
    message: "needs experiments, trials or time",
  });

const SuiteSchema = z
  .object({
    name: nameRule.optional(),
    programs: z.array(ProgramEntry).min(1),
    configurations: z.record(nameRule, Configuration).refine((c) => Object.keys(c).length >= 1, {
      message: "needs at least one configuration",
    }),
    budget: Budget,
    seeds: z.union([z.number().int().positive().max(1000), z.array(z.number().int().nonnegative()).min(1)]),
    layers: z.array(z.string()).default([]),
    order: z.enum(["grid", "curriculum"]).default("grid"),
    remeasure: z.number().int().min(0).max(64).default(5),
    bootstrap: z
      .object({
        resamples: z.number().int().min(100).max(100_000).optional(),
        seed: z.number().int().nonnegative().optional(),
      })
      .strict()
      .optional(),
  })
  .strict();

/** How to fix each top-level field, shown with its problem. */
const FIX: Record<string, string> = {
  name: "name: my-bench   # letters, digits, '.', '_' or '-'",
  programs: "programs:\n  - { path: ../tiny-lm, split: tuning }\n  - { path: ../speedup, split: held-out }",
  configurations:
    "configurations:\n  single: { org: false, acceptance: noise }\n  org: { org: { roles: org/, policy: bandit }, slots: 2 }",
  budget: "budget: { experiments: 10 }   # or trials: 30, or time: 10m — the same for every configuration",
  seeds: "seeds: 3   # or a list: [1, 2, 3]",
  layers: 'layers: ["org vs single", "noise vs greedy"]   # configuration names',
  order: "order: curriculum   # or grid (the default)",
  bootstrap: "bootstrap: { resamples: 2000, seed: 1 }",
};

export type Split = "tuning" | "held-out";

export interface SuiteProgram {
  name: string;
  split: Split;
  /** Absolute path of the program's program.md. */
  programFile: string;
}

export type SuiteConfiguration = z.infer<typeof Configuration> & { name: string };

export interface Layer {
  /** As written: "org vs single". */
  label: string;
  /** The layer being judged (left of "vs") and the simpler one it must beat. */
  candidate: string;
  baseline: string;
}

export interface Suite {
  name: string;
  /** The suite file (absolute). */
  file: string;
  programs: SuiteProgram[];
  configurations: SuiteConfiguration[];
  budget: { experiments?: number; trials?: number; timeMs?: number };
  seeds: number[];
  layers: Layer[];
  order: "grid" | "curriculum";
  /**
   * Trials on fresh seeds (never the run's) of the baseline and of the best kept commit after
   * each cell's run; the cell's improvement is computed from them, not from the run's own record
   * (which favours rules that keep lucky trials). 0: the run's record (default 3).
   */
  remeasure: number;
  bootstrap: { resamples: number; seed: number };
  /** A hash of everything above that decides the cells' results (a resumed bench must match it). */
  hash: string;
}

function invalid(file: string, field: string, problem: string): AutolabError {
  const top = field.split(".")[0] ?? field;
  const example = FIX[top];
  return new AutolabError(
    "BENCH_SUITE_INVALID",
    `${file}: ${field || "(top level)"}: ${problem}`,
    example
      ? `Write ${field || "it"} like this:\n${example}`
      : 'See docs/learning.md "autolab bench" for the suite format.',
  );
}

function fieldOf(path: readonly PropertyKey[]): string {
  return path.map((p) => String(p)).join(".");
}

/** Reads and checks a suite file (`.yaml`, `.yml`, or `.md` with YAML frontmatter). */
export function loadSuite(path: string): Suite {
  const file = resolve(path);
  if (!existsSync(file) || !statSync(file).isFile())
    throw new AutolabError(
      "BENCH_SUITE_INVALID",
      `no suite file at ${file}`,
      "Pass the path of a suite .yaml or .md file: autolab bench suite.yaml",
    );
  const text = readFileSync(file, "utf8");
  let yamlText = text;
  if (extname(file) === ".md") {
    const split = splitFrontmatter(text);
    if (!split.ok)
      throw invalid(
        file,
        "",
        `the markdown suite has ${split.problem === "missing" ? "no" : "an unclosed"} YAML frontmatter (line ${split.line})`,
      );
    yamlText = split.yaml;
  }
  let raw: unknown;
  try {
    raw = parseYaml(yamlText, { uniqueKeys: true });
  } catch (err) {
    throw invalid(file, "", `not valid YAML: ${(err as Error).message.split("\n")[0]}`);
  }
  if (raw === null || typeof raw !== "object" || Array.isArray(raw))
    throw invalid(file, "", "the suite must be a YAML map with programs, configurations, budget and seeds");
  const parsed = SuiteSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw invalid(file, fieldOf(issue?.path ?? []), issue?.message ?? "invalid");
  }
  const s = parsed.data;
  const base = dirname(file);

  const programs: SuiteProgram[] = [];
  const names = new Set<string>();
  s.programs.forEach((p, i) => {
    const abs = resolve(base, p.path);
    const programFile = existsSync(abs) && statSync(abs).isDirectory() ? join(abs, "program.md") : abs;
    if (!existsSync(programFile))
      throw new AutolabError(
        "BENCH_PROGRAM_MISSING",
        `${file}: programs.${i}: the program ${JSON.stringify(p.path)} does not exist (no ${programFile})`,
        "Point path at a program's directory (holding a committed program.md) or at the program.md itself, relative to the suite file.",
      );
    const name = p.name ?? basename(dirname(programFile));
    // The name becomes a directory of the bench and text of its report: the same rule as name:.
    if (!NAME.test(name))
      throw invalid(
        file,
        `programs.${i}.name`,
        `the directory's name ${JSON.stringify(name)} cannot name a program; give it a name: of letters, digits, '.', '_' or '-'`,
      );
    if (names.has(name))
      throw invalid(
        file,
        `programs.${i}.name`,
        `two programs are named ${JSON.stringify(name)}; give one a name: of its own`,
      );
    names.add(name);
    programs.push({ name, split: p.split, programFile });
  });

  const configurations: SuiteConfiguration[] = Object.entries(s.configurations).map(([name, c]) => {
    if (c.program_md !== undefined) {
      const variant = resolve(base, c.program_md);
      if (!existsSync(variant))
        throw new AutolabError(
          "BENCH_PROGRAM_MISSING",
          `${file}: configurations.${name}.program_md: the variant ${JSON.stringify(c.program_md)} does not exist (no ${variant})`,
          "Point program_md at a program.md variant file, relative to the suite file.",
        );
      return { ...c, program_md: variant, name };
    }
    return { ...c, name };
  });

  const budget: Suite["budget"] = {};
  if (s.budget.experiments !== undefined) budget.experiments = s.budget.experiments;
  if (s.budget.trials !== undefined) budget.trials = s.budget.trials;
  if (s.budget.time !== undefined) {
    const { ms, problem } = checkDuration(s.budget.time, true);
    if (problem !== undefined) throw invalid(file, "budget.time", problem);
    budget.timeMs = ms;
  }

  const seeds =
    typeof s.seeds === "number" ? Array.from({ length: s.seeds }, (_, i) => i + 1) : [...new Set(s.seeds)];

  const layers = s.layers.map((label, i) => {
    const m = /^\s*(\S+)\s+vs\.?\s+(\S+)\s*$/.exec(label);
    if (!m)
      throw invalid(
        file,
        `layers.${i}`,
        `${JSON.stringify(label)} is not "<configuration> vs <configuration>"`,
      );
    const [, candidate = "", baseline = ""] = m;
    for (const n of [candidate, baseline])
      if (!s.configurations[n])
        throw invalid(
          file,
          `layers.${i}`,
          `${JSON.stringify(n)} is not a configuration (configurations: ${Object.keys(s.configurations).join(", ")})`,
        );
    if (candidate === baseline) throw invalid(file, `layers.${i}`, "compares a configuration with itself");
    return { label: `${candidate} vs ${baseline}`, candidate, baseline };
  });

  const bootstrap = { resamples: s.bootstrap?.resamples ?? 2000, seed: s.bootstrap?.seed ?? 1 };
  const hash = createHash("sha256")
    .update(JSON.stringify({ programs, configurations, budget, seeds, remeasure: s.remeasure }))
    .digest("hex")
    .slice(0, 16);
  return {
    name: s.name ?? basename(file, extname(file)),
    file,
    programs,
    configurations,
    budget,
    seeds,
    layers,
    order: s.order,
    remeasure: s.remeasure,
    bootstrap,
    hash,
  };
}
