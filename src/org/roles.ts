/**
 * Role files: `org/*.md`, one specialist each. The YAML frontmatter says who the role is
 * (name, agent, editable subset, weight, min_share); the markdown body is its instructions,
 * given to its agent in addition to program.md's research directions.
 *
 * Validation reuses program.md's machinery (frontmatter split, zod, YAML line lookup, the
 * reporter with "did you mean" and examples): every problem is an AutolabError ROLE_INVALID
 * naming the file, the line and the field. Rules that need the program (the editable subset)
 * are in validateRoles.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { AutolabError } from "../core/errors.ts";
import { fileMatcher, isGlob, literalBase, normalizePath, patternProblem } from "../core/file-patterns.ts";
import type { AgentConfig, Program } from "../core/types.ts";
import type { ProgramIssue } from "../program/checks.ts";
import { parseFrontmatterYaml, splitFrontmatter } from "../program/frontmatter.ts";
import { type FieldPath, locateLine } from "../program/locate.ts";
import { toAgentConfig } from "../program/parse.ts";
import { exampleFor, fromZod, showPath } from "../program/report.ts";
import {
  AGENT_BACKENDS,
  AGENT_KEYS,
  agentSchema,
  EXAMPLES as PROGRAM_EXAMPLES,
  type Vocabulary,
} from "../program/schema.ts";

const DOCS_HINT = "role files are described in docs/org.md";

/** A role name: it appears in credit tables, events and CLI flags, so keep it a plain word. */
export const ROLE_NAME = /^[a-z][a-z0-9_-]*$/;

const roleShape = {
  name: z.string().regex(ROLE_NAME, {
    error: (iss) =>
      `${JSON.stringify(iss.input)} is not a role name: use lower-case letters, digits, - and _, starting with a letter`,
  }),
  description: z.string().trim().min(1, { error: "must not be empty" }).optional(),
  agent: agentSchema.default({ backend: "builtin", args: [], env: {} }),
  editable: z
    .array(
      z
        .string()
        .trim()
        .min(1, { error: "must not be empty" })
        .refine((p) => !p.startsWith("/") && !p.split(/[\\/]/).includes(".."), {
          error: "must be a path relative to the project root, inside it",
        })
        .transform(normalizePath),
    )
    .min(1, { error: "must list at least one file; leave editable out to use all of program.md's" })
    .optional(),
  weight: z
    .number({ error: "expected a number" })
    .positive({ error: "must be greater than zero" })
    .default(1),
  min_share: z
    .number({ error: "expected a number" })
    .min(0, { error: "must be between 0 and 1" })
    .max(1, { error: "must be between 0 and 1" })
    .optional(),
};

export const roleSchema = z.strictObject(roleShape);

const MINIMAL_ROLE = `---
name: tuner
description: tunes the hyperparameters in program.md's search space
agent: builtin
---
Instructions for this role's agent go here.`;

const ROLE_VOCABULARY: Vocabulary = {
  knownKeys: { "": Object.keys(roleShape), agent: AGENT_KEYS },
  examples: {
    "": MINIMAL_ROLE,
    name: "name: explorer   # lower-case letters, digits, - and _",
    description: "description: explores architecture changes in train.ts",
    agent: PROGRAM_EXAMPLES.agent as string,
    ...Object.fromEntries(Object.entries(PROGRAM_EXAMPLES).filter(([k]) => k.startsWith("agent."))),
    editable: "editable: [train.ts]   # a subset of program.md's files.editable; default: all of them",
    weight: "weight: 2   # relative share under round-robin (the bandit learns its own); default 1",
    min_share: "min_share: 0.2   # at least 20% of proposals, whatever the bandit learns",
  },
};

export interface Role {
  name: string;
  /** The role file as it was named when loaded (for messages). */
  path: string;
  description?: string;
  agent: AgentConfig;
  /** A subset of the program's editable files; undefined = all of them. */
  editable?: string[];
  /** Relative share under round-robin; breaks ties under the bandit. Default 1. */
  weight: number;
  /** Least share of proposals this role gets (on top of the orchestrator's floor). */
  minShare?: number;
  /** The markdown body: this role's instructions. */
  instructions: string;
  /** 1-based file lines of fields (`name`, `editable[0]`, ...), for errors found later. */
  lines: Record<string, number>;
}

interface LocatedIssue extends ProgramIssue {
  line: number;
}

function indent(text: string, by: string): string {
  return text.replace(/^/gm, by);
}

function roleError(file: string, issues: LocatedIssue[], what = "invalid role"): AutolabError {
  const sorted = [...issues].sort((a, b) => a.line - b.line);
  const count = sorted.length === 1 ? "1 problem" : `${sorted.length} problems`;
  const blocks = sorted.map((issue) => {
    const head = `  ${file}:${issue.line}  ${showPath(issue.path)}: ${issue.message}`;
    const example = issue.example ?? exampleFor(issue.path, ROLE_VOCABULARY.examples);
    return example === undefined ? head : `${head}\n    example:\n${indent(example, "      ")}`;
  });
  return new AutolabError("ROLE_INVALID", `${file}: ${what} (${count}):\n${blocks.join("\n")}`, DOCS_HINT);
}

