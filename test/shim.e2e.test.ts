/**
 * bin/autolab.mjs under an older Node re-runs autolab with Node 24 as its child. `kill -9` of
 * the PID the user started (the shim) must not leave that child running, holding the run's
 * lock: the child watches a pipe from the shim (fd 3) and dies with it.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import type { Socket } from "node:net";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { buildNotebook } from "./helpers/notebook-fixture.ts";
import { CLI_MAIN, createToyProject, REPO_ROOT, type ToyProject } from "./helpers/toy-project.ts";

const toys: ToyProject[] = [];
const started: number[] = [];
afterAll(() => {
  for (const pid of started) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
  for (const t of toys) t.cleanup();
});

/** A project with a notebook, for `autolab serve` (long-running, needs nothing else). */
function lab(): ToyProject {
  const t = createToyProject();
  toys.push(t);
  buildNotebook(t.dir, []);
  return t;
}

/** Alive, and not a zombie waiting for its parent to reap it. */
function alive(pid: number): boolean {
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, "utf8"));
  } catch {
    return false;
  }
}

/** Polls until `pid` is gone; the deadline is generous (it is about "never", not speed). */
async function gone(pid: number, deadlineMs = 20_000): Promise<boolean> {
  const until = Date.now() + deadlineMs;
  while (Date.now() < until) {
    if (!alive(pid)) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return !alive(pid);
}

function waitForOutput(child: ChildProcess, pattern: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = "";
    const onData = (d: Buffer) => {
      out += d.toString();
      if (pattern.test(out)) resolve(out);
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.on("exit", (code) => reject(new Error(`exited (${code}) before ${pattern}:\n${out}`)));
  });
}

function childrenOf(pid: number): number[] {
  return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").split(/\s+/).filter(Boolean).map(Number);
}

// The shim re-runs autolab only under a Node older than 24, such as Debian's Node 20.
const systemNode = "/usr/bin/node";
const version = existsSync(systemNode)
  ? spawnSync(systemNode, ["--version"], { encoding: "utf8" }).stdout
  : "";
const [major = 0] = version.replace(/^v/, "").split(".").map(Number);
const oldNode = major > 0 && major < 24;

describe("the harness dies with the process the user started", () => {
  it.skipIf(!oldNode)("kill -9 of the bin shim (system Node 20) ends its Node 24 child", async () => {
    const t = lab();
    const shim = spawn(systemNode, [join(REPO_ROOT, "bin", "autolab.mjs"), "serve", "--port", "0"], {
      cwd: t.dir,
      stdio: ["ignore", "pipe", "pipe"],
    });
    started.push(shim.pid as number);
    await waitForOutput(shim, /autolab dashboard: /);
    const [child] = childrenOf(shim.pid as number);
    expect(child).toBeDefined();
    started.push(child as number);
    expect(alive(child as number)).toBe(true);
    shim.kill("SIGKILL");
    expect(await gone(child as number)).toBe(true);
  });

  it("the child side, under any Node: a closed fd 3 ends autolab started with AUTOLAB_SHIM=1", async () => {
    const t = lab();
    const child = spawn(process.execPath, [CLI_MAIN, "serve", "--port", "0"], {
      cwd: t.dir,
      env: { ...process.env, AUTOLAB_SHIM: "1" },
      stdio: ["ignore", "pipe", "pipe", "pipe"],
    });
    started.push(child.pid as number);
    await waitForOutput(child, /autolab dashboard: /);
    expect(alive(child.pid as number)).toBe(true);
    // What the kernel does when the shim dies: its end of the pipe closes.
    (child.stdio[3] as Socket).destroy();
    const exit = await new Promise<NodeJS.Signals | null>((r) => child.on("exit", (_c, s) => r(s)));
    expect(exit).toBe("SIGKILL");
  });

  it("watching fd 3 keeps nothing alive: a command that is done exits while the shim lives", async () => {
    const t = lab();
    const viaShim = oldNode
      ? spawnSync(systemNode, [join(REPO_ROOT, "bin", "autolab.mjs"), "status"], {
          cwd: t.dir,
          encoding: "utf8",
          timeout: 60_000,
        })
      : undefined;
    if (viaShim) {
      expect(viaShim.signal).toBeNull();
      expect(viaShim.stderr).toContain("no runs yet");
    }
    const child = spawn(process.execPath, [CLI_MAIN, "status"], {
      cwd: t.dir,
      env: { ...process.env, AUTOLAB_SHIM: "1" },
      stdio: ["ignore", "pipe", "pipe", "pipe"],
    });
    started.push(child.pid as number);
    // fd 3 stays open (the shim is alive) until autolab has exited on its own.
    const [code, signal] = await new Promise<[number | null, string | null]>((r) =>
      child.on("exit", (c, s) => r([c, s])),
    );
    expect(signal).toBeNull();
    expect(code).toBe(1);
  });

  it("without the shim, fd 3 means nothing and autolab ends as usual", async () => {
    const t = lab();
    const child = spawn(process.execPath, [CLI_MAIN, "status"], {
      cwd: t.dir,
      stdio: ["ignore", "pipe", "pipe", "pipe"],
    });
    let err = "";
    child.stderr?.on("data", (d) => {
      err += d;
    });
    (child.stdio[3] as Socket).destroy();
    const [code, signal] = await new Promise<[number | null, string | null]>((r) =>
      child.on("exit", (c, s) => r([c, s])),
    );
    expect(signal).toBeNull();
    expect(code, err).toBe(1); // the empty notebook has no runs: an ordinary answer
    expect(err).toContain("no runs yet");
  });
});
