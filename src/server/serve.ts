import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { AutolabError } from "../core/errors.ts";
import { createApp, isLoopbackName } from "./app.ts";

export interface ServeOptions {
  ledgerPath: string;
  stateDir?: string;
  /** 0 picks a free port. */
  port: number;
  host: string;
  token?: string;
  pollMs?: number;
}

export interface RunningServer {
  /** The dashboard's address (with the token, when there is one). */
  url: string;
  port: number;
  host: string;
  close(): Promise<void>;
}

/**
 * The one place that listens. Loopback by default; any other address only with a token,
 * which every request must then carry. Without a token, requests must also name a loopback
 * host, so a web page cannot reach the lab through DNS rebinding.
 */
export async function startServer(opts: ServeOptions): Promise<RunningServer> {
  const loopback = isLoopbackName(opts.host);
  if (!loopback && !opts.token) {
    throw new AutolabError(
      "TOKEN_REQUIRED",
      `refusing to serve the lab on ${opts.host} without a token: anyone who can reach that address could read the notebook.`,
      "Pass --token <secret> (or set AUTOLAB_TOKEN); every request must then carry it. Or bind --host 127.0.0.1.",
    );
  }
  const app = createApp({
    ledgerPath: opts.ledgerPath,
    ...(opts.stateDir ? { stateDir: opts.stateDir } : {}),
    ...(opts.token ? { token: opts.token } : { loopbackOnly: true }),
    ...(opts.pollMs !== undefined ? { pollMs: opts.pollMs } : {}),
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
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EADDRINUSE")
      throw new AutolabError(
        "PORT_IN_USE",
        `port ${opts.port} on ${opts.host} is in use.`,
        "Pass another --port (or --port 0 for any free one).",
      );
    if (code === "EADDRNOTAVAIL" || code === "ENOTFOUND")
      throw new AutolabError("BAD_HOST", `cannot listen on ${opts.host}: no such local address.`);
    throw err;
  }
  const shownHost = address.family === "IPv6" ? `[${address.address}]` : address.address;
  const url = `http://${shownHost}:${address.port}/${opts.token ? `?token=${encodeURIComponent(opts.token)}` : ""}`;
  return {
    url,
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