/** Parses the text of one role file; `path` names it in messages. Throws AutolabError ROLE_INVALID. */
export function parseRole(text: string, path: string): Role {
  const split = splitFrontmatter(text);
  if (!split.ok) {
    const what =
      split.problem === "missing"
        ? "has no frontmatter: a role file starts with a line `---`, then YAML (name, agent, ...), then a line `---`, then the role's instructions"
        : `has no closing \`---\` after the frontmatter opened on line ${split.line}`;
    throw new AutolabError(
      "ROLE_INVALID",
      `${path}:${split.line}  ${what}. A minimal role file:\n\n${MINIMAL_ROLE}`,
      DOCS_HINT,
    );
  }
  const { doc, lineCounter, toFileLine, raw } = parseFrontmatterYaml(split, path, "ROLE_INVALID");
  const lineOf = (p: FieldPath) => toFileLine(locateLine(doc, lineCounter, p));
  const parsed = roleSchema.safeParse(raw);
  if (!parsed.success) {
    const issues = fromZod(parsed.error.issues, raw, ROLE_VOCABULARY).map((issue) => ({
      ...issue,
      line: lineOf(issue.path),
    }));
    throw roleError(path, issues);
  }
  const fm = parsed.data;
  const lines: Record<string, number> = {};
  for (const key of Object.keys(roleShape)) lines[key] = lineOf([key]);
  for (const [i] of (fm.editable ?? []).entries()) lines[`editable[${i}]`] = lineOf(["editable", i]);
  return {
    name: fm.name,
    path,
    ...(fm.description !== undefined && { description: fm.description }),
    agent: toAgentConfig(fm.agent),
    ...(fm.editable !== undefined && { editable: fm.editable }),
    weight: fm.weight,
    ...(fm.min_share !== undefined && { minShare: fm.min_share }),
    instructions: split.body,
    lines,
  };
}

/**
 * Reads every `*.md` in `dir` (sorted by file name) as a role. A missing directory is an
 * empty org (no roles: the run uses program.md's agent alone). Two roles with one name are
 * an error naming both files.
 */
export function loadRoles(dir: string): Role[] {
  let names: string[];
  try {
    if (!statSync(dir).isDirectory()) {
      throw new AutolabError(
        "ROLE_INVALID",
        `${dir} is not a directory: roles live in a directory of .md files`,
      );
    }
    names = readdirSync(dir)
      .filter((f) => f.endsWith(".md"))
      .sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
  const roles: Role[] = [];
  const seen = new Map<string, Role>();
  for (const f of names) {
    const file = join(dir, f);
    const role = parseRole(readFileSync(file, "utf8"), file);
    const other = seen.get(role.name);
    if (other !== undefined) {
      throw roleError(file, [
        {
          path: ["name"],
          line: role.lines.name ?? 1,
          message: `role "${role.name}" is already defined in ${other.path}:${other.lines.name ?? 1}: each role needs its own name`,
        },
      ]);
    }
    seen.set(role.name, role);
    roles.push(role);
  }
  return roles;
}

/** A role's glob narrows program.md's editable entries: it is one, or lies in an editable directory. */
function narrowsGlob(glob: string, editable: readonly string[]): boolean {
  if (patternProblem(glob) !== undefined) return false;
  const base = literalBase(glob);
  return editable.some(
    (e) => e === glob || (!isGlob(e) && (e === "." || base === e || base.startsWith(`${e}/`))),
  );
}

/**
 * Rules across the roles and the program: a role's editable files must be within the
 * program's (files.editable — equal, or inside an editable directory); the builtin agent needs
 * program.md's search knobs; the least shares must add up to at most 1. Throws ROLE_INVALID
 * naming the file, line and field of the first role with problems (all its problems listed).
 */
export function validateRoles(roles: readonly Role[], program: Pick<Program, "files" | "search">): void {
  const editable = program.files.editable.map(normalizePath);
  const within = fileMatcher(editable);
  for (const role of roles) {
    const issues: LocatedIssue[] = [];
    for (const [i, p] of (role.editable ?? []).entries()) {
      // A path: some program entry covers it. A glob: it is one of program.md's entries, or it
      // lies in one of its editable directories (a glob cannot be compared with another glob).
      if (isGlob(p) ? narrowsGlob(p, editable) : within(p)) continue;
      issues.push({
        path: ["editable", i],
        line: role.lines[`editable[${i}]`] ?? role.lines.editable ?? 1,
        message: `${JSON.stringify(p)} is not editable in program.md (files.editable: ${editable.join(", ")}): a role may only narrow the program's editable files`,
      });
    }
    if (role.agent.backend === "builtin" && Object.keys(program.search).length === 0) {
      issues.push({
        path: ["agent"],
        line: role.lines.agent ?? 1,
        message:
          "the builtin agent tunes program.md's search: knobs, and program.md has none: add search: to program.md or give this role another agent",
        example: `agent: claude   # one of ${AGENT_BACKENDS.join(", ")}`,
      });
    }
    if (issues.length > 0) throw roleError(role.path, issues, `role "${role.name}" does not fit the program`);
  }
  const total = roles.reduce((s, r) => s + (r.minShare ?? 0), 0);
  if (total > 1 + 1e-9) {
    const last = roles.findLast((r) => r.minShare !== undefined) as Role;
    throw roleError(last.path, [
      {
        path: ["min_share"],
        line: last.lines.min_share ?? 1,
        message: `the roles' min_share add up to ${Number(total.toFixed(4))} (${roles
          .filter((r) => r.minShare !== undefined)
          .map((r) => `${r.name} ${r.minShare}`)
          .join(", ")}): together they can be at most 1`,
      },
    ]);
  }
}
