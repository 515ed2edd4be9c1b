/**
 * Process trees on Linux: spawning a command in its own process group, finding every descendant
 * (including ones that left the group with setsid or were orphaned to init), sampling their
 * resource use, and killing all of them.
 *
 * Descendants are found three ways, because each one alone has holes:
 *  1. the process group (`kill(-pgid)`): cheap, but `setsid` leaves it;
 *  2. parent links in /proc (`/proc/<pid>/task/<tid>/children`, or a scan of every
 *     `/proc/<pid>/stat` where that file is missing), snapshotted every sample so that a process
 *     whose parent died (re-parented to init or a subreaper) is still remembered;
 *  3. an environment token: the trial runs with `AUTOLAB_TRIAL_TOKEN=<random>` and every process
 *     created after the root whose `/proc/<pid>/environ` carries it belongs to the trial. This
 *     catches a double fork + setsid that happens between two snapshots. A process that clears
 *     its environment (`env -i`) before escaping both the group and the snapshots is not found
 *     here; in a sandbox (src/runner/sandbox.ts) it cannot escape: the sandbox's pid namespace
 *     dies with bwrap.
 *
 * Everything degrades to zeros and to group-only kills where /proc is absent.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import type { SandboxSpec } from "../core/types.ts";
import { type LimitGroup, sandboxCommand } from "./sandbox.ts";

export const TOKEN_ENV = "AUTOLAB_TRIAL_TOKEN";

/** Kernel clock ticks per second for /proc times (USER_HZ); 100 on every mainstream Linux build. */
const CLOCK_TICKS = 100;

export const hasProc = existsSync("/proc/self/stat");
const hasChildrenFiles = hasProc && existsSync(`/proc/self/task/${process.pid}/children`);

export interface ProcStat {
  pid: number;
  /** R, S, D, Z (zombie), T, X ... */
  state: string;
  ppid: number;
  pgrp: number;
  session: number;
  /** utime + stime of the process itself, in seconds. */
  selfCpuS: number;
  /** cutime + cstime: children it has waited for, in seconds. */
  childCpuS: number;
  /** Start time in clock ticks since boot: with pid, identifies a process across pid reuse. */
  startTime: number;
}

/** Reads /proc/<pid>/stat; undefined when the process is gone or /proc is absent. */
export function readStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "latin1");
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may itself contain spaces and parentheses.
  const close = text.lastIndexOf(")");
  if (close === -1) return undefined;
  const f = text.slice(close + 2).split(" ");
  // f[0] is field 3 (state); field k is f[k - 3].
  const num = (field: number) => Number(f[field - 3]);
  return {
    pid,
    state: f[0] ?? "?",
    ppid: num(4),
    pgrp: num(5),
    session: num(6),
    selfCpuS: (num(14) + num(15)) / CLOCK_TICKS,
    childCpuS: (num(16) + num(17)) / CLOCK_TICKS,
    startTime: num(22),
  };
}

/** Resident set size of one process in kB (VmRSS), 0 when unknown (gone, zombie, kernel thread). */
export function readRssKb(pid: number): number {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/status`, "latin1");
  } catch {
    return 0;
  }
  const i = text.indexOf("VmRSS:");
  if (i === -1) return 0;
  return Number.parseInt(text.slice(i + 6, text.indexOf("\n", i)), 10) || 0;
}

/** True while the process exists and is not a zombie (a zombie is dead, only not yet reaped). */
export function isAlive(pid: number): boolean {
  if (hasProc) {
    const st = readStat(pid);
    return st !== undefined && st.state !== "Z" && st.state !== "X";
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Direct children of a process (of all its threads). */
export function listChildren(pid: number): number[] {
  if (!hasProc) return [];
  if (!hasChildrenFiles) return scanChildren().get(pid) ?? [];
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const tid of tids) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/task/${tid}/children`, "latin1");
    } catch {
      continue;
    }
    for (const s of text.split(" ")) if (s !== "" && s !== "\n") out.push(Number(s));
  }
  return out;
}

/** ppid → children from a scan of every /proc/<pid>/stat: the fallback without children files. */
function scanChildren(): Map<number, number[]> {
  const map = new Map<number, number[]>();
  for (const pid of procPids()) {
    const st = readStat(pid);
    if (!st) continue;
    const list = map.get(st.ppid);
    if (list) list.push(pid);
    else map.set(st.ppid, [pid]);
  }
  return map;
}

