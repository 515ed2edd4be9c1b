/**
 * What each process of a run may see and touch (docs/security.md): the SandboxSpecs of setup,
 * a trial's command, its evaluate step and a researcher, built from program.md and the run's
 * paths. The runner turns a spec into a bubblewrap command line (src/runner/sandbox.ts).
 *
 * The rules, in one place:
 * - everything is read-only, the worktree is the only writable project path (plus declared
 *   caches and a private /tmp);
 * - the notebook and logs (`.autolab/`), the repository's git directory and the other
 *   worktrees are invisible; so are the usual credential files of the home directory;
 * - protected files, the worktree's `.git` file and setup's files are read-only inside it;
 * - holdout data is invisible to the command and to researchers, in the worktree and in the
 *   user's checkout; only the evaluate step reads it;
 * - the environment is a short list (PATH, HOME, locale, …) plus `sandbox.env` names: no
 *   token, key or password of the harness's environment enters;
 * - no network for setup-less trials unless `sandbox.network`; setup has it (it downloads data);
 * - researchers see neither the home directory nor the user's checkout (their worktree, log
 *   directory and tools only), and reach only their model endpoints, through the egress proxy
 *   the agent runs (src/runner/egress-proxy.ts).
 */
import { existsSync, mkdirSync, readdirSync, realpathSync } from "node:fs";
import { homedir } from "node:os";
import { isAbsolute, join, resolve } from "node:path";
import type { Confinement } from "../core/confinement.ts";
import { AutolabError } from "../core/errors.ts";
import { fileRules, matchedPaths } from "../core/file-patterns.ts";
import type { Program, SandboxSpec } from "../core/types.ts";
import type { Workspace } from "../core/workspace.ts";
import { probeSandbox } from "../runner/sandbox.ts";

export interface RunPaths {
  /** The repository's top directory: visible read-only even when it lies under /tmp (which is private inside). */
  repoRoot: string;
  /** The program's directory in the user's checkout. */
  programDir: string;
  /** `.autolab/` of the program: notebook, logs, worktrees. */
  stateDir: string;
  /** The repository's common git directory (objects, refs, config). */
  gitCommonDir: string;
}

/** Variables of autolab's environment a trial gets (besides `sandbox.env`); the rest stays out. */
const BASE_ENV = ["PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TERM", "SHELL"];

/** Credentials people keep in their home directory: invisible to every sandboxed process. */
export const HOME_SECRETS = [
  ".ssh",
  ".gnupg",
  ".aws",
  ".azure",
  ".kube",
  ".docker",
  ".netrc",
  ".pgpass",
  ".git-credentials",
  ".npmrc",
  ".pypirc",
  ".config/gcloud",
  ".config/gh",
  ".cache/huggingface/token",
  ".claude",
  ".claude.json",
  ".codex",
  ".gemini",
  ".qwen",
  ".pi",
  ".config/opencode",
  ".local/share/opencode",
];

/**
 * The run's confinement. `sandbox: off` and a machine without bubblewrap give an unsandboxed
 * one (its description says why); `sandbox: { required: true }` turns the latter into an error.
 */
