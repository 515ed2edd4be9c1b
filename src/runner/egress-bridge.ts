/**
 * The inside half of a sandbox's egress (src/runner/egress-proxy.ts is the harness's half): the
 * sandbox has a network namespace of its own, so its 127.0.0.1 is empty; a small Node program,
 * started before the sandboxed command, listens there and forwards each connection to a unix
 * socket of the harness's proxy, bound read-only into the sandbox. The command starts only once
 * every listener is up. It is the harness's own Node (process.execPath) running code passed on
 * its command line: nothing to install, nothing the sandbox could have replaced.
 */
import type { SandboxEgress } from "../core/types.ts";

/** Where the bridge says it is listening (the sandbox's private /tmp). */
const READY = "/tmp/.autolab-egress-ready";

/** node -e: argv[1] is [[port, socket], …], argv[2] the file written once every listener is up. */
const BRIDGE_JS = `const net = require("node:net"), fs = require("node:fs");
const pairs = JSON.parse(process.argv[1]);
let pending = 0;
const up = () => { if (--pending === 0) fs.writeFileSync(process.argv[2], ""); };
for (const [port, socket] of pairs) {
  for (const host of ["127.0.0.1", "::1"]) {
    pending++;
    const server = net.createServer((a) => {
      const b = net.connect(socket);
      a.pipe(b); b.pipe(a);
      a.on("error", () => b.destroy()); b.on("error", () => a.destroy());
      a.on("close", () => b.destroy()); b.on("close", () => a.destroy());
    });
    // IPv6 may be off inside: only 127.0.0.1 must listen.
    server.once("error", (e) => { if (host === "127.0.0.1") { console.error("autolab egress bridge: " + e.message); process.exit(3); } up(); });
    server.listen(port, host, up);
  }
}`;

/**
 * sh: starts the bridge ("$0" -e "$1" "$2" READY), waits until it listens (10 s at most, or until
 * it died), then execs the rest of its arguments (the command, with its prlimit).
 */
const PRELUDE = `"$0" -e "$1" "$2" ${READY} &
b=$!
i=0
while [ ! -e ${READY} ]; do
  i=$((i+1))
  if [ "$i" -gt 1000 ] || ! kill -0 "$b" 2>/dev/null; then
    echo "autolab: the sandbox's egress bridge did not start" >&2
    exit 125
  fi
  sleep 0.01
done
shift 2
exec "$@"`;

/** The port the proxy listens on inside: 3128 unless a forwarded model endpoint uses it. */
export function proxyPort(egress: SandboxEgress): number {
  let port = 3128;
  while (egress.forwards.some((f) => f.port === port)) port++;
  return port;
}

/**
 * The proxy variables the sandboxed process gets: every common spelling, NO_PROXY for the
 * loopback (named local model servers are bridged at their own address), and Node's switch that
 * makes its fetch and http honour them (Node 24+).
 */
export function egressEnv(egress: SandboxEgress): Record<string, string> {
  const url = `http://127.0.0.1:${proxyPort(egress)}`;
  const noProxy = "localhost,127.0.0.1,::1";
  return {
    HTTP_PROXY: url,
    HTTPS_PROXY: url,
    ALL_PROXY: url,
    http_proxy: url,
    https_proxy: url,
    all_proxy: url,
    NO_PROXY: noProxy,
    no_proxy: noProxy,
    NODE_USE_ENV_PROXY: "1",
  };
}

/** The argv (inside the sandbox) that starts the bridge, then execs `command` (an argv). */
export function egressCommand(egress: SandboxEgress, node: string, command: string[]): string[] {
  const pairs: Array<[number, string]> = [
    [proxyPort(egress), egress.proxy],
    ...egress.forwards.map((f): [number, string] => [f.port, f.socket]),
  ];
  return ["/bin/sh", "-c", PRELUDE, node, BRIDGE_JS, JSON.stringify(pairs), ...command];
}