function procPids(): number[] {
  const out: number[] = [];
  let names: string[];
  try {
    names = readdirSync("/proc");
  } catch {
    return out;
  }
  for (const name of names) {
    const c = name.charCodeAt(0);
    if (c >= 48 && c <= 57) out.push(Number(name));
  }
  return out;
}

/** `pid` and all its live descendants reachable through parent links (breadth first). */
export function descendants(pid: number): number[] {
  const out: number[] = [];
  const seen = new Set<number>();
  const queue = [pid];
  while (queue.length > 0) {
    const p = queue.shift() as number;
    if (seen.has(p)) continue;
    seen.add(p);
    out.push(p);
    for (const c of listChildren(p)) queue.push(c);
  }
  return out;
}

/**
 * Processes created after `sincePid` whose environment carries `NAME=token`. Pids grow until they
 * wrap at pid_max; /proc/loadavg's last field (the newest pid) tells whether they wrapped.
 */
export function findByToken(token: string, sincePid: number): number[] {
  if (!hasProc) return [];
  let lastPid = Number.POSITIVE_INFINITY;
  try {
    const parts = readFileSync("/proc/loadavg", "latin1").trim().split(" ");
    lastPid = Number(parts[parts.length - 1]) || lastPid;
  } catch {}
  const wrapped = lastPid < sincePid;
  const needle = Buffer.from(`${TOKEN_ENV}=${token}\0`);
  const out: number[] = [];
  for (const pid of procPids()) {
    if (pid === process.pid) continue;
    if (!(pid >= sincePid || (wrapped && pid <= lastPid))) continue;
    try {
      if (readFileSync(`/proc/${pid}/environ`).includes(needle)) out.push(pid);
    } catch {}
  }
  return out;
}

export function newTreeToken(): string {
  return randomBytes(12).toString("hex");
}

export interface SpawnGroupOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** Runs the command inside this sandbox (src/runner/sandbox.ts), with `sandbox.env` + `env` as its whole environment. */
  sandbox?: SandboxSpec;
  /** cgroups the sandbox joins before it starts (createLimitGroup). */
  limitGroup?: LimitGroup;
  /**
   * A deadline that holds without the harness: outside a sandbox, the command runs under
   * coreutils' `timeout`, which signals the whole group at `afterMs` (SIGTERM) and again after
   * `graceMs` (SIGKILL) even if the harness was killed with -9 meanwhile. The harness's own
   * timer fires first (see DEADLINE_MARGIN_MS); this is the backstop. Inside a sandbox bwrap's
   * `--die-with-parent` already kills everything the moment the harness dies.
   */
  deadline?: { afterMs: number; graceMs: number };
}

/** coreutils `timeout` (Debian: /usr/bin), or undefined where there is none. */
const TIMEOUT_BIN = ["/usr/bin/timeout", "/bin/timeout"].find((f) => existsSync(f));

/**
 * How much later than the harness's own limit the backstop deadline fires: the harness, when
 * alive, times the command out itself (and reports it as a timeout, with its kill report).
 */
export const DEADLINE_MARGIN_MS = 2000;

/** Exit status of `timeout` when it timed the command out itself. */
export const DEADLINE_EXIT_CODE = 124;

/** The argv running `sh -c command` under the backstop deadline, when one applies here. */
function withDeadline(
  argv: { file: string; args: string[] },
  deadline: SpawnGroupOptions["deadline"],
): { file: string; args: string[] } {
  if (!deadline || !TIMEOUT_BIN || !Number.isFinite(deadline.afterMs)) return argv;
  const s = (ms: number) => `${(ms / 1000).toFixed(3)}s`;
  return {
    file: TIMEOUT_BIN,
    args: [
      `--kill-after=${s(deadline.graceMs + DEADLINE_MARGIN_MS)}`,
      s(deadline.afterMs + DEADLINE_MARGIN_MS),
      argv.file,
      ...argv.args,
    ],
  };
}

/**
 * Runs `command` with `/bin/sh -c` as the leader of a new session and process group (pgid = pid),
 * stdin closed, stdout and stderr piped. With a sandbox the leader is bwrap, and the command runs
 * inside it (its tree is still visible in the host's /proc: sampling and kills work as before).
 * Outside a sandbox, with `deadline`, the leader is coreutils' `timeout` running that shell: the
 * command never outlives its deadline, harness or not.
 * Throws when the sandbox's paths are unusable (sandboxCommand).
 */