export function createConfinement(
  program: Program,
  paths: RunPaths,
  probe: ReturnType<typeof probeSandbox> = probeSandbox(),
): Confinement {
  if (!program.sandbox.enabled) return unsandboxed("sandbox: off in program.md");
  if (!probe.ok) {
    if (program.sandbox.required) {
      throw new AutolabError(
        "SANDBOX_UNAVAILABLE",
        `program.md requires a sandbox (sandbox: { required: true }), but none can be made here: ${probe.reason}.`,
        probe.hint,
      );
    }
    return unsandboxed(probe.reason, probe.hint);
  }
  const devices = gpuDevices(program);
  const home = process.env.HOME ?? homedir();
  const secrets = HOME_SECRETS.map((s) => join(home, s));
  const under = (dir: string, list: string[]) => list.map((p) => resolve(dir, p));
  // files: entries may be directories or globs (src/core/file-patterns.ts): what they match in
  // `dir` now, when the spec is made (after setup, whose files a holdout glob may name).
  const matched = (dir: string, list: string[]) => under(dir, matchedPaths(dir, list));
  const hiddenAlways = [paths.stateDir, paths.gitCommonDir, ...secrets];
  const caches = (ws: Workspace) =>
    program.sandbox.caches.map((c) =>
      c.startsWith("~/") ? join(home, c.slice(2)) : isAbsolute(c) ? c : resolve(ws.projectDir, c),
    );
  const projectCaches = program.sandbox.caches.filter((c) => !c.startsWith("~/") && !isAbsolute(c));
  const env = (extra: Record<string, string>) => ({
    ...pickEnv(program.sandbox.env),
    TMPDIR: "/tmp",
    ...extra,
  });
  const ensure = (dirs: string[]) => {
    for (const d of dirs) mkdirSync(d, { recursive: true });
    return dirs;
  };
  const base = (ws: Workspace, extraEnv: Record<string, string>): SandboxSpec => ({
    writable: [ws.worktree],
    readOnly: [paths.repoRoot, join(ws.worktree, ".git"), ...matched(ws.projectDir, program.files.protected)],
    hidden: hiddenAlways,
    network: program.sandbox.network,
    env: env(extraEnv),
    limits: {},
    devices,
  });
  const holdoutEverywhere = (ws: Workspace) => [
    ...matched(ws.projectDir, program.files.holdout),
    ...matched(paths.programDir, program.files.holdout),
  ];

  return {
    description: `bubblewrap ${probe.version}`,
    sandboxed: true,
    projectCaches,
    setup(ws, extraEnv) {
      const b = base(ws, extraEnv);
      return { ...b, writable: [...b.writable, ...ensure(caches(ws))], network: true };
    },
    trial(ws, setupFiles, extraEnv) {
      const b = base(ws, extraEnv);
      const setupRo = under(ws.projectDir, setupFiles);
      const command: SandboxSpec = {
        ...b,
        writable: [...b.writable, ...ensure(caches(ws))],
        readOnly: [...b.readOnly, ...setupRo],
        hidden: [...b.hidden, ...holdoutEverywhere(ws)],
        limits: program.sandbox.limits,
      };
      const evaluate: SandboxSpec = {
        ...b,
        readOnly: [...b.readOnly, ...setupRo, ...under(ws.projectDir, program.outputs)],
        // Project caches are the command's scratch space: the evaluator never imports from them.
        hidden: [
          ...b.hidden,
          ...under(ws.projectDir, projectCaches),
          ...matched(paths.programDir, program.files.holdout),
        ],
      };
      return { command, evaluate };
    },
    researcher(ws, setupFiles, writable) {
      const b = base(ws, {});
      // The worktree is read-only but for the editable files and directories, each bound
      // writable on top (docs/agents.md "Sandbox"): an edit anywhere else fails with EROFS
      // instead of being left to the scope check. A bound file cannot be replaced by a rename
      // and a read-only directory takes no new file, so an editable path that does not exist
      // yet cannot be created; a CLI that edits by rename (Claude Code, Qwen Code, shell
      // commands) gets the editable files' directories instead, every other entry of them still
      // read-only (agentSandbox in src/agents/cli/cli-agent.ts). Only paths that exist and
      // (symlinks resolved) lie in the worktree: a symlink must not make something outside it
      // writable.
      const root = realpathSync(ws.worktree);
      // A glob binds the files it matches; a directory entry binds the directory (new files in
      // it are in scope). Protected and holdout paths are bound on top, read-only and hidden.
      const rules = fileRules(program.files);
      const editable = under(
        ws.projectDir,
        matchedPaths(ws.projectDir, program.files.editable).filter((p) => rules.editable(p)),
      ).filter((p) => {
        try {
          const real = realpathSync(p);
          return real === root || real.startsWith(`${root}/`);
        } catch {
          return false;
        }
      });
      // The home directory and the user's checkout are hidden whole (docs/security.md "5. The
      // researcher gets only what it needs"): no credential store, shell history, `.env`, or
      // another program's notebook, whatever its name. What shows through: the worktree and
      // the paths bound below (the agent's log directory and isolated home, its executable's
      // directory and its preset's home allowlist: agentSandbox), and the PATH directories that
      // lie in them (the tools).
      // (Never the worktree itself: a checkout used as its own worktree stays what it is.)
      const reach = [home, paths.repoRoot].filter(
        (d) => d !== "/" && isAbsolute(d) && resolve(d) !== resolve(ws.worktree),
      );
      return {
        ...b,
        writable: [...editable, ...writable],
        readOnly: [
          ws.worktree,
          ...b.readOnly.filter((p) => p !== paths.repoRoot),
          ...under(ws.projectDir, setupFiles),
          ...toolDirsIn(reach, hiddenAlways),
        ],
        hidden: [...b.hidden, ...holdoutEverywhere(ws), ...reach],
        // Its own network namespace: the model endpoints only, through the agent's egress proxy.
        network: false,
        env: {},
      };
    },
  };
}

