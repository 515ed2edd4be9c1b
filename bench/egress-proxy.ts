/**
 * What the researcher's egress proxy adds to a model request (docs/security.md "5. The researcher
 * gets only what it needs"): a client inside a bubblewrap sandbox makes `n` HTTP requests to a
 * model stub on the harness's 127.0.0.1, each on a new connection and then `n` on one kept-alive
 * connection, three ways:
 *  - host network (`network: true`, the researcher's sandbox before the proxy): the baseline;
 *  - bridged forward: the named local model endpoint at its own address inside (bridge → unix
 *    socket → harness forward), how ollama or llama.cpp on 127.0.0.1 is reached;
 *  - through the proxy: HTTP_PROXY (absolute-form request; bridge → unix socket → the proxy's
 *    allowlist and lookup → the stub), how a remote endpoint is reached.
 * Per-request medians and p90 in ms, over 5 interleaved rounds; sandbox start-up is not counted
 * (the client times itself).
 * Run: `npm run bench -- egress-proxy [n]` (default 200).
 */
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { proxyPort } from "../src/runner/egress-bridge.ts";
import { type EgressProxy, endpointOf, startEgressProxy } from "../src/runner/egress-proxy.ts";
import { probeSandbox, sandboxCommand } from "../src/runner/sandbox.ts";

/** node -e: argv[1] host:port to connect to, argv[2] the request path, argv[3] n; prints {fresh: [ms], kept: [ms]}. */
const CLIENT = `const http = require("node:http");
const [port, path, n] = [Number(process.argv[1]), process.argv[2], Number(process.argv[3])];
const one = (agent) => new Promise((resolve, reject) => {
  const t = performance.now();
  http.get({ host: "127.0.0.1", port, path, agent }, (res) => {
    res.resume();
    res.on("end", () => (res.statusCode === 200 ? resolve(performance.now() - t) : reject(new Error("HTTP " + res.statusCode))));
  }).on("error", reject);
});
(async () => {
  const fresh = [], kept = [];
  for (let i = 0; i < 10; i++) await one(false);
  for (let i = 0; i < n; i++) fresh.push(await one(false));
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  for (let i = 0; i < n; i++) kept.push(await one(agent));
  agent.destroy();
  console.log(JSON.stringify({ fresh, kept }));
})().catch((e) => { console.error(e.message); process.exit(1); });`;

function stats(xs: number[]): { median: number; p90: number } {
  const s = [...xs].sort((a, b) => a - b);
  const at = (q: number) =>
    Math.round((s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN) * 1000) / 1000;
  return { median: at(0.5), p90: at(0.9) };
}

async function inSandbox(
  egress: EgressProxy | undefined,
  port: number,
  path: string,
  n: number,
): Promise<{ fresh: number[]; kept: number[] }> {
  const argv = sandboxCommand(
    {
      writable: [],
      readOnly: [],
      hidden: [],
      network: egress === undefined,
      ...(egress ? { egress: egress.spec } : {}),
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
      limits: {},
      devices: [],
    },
    `exec "${process.execPath}" -e '${CLIENT}' ${port} '${path}' ${n}`,
    "/",
  );
  return new Promise((resolve, reject) => {
    const child = spawn(argv.file, argv.args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    child.on("close", (code) =>
      code === 0 ? resolve(JSON.parse(out.trim().split("\n").pop() ?? "{}")) : reject(new Error(err)),
    );
  });
}

export async function main(args: string[]): Promise<Record<string, unknown>> {
  const n = Number(args[0] ?? 200);
  const probe = probeSandbox();
  if (!probe.ok) throw new Error(`no sandbox here: ${probe.reason}`);
  const body = JSON.stringify({ object: "list", data: [{ id: "fake-model", object: "model" }] });
  const stub = createServer((_req, res) => res.end(body));
  await new Promise<void>((r) => stub.listen(0, "127.0.0.1", () => r()));
  const port = (stub.address() as AddressInfo).port;
  const egress = await startEgressProxy({
    endpoints: [endpointOf(`http://127.0.0.1:${port}/v1`, "agent.base_url", true)],
  });
  try {
    // Interleaved rounds, so that the machine's load drifts over all three alike.
    const host = { fresh: [] as number[], kept: [] as number[] };
    const forward = { fresh: [] as number[], kept: [] as number[] };
    const proxied = { fresh: [] as number[], kept: [] as number[] };
    const pool = (into: typeof host, r: typeof host) => {
      into.fresh.push(...r.fresh);
      into.kept.push(...r.kept);
    };
    const rounds = 5;
    const per = Math.ceil(n / rounds);
    for (let i = 0; i < rounds; i++) {
      pool(host, await inSandbox(undefined, port, "/v1/models", per));
      pool(forward, await inSandbox(egress, port, "/v1/models", per));
      pool(
        proxied,
        await inSandbox(egress, proxyPort(egress.spec), `http://127.0.0.1:${port}/v1/models`, per),
      );
    }
    const figures = {
      n,
      host_network_fresh_ms: stats(host.fresh),
      host_network_kept_ms: stats(host.kept),
      forward_fresh_ms: stats(forward.fresh),
      forward_kept_ms: stats(forward.kept),
      proxy_fresh_ms: stats(proxied.fresh),
      proxy_kept_ms: stats(proxied.kept),
    };
    const add = (a: { median: number }, b: { median: number }) =>
      Math.round((a.median - b.median) * 1000) / 1000;
    console.log(
      `${n} requests each, median added per request vs the host network: ` +
        `forward ${add(figures.forward_fresh_ms, figures.host_network_fresh_ms)} ms (new connection), ` +
        `${add(figures.forward_kept_ms, figures.host_network_kept_ms)} ms (kept alive); ` +
        `proxy ${add(figures.proxy_fresh_ms, figures.host_network_fresh_ms)} ms, ` +
        `${add(figures.proxy_kept_ms, figures.host_network_kept_ms)} ms`,
    );
    return figures;
  } finally {
    await egress.close();
    stub.close();
  }
}