export function spawnGroup(command: string, opts: SpawnGroupOptions): ChildProcess {
  let argv = withDeadline({ file: "/bin/sh", args: ["-c", command] }, opts.deadline);
  if (opts.sandbox) {
    const env = { ...opts.sandbox.env };
    for (const [k, v] of Object.entries(opts.env)) if (v !== undefined) env[k] = v;
    const group = opts.limitGroup ? { group: opts.limitGroup } : {};
    argv = sandboxCommand({ ...opts.sandbox, env }, command, opts.cwd, group);
  }
  return spawn(argv.file, argv.args, {
    cwd: opts.cwd,
    env: opts.env,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
}

export interface TreeUsage {
  /** Max over samples of the summed VmRSS of the tree, in MB. */
  peakRssMb: number;
  /**
   * Approximate CPU seconds: max over samples of Σ(utime+stime+cutime+cstime) over the root and
   * its live descendants. Sampled, so the last interval before exit is missed and a descendant
   * orphaned to init takes its time with it when it dies.
   */
  cpuS: number;
  samples: number;
}

export interface KillReport {
  /** Processes signalled with SIGTERM. */
  terminated: number;
  /** Processes that survived the grace period and were SIGKILLed. */
  killed: number;
}

/** Trees with live processes, killed synchronously if the harness itself exits. */
const live = new Set<ProcessTree>();
let exitHookInstalled = false;

/**
 * One tracked tree: remembers every process it has seen (pid + start time, so a reused pid is
 * never signalled), samples resource use, and kills everything it can find.
 */
export class ProcessTree {
  readonly rootPid: number;
  readonly token: string | undefined;
  /** pid → start time, for every process ever seen in the tree. */
  readonly #known = new Map<number, number>();
  #peakRssKb = 0;
  #cpuS = 0;
  #samples = 0;
  #timer: NodeJS.Timeout | undefined;
  #killing: Promise<KillReport> | undefined;
  readonly #sandboxed: boolean;

  /**
   * `sandboxed`: the root is bwrap (sandbox.ts) and its child bwrap's init in the sandbox's pid
   * namespace. SIGTERM then goes to the processes inside only: bwrap forwards no signal, and its
   * death SIGKILLs everything inside at once, which would take away the command's grace period.
   */
  constructor(rootPid: number, token?: string, opts: { sandboxed?: boolean } = {}) {
    this.rootPid = rootPid;
    this.token = token;
    this.#sandboxed = opts.sandboxed ?? false;
    // The root is our own child: until it is reaped its pid cannot be reused, so this is it.
    this.#remember(rootPid);
    live.add(this);
    installExitHook();
  }

  get usage(): TreeUsage {
    return { peakRssMb: this.#peakRssKb / 1024, cpuS: this.#cpuS, samples: this.#samples };
  }

  /** Samples after `firstMs`, then every `intervalMs`, until stop(). The timers do not hold the process open. */
  startSampling(intervalMs = 100, firstMs = 10): void {
    if (!hasProc) return;
    const tick = (delay: number) => {
      this.#timer = setTimeout(() => {
        this.sample();
        tick(intervalMs);
      }, delay);
      this.#timer.unref();
    };
    tick(firstMs);
  }

  stopSampling(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** One snapshot: extends the known set and updates peak RSS and CPU. */
  sample(): void {
    if (!hasProc) return;
    this.#samples++;
    let rssKb = 0;
    let cpu = 0;
    for (const pid of this.#walk()) {
      const st = readStat(pid);
      if (!st || st.state === "Z" || st.state === "X") continue;
      rssKb += readRssKb(pid);
      cpu += st.selfCpuS + st.childCpuS;
    }
    if (rssKb > this.#peakRssKb) this.#peakRssKb = rssKb;
    if (cpu > this.#cpuS) this.#cpuS = cpu;
  }

  /** Live members: the root's descendants plus every remembered process and its descendants. */
  #walk(): number[] {
    // A remembered process counts only while its start time matches: its pid may have been reused.
    const roots: number[] = [];
    for (const [pid, start] of this.#known) {
      if (readStat(pid)?.startTime === start) roots.push(pid);
    }
    const seen = new Set<number>();
    for (const r of roots) {
      if (seen.has(r)) continue;
      for (const p of descendants(r)) {
        if (seen.has(p)) continue;
        seen.add(p);
        this.#remember(p);
      }
    }
    return [...seen];
  }

  /** Records a process found to belong to the tree (a newer start time replaces a reused pid's). */
  #remember(pid: number): boolean {
    const st = readStat(pid);
    if (!st) return false;
    this.#known.set(pid, st.startTime);
    return true;
  }

  /** Every live (non-zombie) process of the tree that can be found now. */
  members(withToken = true): number[] {
    if (!hasProc) return [];
    const found = new Set(this.#walk());
    if (withToken && this.token) {
      for (const pid of findByToken(this.token, this.rootPid)) {
        for (const p of descendants(pid)) {
          if (this.#remember(p)) found.add(p);
        }
      }
    }
    return [...found].filter((pid) => {
      const st = readStat(pid);
      return (
        st !== undefined && st.state !== "Z" && st.state !== "X" && this.#known.get(pid) === st.startTime
      );
    });
  }

  /** Whether anything of the tree is still running (a member found in /proc, or a live group member). */
  alive(): boolean {
    return this.members().length > 0 || groupAlive(this.rootPid);
  }

  /**
   * SIGTERM the group and every member, wait up to `graceMs` for them to go, then freeze (SIGSTOP)
   * and SIGKILL whatever is left, repeating until nothing is found. Resolves once the tree is gone.
   * Concurrent calls share one kill.
   */
  kill(graceMs = 2000): Promise<KillReport> {
    this.#killing ??= this.#kill(graceMs).finally(() => {
      this.#killing = undefined;
    });
    return this.#killing;
  }

  async #kill(graceMs: number): Promise<KillReport> {
    let first = this.members();
    if (this.#sandboxed) {
      // bwrap's two processes are left to the SIGKILL below (or go when the command exits).
      const bwrap = new Set([this.rootPid, ...listChildren(this.rootPid)]);
      first = first.filter((pid) => !bwrap.has(pid));
    } else signalGroup(this.rootPid, "SIGTERM");
    for (const pid of first) signal(pid, "SIGTERM");
    // A stopped process cannot act on SIGTERM until it is continued.
    signalGroup(this.rootPid, "SIGCONT");
    for (const pid of first) signal(pid, "SIGCONT");
    const report: KillReport = { terminated: first.length, killed: 0 };

    const deadline = Date.now() + graceMs;
    let left = first;
    while (Date.now() < deadline) {
      left = this.members();
      if (left.length === 0 && !groupAlive(this.rootPid)) break;
      await sleep(Math.min(25, Math.max(1, deadline - Date.now())));
    }
    // Freeze before killing, so nothing forks a new child between the scan and the kill.
    for (let round = 0; round < 20; round++) {
      left = this.members();
      if (left.length === 0 && !groupAlive(this.rootPid)) break;
      signalGroup(this.rootPid, "SIGSTOP");
      for (const pid of left) signal(pid, "SIGSTOP");
      const frozen = this.members();
      signalGroup(this.rootPid, "SIGKILL");
      for (const pid of frozen) signal(pid, "SIGKILL");
      report.killed += frozen.length;
      await sleep(round === 0 ? 5 : 25);
    }
    return report;
  }

  /** Forgets the tree for the exit hook. Call once it is gone. */
  release(): void {
    this.stopSampling();
    live.delete(this);
  }

  /** Synchronous last resort when the harness exits: SIGKILL everything known. */
  killNowSync(): void {
    signalGroup(this.rootPid, "SIGKILL");
    for (const pid of this.members(false)) signal(pid, "SIGKILL");
  }
}

/**
 * Kills `pid`'s process group and every descendant (SIGTERM, then SIGKILL after `graceMs`).
 * Prefer a ProcessTree that sampled while the process ran: it also remembers orphans.
 */
export async function killTree(
  pid: number,
  opts: { graceMs?: number; token?: string } = {},
): Promise<KillReport> {
  const tree = new ProcessTree(pid, opts.token);
  try {
    tree.sample();
    return await tree.kill(opts.graceMs ?? 2000);
  } finally {
    tree.release();
  }
}

/**
 * Whether the group still has a member that is not a zombie. kill(-pgid, 0) also succeeds for
 * zombies (and some inits never reap orphans), so it is only trusted where /proc cannot answer.
 */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch {
    return false;
  }
  if (!hasProc) return true;
  // The group signal already reaches every member; here we only need to know whether one is alive,
  // which a /proc scan answers. This path runs only while killing, never on the fast path.
  for (const pid of procPids()) {
    const st = readStat(pid);
    if (st && st.pgrp === pgid && st.state !== "Z" && st.state !== "X") return true;
  }
  return false;
}

function signalGroup(pgid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pgid, sig);
  } catch {}
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {}
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const tree of live) tree.killNowSync();
  });
}
