/**
 * The sandbox (src/runner/sandbox.ts) against real attacks, with real bubblewrap and real
 * processes. Each attack is first shown to work without the sandbox where that is meaningful,
 * then shown to fail inside it. Without a usable bwrap the suite is skipped, except in CI
 * (CI=true), where it must run.
 */
import { spawn } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { SandboxSpec, TrialSpec } from "../src/core/types.ts";
import { probeEgress } from "../src/runner/egress-probe.ts";
import { LocalExecutor } from "../src/runner/local-executor.ts";
import { readStat } from "../src/runner/process-tree.ts";
import { limitEnforcement, probeSandbox, sandboxCommand, sandboxLimitsNote } from "../src/runner/sandbox.ts";

const probe = probeSandbox();
const inCI = process.env.CI === "true" || process.env.CI === "1";
/** Runs where bwrap works, and in CI whatever happens (a CI machine without it must fail). */
const withBwrap = probe.ok || inCI ? describe : describe.skip;

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tempDir(base = tmpdir()): string {
  const d = mkdtempSync(join(base, "autolab-sandbox-test-"));
  dirs.push(d);
  return d;
}

const PATH = process.env.PATH ?? "/usr/bin:/bin";

function box(over: Partial<SandboxSpec> = {}): SandboxSpec {
  return {
    writable: [],
    readOnly: [],
    hidden: [],
    network: false,
    env: { PATH },
    limits: {},
    devices: [],
    ...over,
  };
}

/** A trial in a fresh worktree `wt` (logs beside it); sandboxed in `sandbox` when given. */
function trial(command: string, over: Partial<TrialSpec> = {}, sandbox?: SandboxSpec): TrialSpec {
  const cwd = over.cwd ?? join(tempDir(), "wt");
  mkdirSync(cwd, { recursive: true });
  const s = sandbox ?? box({ writable: [cwd] });
  return {
    cwd,
    command,
    budgetMs: 30_000,
    graceMs: 1000,
    evaluateTimeoutMs: 30_000,
    seed: 7,
    logDir: join(cwd, "..", "logs"),
    objective: "score",
    sandbox: { command: s, evaluate: s },
    ...over,
  };
}

/** The same trial without a sandbox. */
function bare(spec: TrialSpec): TrialSpec {
  const { sandbox: _, ...rest } = spec;
  return rest;
}

const executor = new LocalExecutor({ killGraceMs: 500 });
const node = JSON.stringify(process.execPath);
const stdout = (spec: TrialSpec) => readFileSync(join(spec.logDir, "stdout.log"), "utf8");

