import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { AutolabError } from "../core/errors.ts";

export interface GitOutput {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Configuration for every git call of the harness: git never runs a program a candidate could
 * have planted (hooks, an fsmonitor), and stat checks are strict, so a file rewritten with its
 * old mtime is still seen as changed (ctime cannot be forged).
 */
export const SAFE_GIT_CONFIG = [
  "-c",
  "core.hooksPath=/dev/null",
  "-c",
  "core.fsmonitor=false",
  "-c",
  "core.trustctime=true",
  "-c",
  "core.checkStat=default",
];

/**
 * Runs git and returns its output as data, whatever the exit code. `env` adds variables (a
 * temporary index: GIT_INDEX_FILE; a commit's dates).
 */
export function gitRaw(
  cwd: string,
  args: string[],
  input?: string,
  env: Record<string, string> = {},
): Promise<GitOutput> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      "git",
      [...SAFE_GIT_CONFIG, ...args],
      {
        cwd,
        maxBuffer: 64 * 1024 * 1024,
        env: { ...process.env, ...env, GIT_TERMINAL_PROMPT: "0", LC_ALL: "C" },
      },
      (err, stdout, stderr) => {
        if (err && (err as NodeJS.ErrnoException).code === "ENOENT") {
          // spawn says ENOENT for a missing cwd too: that is a failed git call, not a missing git.
          if (!existsSync(cwd)) {
            resolve({
              code: 128,
              stdout: "",
              stderr: `cannot change to '${cwd}': No such file or directory`,
            });
            return;
          }
          reject(
            new AutolabError(
              "GIT_NOT_FOUND",
              "git is not installed or not on PATH.",
              "Install git (e.g. `apt-get install git`) and try again.",
            ),
          );
          return;
        }
        const code = err ? (typeof err.code === "number" ? err.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
    if (input !== undefined) child.stdin?.end(input);
  });
}

/** Runs git; a non-zero exit is a GitError naming the command (these are harness bugs or broken repos). */
export async function git(cwd: string, args: string[], input?: string): Promise<string> {
  const out = await gitRaw(cwd, args, input);
  if (out.code !== 0) {
    throw new AutolabError(
      "GIT_FAILED",
      `git ${args.join(" ")} failed in ${cwd} (exit ${out.code}): ${out.stderr.trim() || out.stdout.trim()}`,
    );
  }
  return out.stdout;
}

/**
 * `-c` options naming autolab as the author when the user has no git identity here (a commit
 * made for the user — init, init --from, tournament --evolve — keeps theirs when they have one).
 */
export async function commitIdentity(dir: string): Promise<string[]> {
  const email = await gitRaw(dir, ["config", "user.email"]);
  return email.code === 0 && email.stdout.trim()
    ? []
    : ["-c", "user.name=autolab", "-c", "user.email=autolab@localhost"];
}
