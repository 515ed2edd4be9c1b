/**
 * Whether a sandbox's egress works on this machine: a sandbox with a network namespace of its
 * own, the bridge inside and the harness's proxy outside, end to end (a connection from inside
 * reaches a server on the harness's loopback, through a named endpoint). Run once per process,
 * before the first researcher that needs it: where it fails, researchers do not run at all
 * (never with the host's network instead).
 */
import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { startEgressProxy } from "./egress-proxy.ts";
import {
  probeSandbox,
  type SandboxProbe,
  type SandboxToolOptions,
  sandboxCommand,
  tooOld,
  USERNS_HINT,
} from "./sandbox.ts";

const OK = "autolab-egress-ok";
const cache = new Map<string, Promise<SandboxProbe>>();

/** Cached per bwrap executable, like probeSandbox. */
export function probeEgress(opts: SandboxToolOptions = {}): Promise<SandboxProbe> {
  const key = `${opts.bwrap ?? ""}\0${opts.path ?? ""}`;
  let probe = cache.get(key);
  if (!probe) {
    probe = runEgressProbe(opts);
    cache.set(key, probe);
  }
  return probe;
}

async function runEgressProbe(opts: SandboxToolOptions): Promise<SandboxProbe> {
  const base = probeSandbox(opts);
  if (!base.ok) return base;
  const server = createServer((s) => s.end(OK));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const port = (server.address() as { port: number }).port;
  // Not under /tmp, which is private inside.
  const cwd = "/";
  const proxy = await startEgressProxy({
    endpoints: [{ host: "127.0.0.1", port, named: true, source: "the probe" }],
  });
  try {
    const client = `require("node:net").connect(${port}, "127.0.0.1").on("data", (d) => { process.stdout.write(d); process.exit(0); }).on("error", (e) => { console.error(e.message); process.exit(2); })`;
    const argv = sandboxCommand(
      {
        writable: [],
        readOnly: [],
        hidden: [],
        network: false,
        egress: proxy.spec,
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
        limits: {},
        devices: [],
      },
      `exec "${process.execPath}" -e '${client}'`,
      cwd,
      { bwrap: base.bwrap },
    );
    const { code, stdout, stderr } = await new Promise<{
      code: number | null;
      stdout: string;
      stderr: string;
    }>((resolve) => {
      const child = spawn(argv.file, argv.args, { stdio: ["ignore", "pipe", "pipe"], timeout: 20_000 });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d) => (stdout += d));
      child.stderr.on("data", (d) => (stderr += d));
      child.on("close", (c) => resolve({ code: c, stdout, stderr }));
      child.on("error", (e) => resolve({ code: null, stdout, stderr: e.message }));
    });
    if (code === 0 && stdout.includes(OK)) return base;
    const err = stderr.trim() || `exit code ${code}`;
    const old = tooOld(err, base.version);
    if (old) return old;
    if (/namespace|uid map/i.test(err)) {
      return { ok: false, reason: `user namespaces are not permitted here (${err})`, hint: USERNS_HINT };
    }
    return {
      ok: false,
      reason: `the researcher's network cannot be confined here: a connection from inside the sandbox to autolab's egress proxy failed (${err})`,
      hint: "Check that bubblewrap can create network namespaces (`bwrap --unshare-net --ro-bind / / true`) and that unix sockets under the temp dir work; or run unsandboxed with `sandbox: off` in program.md.",
    };
  } finally {
    await proxy.close();
    server.close();
  }
}
