import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { AutolabError } from "../../core/errors.ts";
import { openNotebook } from "../../ledger/open-notebook.ts";
import { splitFrontmatter } from "../../program/frontmatter.ts";
import { parseProgram } from "../../program/index.ts";
import { findOnPath } from "../../runner/sandbox.ts";
import { commitIdentity, git, gitRaw } from "../../workspace/git.ts";
import { assertNotEmptied, locateNotebook, prepareStateDir } from "../lab.ts";
import { autoresearchMissing, planAutoresearch } from "./autoresearch.ts";
import { keptCommits, piLayout, planPiAutoresearch } from "./pi-autoresearch.ts";
import {
  type Checkout,
  MIGRATION_SOURCES,
  type MigrationEnvironment,
  type MigrationPlan,
  type MigrationSource,
  programText,
} from "./plan.ts";

export interface ImportResult {
  dir: string;
  plan: MigrationPlan;
  /** Files committed (program.md first); empty when nothing changed in git. */
  committed: string[];
  /** True when init made the git repository. */
  newRepo: boolean;
  /** Results written to the notebook now (0 when an earlier init had imported them). */
  imported: number;
}

/** A checkout on disk: files by path relative to `dir`. */
export function diskCheckout(dir: string): Checkout {
  return {
    name: basename(dir),
    exists: (p) => existsSync(join(dir, p)),
    read: (p) => {
      try {
        const f = join(dir, p);
        return statSync(f).isFile() ? readFileSync(f, "utf8") : undefined;
      } catch {
        return undefined;
      }
    },
  };
}

/** Files the commits changed, as git names them (none when git does not know a commit). */
async function filesChangedBy(dir: string, commits: string[]): Promise<string[]> {
  const files = new Set<string>();
  // One call per commit: a commit the log names but the repository lost fails alone.
  for (const commit of commits.slice(-20)) {
    const out = await gitRaw(dir, ["show", "--name-only", "--format=", "--no-renames", commit]);
    if (out.code !== 0) continue;
    for (const f of out.stdout.split("\n")) if (f.trim() !== "") files.add(f);
  }
  return [...files];
}

/** Whether an executable of this name is on PATH. */
export function onPath(name: string, path = process.env.PATH ?? ""): boolean {
  return findOnPath(name, path) !== undefined;
}

const hostEnvironment: MigrationEnvironment = { hasExecutable: (n) => onPath(n) };

/**
 * `autolab init [dir] --from autoresearch|pi-autoresearch`: recognizes the checkout, writes
 * program.md (autoresearch's gains frontmatter above its text, kept verbatim; pi-autoresearch's
 * is new, with .auto/prompt.md's text as directions), commits it with the files its command
 * needs, and imports the old results into the notebook as prior history (claims, never
 * measurements: docs/migrate.md). The user's other files are not touched.
 */
export async function initFrom(
  dirArg: string | undefined,
  from: string,
  env: MigrationEnvironment = hostEnvironment,
): Promise<ImportResult> {
  if (!(MIGRATION_SOURCES as readonly string[]).includes(from)) {
    throw new AutolabError(
      "BAD_FLAG",
      `--from ${JSON.stringify(from)} is not a tool autolab imports from.`,
      `Use --from ${MIGRATION_SOURCES.join(" or --from ")}.`,
    );
  }
  const source = from as MigrationSource;
  const dir = resolve(dirArg ?? ".");
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    throw new AutolabError(
      "IMPORT_UNRECOGNIZED",
      `${dir} is not a directory.`,
      `Point init at your ${source} checkout.`,
    );
  }
  const checkout = diskCheckout(dir);
  recognize(dir, checkout, source);
  const plan =
    source === "autoresearch"
      ? planAutoresearch(checkout, env)
      : planPiAutoresearch(checkout, { keptFiles: await filesChangedBy(dir, keptCommits(checkout)) });
  const text = programText(plan);
  const { file: programFile, stateDir, db } = locateNotebook(dir);
  // What init writes must be a program autolab runs: a bad metric name fails here, before any write.
  parseProgram(text, programFile);

  assertNotEmptied(stateDir);
  prepareStateDir(stateDir);
  const ledger = openNotebook(db);
  try {
    // History first, then program.md: a second init after one cut short between the two finds the
    // history there and only writes program.md (a checkout is refused once program.md is written).
    const sources = new Set(ledger.listImportedResults().map((r) => r.source));
    const before = plan.history.filter((r) => sources.has(r.source));
    if (before.length) {
      plan.notes.push(
        `${before[0]?.source} was imported into the notebook by an earlier init: its history is not imported again.`,
      );
    } else {
      ledger.addImportedResults(plan.history);
    }
    writeFileSync(programFile, text);
    const { committed, newRepo } = await commit(dir, plan);
    await untrackedNotes(dir, plan);
    return { dir, plan, committed, newRepo, imported: before.length ? 0 : plan.history.length };
  } finally {
    ledger.close();
  }
}

