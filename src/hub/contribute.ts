/**
 * `autolab contribute --hub URL [dir]` (issue #14, item 4): the local loop, run with the
 * contributor's own researcher on a clone of the hub's head, then every kept experiment (and,
 * with findings shared, every discarded one that ran) sent to the hub as a signed claim with
 * its bundle. The hub's findings (frontier moves, refuted ideas) go into this machine's
 * knowledge store first, so the researcher reads them as prior work. What the claims say is
 * read from the notebook; the hub believes none of it until its verifiers have re-run it.
 */
import { createHash, randomBytes } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createRun, type RunOutcome } from "../app/create-run.ts";
import { AUTOLAB_VERSION } from "../app/init.ts";
import { AutolabError } from "../core/errors.ts";
import type { LoopEvent } from "../core/events.ts";
import type { KnowledgeEntry } from "../core/knowledge.ts";
import type { ExperimentRecord } from "../core/ledger.ts";
import { readUntrusted } from "../core/untrusted-file.ts";
import { knowledgePath, openKnowledgeStore } from "../ledger/knowledge-store.ts";
import { git, gitRaw } from "../workspace/git.ts";
import { type Claim, signClaim } from "./claim.ts";
import {
  type ClaimState,
  HubClient,
  type HubEvent,
  type HubProgram,
  HubRefused,
  identityPath,
  type LoadedIdentity,
  loadOrCreateIdentity,
  saveIdentity,
} from "./client.ts";

export interface ContributeOptions {
  hub: string;
  /** The local clone (created when missing); default ./autolab-hub-<host>-<port>. */
  dir?: string;
  /** The identity file; default identityPath(hub). */
  identity?: string;
  maxExperiments?: number;
  maxTimeMs?: number;
  agent?: string;
  slots?: number;
  /** What the trials here ran on; default the hub's class (the verifiers re-run on the hub's). */
  hardwareClass?: string;
  /** Also send discarded experiments as findings (default true). */
  shareFindings?: boolean;
  /** Follow the frontier claims until each has a verdict. */
  wait?: boolean;
  /** How often --wait asks (ms; default 2000). */
  pollMs?: number;
  signal?: AbortSignal;
  onEvent?: (e: LoopEvent) => void;
  log: (line: string) => void;
  env?: NodeJS.ProcessEnv;
}

export interface SentClaim {
  experiment: number;
  commit: string;
  /** The hub's answer, or its refusal. */
  state?: ClaimState;
  refused?: { code: string; status: number; message: string };
}

export interface ContributeOutcome {
  program: HubProgram;
  dir: string;
  keyId: string;
  run?: RunOutcome;
  sent: SentClaim[];
}

const WAITING = new Set(["verifying", "checking"]);
/** A trial log is hashed whole up to Node's limit of one read (logs are capped far below it). */
const MAX_LOG_BYTES = 2 ** 31 - 1;

export async function contribute(o: ContributeOptions): Promise<ContributeOutcome> {
  const client = new HubClient(o.hub);
  const program = await client.program();
  const idPath = o.identity ?? identityPath(client.base, o.env);
  const me = await loadOrCreateIdentity(idPath, client.base);
  await ensureRegistered(client, me, idPath, o.log);

  const dir = resolve(o.dir ?? defaultDir(client.base));
  await checkoutHead(client, dir, program.head);
  o.log(`hub ${client.base}: head ${program.head.slice(0, 12)}; working in ${dir}`);
  const learned = recordFindings(client.base, program, await allFindings(client), o);
  if (learned) o.log(`${learned} finding(s) of the hub added to this machine's prior work`);

  const tag = `hub-${program.head.slice(0, 8)}-${stamp()}`;
  const run = await createRun({
    program: dir,
    tag,
    ...(o.maxExperiments !== undefined ? { maxExperiments: o.maxExperiments } : {}),
    ...(o.maxTimeMs !== undefined ? { maxTimeMs: o.maxTimeMs } : {}),
    ...(o.agent ? { agent: o.agent } : {}),
    ...(o.slots !== undefined ? { slots: o.slots } : {}),
    ...(o.signal ? { signal: o.signal } : {}),
    ...(o.onEvent ? { onEvent: o.onEvent } : {}),
  });
  run.lab.ledger.close();
  const holdout = new Set(run.lab.program.metrics.holdout);
  const sent = await sendClaims(client, me, program, dir, run.experiments, holdout, o);
  if (o.wait) await waitForVerdicts(client, sent, o);
  return { program, dir, keyId: me.keyId, run, sent };
}