/** Live (non-zombie) processes whose command line contains `marker`. */
function processesWith(marker: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`, "utf8");
      const st = readStat(Number(name));
      if (cmdline.includes(marker) && st && st.state !== "Z" && st.state !== "X") out.push(Number(name));
    } catch {}
  }
  return out;
}

/** Polls until `check` holds or `ms` pass (the kernel finishes killing a namespace asynchronously). */
async function eventually<T>(get: () => T, check: (v: T) => boolean, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  let v = get();
  while (!check(v) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 25));
    v = get();
  }
  return v;
}

function marker(): string {
  return `${String(Math.random()).slice(2, 8)}`;
}

describe("probeSandbox", () => {
  it("says bubblewrap is not installed when bwrap is not on PATH", () => {
    const p = probeSandbox({ path: tempDir() });
    expect(p).toEqual({
      ok: false,
      reason: "bubblewrap (bwrap) is not installed",
      hint: expect.stringContaining("apt-get install bubblewrap"),
    });
  });

  it("says user namespaces are not permitted when bwrap cannot create them", () => {
    const dir = tempDir();
    const fake = join(dir, "bwrap");
    writeFileSync(
      fake,
      '#!/bin/sh\n[ "$1" = --version ] && { echo "bubblewrap 0.8.0"; exit 0; }\n' +
        'echo "bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces." >&2\nexit 1\n',
    );
    chmodSync(fake, 0o755);
    const p = probeSandbox({ path: dir });
    expect(p.ok).toBe(false);
    if (p.ok) return;
    expect(p.reason).toMatch(
      /^user namespaces are not permitted here \(bwrap: No permissions to create new namespace/,
    );
    expect(p.hint).toContain("kernel.unprivileged_userns_clone=1");
    expect(p.hint).toContain("AppArmor");
  });
});

describe("a bubblewrap too old, or no namespaces, for the researcher's egress: refused with the fix", () => {
  /** A bwrap that says its version, runs the plain probe, and fails on the options listed. */
  function fakeBwrap(version: string, failOn: string, message: string): string {
    const dir = tempDir();
    const fake = join(dir, "bwrap");
    writeFileSync(
      fake,
      `#!/bin/sh\n[ "$1" = --version ] && { echo "bubblewrap ${version}"; exit 0; }\ncase " $* " in *" ${failOn} "*) echo "${message}" >&2; exit 1;; esac\nexit 0\n`,
    );
    chmodSync(fake, 0o755);
    return dir;
  }

  it("a bwrap without an option every sandbox uses: its version and the upgrade are named", () => {
    const p = probeSandbox({
      path: fakeBwrap("0.1.8", "--die-with-parent", "bwrap: Unknown option --die-with-parent"),
    });
    expect(p).toEqual({
      ok: false,
      reason: "bubblewrap 0.1.8 is too old for the option --die-with-parent, which autolab's sandbox needs",
      hint: expect.stringMatching(/Upgrade bubblewrap to 0\.5\.0 or later/),
    });
  });

  it("a bwrap that cannot make the egress sandbox (an option of it unknown, or no namespace): the probe says why", async () => {
    const old = await probeEgress({
      path: fakeBwrap("0.4.1", "--clearenv", "bwrap: Unknown option --clearenv"),
    });
    expect(old).toMatchObject({
      ok: false,
      reason: expect.stringContaining("0.4.1 is too old for the option --clearenv"),
    });
    const noNs = await probeEgress({
      path: fakeBwrap("0.8.0", "--clearenv", "bwrap: setting up uid map: Permission denied"),
    });
    expect(noNs).toMatchObject({
      ok: false,
      reason: expect.stringContaining("user namespaces are not permitted"),
      hint: expect.stringContaining("kernel.unprivileged_userns_clone"),
    });
  });

  it.skipIf(!probeSandbox().ok)(
    "works end to end here: from inside, 127.0.0.1 reaches a named endpoint through the proxy",
    async () => {
      expect(await probeEgress()).toMatchObject({ ok: true });
    },
  );
});

