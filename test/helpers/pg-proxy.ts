/**
 * A TCP proxy in front of the test database that can drop every connection and refuse new ones:
 * "the database went away" for one test, without stopping the PostgreSQL other tests share.
 */
import { type AddressInfo, connect, createServer, type Socket } from "node:net";
import { PG_URL } from "./pg.ts";

export interface PgProxy {
  port: number;
  /** Drops every connection and refuses new ones. */
  down(): void;
  up(): Promise<void>;
  close(): Promise<void>;
  /**
   * Goes down (as `down`) the moment a client sends a message holding `text` (a query's SQL: the
   * message is dropped, never reaching the server). Resolves then.
   */
  cutOn(text: string): Promise<void>;
  /** `url` (the test database's, with its query string) pointed at the proxy. */
  via(url: string): string;
}

export async function pgProxy(): Promise<PgProxy> {
  const target = new URL(PG_URL as string);
  const sockets = new Set<Socket>();
  let trap: { needle: Buffer; sprung: () => void } | undefined;
  const down = () => {
    server.close();
    for (const s of sockets) s.destroy();
  };
  const server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("error", () => {});
      s.on("close", () => {
        sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
    client.on("data", (chunk: Buffer) => {
      if (trap && chunk.includes(trap.needle)) {
        const sprung = trap.sprung;
        trap = undefined;
        down();
        sprung();
        return;
      }
      if (!upstream.write(chunk)) {
        client.pause();
        upstream.once("drain", () => client.resume());
      }
    });
    upstream.pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    down,
    cutOn: (text) =>
      new Promise<void>((sprung) => {
        trap = { needle: Buffer.from(text), sprung };
      }),
    up: () => new Promise<void>((r) => server.listen(port, "127.0.0.1", r)),
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
        if (!server.listening) r();
      }),
    via(url) {
      const u = new URL(url);
      u.hostname = "127.0.0.1";
      u.port = String(port);
      return u.toString();
    },
  };
}