async function ensureRegistered(
  client: HubClient,
  me: LoadedIdentity,
  path: string,
  log: (line: string) => void,
): Promise<void> {
  if (me.token) return;
  const got = await client.register(me.publicKey).catch((err: unknown) => {
    if (err instanceof HubRefused) throw err.toAutolabError();
    throw err;
  });
  me.token = got.token;
  const { privateKey: _k, ...stored } = me;
  await saveIdentity(path, stored);
  log(`registered with the hub as ${me.keyId.slice(0, 16)}… (identity in ${path})`);
}

function defaultDir(base: string): string {
  const u = new URL(base);
  return join(process.cwd(), `autolab-hub-${u.hostname.replace(/[^A-Za-z0-9.-]/g, "_")}-${u.port || "80"}`);
}

function stamp(): string {
  return new Date().toISOString().replace(/[-:]/g, "").replace(/\..*$/, "").replace("T", "-");
}

/**
 * Brings the hub's head into `dir` (a new repository when it is missing or empty) and checks it
 * out on the branch `autolab-hub`. The bundle is fetched with the harness's safe git (no hooks,
 * no filters): a hub is not trusted either.
 */
async function checkoutHead(client: HubClient, dir: string, head: string): Promise<void> {
  const fresh = !existsSync(dir) || readdirSync(dir).length === 0;
  if (fresh) {
    await mkdir(dir, { recursive: true });
    await git(dir, ["init", "-q"]);
  } else if ((await gitRaw(dir, ["rev-parse", "--git-dir"])).code !== 0) {
    throw new AutolabError(
      "HUB_CLONE_INVALID",
      `${dir} exists and is not a git repository.`,
      "Give `autolab contribute` an empty or missing directory (or a clone it made before).",
    );
  }
  if ((await gitRaw(dir, ["cat-file", "-e", `${head}^{commit}`])).code !== 0) {
    const file = join(tmpdir(), `autolab-hub-${randomBytes(6).toString("hex")}.bundle`);
    await writeFile(file, await client.bundle(head));
    try {
      const got = await gitRaw(dir, ["fetch", "-q", "--no-tags", file, "+refs/*:refs/autolab-hub/*"]);
      if (got.code !== 0 || (await gitRaw(dir, ["cat-file", "-e", `${head}^{commit}`])).code !== 0) {
        throw new AutolabError(
          "HUB_REFUSED",
          `the hub's bundle of its head ${head.slice(0, 12)} did not bring that commit (${got.stderr.trim().split("\n").at(-1) ?? ""}).`,
          "Try again; if it persists, the hub is damaged or not what it claims: tell its operator.",
        );
      }
    } finally {
      await rm(file, { force: true });
    }
  }
  const co = await gitRaw(dir, ["checkout", "-q", "-B", "autolab-hub", head]);
  if (co.code !== 0) {
    throw new AutolabError(
      "HUB_CLONE_INVALID",
      `cannot check out the hub's head in ${dir}: ${co.stderr.trim()}`,
      "Commit or remove the local changes there, or contribute from a new directory.",
    );
  }
}

/** Every event of the hub, page by page (a few thousand at most: findings are small). */
async function allFindings(client: HubClient, most = 20_000): Promise<HubEvent[]> {
  const out: HubEvent[] = [];
  let after = 0;
  while (out.length < most) {
    const page = await client.findings(after);
    if (!page.events.length) break;
    out.push(...page.events);
    after = page.events.at(-1)?.seq ?? after;
  }
  return out;
}