describe("sandboxCommand", () => {
  it("builds the bwrap command line: read-only root, private /tmp, namespaces, exactly the env", () => {
    const wt = tempDir();
    const { args } = sandboxCommand(box({ writable: [wt], env: { A: "1", B: "two words" } }), "echo hi", wt);
    const line = args.join(" ");
    expect(line).toMatch(
      /^--ro-bind \/ \/ --dev \/dev --proc \/proc --ro-bind \/proc\/sys \/proc\/sys --tmpfs \/tmp --unshare-all --cap-drop ALL --die-with-parent --new-session --clearenv --setenv A 1 --setenv B two words /,
    );
    expect(args).not.toContain("--share-net");
    expect(args.slice(-4)).toEqual(["--", "/bin/sh", "-c", "echo hi"]);
    expect(sandboxCommand(box({ writable: [wt], network: true }), "x", wt).args).toContain("--share-net");
  });

  it("orders mounts parents first, the strictest last at equal paths, and hidden dirs go read-only at the end", () => {
    const repo = tempDir();
    const state = join(repo, ".autolab");
    const wt = join(state, "worktrees", "e1");
    mkdirSync(join(wt, "sub"), { recursive: true });
    for (const f of ["sub/prot.txt", "holdout.txt", "both.txt"]) writeFileSync(join(wt, f), "x");
    symlinkSync(join(wt, "sub", "prot.txt"), join(repo, "link-to-prot"));
    const { args } = sandboxCommand(
      box({
        writable: [wt],
        readOnly: [join(repo, "link-to-prot"), join(wt, "both.txt"), join(repo, "missing-ro")],
        hidden: [join(wt, "holdout.txt"), join(wt, "both.txt"), state, join(repo, "missing-hidden")],
      }),
      "true",
      wt,
    );
    // Mount operations and their targets, in order (autolab's own files and tools, made visible
    // again when they lie under /tmp — a checkout there — are not this test's business).
    const ops: string[] = [];
    const tools = (target: string) => !target.startsWith(repo) && target.startsWith("/tmp/");
    for (let i = 0; i < args.length; i++) {
      const a = args[i] as string;
      if (a === "--bind" || a === "--ro-bind") {
        if (!tools(args[i + 2] as string)) ops.push(`${a} ${args[i + 2]}`);
        i += 2;
      } else if (a === "--tmpfs" || a === "--remount-ro") {
        ops.push(`${a} ${args[i + 1]}`);
        i += 1;
      }
    }
    expect(ops).toEqual([
      "--ro-bind /",
      "--ro-bind /proc/sys",
      "--tmpfs /tmp",
      "--tmpfs /run", // host sockets
      `--tmpfs ${state}`,
      `--bind ${wt}`,
      // the parent of a read-only file is pinned (a mount point cannot be renamed away)
      `--bind ${join(wt, "sub")}`,
      // both.txt is readOnly and hidden: hidden wins (it comes after)
      `--ro-bind ${join(wt, "both.txt")}`,
      `--ro-bind ${join(wt, "holdout.txt")}`,
      `--ro-bind ${join(wt, "both.txt")}`,
      // the symlink is resolved: the real file is what gets mounted
      `--ro-bind ${join(wt, "sub", "prot.txt")}`,
      "--remount-ro /run",
      `--remount-ro ${state}`,
    ]);
    // The sources mounted on both.txt: itself (read-only), then the empty file (hidden).
    const both = join(wt, "both.txt");
    const sources = args.flatMap((a, i) => (a === "--ro-bind" && args[i + 2] === both ? [args[i + 1]] : []));
    expect(sources).toHaveLength(2);
    expect(sources[0]).toBe(both);
    expect(readFileSync(sources[1] as string, "utf8")).toBe("");
    expect(args.join(" ")).not.toContain("missing");
  });

  it("refuses a writable path or device that does not exist", () => {
    const wt = tempDir();
    expect(() => sandboxCommand(box({ writable: [join(wt, "nope")] }), "true", wt)).toThrow(
      /writable path does not exist/,
    );
    expect(() => sandboxCommand(box({ devices: ["/dev/nvidia-none"] }), "true", wt)).toThrow(
      /device path does not exist/,
    );
  });
});

