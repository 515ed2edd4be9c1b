/**
 * `autolab worker --db postgres://… [--slots N | --gpus 0,1] [--name H] [--cache DIR]`: this
 * machine serves the fleet's trial queue (src/fleet/worker.ts). SIGTERM or Ctrl-C: the running
 * trials are stopped and their jobs given back (leased again at once elsewhere); a second one
 * leaves at once (the jobs come back after the heartbeat's expiry).
 */
import { AutolabError } from "../core/errors.ts";
import { parseFleetUrl } from "../fleet/db.ts";
import { runWorker } from "../fleet/worker.ts";
import { handleError } from "./errors.ts";
import { safeText } from "./safe-text.ts";

export interface WorkerFlags {
  db?: string;
  slots?: number;
  gpus?: string;
  name?: string;
  cache?: string;
}

export async function workerCommand(flags: WorkerFlags): Promise<void> {
  const ac = new AbortController();
  let signals = 0;
  const onSignal = () => {
    signals++;
    if (signals === 1) {
      process.stderr.write("stopping: running trials are given back to the queue (again to quit now)\n");
      ac.abort("the worker was stopped");
    } else process.exit(143);
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    const url = flags.db ?? process.env.AUTOLAB_FLEET_DB;
    if (!url) {
      throw new AutolabError(
        "FLEET_OPTIONS_INVALID",
        "autolab worker needs the fleet's database.",
        "Pass --db postgres://user@host/database (or set AUTOLAB_FLEET_DB); the password comes from PGPASSWORD or ~/.pgpass.",
      );
    }
    if (flags.gpus !== undefined && flags.slots !== undefined) {
      throw new AutolabError(
        "FLEET_OPTIONS_INVALID",
        "--slots and --gpus both say how many trials run at once.",
        "Give --gpus 0,1,… (one slot per GPU) or --slots N (CPU slots), not both.",
      );
    }
    const gpus = flags.gpus?.split(",").map((g) => g.trim());
    if (
      gpus &&
      (gpus.length === 0 || gpus.some((g) => !/^\d+$/.test(g)) || new Set(gpus).size !== gpus.length)
    ) {
      throw new AutolabError(
        "FLEET_OPTIONS_INVALID",
        `--gpus ${JSON.stringify(flags.gpus)} is not a list of distinct GPU indices.`,
        "e.g. --gpus 0,1,2,3 (one slot per GPU; each trial gets CUDA_VISIBLE_DEVICES=<its GPU>).",
      );
    }
    if (flags.name !== undefined && !/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(flags.name)) {
      throw new AutolabError(
        "FLEET_OPTIONS_INVALID",
        `--name ${JSON.stringify(flags.name)}: use letters, digits, dot, dash or underscore.`,
        "e.g. --name gpu-box-2",
      );
    }
    await runWorker({
      url: parseFleetUrl(url, "--db"),
      ...(gpus ? { gpus } : { slots: flags.slots ?? 1 }),
      ...(flags.name !== undefined ? { name: flags.name } : {}),
      ...(flags.cache !== undefined ? { cacheDir: flags.cache } : {}),
      signal: ac.signal,
      log: (line) => process.stdout.write(`${safeText(line)}\n`),
    });
  } catch (err) {
    process.exitCode = handleError(err);
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}
