/**
 * `autolab contribute --hub URL [dir]`: the local loop on the hub's head with this machine's
 * researcher, then its kept experiments sent as signed claims (src/hub/contribute.ts).
 * `autolab hub <dir> --db postgres://…`: serve a program to outside contributors, with its
 * verifiers on the fleet of the same database (src/hub/hub.ts).
 */
import { join, resolve } from "node:path";
import { AutolabError } from "../core/errors.ts";
import { contribute } from "../hub/contribute.ts";
import { startHub } from "../hub/hub.ts";
import { fleetHubTrials, localWorkers } from "../hub/hub-trials.ts";
import { measureRoot } from "../hub/root-value.ts";
import { VerifierDriver } from "../hub/verifier.ts";
import { handleError } from "./errors.ts";
import { createProgress } from "./progress.ts";
import { safeText } from "./safe-text.ts";

export interface ContributeFlags {
  hub: string;
  identity?: string;
  maxExperiments?: number;
  maxTime?: number;
  agent?: string;
  slots?: number;
  hardwareClass?: string;
  /** false: --no-share-findings. */
  shareFindings?: boolean;
  wait?: boolean;
}

export async function contributeCommand(dir: string | undefined, flags: ContributeFlags): Promise<void> {
  const ac = new AbortController();
  const onSignal = () => {
    if (ac.signal.aborted) process.exit(130);
    process.stderr.write("\nstopping: what was kept so far is still sent (Ctrl-C again to quit now)\n");
    ac.abort();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  const progress = createProgress({});
  const log = (line: string) => process.stdout.write(`${safeText(line)}\n`);
  try {
    const out = await contribute({
      hub: flags.hub,
      ...(dir ? { dir } : {}),
      ...(flags.identity ? { identity: flags.identity } : {}),
      ...(flags.maxExperiments !== undefined ? { maxExperiments: flags.maxExperiments } : {}),
      ...(flags.maxTime !== undefined ? { maxTimeMs: flags.maxTime } : {}),
      ...(flags.agent ? { agent: flags.agent } : {}),
      ...(flags.slots !== undefined ? { slots: flags.slots } : {}),
      ...(flags.hardwareClass ? { hardwareClass: flags.hardwareClass } : {}),
      shareFindings: flags.shareFindings !== false,
      ...(flags.wait ? { wait: true } : {}),
      signal: ac.signal,
      onEvent: progress.onEvent,
      log: (line) => {
        progress.stop();
        log(line);
      },
    });
    progress.stop();
    const accepted = out.sent.filter((s) => s.state).length;
    log(
      `${out.sent.length} claim(s) sent as ${out.keyId.slice(0, 16)}…: ${accepted} taken by the hub, ${out.sent.length - accepted} refused. The hub's verifiers decide what counts: GET ${new URL("/api/chain", flags.hub)}`,
    );
    if (ac.signal.aborted) process.exitCode = 130;
  } catch (err) {
    progress.stop();
    process.exitCode = handleError(err);
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

export interface HubFlags {
  db?: string;
  host?: string;
  port?: number;
  data?: string;
  hardwareClass?: string;
  workers?: number;
}

/**
 * Serves until SIGINT/SIGTERM: the API (startHub), the verifier driver over the fleet of the
 * same database, and `--workers N` in-process worker slots. Stopping leaves every claim as the
 * tables hold it; the next start resumes each verification from its stored trials.
 */
export async function hubCommand(dir: string, flags: HubFlags): Promise<void> {
  const log = (line: string) => process.stdout.write(`${safeText(line)}\n`);
  const stopped = new Promise<void>((res) => {
    const on = () => {
      process.stderr.write("\nstopping the hub: claims under verification resume at the next start\n");
      process.off("SIGINT", on);
      process.off("SIGTERM", on);
      res();
    };
    process.on("SIGINT", on);
    process.on("SIGTERM", on);
  });
  const closers: (() => Promise<void>)[] = [];
  try {
    const db = flags.db ?? process.env.AUTOLAB_HUB_DB;
    if (!db) {
      throw new AutolabError(
        "FLEET_OPTIONS_INVALID",
        "autolab hub needs its PostgreSQL database.",
        "Pass --db postgres://user@host/database[?schema=autolab_hub] (or set AUTOLAB_HUB_DB); the password comes from PGPASSWORD or ~/.pgpass.",
      );
    }
    const projectDir = resolve(dir);
    const dataDir = resolve(flags.data ?? join(projectDir, ".autolab", "hub"));
    let driver: VerifierDriver | undefined;
    const hub = await startHub({
      db,
      projectDir,
      dataDir,
      ...(flags.host ? { host: flags.host } : {}),
      ...(flags.port !== undefined ? { port: flags.port } : {}),
      ...(flags.hardwareClass ? { hardwareClass: flags.hardwareClass } : {}),
      onClaim: () => driver?.wake(),
      log,
    });
    closers.unshift(() => hub.close());
    const program = hub.repo.program;
    const hardwareClass = (await hub.store.meta("hardware_class")) ?? flags.hardwareClass ?? "cpu";
    const trials = await fleetHubTrials({
      url: hub.fleetUrl,
      repo: hub.repo,
      program,
      logDir: join(dataDir, "trials"),
    });
    closers.unshift(() => trials.close());
    if (flags.workers) {
      const stop = await localWorkers(hub.fleetUrl, flags.workers, { log });
      closers.unshift(stop);
    }
    driver = new VerifierDriver({
      pool: hub.pool,
      schema: hub.schema,
      trials,
      direction: program.objective.direction,
      metric: program.objective.metric,
      onError: (err) => log(`verifier: ${err instanceof Error ? err.message : String(err)}`),
    });
    driver.start();
    const d = driver;
    closers.unshift(() => d.stop());
    // Until the root has a value every claim looks like a frontier move (src/hub/root-value.ts).
    const measuring = new AbortController();
    closers.unshift(async () => measuring.abort("the hub stopped"));
    measureRoot({ pool: hub.pool, schema: hub.schema, trials, signal: measuring.signal }).then(
      (r) => {
        if (r)
          log(
            `hub: the root measured on the verifiers: ${program.objective.metric} ${r.value} (mean of ${r.trials} trials); claims that do not beat it are findings`,
          );
      },
      (err: unknown) => {
        if (!measuring.signal.aborted)
          log(`hub: the root could not be measured: ${err instanceof Error ? err.message : String(err)}`);
      },
    );
    log(
      [
        `hub: ${program.name} at ${hub.url} (root ${hub.repo.rootCommit.slice(0, 12)}, hardware class ${hardwareClass})`,
        `verifiers: ${flags.workers ? `${flags.workers} slot(s) in this process, and ` : ""}any \`autolab worker --db ${hub.fleetUrl.shown}\` (machines of class ${hardwareClass})`,
        `contributors join with: autolab contribute --hub ${hub.url}`,
      ].join("\n"),
    );
    await stopped;
  } catch (err) {
    process.exitCode = handleError(err);
  } finally {
    for (const close of closers) await close().catch(() => {});
  }
}
