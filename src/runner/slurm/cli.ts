/**
 * Slurm's command-line tools (sbatch, squeue, scancel, sacct) as the Slurm executor uses them.
 * Every call is an argv array given to execFile: no shell ever sees a partition name, an extra
 * argument or a path (program.md is text anyone with commit access writes).
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { findOnPath } from "../sandbox.ts";

export interface SlurmToolOptions {
  /** The directory holding sbatch, squeue, scancel and sacct; default: each found on PATH. */
  bin?: string;
  /** The environment the tools run in (sbatch passes it on to the job: `--export=ALL`). Default: the harness's. */
  env?: NodeJS.ProcessEnv;
}

/** One line of `squeue`: what the executor needs to know about a job. */
export interface JobInfo {
  id: string;
  /** Slurm's long state name: PENDING, RUNNING, COMPLETING, COMPLETED, FAILED, TIMEOUT, CANCELLED, NODE_FAIL, … */
  state: string;
  /** Why it is pending or why it ended (`Resources`, `BeginTime`, `PartitionDown`, `NonZeroExitCode`, `None`). */
  reason: string;
  partition: string;
  /** The node(s) it runs on; empty while pending. */
  nodes: string;
}

export type ToolResult =
  | { ok: true; stdout: string }
  | { ok: false; message: string; code?: number | string };

const TOOL_TIMEOUT_MS = 60_000;

/** squeue's fields, separated by `|` (none of them can contain one: ids, state names, reason codes, partition and node names). */
const SQUEUE_FORMAT = "%i|%T|%r|%P|%N";

export class SlurmTools {
  readonly #bin: string | undefined;
  readonly #env: NodeJS.ProcessEnv;

  constructor(opts: SlurmToolOptions = {}) {
    this.#bin = opts.bin;
    this.#env = opts.env ?? process.env;
  }

  /** The path of a tool, or undefined when it is not installed. */
  which(tool: "sbatch" | "squeue" | "scancel" | "sacct"): string | undefined {
    return this.#bin !== undefined ? join(this.#bin, tool) : findOnPath(tool, this.#env.PATH);
  }

  /** Runs a tool with `args` (argv items, never a shell). */
  run(
    tool: "sbatch" | "squeue" | "scancel" | "sacct",
    args: string[],
    env?: NodeJS.ProcessEnv,
  ): Promise<ToolResult> {
    const file = this.which(tool) ?? tool;
    return new Promise((resolve) => {
      execFile(
        file,
        args,
        { env: env ?? this.#env, timeout: TOOL_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024, encoding: "utf8" },
        (err, stdout, stderr) => {
          if (!err) return resolve({ ok: true, stdout });
          const e = err as NodeJS.ErrnoException & { code?: number | string; killed?: boolean };
          const said = lastLine(stderr) || lastLine(stdout);
          const message =
            e.code === "ENOENT"
              ? `${tool} is not installed here (${file} not found)`
              : e.killed
                ? `${tool} did not answer within ${TOOL_TIMEOUT_MS / 1000}s`
                : said || e.message;
          resolve({ ok: false, message, ...(e.code !== undefined ? { code: e.code } : {}) });
        },
      );
    });
  }

  /** Submits a batch script; the job id, or why sbatch refused. `args` go before the script path. */
  async submit(
    args: string[],
    script: string,
    env?: NodeJS.ProcessEnv,
  ): Promise<{ id: string } | { error: string }> {
    const out = await this.run("sbatch", ["--parsable", ...args, script], env);
    if (!out.ok) return { error: out.message };
    // --parsable: "<id>" or "<id>;<cluster>".
    const id = out.stdout.trim().split(";")[0] ?? "";
    if (!/^\d+$/.test(id))
      return { error: `sbatch printed no job id (${JSON.stringify(out.stdout.trim())})` };
    return { id };
  }

  /**
   * The job as squeue sees it (finished jobs too, for MinJobAge after their end). `undefined`:
   * squeue does not know the job any more; a string: squeue could not be asked (controller down).
   */
  async job(id: string): Promise<JobInfo | undefined | string> {
    const out = await this.run("squeue", [
      "--jobs",
      id,
      "--states=all",
      "--noheader",
      `--format=${SQUEUE_FORMAT}`,
    ]);
    if (!out.ok) return /invalid job id/i.test(out.message) ? undefined : out.message;
    for (const line of out.stdout.split("\n")) {
      const info = parseSqueueLine(line);
      if (info?.id === id) return info;
    }
    return undefined;
  }

  /**
   * The job's end state from accounting (`sacct --parsable2 --noheader`), for a job squeue has
   * forgotten; undefined where accounting is off ("Slurm accounting storage is disabled") or
   * does not know it either.
   */
  async accounted(
    id: string,
  ): Promise<{ state: string; exitCode: number | null; signal: number | null } | undefined> {
    const out = await this.run("sacct", [
      "--jobs",
      id,
      "--parsable2",
      "--noheader",
      "--format=JobID,State,ExitCode",
    ]);
    if (!out.ok) return undefined;
    for (const line of out.stdout.split("\n")) {
      const row = parseSacctLine(line);
      if (row?.id === id) return row;
    }
    return undefined;
  }

  /** Cancels jobs (scancel: SIGTERM, then SIGKILL after the cluster's KillWait). */
  async cancel(ids: string[]): Promise<ToolResult> {
    if (ids.length === 0) return { ok: true, stdout: "" };
    return this.run("scancel", ids);
  }

  /** The ids of this user's unfinished jobs named `name` (`squeue --name`). */
  async named(name: string): Promise<string[] | string> {
    const out = await this.run("squeue", ["--name", name, "--noheader", "--format=%i"]);
    if (!out.ok) return out.message;
    return out.stdout
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => /^\d+$/.test(l));
  }
}

/** One `%i|%T|%r|%P|%N` line, or undefined for anything else. */
export function parseSqueueLine(line: string): JobInfo | undefined {
  const parts = line.trim().split("|");
  if (parts.length !== 5) return undefined;
  const [id = "", state = "", reason = "", partition = "", nodes = ""] = parts.map((p) => p.trim());
  if (!/^\d+$/.test(id) || !/^[A-Z_]+$/.test(state)) return undefined;
  return { id, state, reason, partition, nodes };
}

/** One `JobID|State|ExitCode` line of `sacct --parsable2` ("CANCELLED by 0" → CANCELLED; "0:15" → exit 0, signal 15). */
export function parseSacctLine(
  line: string,
): { id: string; state: string; exitCode: number | null; signal: number | null } | undefined {
  const parts = line.trim().split("|");
  if (parts.length !== 3) return undefined;
  const [id = "", stateText = "", exit = ""] = parts;
  const state = stateText.split(" ")[0] ?? "";
  if (!/^\d+$/.test(id) || !/^[A-Z_]+$/.test(state)) return undefined;
  const m = /^(\d+):(\d+)$/.exec(exit);
  return {
    id,
    state,
    exitCode: m ? Number(m[1]) : null,
    signal: m && Number(m[2]) > 0 ? Number(m[2]) : null,
  };
}

function lastLine(s: string): string {
  const lines = s
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "");
  return lines.at(-1) ?? "";
}