/**
 * The hub's events as prior work: each frontier move and refuted idea becomes an entry of this
 * machine's knowledge store (project `hub:<url>`), which the loop searches for the researcher's
 * context. Never fails the contribution: a store that cannot be written is said and skipped.
 */
function recordFindings(base: string, program: HubProgram, events: HubEvent[], o: ContributeOptions): number {
  const path = knowledgePath(o.env ?? process.env);
  if (!path) return 0;
  const entries: KnowledgeEntry[] = [];
  for (const ev of events) {
    const p = ev.payload ?? {};
    const subject = typeof p.subject === "string" ? p.subject : undefined;
    if (!subject || (ev.kind !== "frontier" && ev.kind !== "refuted")) continue;
    const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : undefined);
    const value = num(p.recordedValue) ?? num(p.value);
    const gain = num(p.gain);
    entries.push({
      project: `hub:${base}`,
      projectName: program.name ?? "hub",
      run: "hub",
      n: ev.seq,
      date: ev.at ?? new Date().toISOString(),
      hypothesis: subject.slice(0, 500),
      action: ev.kind === "frontier" ? "keep" : "discard",
      reason:
        ev.kind === "frontier"
          ? "accepted by the hub's verifiers"
          : `refuted on the hub${typeof p.reason === "string" ? `: ${p.reason.slice(0, 300)}` : ""}`,
      metric: program.objective.metric,
      direction: program.objective.direction,
      ...(value !== undefined ? { value } : {}),
      ...(gain !== undefined ? { gain } : {}),
    });
  }
  if (!entries.length) return 0;
  try {
    const store = openKnowledgeStore(path);
    try {
      return store.record(entries);
    } finally {
      store.close();
    }
  } catch (err) {
    o.log(
      `the hub's findings could not be added to prior work (${(err as Error).message}); going on without them`,
    );
    return 0;
  }
}

/** The experiments worth a claim, in the order they were made (a parent before its children). */
function claimable(exps: readonly ExperimentRecord[], shareFindings: boolean): ExperimentRecord[] {
  return exps
    .filter((e) => e.n > 0 && e.decision)
    .filter((e) => e.decision?.action === "keep" || (shareFindings && e.decision?.action === "discard"))
    .sort((a, b) => a.id - b.id);
}

async function sendClaims(
  client: HubClient,
  me: LoadedIdentity,
  program: HubProgram,
  dir: string,
  exps: readonly ExperimentRecord[],
  holdout: ReadonlySet<string>,
  o: ContributeOptions,
): Promise<SentClaim[]> {
  const known = new Set([program.head]);
  const sent: SentClaim[] = [];
  for (const e of claimable(exps, o.shareFindings !== false)) {
    if (!known.has(e.parentCommit)) {
      o.log(`#${e.n}: not sent (built on ${e.parentCommit.slice(0, 8)}, which the hub does not have)`);
      continue;
    }
    const claim = await claimOf(e, me, program, dir, holdout, o.hardwareClass);
    if (!claim) {
      o.log(`#${e.n}: not sent (no trial measured ${program.objective.metric})`);
      continue;
    }
    const one: SentClaim = { experiment: e.n, commit: e.commit };
    try {
      const bundle = await bundleOf(dir, e.commit, e.parentCommit);
      const sha = createHash("sha256").update(bundle).digest("hex");
      await client.putBundle(me.token as string, sha, bundle);
      one.state = await client.postClaim(
        me.token as string,
        signClaim({ ...claim, bundleSha256: sha }, me.privateKey),
      );
      known.add(e.commit);
      o.log(
        `#${e.n} ${e.commit.slice(0, 8)}: claim ${one.state.id.slice(0, 12)} ${one.state.kind}, ${one.state.status}`,
      );
    } catch (err) {
      if (!(err instanceof HubRefused)) throw err;
      one.refused = { code: err.code, status: err.status, message: err.message };
      o.log(`#${e.n} ${e.commit.slice(0, 8)}: ${err.message}`);
      // A duplicate is already on the hub: what is built on it can still be sent.
      if (err.code === "duplicate") known.add(e.commit);
    }
    sent.push(one);
  }
  return sent;
}