/** Throws IMPORT_UNRECOGNIZED (what was expected, what was found) unless the checkout is `source`'s. */
function recognize(dir: string, c: Checkout, source: MigrationSource): void {
  const found = () => {
    const names = readdirSync(dir)
      .filter((f) => f !== ".git" && f !== ".autolab")
      .sort();
    return names.length
      ? `${names.slice(0, 10).join(", ")}${names.length > 10 ? ", …" : ""}`
      : "an empty directory";
  };
  if (source === "autoresearch") {
    const missing = autoresearchMissing(c);
    if (missing.length) {
      const other = piLayout(c)
        ? " It looks like a pi-autoresearch session: autolab init --from pi-autoresearch."
        : "";
      throw new AutolabError(
        "IMPORT_UNRECOGNIZED",
        `${dir} is not an autoresearch checkout: expected program.md and train.py (with prepare.py and results.tsv), found ${found()}.`,
        `Run it in the checkout of karpathy/autoresearch or a fork.${other} For a new project: autolab init.`,
      );
    }
    const split = splitFrontmatter(c.read("program.md") ?? "");
    if (split.ok) {
      throw new AutolabError(
        "PROGRAM_EXISTS",
        `${join(dir, "program.md")} already has frontmatter: it is an autolab program (or was imported before).`,
        "Edit it, or restore autoresearch's program.md (git checkout program.md) to import again.",
      );
    }
    return;
  }
  if (!piLayout(c)) {
    const other = autoresearchMissing(c).length
      ? ""
      : " It looks like an autoresearch checkout: autolab init --from autoresearch.";
    throw new AutolabError(
      "IMPORT_UNRECOGNIZED",
      `${dir} has no pi-autoresearch session: expected .auto/ (prompt.md, measure.sh, log.jsonl) or the legacy autoresearch.md, autoresearch.sh, autoresearch.jsonl; found ${found()}.`,
      `Run it where pi-autoresearch ran (its working directory).${other} For a new project: autolab init.`,
    );
  }
  if (c.exists("program.md")) {
    throw new AutolabError(
      "PROGRAM_EXISTS",
      `${join(dir, "program.md")} already exists; init --from pi-autoresearch writes a new one from ${promptName(c)}.`,
      "Move it aside, or edit it by hand.",
    );
  }
}

const promptName = (c: Checkout) => (piLayout(c) === "legacy" ? "autoresearch.md" : ".auto/prompt.md");

/**
 * Commits program.md and the files the command needs (measure.sh even where .gitignore hides
 * .auto/: a run starts from the last commit). In a new repository everything but the old
 * history files goes into the first commit; in an existing one, only these paths (the user's
 * staged changes stay staged, results.tsv stays untracked).
 */
async function commit(dir: string, p: MigrationPlan): Promise<{ committed: string[]; newRepo: boolean }> {
  const inRepo = (await gitRaw(dir, ["rev-parse", "--show-toplevel"])).code === 0;
  const id = await commitIdentity(dir);
  const message = `autolab init --from ${p.source}: program.md (directions from ${p.directionsFrom}), history imported into the notebook`;
  const paths = ["program.md", ...p.commitFiles];
  if (!inRepo) {
    await git(dir, ["init", "-q", "-b", "main"]);
    const history = [p.historyFrom, "results.tsv", ".auto/log.jsonl", "autoresearch.jsonl"].filter(
      (f): f is string => f !== undefined && existsSync(join(dir, f)),
    );
    await git(dir, ["add", "-A", "--", ".", ...history.map((f) => `:(exclude)${f}`)]);
    await git(dir, ["add", "-f", "--", ...paths]);
    await git(dir, [...id, "commit", "-q", "--no-verify", "-m", message]);
    return { committed: paths, newRepo: true };
  }
  await git(dir, ["add", "-f", "--", ...paths]);
  const staged = await gitRaw(dir, ["diff", "--cached", "--quiet", "--", ...paths]);
  if (staged.code === 0) return { committed: [], newRepo: false };
  await git(dir, [...id, "commit", "-q", "--no-verify", "-m", message, "--", ...paths]);
  return { committed: paths, newRepo: false };
}

/** Notes for program files git does not have: `autolab run` starts from the last commit. */
async function untrackedNotes(dir: string, p: MigrationPlan): Promise<void> {
  for (const f of [...p.settings.editable, ...p.settings.protected]) {
    const tracked = await gitRaw(dir, ["ls-files", "--error-unmatch", "--", f]);
    if (tracked.code !== 0)
      p.notes.push(
        `${f} is not committed: commit it before autolab run (a run starts from the last commit).`,
      );
  }
}
