/**
 * The batch script of one trial's Slurm job. It is the harness's code (written into the trial's
 * log directory, which the sandbox hides from the command): it runs the command — inside the
 * same bubblewrap sandbox the local executor builds (sandbox.ts: sandboxCommand), or under
 * `/bin/sh -c` when the run is unsandboxed — and records the command's exit status and its
 * wall time in `exit-status` next to the logs, so the end of a job is known even where Slurm
 * keeps no accounting.
 */
import { join } from "node:path";
import type { SandboxSpec } from "../../core/types.ts";
import { TOKEN_ENV } from "../process-tree.ts";
import { sandboxCommand } from "../sandbox.ts";

/** The file the script writes at the end: `<exit code> <start ns> <end ns>`. */
export const EXIT_STATUS_FILE = "exit-status";
/** The empty, read-only file bound over hidden paths (on the shared file system, next to the logs). */
export const EMPTY_FILE = "sandbox-empty";

export interface JobScriptInput {
  command: string;
  cwd: string;
  logDir: string;
  /** AUTOLAB_SEED, AUTOLAB_BUDGET_S, the trial's env and its token. */
  env: Record<string, string>;
  /** The command's sandbox; absent: unsandboxed (the environment comes from sbatch, `--export=ALL`). */
  sandbox?: SandboxSpec;
}

/**
 * What only the node knows, passed into the sandbox: the GPUs and CPUs Slurm gave the job (its
 * `CUDA_VISIBLE_DEVICES` wins over a slot's) and the job's id. Names only; values come from the
 * job's environment at run time.
 */
export const NODE_ENV = [
  "CUDA_VISIBLE_DEVICES",
  "ROCR_VISIBLE_DEVICES",
  "GPU_DEVICE_ORDINAL",
  "SLURM_JOB_ID",
  "SLURM_JOB_GPUS",
  "SLURM_CPUS_PER_TASK",
  "SLURM_CPUS_ON_NODE",
  "SLURM_MEM_PER_NODE",
  "SLURM_MEM_PER_CPU",
  "SLURMD_NODENAME",
] as const;

/** The word of the bwrap argv that the script replaces by the node's own options ("$@"). */
const NODE_ARGS = "\u0000autolab-node-args";

/**
 * Builds the node's bwrap options in "$@": `--setenv` for each NODE_ENV variable the job has,
 * and, when Slurm gave the job GPUs, the NVIDIA device nodes (the sandbox's /dev is minimal).
 */
const NODE_PRELUDE = `set --
for v in ${NODE_ENV.join(" ")}; do
  eval "isset=\\\${$v+x}"
  if [ -n "$isset" ]; then eval "set -- \\"\\$@\\" --setenv $v \\"\\\${$v}\\""; fi
done
if [ -n "\${CUDA_VISIBLE_DEVICES:-}\${SLURM_JOB_GPUS:-}" ]; then
  for d in /dev/nvidia*; do
    if [ -e "$d" ]; then set -- "$@" --dev-bind "$d" "$d"; fi
  done
fi`.split("\n");

/** Quotes one word for /bin/sh: single quotes, with `'` written as `'\''`. Anything else is literal. */
export function shellQuote(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

/**
 * The script's text. The argv of the sandbox is the one `spawnGroup` would run (the sandbox's env
 * plus the trial's, then AUTOLAB_TRIAL_TOKEN), written out word by word in single quotes: no
 * word is ever parsed by a shell except the command itself, inside the sandbox, as locally.
 * Without cgroups on the node, process and memory limits fall back to rlimits (sandbox.ts).
 */
export function jobScript(input: JobScriptInput): string {
  if (!(TOKEN_ENV in input.env)) throw new Error(`jobScript: the env must carry ${TOKEN_ENV}`);
  const badName = Object.keys(input.env).find((k) => !/^[A-Za-z_][A-Za-z0-9_]*$/.test(k));
  if (badName !== undefined)
    throw new Error(`jobScript: ${JSON.stringify(badName)} is not an environment variable name`);
  const status = join(input.logDir, EXIT_STATUS_FILE);
  let argv: string[];
  let exports: string[] = [];
  let prelude: string[] = [];
  if (input.sandbox) {
    const env = { ...input.sandbox.env, ...input.env };
    const sb = sandboxCommand({ ...input.sandbox, env }, input.command, input.cwd, {
      emptyFile: join(input.logDir, EMPTY_FILE),
      lateArgs: [NODE_ARGS],
    });
    argv = [sb.file, ...sb.args];
    prelude = NODE_PRELUDE;
  } else {
    argv = ["/bin/sh", "-c", input.command];
    exports = Object.entries(input.env).map(([k, v]) => `export ${k}=${shellQuote(v)}`);
  }
  return [
    "#!/bin/sh",
    "# An autolab trial (written by the harness; the command runs in the sandbox below).",
    ...exports,
    `cd ${shellQuote(input.cwd)} || exit 125`,
    "start=$(date +%s%N)",
    ...prelude,
    argv.map((w) => (w === NODE_ARGS ? '"$@"' : shellQuote(w))).join(" "),
    "code=$?",
    `printf '%s %s %s\\n' "$code" "$start" "$(date +%s%N)" > ${shellQuote(`${status}.tmp`)} && mv -f ${shellQuote(`${status}.tmp`)} ${shellQuote(status)}`,
    'exit "$code"',
    "",
  ].join("\n");
}

/** `exit-status`'s content: the command's exit code and wall time, or undefined when it is not (yet) whole. */
export function parseExitStatus(text: string): { exitCode: number; wallS: number } | undefined {
  const m = /^(\d+) (\d+) (\d+)\n?$/.exec(text);
  if (!m) return undefined;
  const wallNs = Number(BigInt(m[3] as string) - BigInt(m[2] as string));
  return { exitCode: Number(m[1]), wallS: Math.max(0, wallNs / 1e9) };
}
