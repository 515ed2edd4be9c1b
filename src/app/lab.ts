import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { AutolabError } from "../core/errors.ts";
import type { Ledger, RunRecord } from "../core/ledger.ts";
import type { ReadableNotebook } from "../core/notebook-reader.ts";
import type { Program } from "../core/types.ts";
import { isPgUrl, maskUrl, openNotebook } from "../ledger/open-notebook.ts";
import { loadProgram } from "../program/index.ts";
import { programDb } from "../program/program-db.ts";
import { SAFE_GIT_CONFIG } from "../workspace/git.ts";

/** A project as the CLI sees it: its program, its `.autolab/` state directory and notebook. */
export interface Lab {
  program: Program;
  /** Directory of program.md. */
  dir: string;
  stateDir: string;
  ledger: ReadableNotebook;
  /** Where the notebook is, for people: its file, or its postgres:// URL with the password masked. */
  notebook: string;
}

/** Resolves `--program` (a file or a directory holding program.md; default: the current directory). */
export function programPath(arg: string | undefined): string {
  const p = resolve(arg ?? ".");
  if (existsSync(p) && statSync(p).isDirectory()) return join(p, "program.md");
  return p;
}

export function stateDirOf(programFile: string): string {
  return join(dirname(programFile), ".autolab");
}

/** The notebook file in a lab's `.autolab/`. */
export function notebookFile(stateDir: string): string {
  return join(stateDir, "lab.db");
}

/**
 * Where `--program`'s lab keeps its notebook: program.md, its `.autolab/` and the notebook —
 * `--db` (which sets AUTOLAB_DB), else $AUTOLAB_DB, else program.md's `db:`, else the file
 * `.autolab/lab.db`. `db` is then a path or a postgres:// URL. Every command that opens a
 * notebook (run, views, serve, mcp) finds it here; none checks it.
 */
export function locateNotebook(programArg: string | undefined): {
  file: string;
  stateDir: string;
  db: string;
} {
  const file = programPath(programArg);
  const stateDir = stateDirOf(file);
  const db = process.env.AUTOLAB_DB || programDb(file) || notebookFile(stateDir);
  return { file, stateDir, db };
}

/** Whether a notebook is there to open: a file that exists, or a database (opening makes its schema). */
export function notebookExists(db: string): boolean {
  return isPgUrl(db) || existsSync(db);
}

/**
 * Makes `.autolab/` with a `.gitignore` of `*` in it before anything else: whatever creates the
 * notebook (run, serve, mcp) and whenever the project becomes a git repository, `git add -A`
 * never picks up the notebook, logs or worktrees. (Runs also list `.autolab/` in
 * .git/info/exclude.) Idempotent; repairs a state directory made by an older autolab.
 */
export function prepareStateDir(stateDir: string): void {
  mkdirSync(stateDir, { recursive: true });
  const ignore = join(stateDir, ".gitignore");
  if (!existsSync(ignore)) writeFileSync(ignore, STATE_GITIGNORE);
}

const STATE_GITIGNORE = "# Written by autolab: the notebook, logs and worktrees stay out of git.\n*\n";

export function openLab(programArg: string | undefined): Lab {
  const { file, stateDir, db } = locateNotebook(programArg);
  const program = loadProgram(file);
  assertNotEmptied(stateDir);
  prepareStateDir(stateDir);
  const ledger = openNotebook(db);
  return { program, dir: dirname(file), stateDir, ledger, notebook: maskUrl(db) };
}

// What SQLite keeps beside the notebook, and the .gitignore every opening writes (prepareStateDir):
// anything else in .autolab/ comes from a run.
const NOTEBOOK_FILES = new Set(["lab.db", "lab.db-wal", "lab.db-shm", "lab.db-journal", ".gitignore"]);

/**
 * Refuses a notebook emptied to 0 bytes where a lab has run: SQLite would take the empty file
 * for a new database, and the run would silently start over with its history gone. A run
 * leaves traces a truncation does not remove — worktrees, logs, lock files in `.autolab/`, the
 * refs of its experiments in git — so an empty file beside them is a lost notebook, not a new one.
 */
export function assertNotEmptied(stateDir: string): void {
  const db = notebookFile(stateDir);
  if (!existsSync(db) || statSync(db).size > 0) return;
  const traces = readdirSync(stateDir).filter((f) => !NOTEBOOK_FILES.has(f));
  const refs = traces.length ? [] : autolabRefs(dirname(stateDir));
  if (!traces.length && !refs.length) return;
  const evidence = traces.length
    ? `${stateDir} holds ${traces.slice(0, 4).join(", ")}${traces.length > 4 ? ", …" : ""}`
    : `git has ${refs.join(", ")}`;
  throw new AutolabError(
    "NOTEBOOK_EMPTY",
    `the lab notebook ${db} is empty (0 bytes), but this lab has run before (${evidence}): its history is gone, and autolab will not silently start a new one in its place.`,
    `Restore ${db} from a backup if you have one. To start afresh instead, move it aside (mv ${db} ${db}.empty); the code of every kept experiment survives in git (branches autolab/<tag>, refs refs/autolab/<tag>/<n>).`,
  );
}

/** A few of the repository's autolab refs (none outside a repository). */
function autolabRefs(dir: string): string[] {
  try {
    const out = execFileSync(
      "git",
      [
        ...SAFE_GIT_CONFIG,
        "for-each-ref",
        "--count=3",
        "--format=%(refname)",
        "refs/autolab/",
        "refs/heads/autolab/",
      ],
      { cwd: dir, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] },
    );
    return out.split("\n").filter(Boolean);
  } catch {
    return [];
  }
}

/** Opens only the notebook (for read-only views that must work even if program.md is now broken). */
export function openLedger(programArg: string | undefined): { ledger: ReadableNotebook; stateDir: string } {
  const { stateDir, db } = locateNotebook(programArg);
  if (!notebookExists(db)) {
    throw new AutolabError(
      "NO_NOTEBOOK",
      `no lab notebook at ${db}.`,
      "Run `autolab run` in the project directory first (or pass --program <path to program.md>).",
    );
  }
  assertNotEmptied(stateDir);
  try {
    prepareStateDir(stateDir); // a notebook made by an older autolab gets its .gitignore
  } catch {
    // A read-only copy of a notebook: views still work.
  }
  return { ledger: openNotebook(db), stateDir };
}

/** The run a view refers to: --tag, else the newest. */
export function selectRun(ledger: Ledger, tag: string | undefined): RunRecord {
  const run = tag ? ledger.getRun(tag) : ledger.latestRun();
  if (!run) {
    const tags = ledger.listRuns().map((r) => r.tag);
    throw new AutolabError(
      "RUN_NOT_FOUND",
      tag ? `no run tagged "${tag}".` : "the notebook has no runs yet.",
      tags.length ? `Known runs: ${tags.join(", ")}.` : "Start one with `autolab run`.",
    );
  }
  return run;
}
