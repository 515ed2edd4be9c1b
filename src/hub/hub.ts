/**
 * Starting a hub (docs/hub.md "Running a hub"): the pool on its PostgreSQL schema (default
 * `autolab_hub`), the tables (migrateHub), the hub's repository (the root commit recorded in
 * hub_meta at first start, with the root as the DAG's first commit and the chain's first row),
 * and the HTTP API on host:port. The `autolab hub` command and the verifier driver build on it.
 */
import type { AddressInfo } from "node:net";
import { join, resolve } from "node:path";
import { serve } from "@hono/node-server";
import pg from "pg";
import { AutolabError } from "../core/errors.ts";
import { type FleetUrl, parseFleetUrl, unreachable } from "../fleet/db.ts";
import { git } from "../workspace/git.ts";
import type { HubLimits } from "./gates.ts";
import { cleanSubject, HubRepo } from "./repo.ts";
import { migrateHub } from "./schema.ts";
import { createHubApp } from "./server.ts";
import { HubStore } from "./store.ts";

export interface StartHubOptions {
  /** postgres://…[?schema=…] (default schema `autolab_hub`). */
  db: string;
  /** The project (a git repository with program.md) the hub serves. */
  projectDir: string;
  /** Default `<project>/.autolab/hub`. */
  dataDir?: string;
  host?: string;
  /** 0: any free port. Default 7878. */
  port?: number;
  /** Default `cpu`; recorded at first start, and must match on every later start. */
  hardwareClass?: string;
  limits?: Partial<HubLimits>;
  onClaim?: (id: string, kind: "frontier" | "finding", status: string) => void;
  clock?: () => number;
  random?: () => number;
  log?: (message: string) => void;
  feedPollMs?: number;
}

export interface StartedHub {
  url: string;
  port: number;
  pool: pg.Pool;
  schema: string;
  fleetUrl: FleetUrl;
  repo: HubRepo;
  store: HubStore;
  close(): Promise<void>;
}

export async function startHub(o: StartHubOptions): Promise<StartedHub> {
  const url = parseFleetUrl(o.db, "--db", "autolab_hub");
  const hardwareClass = o.hardwareClass ?? "cpu";
  const pool = new pg.Pool({
    connectionString: url.connectionString,
    max: 8,
    connectionTimeoutMillis: 10_000,
    application_name: `autolab-hub/${url.schema}`,
  });
  pool.on("error", () => {});
  let app: ReturnType<typeof createHubApp> | undefined;
  try {
    try {
      await migrateHub(pool, url.schema);
    } catch (err) {
      throw unreachable(url, err);
    }
    const store = new HubStore(pool, url.schema);
    const dataDir = resolve(o.dataDir ?? join(o.projectDir, ".autolab", "hub"));
    const recordedRoot = await store.meta("root_commit");
    let repo: HubRepo;
    if (recordedRoot === undefined) {
      repo = await HubRepo.open({ dataDir, projectDir: o.projectDir });
      const tree = (await git(repo.gitDir, ["rev-parse", `${repo.rootCommit}^{tree}`])).trim();
      const subject = cleanSubject(await git(repo.gitDir, ["log", "-1", "--format=%s", repo.rootCommit]));
      await store.initRoot({ root: repo.rootCommit, tree, subject, hardwareClass, at: new Date() });
      // Two hubs started at once on one database: the first one's root wins.
      const root = await store.meta("root_commit");
      if (root !== repo.rootCommit)
        throw new AutolabError(
          "HUB_STATE_MISMATCH",
          `the hub's database ${url.shown} (schema ${url.schema}) was initialised with root ${root} while this hub started from ${repo.rootCommit}.`,
          "Start one hub per schema (?schema=… in --db).",
        );
    } else {
      repo = await HubRepo.open({ dataDir, projectDir: o.projectDir, rootCommit: recordedRoot }).catch(
        (err) => {
          throw new AutolabError(
            "HUB_STATE_MISMATCH",
            `the hub's database ${url.shown} (schema ${url.schema}) records root ${recordedRoot}, which the data directory ${dataDir} cannot give: ${err instanceof Error ? err.message : String(err)}`,
            "Start the hub with the --data directory it was first started with, or use a new schema (?schema=… in --db) for a new hub.",
          );
        },
      );
      if (!(await repo.has(recordedRoot)))
        throw new AutolabError(
          "HUB_STATE_MISMATCH",
          `the hub's repository in ${dataDir} lacks the root commit ${recordedRoot} its database records.`,
          "Start the hub with the --data directory it was first started with, or use a new schema for a new hub.",
        );
    }
    const recordedClass = await store.meta("hardware_class");
    if (recordedClass !== undefined && o.hardwareClass !== undefined && recordedClass !== o.hardwareClass)
      throw new AutolabError(
        "HUB_STATE_MISMATCH",
        `this hub verifies on hardware class ${JSON.stringify(recordedClass)} (recorded at its first start), not ${JSON.stringify(o.hardwareClass)}.`,
        `Drop --hardware-class or pass ${recordedClass}; a hub for another class needs a schema of its own.`,
      );
    const hubApp = createHubApp({
      store,
      repo,
      bundlesDir: join(dataDir, "bundles"),
      hardwareClass: recordedClass ?? hardwareClass,
      ...(o.limits ? { limits: o.limits } : {}),
      ...(o.onClaim ? { onClaim: o.onClaim } : {}),
      ...(o.clock ? { clock: o.clock } : {}),
      ...(o.random ? { random: o.random } : {}),
      ...(o.log ? { log: o.log } : {}),
      ...(o.feedPollMs !== undefined ? { feedPollMs: o.feedPollMs } : {}),
    });
    app = hubApp;
    const host = o.host ?? "127.0.0.1";
    const { server, address } = await new Promise<{ server: ReturnType<typeof serve>; address: AddressInfo }>(
      (res, rej) => {
        const s = serve({ fetch: hubApp.fetch, port: o.port ?? 7878, hostname: host }, (info) =>
          res({ server: s, address: info }),
        );
        s.once("error", (err: NodeJS.ErrnoException) =>
          rej(
            err.code === "EADDRINUSE"
              ? new AutolabError(
                  "PORT_IN_USE",
                  `port ${o.port} on ${host} is in use.`,
                  "Pass another --port (or --port 0).",
                )
              : err,
          ),
        );
      },
    );
    const shownHost = address.family === "IPv6" ? `[${address.address}]` : address.address;
    return {
      url: `http://${shownHost}:${address.port}`,
      port: address.port,
      pool,
      schema: url.schema,
      fleetUrl: url,
      repo,
      store,
      close: () =>
        new Promise<void>((res) => {
          hubApp.close();
          (server as { closeAllConnections?: () => void }).closeAllConnections?.();
          server.close(() => {
            pool.end().then(
              () => res(),
              () => res(),
            );
          });
        }),
    };
  } catch (err) {
    app?.close();
    await pool.end().catch(() => {});
    throw err;
  }
}