/** The claim for one experiment (bundle hash filled in by the caller), or undefined without a measured trial. */
async function claimOf(
  e: ExperimentRecord,
  me: LoadedIdentity,
  program: HubProgram,
  dir: string,
  holdout: ReadonlySet<string>,
  hardwareClass: string | undefined,
): Promise<Omit<Claim, "bundleSha256"> | undefined> {
  const objective = program.objective.metric;
  const seen = new Set<number>();
  const trials = e.trials.filter((t) => {
    const v = t.result?.status === "ok" ? t.result.metrics[objective] : undefined;
    if (typeof v !== "number" || !Number.isFinite(v) || seen.has(t.seed)) return false;
    seen.add(t.seed);
    return true;
  });
  if (!trials.length) return undefined;
  trials.splice(64);
  const names = [objective];
  for (const name of Object.keys(trials[0]?.result?.metrics ?? {})) {
    if (name === objective || holdout.has(name) || names.length >= 16 || name.length > 64) continue;
    if (trials.every((t) => Number.isFinite(t.result?.metrics[name]))) names.push(name);
  }
  const metrics: Record<string, number[]> = {};
  for (const name of names) metrics[name] = trials.map((t) => t.result?.metrics[name] as number);
  const logs = createHash("sha256");
  for (const t of trials) {
    logs.update(`seed ${t.seed}\n`);
    for (const f of ["stdout.log", "stderr.log"]) {
      const p = t.result?.logDir ? join(resolve(dir, t.result.logDir), f) : undefined;
      // Through the one door (src/core/untrusted-file.ts): what is not a plain file is not read.
      const read = p ? readUntrusted(p, { maxBytes: MAX_LOG_BYTES }) : undefined;
      if (read?.ok) logs.update(read.bytes);
    }
  }
  return {
    parent: e.parentCommit,
    harnessVersion: AUTOLAB_VERSION,
    hardwareClass: hardwareClass ?? program.hardwareClass,
    budgetS: (trials[0]?.budgetMs ?? program.budgetS * 1000) / 1000,
    seeds: trials.map((t) => t.seed),
    metrics,
    logSha256: logs.digest("hex"),
    contributor: me.keyId,
    nonce: randomBytes(18).toString("base64url"),
    createdAt: new Date().toISOString(),
  };
}

/** A bundle of the commits after `parent` up to `commit` (a temporary ref, removed again). */
async function bundleOf(dir: string, commit: string, parent: string): Promise<Buffer> {
  const ref = `refs/autolab-hub-out/${commit}`;
  const file = join(tmpdir(), `autolab-claim-${randomBytes(6).toString("hex")}.bundle`);
  await git(dir, ["update-ref", ref, commit]);
  try {
    await git(dir, ["bundle", "create", "-q", file, ref, `^${parent}`]);
    return await readFile(file);
  } finally {
    await gitRaw(dir, ["update-ref", "-d", ref]);
    await rm(file, { force: true });
  }
}

async function waitForVerdicts(client: HubClient, sent: SentClaim[], o: ContributeOptions): Promise<void> {
  const open = sent.filter((s) => s.state && WAITING.has(s.state.status));
  while (open.length && !o.signal?.aborted) {
    await new Promise((r) => setTimeout(r, o.pollMs ?? 2000));
    for (let i = open.length - 1; i >= 0; i--) {
      const s = open[i] as SentClaim;
      const now = await client.claim((s.state as ClaimState).id);
      s.state = now;
      if (!WAITING.has(now.status)) {
        o.log(
          `#${s.experiment} ${s.commit.slice(0, 8)}: ${now.status}${now.recordedValue !== undefined ? ` at ${now.recordedValue}` : ""}${now.reason ? ` (${now.reason})` : ""}`,
        );
        open.splice(i, 1);
      }
    }
  }
}
