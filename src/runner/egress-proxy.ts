/**
 * A researcher's only way out of its sandbox (docs/security.md "5. The researcher gets only what
 * it needs"): the sandbox has a network namespace of its own (loopback only), and the harness runs
 * this proxy on unix sockets in a directory it made, bound read-only into the sandbox, where a
 * small bridge (src/runner/egress-bridge.ts) listens on the sandbox's own 127.0.0.1.
 *
 * - `proxy.sock`: an HTTP CONNECT + plain-HTTP forward proxy. It serves only the host:port pairs
 *   of the allowlist (the model endpoints program.md names), resolves names itself and connects
 *   to the address it checked (no second lookup to rebind), and refuses loopback, private,
 *   link-local and other non-public addresses unless the endpoint was named by program.md itself
 *   (`agent.base_url` on 127.0.0.1 or a LAN host: ollama, llama.cpp, vLLM).
 * - `f<port>.sock`, one per named loopback endpoint: a plain TCP forward to that port on the
 *   host, so a client that ignores proxy variables (most do for 127.0.0.1) reaches a local model
 *   server at the address program.md gives, and nothing else on the host's loopback.
 *
 * Every refusal is answered (403 with the reason) and written to the log, when one is given.
 */

import { lookup } from "node:dns/promises";
import { appendFileSync, mkdtempSync, rmSync } from "node:fs";
import { createServer as createHttpServer, request as httpRequest } from "node:http";
import { BlockList, connect, createServer, isIP, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AutolabError } from "../core/errors.ts";
import type { SandboxEgress } from "../core/types.ts";

export interface EgressEndpoint {
  /** Lower case; an IPv6 address without brackets. */
  host: string;
  port: number;
  /**
   * Named by program.md itself (`agent.base_url`): it may be a loopback or private address.
   * Otherwise (a CLI's vendor default) only public addresses are served.
   */
  named: boolean;
  /** Where it was named, for messages ("agent.base_url", "claude's default endpoint"). */
  source: string;
}

/** The endpoint of a URL (`http://127.0.0.1:11434/v1` → 127.0.0.1:11434). */
export function endpointOf(url: string, source: string, named: boolean): EgressEndpoint {
  const u = new URL(url);
  const port = u.port ? Number(u.port) : u.protocol === "https:" ? 443 : 80;
  return { host: u.hostname.replace(/^\[|\]$/g, "").toLowerCase(), port, named, source };
}

/** Whether a host name or address is this machine's loopback (bridged as a plain forward). */
export function isLoopbackHost(host: string): boolean {
  if (host === "localhost" || host.endsWith(".localhost")) return true;
  return isIP(host) !== 0 && LOOPBACK.check(host, isIP(host) === 6 ? "ipv6" : "ipv4");
}

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet("127.0.0.0", 8, "ipv4");
LOOPBACK.addAddress("::1", "ipv6");

/** Addresses no vendor endpoint may resolve to: this machine, the LAN, link-local (cloud metadata), reserved. */
const NOT_PUBLIC = new BlockList();
for (const [net, bits] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const) {
  NOT_PUBLIC.addSubnet(net, bits, "ipv4");
}
for (const [net, bits] of [
  ["::", 128],
  ["::1", 128],
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8],
  ["2001:db8::", 32],
] as const) {
  NOT_PUBLIC.addSubnet(net, bits, "ipv6");
}

export function isPublicAddress(address: string): boolean {
  const v = isIP(address);
  if (v === 0) return false;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  if (mapped) return !NOT_PUBLIC.check(mapped, "ipv4");
  return !NOT_PUBLIC.check(address, v === 6 ? "ipv6" : "ipv4");
}

