/**
 * One verifier trial of the hub (issue #14; docs/hub.md "Verifier trials: what a hostile
 * candidate can and cannot do"). A contributor's commit runs on the fleet of the hub's database
 * (`autolab worker`s, or the hub's own slots: `localWorkers`) as every fleet trial does, with the
 * loop's guarantees (src/fleet/worker-trial.ts): pristine tree, protected files checked against
 * the root commit's hashes, the command in the sandbox killed at budget + grace, the protected
 * evaluate step on the pristine tree. On top, a hub trial is `untrusted`: a worker runs it only
 * sandboxed and offline, whatever program.md says, or not at all.
 *
 * What comes back is a HubTrial: the objective as the harness measured it (the evaluate step's,
 * never a value the command printed), or `failure` = "<status>: <reason>" when the candidate's
 * trial failed (crash, timeout, tampered, missing metric). A trial the harness could not run
 * (the worker could not prepare it, has no sandbox, was stopped) is no verdict on the candidate:
 * it is tried again under the next attempt's key, and after `ATTEMPTS` such runs `run` throws
 * `HubTrialNotRun`, never a failure that would count against the contributor.
 */
import { createHash } from "node:crypto";
import { homedir, hostname } from "node:os";
import { join } from "node:path";
import { AutolabError } from "../core/errors.ts";
import type { Program, TrialResult, TrialSpec } from "../core/types.ts";
import type { FleetUrl } from "../fleet/db.ts";
import { FleetExecutor, TrialDetached } from "../fleet/fleet-executor.ts";
import { runWorker } from "../fleet/worker.ts";
import { safeName } from "../fleet/worker-trial.ts";
import { TOKEN_ENV } from "../runner/process-tree.ts";
import type { HubTrial } from "./verification-policy.ts";

export interface HubTrialRequest {
  /**
   * The trial's identity, deterministic (`hub-<claimId[0:16]>-r<round>-v<idx>-<side>-<seed>`): a
   * hub restarted mid-verification asks again with the same key and gets the same fleet job
   * (running, or its result) instead of a second run.
   */
  key: string;
  commit: string;
  seed: number;
  /** For people: the fleet job's label (never shown to the trial). */
  label: string;
  /** Stops waiting (the hub stops): `run` throws HubTrialNotRun; the job goes on in the fleet. */
  signal?: AbortSignal;
}

export interface HubTrials {
  run(req: HubTrialRequest): Promise<HubTrial>;
  close(): Promise<void>;
}

/** The hub's repository as far as trials need it (HubRepo has these). */
export interface HubTrialsRepo {
  /** The hub's bare git repository: every commit a trial names is in it. */
  gitDir: string;
  rootCommit: string;
  /** program.md at the root commit, and where it lies in the repository. */
  programText: string;
  programFile: string;
  prefix: string;
}

/** A trial the harness could not run, or stopped waiting for: no verdict on the candidate. */
export class HubTrialNotRun extends Error {
  readonly kind: "stopped" | "harness";
  constructor(kind: "stopped" | "harness", message: string) {
    super(message);
    this.name = "HubTrialNotRun";
    this.kind = kind;
  }
}

/** Runs of one trial the harness failed to start before `run` gives up (each a fleet job of its own). */
export const ATTEMPTS = 3;

/**
 * The fleet job's key (and the trial's AUTOLAB_TRIAL_TOKEN, which the trial sees): a hash of the
 * request's key, so that a candidate reads nothing from it — not which side of a verification
 * it is run as (a parent that sandbags when it is the baseline of someone's claim), nor the
 * round or the verifier. Deterministic: a restarted hub finds the same job.
 */
export function hubJobKey(key: string, attempt = 1): string {
  const h = createHash("sha256").update(`autolab-hub-trial\0${key}`).digest("hex").slice(0, 32);
  return attempt > 1 ? `hub-${h}-${attempt}` : `hub-${h}`;
}

/** The hub refuses a program its verifiers could not run contributors' code under safely. */
export function checkHubProgram(program: Program): void {
  if (!program.sandbox.enabled) {
    throw new AutolabError(
      "PROGRAM_INVALID",
      `${program.path}: \`sandbox: off\` — a hub runs contributors' code, which runs only in the sandbox.`,
      "Remove `sandbox: off` from program.md; the hub's workers need bubblewrap (autolab doctor).",
    );
  }
  if (program.sandbox.network) {
    throw new AutolabError(
      "PROGRAM_INVALID",
      `${program.path}: \`sandbox: { network: true }\` — a hub's trials run offline (a candidate could reach the hub's database or fetch results computed elsewhere).`,
      "Remove `network: true`; download what the command needs in `run.setup` (the root's code, which keeps the network).",
    );
  }
  if (program.sandbox.caches.length > 0) {
    throw new AutolabError(
      "PROGRAM_INVALID",
      `${program.path}: \`sandbox.caches\` (${program.sandbox.caches.join(", ")}) — a cache is writable by every trial and kept for the next one: one contributor's candidate could change what a verifier measures of another's.`,
      "Remove `sandbox.caches`; let `run.setup` download what trials need into the project (setup's files are kept, and read-only to trials).",
    );
  }
  if (program.run.evaluate === undefined) {
    throw new AutolabError(
      "PROGRAM_INVALID",
      `${program.path}: no \`run.evaluate\` — without it the candidate's own command prints the score a verifier records.`,
      "Add `run.evaluate:` a script listed under `files.protected` that measures what the command produced (docs/hub.md).",
    );
  }
}