withBwrap("the sandbox", () => {
  it("can be made here (CI must have bubblewrap with user namespaces)", () => {
    expect(probe).toMatchObject({ ok: true, version: expect.stringMatching(/^\d+\.\d+/) });
  });

  it("keeps writes outside the writable paths off the host", async () => {
    const outsideTmp = tempDir();
    const outsideVar = tempDir("/var/tmp");
    const command = [
      `echo pwned > ${outsideTmp}/pwned`,
      `echo pwned > ${outsideVar}/pwned`,
      "echo mine > mine.txt",
      "echo 'score: 1'",
    ].join("; ");

    const open = trial(command);
    expect((await executor.runTrial(bare(open))).status).toBe("ok");
    expect(existsSync(join(outsideTmp, "pwned"))).toBe(true);
    expect(existsSync(join(outsideVar, "pwned"))).toBe(true);
    rmSync(join(outsideTmp, "pwned"));
    rmSync(join(outsideVar, "pwned"));

    const boxed = trial(command);
    const r = await executor.runTrial(boxed);
    expect(r.status).toBe("ok");
    expect(existsSync(join(outsideTmp, "pwned"))).toBe(false); // /tmp inside is private
    expect(existsSync(join(outsideVar, "pwned"))).toBe(false); // read-only
    expect(r.logTail).toMatch(/Read-only file system/);
    expect(readFileSync(join(boxed.cwd, "mine.txt"), "utf8")).toBe("mine\n"); // the worktree is writable
  });

  const attacks: Record<string, string> = {
    write: "echo evil > sub/prot.txt",
    append: "echo evil >> sub/prot.txt",
    delete: "rm -f sub/prot.txt",
    "rename over": "echo evil > x && mv -f x sub/prot.txt",
    "rename its directory away": "mv sub sub2 && mkdir sub && echo evil > sub/prot.txt",
  };
  for (const [name, attack] of Object.entries(attacks)) {
    it(`protects a read-only file inside a writable tree: ${name}`, async () => {
      const run = async (sandboxed: boolean) => {
        const wt = join(tempDir(), "wt");
        mkdirSync(join(wt, "sub"), { recursive: true });
        const prot = join(wt, "sub", "prot.txt");
        writeFileSync(prot, "protected\n");
        const spec = trial(
          `${attack}; echo 'score: 1'`,
          { cwd: wt },
          box({ writable: [wt], readOnly: [prot] }),
        );
        const r = await executor.runTrial(sandboxed ? spec : bare(spec));
        expect(r.status).toBe("ok");
        return existsSync(prot) ? readFileSync(prot, "utf8") : "(deleted)";
      };
      expect(await run(false)).not.toBe("protected\n");
      expect(await run(true)).toBe("protected\n");
    });
  }

  it("hides files and directories, also inside a hidden .autolab that holds the writable worktree", async () => {
    const repo = tempDir();
    const state = join(repo, ".autolab");
    const wt = join(state, "worktrees", "e1");
    mkdirSync(join(wt, "data"), { recursive: true });
    writeFileSync(join(state, "notebook.db"), "NOTEBOOK-SECRET");
    writeFileSync(join(wt, "holdout.txt"), "HOLDOUT-SECRET");
    writeFileSync(join(wt, "data", "test.csv"), "DATA-SECRET");
    writeFileSync(join(wt, "prot.txt"), "protected\n");
    const command = [
      "cat holdout.txt",
      "ls -A data",
      `ls -A ${state}`,
      `cat ${state}/notebook.db`,
      "echo evil > prot.txt",
      "echo result > result.txt",
      `touch ${state}/new`,
      "echo 'score: 1'",
    ].join("; ");
    const sandbox = box({
      writable: [wt],
      readOnly: [join(wt, "prot.txt")],
      hidden: [state, join(wt, "holdout.txt"), join(wt, "data")],
    });

    const open = trial(command, { cwd: wt, logDir: join(repo, "logs-open") }, sandbox);
    await executor.runTrial(bare(open));
    const seen = stdout(open);
    for (const secret of ["NOTEBOOK-SECRET", "HOLDOUT-SECRET", "test.csv"]) expect(seen).toContain(secret);
    writeFileSync(join(wt, "prot.txt"), "protected\n");
    rmSync(join(state, "new"));
    rmSync(join(wt, "result.txt"));

    const boxed = trial(command, { cwd: wt, logDir: join(repo, "logs-boxed") }, sandbox);
    const r = await executor.runTrial(boxed);
    expect(r.status).toBe("ok");
    const out = stdout(boxed);
    for (const secret of ["NOTEBOOK-SECRET", "HOLDOUT-SECRET", "test.csv", "notebook.db"]) {
      expect(out).not.toContain(secret);
    }
    // The hidden .autolab shows only the way down to the worktree; the hidden file reads empty.
    expect(out.split("\n")).toEqual(["worktrees", "score: 1", ""]);
    expect(readFileSync(join(wt, "prot.txt"), "utf8")).toBe("protected\n");
    expect(readFileSync(join(wt, "result.txt"), "utf8")).toBe("result\n");
    expect(existsSync(join(state, "new"))).toBe(false);
    expect(readFileSync(join(wt, "holdout.txt"), "utf8")).toBe("HOLDOUT-SECRET");
  });

  it("lets none of the harness's environment in: only the sandbox's env, the trial's env and the runner's", async () => {
    process.env.AUTOLAB_TEST_SECRET = "s3cret-token";
    try {
      const spec = trial("env; echo 'score: 1'", { env: { SLOT_VAR: "slot" } });
      const s = spec.sandbox?.command as SandboxSpec;
      s.env = { PATH, FROM_SPEC: "spec" };

      const open = { ...bare(spec), logDir: `${spec.logDir}-open` };
      await executor.runTrial(open);
      // Unsandboxed, the variable reaches the trial (its value is redacted in the log: secrets.ts).
      expect(stdout(open)).toMatch(/^AUTOLAB_TEST_SECRET=/m);

      expect((await executor.runTrial(spec)).status).toBe("ok");
      const names = stdout(spec)
        .split("\n")
        .filter((l) => l.includes("="))
        .map((l) => l.slice(0, l.indexOf("=")))
        .sort();
      expect(names).toEqual([
        "AUTOLAB_BUDGET_S",
        "AUTOLAB_SEED",
        "AUTOLAB_TRIAL_TOKEN",
        "FROM_SPEC",
        "PATH",
        "PWD", // set by the shell itself
        "SLOT_VAR",
      ]);
    } finally {
      delete process.env.AUTOLAB_TEST_SECRET;
    }
  });

  it("gives no capabilities, even to root: mounts cannot be undone, sysctls cannot be written", async () => {
    const wt = join(tempDir(), "wt");
    mkdirSync(wt);
    const prot = join(wt, "prot.txt");
    writeFileSync(prot, "protected\n");
    const spec = trial(
      [
        "grep CapEff /proc/self/status",
        "umount prot.txt 2>/dev/null && echo unmounted",
        "echo evil > prot.txt",
        "mount -o remount,rw,bind / 2>/dev/null && echo remounted",
        // uts-namespaced, so harmless even if it worked; it stands for core_pattern and friends
        "(echo sandbox > /proc/sys/kernel/hostname) 2>/dev/null && echo sysctl-written",
        "echo 'score: 1'",
      ].join("; "),
      { cwd: wt },
      box({ writable: [wt], readOnly: [prot] }),
    );
    expect((await executor.runTrial(spec)).status).toBe("ok");
    expect(stdout(spec)).toBe("CapEff:\t0000000000000000\nscore: 1\n");
    expect(readFileSync(prot, "utf8")).toBe("protected\n");
  });

  it("keeps host sockets in /run out of reach (a read-only socket can still be connected to)", async () => {
    // A socket where services keep theirs (/run/docker.sock, /run/user/<uid>/bus, …).
    let runDir: string | undefined;
    try {
      runDir = mkdtempSync("/run/autolab-sandbox-test-");
    } catch {
      const xdg = process.env.XDG_RUNTIME_DIR;
      if (xdg?.startsWith("/run/")) runDir = mkdtempSync(join(xdg, "autolab-sandbox-test-"));
    }
    if (runDir) dirs.push(runDir);
    let connections = 0;
    const server: Server | undefined = runDir
      ? createServer((sock) => {
          connections++;
          sock.end();
        })
      : undefined;
    const sock = runDir ? join(runDir, "service.sock") : "/run/none.sock";
    if (server) await new Promise<void>((resolve) => server.listen(sock, resolve));
    try {
      const js = `require('net').connect('${sock}').on('connect', () => { console.log('connected'); process.exit(0); }).on('error', (e) => { console.log('failed ' + e.code); process.exit(0); })`;
      const command = `${node} -e "${js}"; ls -A /run; echo 'score: 1'`;
      const boxed = trial(command);
      if (server) {
        const open = { ...bare(boxed), logDir: `${boxed.logDir}-open` };
        await executor.runTrial(open);
        expect(stdout(open)).toMatch(/^connected/);
        expect(connections).toBe(1);
      }
      expect((await executor.runTrial(boxed)).status).toBe("ok");
      const out = stdout(boxed).split("\n");
      expect(out[0]).toBe("failed ENOENT");
      expect(connections).toBe(server ? 1 : 0);
      // Only the way to the resolver configuration may be left (where /etc/resolv.conf points into /run).
      expect(out.slice(1, -2).every((name) => !name.includes("sock") && !name.startsWith("autolab"))).toBe(
        true,
      );
    } finally {
      server?.close();
    }
  });

  it("has no network unless the spec asks for it", async () => {
    let connections = 0;
    const server: Server = createServer((sock) => {
      connections++;
      sock.end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as { port: number }).port;
    try {
      const js = `require('net').connect(${port}, '127.0.0.1').on('connect', () => { console.log('connected'); process.exit(0); }).on('error', (e) => { console.log('refused ' + e.code); process.exit(0); })`;
      const command = `${node} -e "${js}"; echo 'score: 1'`;
      const offline = trial(command);
      expect((await executor.runTrial(offline)).status).toBe("ok");
      expect(stdout(offline)).toMatch(/^refused E/);
      expect(connections).toBe(0);

      const wt = join(tempDir(), "wt");
      mkdirSync(wt);
      const online = trial(command, { cwd: wt }, box({ writable: [wt], network: true }));
      expect((await executor.runTrial(online)).status).toBe("ok");
      expect(stdout(online)).toMatch(/^connected/);
      expect(connections).toBe(1);
    } finally {
      server.close();
    }
  });

  it("lets no double fork with a cleared environment outlive the trial", async () => {
    const m = marker();
    const spec = trial(
      [
        `setsid env -i sh -c '(touch started; exec sleep 300.${m}) &'`,
        "while [ ! -e started ]; do sleep 0.01; done",
        "echo 'score: 1'",
      ].join("\n"),
    );
    const r = await executor.runTrial(spec);
    expect(r.status).toBe("ok");
    expect(existsSync(join(spec.cwd, "started"))).toBe(true);
    expect(
      await eventually(
        () => processesWith(`.${m}`),
        (p) => p.length === 0,
      ),
    ).toEqual([]);
  });

  it("leaves nothing of a trial alive when the harness running it is killed with -9", async () => {
    const m = marker();
    const dir = tempDir();
    const wt = join(dir, "wt");
    mkdirSync(wt);
    const script = join(dir, "harness.mts");
    const runProcessUrl = new URL("../src/runner/run-process.ts", import.meta.url).href;
    writeFileSync(
      script,
      [
        `import { runProcess } from ${JSON.stringify(runProcessUrl)};`,
        "const [wt, command, sandbox] = process.argv.slice(2);",
        "await runProcess({ command, cwd: wt, env: {}, sandbox: JSON.parse(sandbox),",
        "  stdoutPath: wt + '/../out.log', stderrPath: wt + '/../err.log', killAfterMs: 120000, killGraceMs: 500,",
        "  logCapBytes: 100000, sampleIntervalMs: 100, tailLines: 10, tailChars: 1000 });",
      ].join("\n"),
    );
    const command = [
      `setsid env -i sh -c '(touch started; exec sleep 300.${m}) &'`,
      "while [ ! -e started ]; do sleep 0.01; done",
      `exec sleep 301.${m}`,
    ].join("\n");
    const harness = spawn(process.execPath, [script, wt, command, JSON.stringify(box({ writable: [wt] }))], {
      stdio: "ignore",
    });
    const exited = new Promise((resolve) => harness.once("exit", resolve));
    const sleeping = await eventually(
      () =>
        processesWith(`.${m}`).filter((pid) => {
          // A process seen a moment ago may be gone now (the shell that started the sleeps).
          try {
            return readFileSync(`/proc/${pid}/cmdline`, "utf8").startsWith("sleep");
          } catch {
            return false;
          }
        }),
      (p) => p.length === 2,
      30_000,
    );
    expect(sleeping).toHaveLength(2);
    expect(existsSync(join(wt, "started"))).toBe(true);
    harness.kill("SIGKILL");
    await exited;
    expect(
      await eventually(
        () => processesWith(`.${m}`),
        (p) => p.length === 0,
      ),
    ).toEqual([]);
  });

  describe("limits", () => {
    it("file size: a write past the limit fails", async () => {
      const command = "head -c 2000000 /dev/zero > big && echo 'score: 1'";
      const open = trial(command);
      await executor.runTrial(bare(open));
      expect(statSync(join(open.cwd, "big")).size).toBe(2_000_000);

      const wt = join(tempDir(), "wt");
      mkdirSync(wt);
      const boxed = trial(command, { cwd: wt }, box({ writable: [wt], limits: { fileSizeMb: 1 } }));
      const r = await executor.runTrial(boxed);
      expect(statSync(join(wt, "big")).size).toBeLessThanOrEqual(1024 * 1024);
      expect(r.status).toBe("crash");
      expect(r.reason).toMatch(/SIGXFSZ/); // it ended the writer
      expect(r.logTail).toMatch(/File size limit exceeded/);
    });

    it("CPU time: a busy loop is stopped at the limit", async () => {
      const wt = join(tempDir(), "wt");
      mkdirSync(wt);
      const spec = trial(
        "while :; do :; done",
        { cwd: wt },
        box({ writable: [wt], limits: { cpuSeconds: 1 } }),
      );
      const r = await executor.runTrial(spec);
      expect(r.status).toBe("crash");
      expect(r.reason).toMatch(/SIGXCPU|SIGKILL/);
    });

    it("memory: an allocation past the limit fails", async () => {
      // tail keeps an unterminated line whole: 200 MB of memory
      const command = "head -c 200000000 /dev/zero | tail -n 1 > /dev/null && echo 'score: 1'";
      const open = trial(command);
      expect((await executor.runTrial(bare(open))).status).toBe("ok");

      const wt = join(tempDir(), "wt");
      mkdirSync(wt);
      const r = await executor.runTrial(
        trial(command, { cwd: wt }, box({ writable: [wt], limits: { memoryMb: 64 } })),
      );
      expect(r.status).toBe("crash");
      expect(r.logTail).toMatch(/memory exhausted/);
    });

    it("processes: a fork loop is bounded and the trial ends; a fork bomb ends and leaves nothing", async () => {
      const limits = { processes: 20 };
      const enforced = limitEnforcement(limits)[0]?.how !== undefined;
      if (!enforced) {
        // Root without a writable pids cgroup: nothing bounds processes, and the note says so.
        expect(sandboxLimitsNote(limits)).toMatch(/processes \(RLIMIT_NPROC does not apply to root/);
        return;
      }
      const m = marker();
      const command = `i=0; while [ $i -lt 100 ]; do sleep 30.${m} & i=$((i+1)); done; echo spawned-all; echo 'score: 1'`;
      const open = trial(command);
      expect((await executor.runTrial(bare(open))).status).toBe("ok");
      expect(stdout(open)).toContain("spawned-all");

      const wt = join(tempDir(), "wt");
      mkdirSync(wt);
      const boxed = trial(command, { cwd: wt }, box({ writable: [wt], limits }));
      const r = await executor.runTrial(boxed);
      expect(r.status).toBe("crash");
      expect(r.logTail).toMatch(/Cannot fork|Resource temporarily unavailable/);
      expect(stdout(boxed)).not.toContain("spawned-all");
      expect(
        await eventually(
          () => processesWith(`.${m}`),
          (p) => p.length === 0,
        ),
      ).toEqual([]);

      const wt2 = join(tempDir(), "wt");
      mkdirSync(wt2);
      const bomb = trial(
        `b() { b & b & wait; }; b # ${m}`,
        { cwd: wt2, budgetMs: 1000, graceMs: 0 },
        box({ writable: [wt2], limits }),
      );
      const rb = await executor.runTrial(bomb);
      // Bounded, the bomb may collapse by itself (its shells exit when fork fails) or run to the
      // budget; either way the trial ends and leaves nothing behind.
      expect(["timeout", "crash", "missing_metric"]).toContain(rb.status);
      expect(
        await eventually(
          () => processesWith(m),
          (p) => p.length === 0,
        ),
      ).toEqual([]);
      // The cgroups are gone with the trial.
      const how = limitEnforcement(limits)[0]?.how ?? "";
      if (how.startsWith("cgroup v1")) {
        const left = readdirSync("/sys/fs/cgroup/pids").filter((d) =>
          d.startsWith(`autolab-${process.pid}-`),
        );
        expect(left).toEqual([]);
      }
    });

    it("reports the limits that cannot be enforced here, and how the others are", () => {
      const all = { fileSizeMb: 1, cpuSeconds: 1, memoryMb: 64, processes: 10 };
      const report = limitEnforcement(all);
      expect(report.map((e) => e.limit).sort()).toEqual([
        "cpuSeconds",
        "fileSizeMb",
        "memoryMb",
        "processes",
      ]);
      const missing = report.filter((e) => e.how === undefined);
      const note = sandboxLimitsNote(all);
      if (missing.length === 0) expect(note).toBeUndefined();
      else for (const e of missing) expect(note).toContain(e.limit);
      expect(sandboxLimitsNote({})).toBeUndefined();
    });
  });

  it("still kills at the budget: SIGTERM reaches the command inside, SIGKILL what ignores it", async () => {
    const m = marker();
    const graceful = trial(`trap 'echo got-term; exit 3' TERM; sleep 100.${m} & wait`, {
      budgetMs: 300,
      graceMs: 100,
    });
    const r = await executor.runTrial(graceful);
    expect(r.status).toBe("timeout");
    expect(r.reason).toContain("killed (SIGTERM)");
    expect(stdout(graceful)).toContain("got-term");

    const stubborn = trial(`trap '' TERM; sleep 100.${m}`, { budgetMs: 300, graceMs: 100 });
    const r2 = await executor.runTrial(stubborn);
    expect(r2.status).toBe("timeout");
    expect(r2.reason).toMatch(/killed \(SIGKILL/);
    expect(
      await eventually(
        () => processesWith(`.${m}`),
        (p) => p.length === 0,
      ),
    ).toEqual([]);
  });

  it("keeps metrics, logs and resource sampling; evaluate runs in its own sandbox", async () => {
    const wt = join(tempDir(), "wt");
    mkdirSync(wt);
    writeFileSync(join(wt, "holdout.txt"), "0.25");
    const js =
      "const b = Buffer.alloc(100 * 1024 * 1024, 1); setTimeout(() => { console.log('progress: ' + b[7]); console.error('a warning'); }, 500)";
    const seen: Array<[string, number]> = [];
    const spec = trial(
      `cat holdout.txt; ${node} -e "${js}"`,
      {
        cwd: wt,
        evaluate: 'echo "score: $(cat holdout.txt)"; echo "evalenv: ${EVAL_ONLY:-0}"',
        onMetric: (name, value) => seen.push([name, value]),
      },
      box({ writable: [wt], hidden: [join(wt, "holdout.txt")] }),
    );
    (spec.sandbox as { evaluate: SandboxSpec }).evaluate = box({
      writable: [wt],
      env: { PATH, EVAL_ONLY: "1" },
    });
    const r = await executor.runTrial(spec);
    expect(r.status).toBe("ok");
    expect(r.metrics).toEqual({ score: 0.25, evalenv: 1, progress: 1 });
    expect(seen).toEqual([["progress", 1]]);
    expect(r.logTail).toContain("a warning");
    expect(r.logTail).not.toContain("0.25"); // the command could not read the holdout
    expect(r.peakRssMb).toBeGreaterThan(90);
    expect(r.cpuS).toBeGreaterThan(0);
  });

  it("runs setup in its sandbox, without the harness's environment", async () => {
    process.env.AUTOLAB_TEST_SECRET = "s3cret-token";
    try {
      const wt = join(tempDir(), "wt");
      mkdirSync(wt);
      const outside = tempDir("/var/tmp");
      const r = await executor.setup(
        wt,
        `echo "secret=\${AUTOLAB_TEST_SECRET:-none} spec=$FROM_SPEC" > setup.txt; touch ${outside}/pwned`,
        30_000,
        join(wt, "..", "logs"),
        undefined,
        box({ writable: [wt], env: { PATH, FROM_SPEC: "yes" } }),
      );
      expect(r.status).toBe("crash"); // touch outside the sandbox failed
      expect(readFileSync(join(wt, "setup.txt"), "utf8")).toBe("secret=none spec=yes\n");
      expect(existsSync(join(outside, "pwned"))).toBe(false);
    } finally {
      delete process.env.AUTOLAB_TEST_SECRET;
    }
  });
});