/** The address the proxy connects to for `ep`: its own lookup, public addresses only unless named. */
export async function resolveEndpoint(ep: EgressEndpoint): Promise<string> {
  const addresses = isIP(ep.host)
    ? [ep.host]
    : (await lookup(ep.host, { all: true, verbatim: true })).map((a) => a.address);
  const usable = ep.named ? addresses : addresses.filter(isPublicAddress);
  const first = usable[0];
  if (first === undefined) {
    throw new Error(
      `${ep.host} resolves only to non-public addresses (${addresses.join(", ")}), which only an endpoint program.md names may use`,
    );
  }
  return first;
}

export interface EgressProxy {
  /** What the sandbox spec carries (SandboxSpec.egress). */
  readonly spec: SandboxEgress;
  readonly endpoints: readonly EgressEndpoint[];
  /** Connections refused so far. */
  readonly refused: number;
  close(): Promise<void>;
}

export interface EgressOptions {
  endpoints: EgressEndpoint[];
  /** Appends one line per refusal (and per served connection). */
  log?: string;
  /** Where the socket directory goes (default: the temp dir, or /tmp when that is too long for a socket path). */
  baseDir?: string;
}

/** A unix socket's path holds at most 107 bytes. */
const MAX_SOCKET_PATH = 100;

/** Starts the proxy and the forwards; close() stops them and removes the directory. */
export async function startEgressProxy(opts: EgressOptions): Promise<EgressProxy> {
  let base = opts.baseDir ?? tmpdir();
  if (base.length > MAX_SOCKET_PATH - 30) base = "/tmp";
  // mkdtemp makes it 0700: no other user can connect to the sockets or swap them.
  const dir = mkdtempSync(join(base, "autolab-egress-"));
  const sockets = new Set<Socket>();
  const servers: Server[] = [];
  let refused = 0;
  const log = (line: string) => {
    if (!opts.log) return;
    try {
      appendFileSync(opts.log, `${new Date().toISOString()} ${line}\n`);
    } catch {}
  };
  const track = (s: Socket) => {
    // A kept-alive connection carries many requests: its listeners are added once.
    if (sockets.has(s)) return s;
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
    s.on("error", () => s.destroy());
    return s;
  };
  const allowed = (host: string, port: number) => {
    const h = host.replace(/^\[|\]$/g, "").toLowerCase();
    return opts.endpoints.find((e) => e.host === h && e.port === port);
  };
  const refuse = (what: string, why: string) => {
    refused++;
    log(`refused ${what}: ${why}`);
    return `autolab egress proxy: ${what} refused: ${why}\n`;
  };
  const notNamed = "not a model endpoint program.md names (agent.base_url)";

  const proxy = createHttpServer((req, res) => {
    track(req.socket);
    let url: URL;
    try {
      url = new URL(req.url ?? "");
    } catch {
      res
        .writeHead(400, { "content-type": "text/plain" })
        .end(refuse(String(req.url), "not an absolute URL"));
      return;
    }
    const port = url.port ? Number(url.port) : 80;
    const ep = url.protocol === "http:" ? allowed(url.hostname, port) : undefined;
    if (!ep) {
      res.writeHead(403, { "content-type": "text/plain" }).end(refuse(`${url.host}`, notNamed));
      return;
    }
    resolveEndpoint(ep).then(
      (address) => {
        const headers = { ...req.headers };
        for (const h of Object.keys(headers)) if (h.startsWith("proxy-")) delete headers[h];
        const up = httpRequest(
          { host: address, port, method: req.method, path: `${url.pathname}${url.search}`, headers },
          (upRes) => {
            res.writeHead(upRes.statusCode ?? 502, upRes.headers);
            upRes.pipe(res);
          },
        );
        up.on("socket", track);
        up.on("error", (err) => {
          if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
          res.end(`autolab egress proxy: ${ep.host}:${port}: ${err.message}\n`);
        });
        req.pipe(up);
        log(`http ${ep.host}:${port} (${address})`);
      },
      (err: Error) => {
        res.writeHead(403, { "content-type": "text/plain" }).end(refuse(`${ep.host}:${port}`, err.message));
      },
    );
  });
  proxy.on("connect", (req, clientSocket, head) => {
    const client = track(clientSocket as Socket);
    const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(req.url ?? "");
    const ep = m ? allowed(m[1] as string, Number(m[2])) : undefined;
    const deny = (status: string, text: string) =>
      client.end(`HTTP/1.1 ${status}\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n${text}`);
    if (!ep) {
      deny("403 Forbidden", refuse(String(req.url), notNamed));
      return;
    }
    resolveEndpoint(ep).then(
      (address) => {
        const up = track(connect(ep.port, address));
        up.once("connect", () => {
          client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
          if (head.length > 0) up.write(head);
          up.pipe(client);
          client.pipe(up);
          log(`connect ${ep.host}:${ep.port} (${address})`);
        });
        up.once("error", (err) =>
          deny("502 Bad Gateway", `autolab egress proxy: ${req.url}: ${err.message}\n`),
        );
        client.once("close", () => up.destroy());
      },
      (err: Error) => deny("403 Forbidden", refuse(`${ep.host}:${ep.port}`, err.message)),
    );
  });
  proxy.on("clientError", (_err, s) => s.destroy());
  servers.push(proxy);

  const forwards: SandboxEgress["forwards"] = [];
  const listenOn = (server: Server, path: string) =>
    new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(path, () => resolve());
    });
  try {
    const proxySocket = join(dir, "proxy.sock");
    await listenOn(proxy, proxySocket);
    for (const ep of opts.endpoints) {
      if (!isLoopbackHost(ep.host) || forwards.some((f) => f.port === ep.port)) continue;
      const socket = join(dir, `f${ep.port}.sock`);
      const server = createServer((c) => {
        const client = track(c);
        const up = track(connect(ep.port, ep.host));
        up.pipe(client);
        client.pipe(up);
        client.once("close", () => up.destroy());
        up.once("close", () => client.destroy());
      });
      servers.push(server);
      await listenOn(server, socket);
      forwards.push({ port: ep.port, socket });
    }
    return {
      spec: { dir, proxy: proxySocket, forwards },
      endpoints: opts.endpoints,
      get refused() {
        return refused;
      },
      close: () => close(),
    };
  } catch (err) {
    await close();
    throw err;
  }

  async function close(): Promise<void> {
    for (const s of sockets) s.destroy();
    await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Checks that the harness can reach every endpoint (a TCP connection to the address the proxy
 * would use): otherwise the researcher could reach nothing, and the run stops here with what to
 * fix rather than after a proposal that failed for an unclear reason.
 */
export async function assertReachable(endpoints: readonly EgressEndpoint[], timeoutMs = 5000): Promise<void> {
  for (const ep of endpoints) {
    let why: string | undefined;
    try {
      const address = await resolveEndpoint(ep);
      await new Promise<void>((resolve, reject) => {
        const s = connect(ep.port, address);
        const timer = setTimeout(() => {
          s.destroy();
          reject(new Error(`no answer within ${timeoutMs / 1000} s`));
        }, timeoutMs);
        s.once("connect", () => {
          clearTimeout(timer);
          s.destroy();
          resolve();
        });
        s.once("error", (err) => {
          clearTimeout(timer);
          reject(err);
        });
      });
    } catch (err) {
      why = (err as Error).message;
    }
    if (why === undefined) continue;
    const where = ep.host.includes(":") ? `[${ep.host}]:${ep.port}` : `${ep.host}:${ep.port}`;
    throw new AutolabError(
      "EGRESS_ENDPOINT_UNREACHABLE",
      `the model endpoint ${where} (${ep.source}) cannot be reached from here (${why}); the researcher's sandbox reaches nothing but its model endpoints, through autolab's egress proxy.`,
      isLoopbackHost(ep.host) || ep.named
        ? "Start the model server (e.g. `ollama serve`, `llama-server --port N`), or correct agent.base_url in program.md."
        : "Check this machine's network and DNS for the agent's vendor, or name a reachable endpoint with agent.base_url in program.md.",
    );
  }
}
