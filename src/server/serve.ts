import { randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { AutolabError } from "../core/errors.ts";
import type { FleetUrl } from "../fleet/db.ts";
import { createApp, isLoopbackName } from "./app.ts";

/** A token shorter than this is refused: it could be guessed. */
export const MIN_TOKEN_LENGTH = 16;

export interface ServeOptions {
  ledgerPath: string;
  stateDir?: string;
  /** 0 picks a free port. */
  port: number;
  host: string;
  token?: string;
  pollMs?: number;
  /** A worker fleet whose workers the dashboard shows. */
  fleet?: FleetUrl;
}

export interface RunningServer {
  /** The dashboard's address (never with the token: the caller knows it, and logs must not). */
  url: string;
  /**
   * The address to open in a browser: `url?token=…` when the server made its token (the page
   * then trades it for a session cookie and drops it from the address bar), `url` when the user
   * gave one (they know it; it is never echoed).
   */
  openUrl: string;
  /** The token every request carries (header, cookie or `?token=`): the user's, or one made here. */
  token: string;
  port: number;
  host: string;
  close(): Promise<void>;
}

/**
 * The one place that listens. Every request carries a token (docs/security.md "5. The researcher
 * gets only what it needs": a loopback address is no proof of who asks — any process of the
 * machine, a sandbox's proxy, another user, can connect there). The user's own (`--token`,
 * AUTOLAB_TOKEN), or one made here, in the address `autolab serve` prints: opening it sets a
 * session cookie. Loopback by default; any other address only with the user's token. Without
 * one, requests must also name a loopback host (DNS rebinding).
 */
export async function startServer(opts: ServeOptions): Promise<RunningServer> {
  if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535) {
    throw new AutolabError(
      "BAD_PORT",
      `port ${opts.port} is not a TCP port.`,
      "Pass --port with a whole number from 0 to 65535 (0 picks a free one).",
    );
  }
  if (opts.token !== undefined && opts.token.length < MIN_TOKEN_LENGTH) {
    throw new AutolabError(
      "TOKEN_TOO_SHORT",
      `the token is ${opts.token.length} character${opts.token.length === 1 ? "" : "s"} long: anyone could guess it.`,
      `Use at least ${MIN_TOKEN_LENGTH} random characters, e.g. --token "$(openssl rand -hex 16)" (or AUTOLAB_TOKEN).`,
    );
  }
  const loopback = isLoopbackName(opts.host);
  if (!loopback && !opts.token) {
    throw new AutolabError(
      "TOKEN_REQUIRED",
      `refusing to serve the lab on ${opts.host} without a token: anyone who can reach that address could read the notebook.`,
      "Pass --token <secret> (or set AUTOLAB_TOKEN); every request must then carry it. Or bind --host 127.0.0.1.",
    );
  }
  const token = opts.token ?? randomBytes(24).toString("base64url");
  const app = createApp({
    ledgerPath: opts.ledgerPath,
    ...(opts.stateDir ? { stateDir: opts.stateDir } : {}),
    token,
    ...(opts.token ? {} : { loopbackOnly: true }),
    ...(opts.pollMs !== undefined ? { pollMs: opts.pollMs } : {}),
    ...(opts.fleet ? { fleet: opts.fleet } : {}),
    warm: true,
  });
  let server: ReturnType<typeof serve>;
  let address: AddressInfo;
  try {
    ({ server, address } = await new Promise<{ server: ReturnType<typeof serve>; address: AddressInfo }>(
      (resolve, reject) => {
        const s = serve({ fetch: app.fetch, port: opts.port, hostname: opts.host }, (info) =>
          resolve({ server: s, address: info }),
        );
        s.once("error", reject);
      },
    ));
  } catch (err) {
    app.close();
    throw listenError(err, opts);
  }
  const shownHost = address.family === "IPv6" ? `[${address.address}]` : address.address;
  const url = `http://${shownHost}:${address.port}/`;
  return {
    url,
    openUrl: opts.token ? url : `${url}?token=${token}`,
    token,
    port: address.port,
    host: address.address,
    close: () =>
      new Promise<void>((resolve) => {
        app.close();
        // Open SSE streams would keep the server from closing.
        (server as { closeAllConnections?: () => void }).closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

/** Why listening failed, as a user can act on it (every errno listen gives); else the error itself. */
function listenError(err: unknown, opts: ServeOptions): unknown {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const where = `${opts.host}:${opts.port}`;
  switch (code) {
    case "EADDRINUSE":
      return new AutolabError(
        "PORT_IN_USE",
        `port ${opts.port} on ${opts.host} is in use.`,
        "Pass another --port (or --port 0 for any free one).",
      );
    case "EACCES":
    case "EPERM":
      return new AutolabError(
        "PORT_FORBIDDEN",
        `not allowed to listen on ${where}${opts.port > 0 && opts.port < 1024 ? ": ports below 1024 need root" : ""}.`,
        "Pass a --port of 1024 or more (e.g. --port 8420, or --port 0 for any free one).",
      );
    case "EADDRNOTAVAIL":
    case "ENOTFOUND":
    case "EAI_AGAIN":
    case "EAI_FAIL":
    case "EAI_NONAME":
      return new AutolabError(
        "BAD_HOST",
        `cannot listen on ${opts.host}: no such local address.`,
        "Pass --host an address of this machine (127.0.0.1, ::1, 0.0.0.0 for all).",
      );
    default:
      return code
        ? new AutolabError(
            "LISTEN_FAILED",
            `cannot listen on ${where}: ${(err as Error).message}.`,
            "Pass another --port or --host.",
          )
        : err;
  }
}
