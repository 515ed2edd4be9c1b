/**
 * `autolab contribute --hub URL [dir]`: the local loop on the hub's head with this machine's
 * researcher, then its kept experiments sent as signed claims (src/hub/contribute.ts).
 * `autolab hub <dir> --db postgres://…`: serve a program to outside contributors, with its
 * verifiers on the fleet of the same database (src/hub/hub.ts).
 */
import { contribute } from "../hub/contribute.ts";
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