function unsandboxed(why: string, hint?: string): Confinement {
  return {
    description: `unsandboxed: ${why}`,
    sandboxed: false,
    ...(hint ? { hint } : {}),
    projectCaches: [],
    setup: () => undefined,
    trial: () => undefined,
    researcher: () => undefined,
  };
}

/**
 * The PATH directories (real paths) that lie inside one of `roots` (hidden from researchers), with
 * the parent of a `bin` or `.bin` (a venv's lib/, node_modules next to .bin) unless that parent
 * is a root itself; never one inside `never` (the notebook, the git directory, credentials).
 */
export function toolDirsIn(roots: string[], never: string[], path = process.env.PATH ?? ""): string[] {
  const real = (p: string) => {
    try {
      return realpathSync(p);
    } catch {
      return undefined;
    }
  };
  const realRoots = roots.map(real).filter((r): r is string => r !== undefined);
  const realNever = never.map((p) => real(p) ?? p);
  const within = (p: string, d: string) => p === d || p.startsWith(`${d}/`);
  const out = new Set<string>();
  for (const entry of path.split(":")) {
    if (!isAbsolute(entry)) continue;
    const dir = real(entry);
    if (!dir) continue;
    const root = realRoots.find((r) => within(dir, r));
    if (!root || dir === root) continue;
    const parent = dir.slice(0, dir.lastIndexOf("/"));
    const wide = (dir.endsWith("/bin") || dir.endsWith("/.bin")) && parent !== root ? parent : dir;
    if (realNever.some((n) => within(wide, n) || within(n, wide))) {
      if (!realNever.some((n) => within(dir, n))) out.add(dir);
      continue;
    }
    out.add(wide);
  }
  return [...out];
}

/** The base variables that are set, and the program's `sandbox.env` names. */
function pickEnv(names: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined) continue;
    if (BASE_ENV.includes(k) || k.startsWith("LC_") || names.includes(k)) out[k] = v;
  }
  return out;
}

/** /dev/nvidia* when slots name GPUs; a clear error when there are none to pass through. */
function gpuDevices(program: Program): string[] {
  if (!program.slots?.gpus) return [];
  let names: string[] = [];
  try {
    names = readdirSync("/dev").filter((d) => d.startsWith("nvidia"));
  } catch {
    // no /dev: reported below
  }
  const devices = names
    .map((d) => join("/dev", d))
    .filter((d) => existsSync(d) && !d.endsWith("/nvidia-caps"));
  if (devices.length === 0) {
    throw new AutolabError(
      "GPU_DEVICE_MISSING",
      `program.md's slots name GPUs (${program.slots.gpus.join(", ")}), but this machine has no /dev/nvidia* device to pass into the sandbox.`,
      "Check the NVIDIA driver (nvidia-smi), or remove slots.gpus to run on CPU slots.",
    );
  }
  const caps = "/dev/nvidia-caps";
  return existsSync(caps) ? [...devices, caps] : devices;
}
