import { existsSync, mkdirSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { AutolabError } from "../core/errors.ts";
import type { RunRecord } from "../core/ledger.ts";
import type { Program } from "../core/types.ts";
import { SqliteLedger } from "../ledger/sqlite-ledger.ts";
import { loadProgram } from "../program/index.ts";

/** A project as the CLI sees it: its program, its `.autolab/` state directory and notebook. */
export interface Lab {
  program: Program;
  /** Directory of program.md. */
  dir: string;
  stateDir: string;
  ledger: SqliteLedger;
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
  const file = programPath(programArg);
  const program = loadProgram(file);
  const stateDir = stateDirOf(file);
  prepareStateDir(stateDir);
  const ledger = new SqliteLedger(join(stateDir, "lab.db"));
  return { program, dir: dirname(file), stateDir, ledger };
}

/** Opens only the notebook (for read-only views that must work even if program.md is now broken). */
export function openLedger(programArg: string | undefined): { ledger: SqliteLedger; stateDir: string } {
  const file = programPath(programArg);
  const stateDir = stateDirOf(file);
  const db = join(stateDir, "lab.db");
  if (!existsSync(db)) {
    throw new AutolabError(
      "NO_NOTEBOOK",
      `no lab notebook at ${db}.`,
      "Run `autolab run` in the project directory first (or pass --program <path to program.md>).",
    );
  }
  try {
    prepareStateDir(stateDir); // a notebook made by an older autolab gets its .gitignore
  } catch {
    // A read-only copy of a notebook: views still work.
  }
  return { ledger: new SqliteLedger(db), stateDir };
}

/** The run a view refers to: --tag, else the newest. */
export function selectRun(ledger: SqliteLedger, tag: string | undefined): RunRecord {
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