/** Trials on the fleet of the hub's database: a FleetExecutor bound to the hub's repository, `runAt(commit)`. */
export async function fleetHubTrials(o: {
  url: FleetUrl;
  repo: HubTrialsRepo;
  program: Program;
  /** Each trial's logs (the worker's stdout, stderr, evaluate's) land in `<logDir>/<job key>/`. */
  logDir: string;
  /** How often a running trial's result is read (ms). Default 250. */
  pollMs?: number;
}): Promise<HubTrials> {
  checkHubProgram(o.program);
  const { program, repo } = o;
  const exec = await FleetExecutor.open(o.url, o.pollMs !== undefined ? { pollMs: o.pollMs } : {});
  exec.bind({
    repoRoot: repo.gitDir,
    prefix: repo.prefix,
    programFile: repo.programFile,
    programText: repo.programText,
    baseCommit: repo.rootCommit,
    tag: "hub",
    untrusted: true,
  });
  const once = async (req: HubTrialRequest, attempt: number): Promise<TrialResult> => {
    const key = hubJobKey(req.key, attempt);
    // As the loop builds a trial of this program (src/core/trial-step.ts), at the full budget.
    const spec: TrialSpec = {
      cwd: repo.gitDir,
      command: program.run.command,
      ...(program.run.evaluate !== undefined ? { evaluate: program.run.evaluate } : {}),
      budgetMs: program.run.budgetMs,
      graceMs: program.run.graceMs,
      evaluateTimeoutMs: program.run.evaluateTimeoutMs,
      seed: req.seed,
      logDir: join(o.logDir, safeName(key)),
      env: { [TOKEN_ENV]: key },
      objective: program.objective.metric,
    };
    const label = attempt > 1 ? `${req.label} (attempt ${attempt})` : req.label;
    return exec.runAt(req.commit, spec, { label, ...(req.signal ? { detach: req.signal } : {}) });
  };
  return {
    async run(req) {
      let last: TrialResult | undefined;
      for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
        try {
          last = await once(req, attempt);
        } catch (err) {
          if (err instanceof TrialDetached)
            throw new HubTrialNotRun("stopped", `trial ${req.label}: ${err.message}`);
          throw err;
        }
        if (!notRunByHarness(last)) return hubTrial(req.seed, last, program.objective.metric);
      }
      throw new HubTrialNotRun(
        "harness",
        `trial ${req.label} could not be run ${ATTEMPTS} times: ${last?.status}: ${last?.reason ?? ""}`,
      );
    },
    close: () => exec.close(),
  };
}

/**
 * The harness's failure, not the candidate's: the command never started (the worker could not
 * prepare the code, has no sandbox, setup — the root's code — failed, the job was lost), or the
 * trial was stopped from outside.
 */
function notRunByHarness(r: TrialResult): boolean {
  if (r.status === "interrupted") return true;
  return r.status === "crash" && r.exitCode === null && r.signal === null && r.wallS === 0;
}

function hubTrial(seed: number, r: TrialResult, objective: string): HubTrial {
  const value = r.metrics[objective];
  if (r.status === "ok" && typeof value === "number" && Number.isFinite(value)) return { seed, value };
  return { seed, failure: `${r.status}: ${r.reason ?? "no value"}` };
}

/**
 * `--workers N` of `autolab hub`: N worker slots in this process (one `runWorker`, what `autolab
 * worker --slots N` runs), for a one-machine hub. In-process is as sound as a child process: what
 * isolates a candidate is the sandbox, a bubblewrap process tree of its own (cleared environment,
 * own pid namespace, no network) whichever process starts it. Resolves once the worker has
 * registered (rejects when it cannot: database unreachable, cache in use); the function it
 * returns stops it (running trials are stopped and their jobs given back).
 */
export async function localWorkers(
  url: FleetUrl,
  n: number,
  o: { cacheDir?: string; name?: string; log?: (line: string) => void } = {},
): Promise<() => Promise<void>> {
  if (!Number.isInteger(n) || n < 1) {
    throw new AutolabError(
      "FLEET_OPTIONS_INVALID",
      `--workers ${n}: the number of local worker slots must be a whole number of at least 1.`,
      "Give --workers 1 or more, or leave it out and start `autolab worker --db <the hub's URL>` processes.",
    );
  }
  const stop = new AbortController();
  let ready: () => void = () => {};
  const started = new Promise<void>((resolve) => {
    ready = resolve;
  });
  const done = runWorker({
    url,
    slots: n,
    name: o.name ?? `hub-${hostname()}`,
    cacheDir:
      o.cacheDir ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "autolab", "hub-workers"),
    signal: stop.signal,
    ...(o.log ? { log: o.log } : {}),
    onReady: ready,
  });
  await Promise.race([
    started,
    done.then(() => {
      throw new Error("the hub's local worker stopped before it started");
    }),
  ]);
  done.catch(() => {});
  return async () => {
    stop.abort("the hub stopped");
    await done.catch(() => {});
  };
}
