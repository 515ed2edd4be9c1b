/**
 * The worker fleet at scale (issue #13 item 4; docs/distributed.md "Worker fleet"): real
 * `autolab worker` processes, a real `autolab run --fleet` coordinator, real sandboxed trials, a
 * real PostgreSQL. Three parts, each in a fleet schema of its own (dropped after):
 *
 * 1. throughput — `--workers` workers × `--slots` slots (separate `--cache` dirs and `--name`s:
 *    machines simulated on one), trials of a fixed length (`sleep <trial>; awk …`: no CPU), the
 *    built-in optimizer on a two-knob project (it proposes in milliseconds), `acceptance: greedy`
 *    (one trial per experiment), `autolab run --fleet -n <n>`. Throughput over the steady state
 *    (from the fleet being full plus one trial length to the last job enqueued) against the ideal
 *    slots / trial length; dispatch latency (fleet_jobs.enqueued_at → started_at, the database's
 *    clock); where each trial's time outside its command goes, from the notebook's and the fleet
 *    tables' timestamps (one machine, one clock); the database's transactions/s and CPU; bundle
 *    and row sizes (bytes per trial).
 * 2. faults — the same fleet under `autolab run --fleet -n <fault-n>`; ten times a random worker
 *    is killed with -9 (restarted a moment later, as systemd's Restart=always would) and ten times
 *    the coordinator (restarted: the run resumes). Afterwards, from the notebook and the fleet's
 *    tables: every experiment 0..N once and decided once, every trial start with one result, no
 *    token with two results, no experiment whose last trial was interrupted. Exits non-zero when
 *    an invariant fails.
 * 3. sim — an idle fleet of N simulated workers (N = `--sim`, default 25,50,100,200): per worker
 *    one pg-boss instance (supervisor and monitor every 2 s, as src/fleet/queue.ts opens them),
 *    `--slots` fetch loops (a fetch, then 500 ms asleep when the queue was empty, as worker.ts)
 *    and a heartbeat UPDATE every 2 s. All instances share one pool of `--sim-conns` connections
 *    (what a transaction-mode pooler gives: this machine's max_connections is too small for a
 *    connection per instance). Measured: fetches/s achieved vs asked, fetch latency, the server's
 *    transactions/s and CPU, this process's CPU; extrapolated to 1,000 workers in docs/benchmarks.md.
 *
 * With `--sim-via=postgres://…` (a pgbouncer in transaction mode in front of the same database)
 * each simulated instance opens its own pool of 2 through it instead, as real workers would.
 *
 * `npm run bench -- cluster postgres://autolab:autolab@127.0.0.1/autolab_bench [throughput,faults,sim]
 *   [--workers=8] [--slots=4] [--trial=10] [--n=256] [--fault-n=400] [--sim=25,50,100,200] [--sim-conns=20]
 *   [--sim-seconds=20] [--sim-via=postgres://…]`
 * Without a URL (argument or AUTOLAB_PG_URL) it says so and skips.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { DatabaseSync } from "node:sqlite";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { PgBoss } from "pg-boss";
import { flags, numberFlag } from "./_stats.ts";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const CLI = join(ROOT, "src", "cli", "main.ts");
const QUEUE = "autolab-trials";
const GIT_ENV = { GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" };

type Figures = Record<string, number | string | boolean>;

export async function main(args: string[]): Promise<Figures> {
  const url = args.find((a) => /^postgres(ql)?:\/\//.test(a)) ?? process.env.AUTOLAB_PG_URL;
  if (!url) {
    const reason =
      "no PostgreSQL URL; give one (npm run bench -- cluster postgres://user:pw@127.0.0.1/db) or set AUTOLAB_PG_URL";
    console.log(`cluster: skipped: ${reason}`);
    return { benchmark: "cluster", skipped: reason };
  }
  const f = flags(args);
  const parts = (args.find((a) => /^[a-z,]+$/.test(a)) ?? "throughput,faults,sim").split(",");
  const o: Opts = {
    url,
    workers: numberFlag(f, "workers", 8),
    slots: numberFlag(f, "slots", 4),
    trialS: numberFlag(f, "trial", 10),
    n: numberFlag(f, "n", 256),
    faultN: numberFlag(f, "fault-n", 400),
    sim: (f.sim ?? "25,50,100,200").split(",").map(Number),
    simConns: numberFlag(f, "sim-conns", 20),
    ...(f["sim-via"] ? { simVia: f["sim-via"] } : {}),
    simSeconds: numberFlag(f, "sim-seconds", 20),
  };
  const figures: Figures = { benchmark: "cluster" };
  const tmp = mkdtempSync(join(tmpdir(), "autolab-bench-cluster-"));
  const admin = new pg.Client({ connectionString: url });
  admin.on("error", () => {});
  await admin.connect();
  try {
    const pgVersion = (await admin.query("SHOW server_version")).rows[0].server_version;
    const maxConn = (await admin.query("SHOW max_connections")).rows[0].max_connections;
    console.log(`PostgreSQL ${pgVersion}, max_connections ${maxConn}; load average ${loadavg()}`);
    figures.postgres = String(pgVersion);
    figures.max_connections = Number(maxConn);
    if (parts.includes("throughput")) Object.assign(figures, await throughput(o, admin, tmp));
    if (parts.includes("faults")) Object.assign(figures, await faults(o, admin, tmp));
    if (parts.includes("sim")) Object.assign(figures, await simulate(o, admin));
  } finally {
    await admin.end();
    rmSync(tmp, { recursive: true, force: true });
  }
  if (figures.invariants_ok === false) process.exitCode = 1;
  return figures;
}

interface Opts {
  url: string;
  workers: number;
  slots: number;
  trialS: number;
  n: number;
  faultN: number;
  sim: number[];
  simConns: number;
  /** A pooler's URL (pgbouncer): each simulated instance then opens its own connections through it. */
  simVia?: string;
  simSeconds: number;
}

// ---------------------------------------------------------------------------------------------
// Part 1: throughput and dispatch

async function throughput(o: Opts, admin: pg.Client, tmp: string): Promise<Figures> {
  const slots = o.workers * o.slots;
  console.log(
    `\n== throughput: ${o.workers} workers × ${o.slots} slots = ${slots} slots, ${o.trialS} s trials (sleep + awk, sandboxed), builtin optimizer, greedy, -n ${o.n}`,
  );
  const fleet = newFleet(o.url, "bench_tp");
  const project = makeProject(join(tmp, "tp"), o.trialS);
  const workers = await startWorkers(fleet, o, join(tmp, "tp-caches"));
  try {
    const connections = await fleetConnections(admin, fleet.schema);
    console.log(`connections held by the ${o.workers} idle workers: ${connections}`);
    const t0 = Date.now();
    const run = spawnAutolab(["run", "--fleet", fleet.url, "-n", String(o.n)], project.dir);
    const workerPids = workers.map((w) => w.proc.pid ?? 0);
    const coordPid = run.proc.pid ?? 0;
    const sampler = new Sampler(admin, () => [...workerPids, coordPid]);
    let coordPeakConns = 0;
    const connPoll = setInterval(() => {
      fleetConnections(admin, fleet.schema).then(
        (c) => {
          coordPeakConns = Math.max(coordPeakConns, c);
        },
        () => {},
      );
    }, 2000);
    const exit = await run.done;
    clearInterval(connPoll);
    sampler.stop();
    const wallS = (Date.now() - t0) / 1000;
    if (exit.code !== 0) throw new Error(`autolab run exited ${exit.code}\n${run.output().slice(-3000)}`);

    const jobs = (
      await admin.query<{
        key: string;
        enq: number;
        st: number;
        fin: number;
        runs: number;
        result: string;
        worker_id: string;
      }>(
        `SELECT j.key, extract(epoch FROM j.enqueued_at) * 1000 AS enq, extract(epoch FROM j.started_at) * 1000 AS st,
                extract(epoch FROM r.finished_at) * 1000 AS fin, j.runs, r.result, j.worker_id
         FROM ${fleet.schema}.fleet_jobs j JOIN ${fleet.schema}.fleet_results r USING (key) ORDER BY j.enqueued_at`,
      )
    ).rows.map((r) => ({
      key: r.key,
      enq: Number(r.enq),
      st: Number(r.st),
      fin: Number(r.fin),
      runs: r.runs,
      worker: r.worker_id,
      wallMs: (JSON.parse(r.result) as { wallS: number }).wallS * 1000,
      status: (JSON.parse(r.result) as { status: string }).status,
    }));
    const dispatch = jobs.map((j) => j.st - j.enq);
    // Steady state: from the moment all slots first held a trial, plus one trial length (the first
    // full wave's ends), to the last job enqueued (after it the fleet drains).
    const events = jobs.flatMap((j) => [
      { t: j.st, d: 1 },
      { t: j.fin, d: -1 },
    ]);
    events.sort((a, b) => a.t - b.t || a.d - b.d);
    let occ = 0;
    let full: number | undefined;
    for (const e of events) {
      occ += e.d;
      if (occ >= slots && full === undefined) full = e.t;
    }
    const lastEnq = Math.max(...jobs.map((j) => j.enq));
    const from = (full ?? jobs[0]?.st ?? 0) + o.trialS * 1000;
    const to = lastEnq;
    const completed = jobs.filter((j) => j.fin > from && j.fin <= to).length;
    const windowS = (to - from) / 1000;
    const rate = completed / windowS;
    const ideal = slots / o.trialS;
    // Slot occupancy in the window: a slot is "held" from the worker's lease to the result.
    const held = jobs.reduce((s, j) => s + overlap(j.st, j.fin, from, to), 0) / (slots * (to - from));
    const cmd =
      jobs.reduce((s, j) => s + overlap(j.fin - j.wallMs, j.fin, from, to), 0) / (slots * (to - from));

    // Where a trial's time outside its command goes: notebook (coordinator) + fleet timestamps.
    const nb = new DatabaseSync(join(project.dir, ".autolab", "lab.db"), { readOnly: true });
    const rows = nb
      .prepare(
        `SELECT e.n, e.created_at AS created, ts.started_at AS tstart, ts.env, tr.finished_at AS recorded, d.decided_at AS decided
         FROM experiments e JOIN trial_starts ts ON ts.experiment_id = e.id JOIN trial_results tr ON tr.trial_id = ts.id
         LEFT JOIN decisions d ON d.experiment_id = e.id ORDER BY e.n`,
      )
      .all() as {
      n: number;
      created: string;
      tstart: string;
      env: string;
      recorded: string;
      decided: string;
    }[];
    nb.close();
    const byKey = new Map(jobs.map((j) => [j.key, j]));
    // Proposing: with an instant researcher the scheduler proposes for a slot once it is free, so an
    // experiment's row (written after the optimizer's suggestion, the edit and the commit) comes
    // that long after the latest decision before it.
    const decidedTimes = rows
      .map((r) => Date.parse(r.decided))
      .filter((t) => Number.isFinite(t))
      .sort((a, b) => a - b);
    const proposing: number[] = [];
    const seenN = new Set<number>();
    for (const r of rows) {
      if (r.n === 0 || seenN.has(r.n)) continue;
      seenN.add(r.n);
      const c = Date.parse(r.created);
      const before = decidedTimes.filter((t) => t <= c);
      if (before.length && c >= from && c <= to) proposing.push(c - (before[before.length - 1] as number));
    }
    const phase = {
      decided_to_next_proposed: proposing,
      propose_to_start: [] as number[],
      start_to_enqueued: [] as number[],
      setup_and_evaluate: [] as number[],
      result_to_recorded: [] as number[],
      recorded_to_decided: [] as number[],
    };
    for (const r of rows) {
      const j = byKey.get(JSON.parse(r.env).AUTOLAB_TRIAL_TOKEN as string);
      if (!j) continue;
      phase.propose_to_start.push(Date.parse(r.tstart) - Date.parse(r.created));
      phase.start_to_enqueued.push(j.enq - Date.parse(r.tstart));
      phase.setup_and_evaluate.push(j.fin - j.st - j.wallMs);
      phase.result_to_recorded.push(Date.parse(r.recorded) - j.fin);
      if (r.decided) phase.recorded_to_decided.push(Date.parse(r.decided) - Date.parse(r.recorded));
    }
    const steady = sampler.between(from, to, workerPids);
    const coord = sampler.between(from, to, [coordPid]);
    const whole = sampler.between(t0, Date.now(), [coordPid]);
    const coordMsPerTrial = (whole.tracked * wallS * 1000) / jobs.length;
    const sizes = (
      await admin.query<{ base: string; cand: string; cands: string; payload: string; result: string }>(
        `SELECT (SELECT max(length(data)) FROM ${fleet.schema}.fleet_bundles) AS base,
                (SELECT avg(length(data)) FROM ${fleet.schema}.fleet_bundles) AS cand,
                (SELECT count(*) FROM ${fleet.schema}.fleet_bundles) AS cands,
                (SELECT avg(length(payload)) FROM ${fleet.schema}.fleet_jobs) AS payload,
                (SELECT avg(length(result) + length(logs)) FROM ${fleet.schema}.fleet_results) AS result`,
      )
    ).rows[0];
    const metricsPerTrial =
      Number((await admin.query(`SELECT count(*) AS c FROM ${fleet.schema}.fleet_metrics`)).rows[0]?.c ?? 0) /
      jobs.length;

    console.log(`run: ${jobs.length} trials in ${wallS.toFixed(1)} s (coordinator start to exit)`);
    console.log(
      `steady state ${windowS.toFixed(1)} s: ${completed} trials completed = ${rate.toFixed(3)}/s; ideal ${slots}/${o.trialS} s = ${ideal.toFixed(3)}/s → ${pct(rate / ideal)} (target ≥ 90%)`,
    );
    console.log(`slots held (lease → result) ${pct(held)}, running the command ${pct(cmd)} of the window`);
    console.log(
      `dispatch (enqueued → started, database clock): p50 ${q(dispatch, 0.5)} ms, p99 ${q(dispatch, 0.99)} ms, max ${Math.round(Math.max(...dispatch))} ms`,
    );
    // A slot's idle gap: a result written on a worker → the next lease on that worker (matched in order).
    const gaps: number[] = [];
    const byWorker = new Map<string, typeof jobs>();
    for (const j of jobs) byWorker.set(j.worker, [...(byWorker.get(j.worker) ?? []), j]);
    for (const js of byWorker.values()) {
      const starts = js.map((j) => j.st).sort((a, b) => a - b);
      const fins = js.map((j) => j.fin).sort((a, b) => a - b);
      let k = 0;
      for (const f of fins) {
        while (k < starts.length && (starts[k] as number) < f) k++;
        if (k >= starts.length) break;
        if (f >= from && f <= to) gaps.push((starts[k] as number) - f);
        k++;
      }
    }
    console.log("per trial, outside its command (ms):          p50     p90     p99    mean");
    for (const [k, v] of Object.entries({ ...phase, slot_idle_gap: gaps }))
      console.log(
        `  ${k.padEnd(40)} ${pad(q(v, 0.5))} ${pad(q(v, 0.9))} ${pad(q(v, 0.99))} ${pad(Math.round(mean(v)))}`,
      );
    console.log(
      `CPU in the steady state: machine ${pct(steady.machine)} of ${steady.cores} cores busy (everything on it, other sessions too); postgres ${steady.postgres.toFixed(2)} cores, the ${o.workers} worker processes ${steady.tracked.toFixed(2)} (not their trials), the coordinator ${coord.tracked.toFixed(2)}; load average after ${loadavg()}`,
    );
    console.log(
      `coordinator: ${Math.round(coordMsPerTrial)} ms of CPU per trial over the whole run (${whole.tracked.toFixed(2)} cores)`,
    );
    console.log(
      `database: ${steady.xactPerS.toFixed(0)} transactions/s in the steady state (the whole database); connections: ${connections} idle workers, peak ${coordPeakConns} with the coordinator`,
    );
    console.log(
      `bytes: base bundle ${kb(Number(sizes?.base))}, ${sizes?.cands} bundles avg ${kb(Number(sizes?.cand))}, job payload avg ${kb(Number(sizes?.payload))}, result + log tails avg ${kb(Number(sizes?.result))}, ${metricsPerTrial.toFixed(1)} metric rows per trial`,
    );
    return {
      tp_workers: o.workers,
      tp_slots: slots,
      tp_trial_s: o.trialS,
      tp_trials: jobs.length,
      tp_wall_s: round(wallS),
      tp_window_s: round(windowS),
      tp_rate_per_s: round(rate, 3),
      tp_ideal_per_s: round(ideal, 3),
      tp_ratio: round(rate / ideal, 3),
      tp_slots_held: round(held, 3),
      tp_command_share: round(cmd, 3),
      tp_dispatch_p50_ms: q(dispatch, 0.5),
      tp_dispatch_p99_ms: q(dispatch, 0.99),
      tp_dispatch_max_ms: Math.round(Math.max(...dispatch)),
      ...Object.fromEntries(Object.entries(phase).map(([k, v]) => [`tp_${k}_p50_ms`, q(v, 0.5)])),
      ...Object.fromEntries(Object.entries(phase).map(([k, v]) => [`tp_${k}_mean_ms`, Math.round(mean(v))])),
      tp_slot_idle_gap_p50_ms: q(gaps, 0.5),
      tp_slot_idle_gap_mean_ms: Math.round(mean(gaps)),
      tp_setup_and_evaluate_p99_ms: q(phase.setup_and_evaluate, 0.99),
      tp_machine_cpu: round(steady.machine, 3),
      tp_postgres_cores: round(steady.postgres, 2),
      tp_workers_cores: round(steady.tracked, 2),
      tp_coordinator_cores: round(coord.tracked, 2),
      tp_coordinator_cpu_ms_per_trial: Math.round(coordMsPerTrial),
      tp_db_xact_per_s: Math.round(steady.xactPerS),
      tp_connections_idle_workers: connections,
      tp_connections_peak: coordPeakConns,
      tp_base_bundle_bytes: Number(sizes?.base),
      tp_bundle_avg_bytes: Math.round(Number(sizes?.cand)),
      tp_payload_avg_bytes: Math.round(Number(sizes?.payload)),
      tp_result_avg_bytes: Math.round(Number(sizes?.result)),
      tp_not_ok: jobs.filter((j) => j.status !== "ok").length,
    };
  } finally {
    await stopWorkers(workers);
    await dropFleet(admin, fleet.schema);
  }
}

// ---------------------------------------------------------------------------------------------
// Part 2: faults

async function faults(o: Opts, admin: pg.Client, tmp: string): Promise<Figures> {
  console.log(
    `\n== faults: ${o.workers} workers × ${o.slots} slots, ${o.trialS} s trials, -n ${o.faultN}; 10 × kill -9 of a random worker, 10 × kill -9 of the coordinator, alternating`,
  );
  const fleet = newFleet(o.url, "bench_fault");
  const project = makeProject(join(tmp, "fault"), o.trialS);
  const workers = await startWorkers(fleet, o, join(tmp, "fault-caches"));
  let coordinatorRuns = 0;
  const startCoordinator = () => {
    coordinatorRuns++;
    return spawnAutolab(["run", "--fleet", fleet.url, "-n", String(o.faultN)], project.dir);
  };
  let coord = startCoordinator();
  const rng = seeded(13);
  let workerKills = 0;
  let coordKills = 0;
  const t0 = Date.now();
  try {
    await coord.waitFor(/the run uses \d+/, 60_000);
    for (let i = 0; i < 20; i++) {
      await sleep(6000 + rng() * 6000);
      if (coord.proc.exitCode !== null) {
        console.log(`the run ended before kill ${i + 1} (raise --fault-n)`);
        break;
      }
      if (i % 2 === 0) {
        const w = workers[Math.floor(rng() * workers.length)] as WorkerHandle;
        w.proc.kill("SIGKILL");
        await w.done;
        workerKills++;
        console.log(`${secs(t0)} kill -9 worker ${w.name} (${workerKills}/10)`);
        await sleep(1000 + rng() * 2000);
        restartWorker(w, fleet);
        await w.ready;
      } else {
        // Only while trials are in flight: the coordinator has started some since its (re)start.
        coord.proc.kill("SIGKILL");
        await coord.done.catch(() => {});
        coordKills++;
        console.log(`${secs(t0)} kill -9 coordinator (${coordKills}/10)`);
        await sleep(1000);
        coord = startCoordinator();
        await coord.waitFor(/the run uses \d+/, 60_000);
      }
    }
    const exit = await coord.done;
    if (exit.code !== 0) throw new Error(`autolab run exited ${exit.code}\n${coord.output().slice(-3000)}`);
    const wallS = (Date.now() - t0) / 1000;
    console.log(`${secs(t0)} the run finished (${coordinatorRuns} coordinator processes)`);
    const inv = await checkInvariants(project.dir, admin, fleet.schema, o.faultN);
    console.log("invariants:");
    for (const [k, v] of Object.entries(inv.counts)) console.log(`  ${k.padEnd(52)} ${v}`);
    for (const p of inv.problems) console.log(`  FAILED: ${p}`);
    console.log(inv.problems.length ? "invariants: FAILED" : "invariants: all hold");
    return {
      fault_worker_kills: workerKills,
      fault_coordinator_kills: coordKills,
      fault_wall_s: round(wallS),
      ...Object.fromEntries(Object.entries(inv.counts).map(([k, v]) => [`fault_${k}`, v])),
      invariants_ok: inv.problems.length === 0,
    };
  } finally {
    if (coord.proc.exitCode === null) coord.proc.kill("SIGKILL");
    await stopWorkers(workers);
    await dropFleet(admin, fleet.schema);
  }
}

async function checkInvariants(
  dir: string,
  admin: pg.Client,
  schema: string,
  n: number,
): Promise<{ counts: Record<string, number>; problems: string[] }> {
  const db = new DatabaseSync(join(dir, ".autolab", "lab.db"), { readOnly: true });
  const exps = db.prepare("SELECT id, n, rebase_of FROM experiments ORDER BY n").all() as {
    id: number;
    n: number;
    rebase_of: number | null;
  }[];
  const decisions = db.prepare("SELECT experiment_id FROM decisions").all() as { experiment_id: number }[];
  const starts = db
    .prepare("SELECT id, experiment_id, attempt, env FROM trial_starts ORDER BY experiment_id, attempt")
    .all() as { id: number; experiment_id: number; attempt: number; env: string }[];
  const results = db.prepare("SELECT trial_id, status FROM trial_results").all() as {
    trial_id: number;
    status: string;
  }[];
  db.close();
  const problems: string[] = [];
  const ns = exps.map((e) => e.n);
  const distinct = new Set(ns);
  // Numbers 0..max each once; the run's own experiments (not rebases of a winner onto a newer
  // best, which the scheduler adds and numbers too) are exactly the -n asked for plus the baseline.
  const top = Math.max(...ns);
  const missing = [...Array(top + 1).keys()].filter((i) => !distinct.has(i));
  if (missing.length) problems.push(`experiments missing: ${missing.slice(0, 10).join(", ")}`);
  if (distinct.size !== ns.length) problems.push("an experiment number appears twice");
  const own = exps.filter((e) => e.rebase_of === null).length;
  if (own !== n + 1) problems.push(`${own} experiments besides rebases, not ${n + 1}`);
  const decidedCount = new Map<number, number>();
  for (const d of decisions) decidedCount.set(d.experiment_id, (decidedCount.get(d.experiment_id) ?? 0) + 1);
  const undecided = exps.filter((e) => !decidedCount.has(e.id)).length;
  const twiceDecided = [...decidedCount.values()].filter((c) => c > 1).length;
  if (undecided) problems.push(`${undecided} experiments undecided`);
  if (twiceDecided) problems.push(`${twiceDecided} experiments decided twice`);
  const resultsOf = new Map<number, string[]>();
  for (const r of results) resultsOf.set(r.trial_id, [...(resultsOf.get(r.trial_id) ?? []), r.status]);
  const noResult = starts.filter((s) => !resultsOf.has(s.id)).length;
  const twoResults = [...resultsOf.values()].filter((v) => v.length > 1).length;
  if (noResult) problems.push(`${noResult} trial starts without a result`);
  if (twoResults) problems.push(`${twoResults} trial starts with two results`);
  const tokens = starts.map((s) => JSON.parse(s.env).AUTOLAB_TRIAL_TOKEN as string);
  if (new Set(tokens).size !== tokens.length) problems.push("a trial token is used by two trial starts");
  const interrupted = results.filter((r) => r.status === "interrupted").length;
  // The last trial of each experiment must not be an interrupted one: interrupted trials ran again.
  const lastOf = new Map<number, { id: number; attempt: number }>();
  for (const s of starts) {
    const prev = lastOf.get(s.experiment_id);
    if (!prev || s.attempt > prev.attempt) lastOf.set(s.experiment_id, s);
  }
  const lastInterrupted = [...lastOf.values()].filter(
    (s) => resultsOf.get(s.id)?.[0] === "interrupted",
  ).length;
  if (lastInterrupted)
    problems.push(`${lastInterrupted} experiments whose last trial was interrupted (not re-run)`);
  // The fleet: one result per token (its key); every counted (not interrupted) notebook result has
  // the fleet's result of its token with the same status; jobs leased more than once.
  const fleet = (
    await admin.query<{ key: string; runs: number; status: string | null; nres: string }>(
      `SELECT j.key, j.runs, (r.result::json ->> 'status') AS status,
              (SELECT count(*) FROM ${schema}.fleet_results r2 WHERE r2.key = j.key) AS nres
       FROM ${schema}.fleet_jobs j LEFT JOIN ${schema}.fleet_results r USING (key)`,
    )
  ).rows;
  const fleetBy = new Map(fleet.map((r) => [r.key, r]));
  const fleetTwice = fleet.filter((r) => Number(r.nres) > 1).length;
  if (fleetTwice) problems.push(`${fleetTwice} trial tokens with two fleet results`);
  let mismatched = 0;
  let notInFleet = 0;
  starts.forEach((s, i) => {
    const st = resultsOf.get(s.id)?.[0];
    if (!st || st === "interrupted") return;
    const fr = fleetBy.get(tokens[i] as string);
    if (!fr?.status) notInFleet++;
    else if (fr.status !== st) mismatched++;
  });
  if (notInFleet) problems.push(`${notInFleet} counted results without the fleet's result of their token`);
  if (mismatched) problems.push(`${mismatched} counted results that differ from the fleet's`);
  const counts = {
    experiments: exps.length,
    experiments_not_rebases: own,
    experiments_expected: n + 1,
    rebased_winners: exps.length - own,
    decided: decidedCount.size,
    decided_twice: twiceDecided,
    trial_starts: starts.length,
    trial_results: results.length,
    starts_without_result: noResult,
    starts_with_two_results: twoResults,
    interrupted_trials: interrupted,
    experiments_last_trial_interrupted: lastInterrupted,
    fleet_jobs: fleet.length,
    fleet_jobs_leased_more_than_once: fleet.filter((r) => r.runs > 1).length,
    fleet_tokens_with_two_results: fleetTwice,
    counted_results_missing_in_fleet: notInFleet,
    counted_results_differing_from_fleet: mismatched,
    not_ok_trials: results.filter((r) => r.status !== "ok" && r.status !== "interrupted").length,
  };
  return { counts, problems };
}

// ---------------------------------------------------------------------------------------------
// Part 3: an idle fleet of N simulated workers on one pool

async function simulate(o: Opts, admin: pg.Client): Promise<Figures> {
  console.log(
    `\n== sim: idle fleets of N workers × ${o.slots} fetch loops (500 ms apart when empty) + a pg-boss supervisor/monitor each (2 s) + a heartbeat UPDATE each (2 s); ${o.simVia ? `each instance with its own pool of 2 through ${o.simVia.replace(/:[^:@/]*@/, ":***@")}, heartbeats on one of ${o.simConns}` : `all on one pool of ${o.simConns} connections`}; ${o.simSeconds} s per N`,
  );
  const out: Figures = {};
  const fleet = newFleet(o.url, "bench_sim");
  console.log(
    "   N  fetch/s asked  fetch/s done  p50 ms  p99 ms  server xact/s  postgres cores  bench cores  machine busy",
  );
  try {
    for (const n of o.sim) {
      const r = await simulateOne(o, admin, fleet, n);
      console.log(
        `${String(n).padStart(4)}  ${pad(r.asked, 13)}  ${pad(r.done, 12)}  ${pad(r.p50, 6)}  ${pad(r.p99, 6)}  ${pad(r.xact, 13)}  ${pad(r.pgCores, 14)}  ${pad(r.selfCores, 11)}  ${pct(r.machine).padStart(12)}`,
      );
      for (const [k, v] of Object.entries(r)) out[`sim_${n}_${k}`] = v;
    }
  } finally {
    await dropFleet(admin, fleet.schema);
  }
  return out;
}

interface SimResult {
  asked: number;
  done: number;
  p50: number;
  p99: number;
  xact: number;
  pgCores: number;
  selfCores: number;
  machine: number;
  errors: number;
}

async function simulateOne(
  o: Opts,
  admin: pg.Client,
  fleet: { url: string; schema: string; connectionString: string },
  n: number,
): Promise<SimResult> {
  // Through a pooler (--sim-via): each instance opens its own pool of 2, as src/fleet/queue.ts does.
  const via = o.simVia ? new URL(o.simVia).toString() : undefined;
  const pool = new pg.Pool({ connectionString: via ?? fleet.connectionString, max: o.simConns });
  pool.on("error", () => {});
  const db = { executeSql: (text: string, values?: unknown[]) => pool.query(text, values as unknown[]) };
  const schema = `${fleet.schema}_queue`;
  await pool.query(`CREATE SCHEMA IF NOT EXISTS ${fleet.schema}`);
  await pool.query(
    `CREATE TABLE IF NOT EXISTS ${fleet.schema}.sim_workers (id INTEGER PRIMARY KEY, heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now(), current TEXT NOT NULL DEFAULT '[]')`,
  );
  const bosses: PgBoss[] = [];
  const stop = new AbortController();
  const latencies: number[] = [];
  let fetches = 0;
  let errors = 0;
  let measuring = false;
  const loops: Promise<void>[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const boss = new PgBoss({
        ...(via ? { connectionString: via, max: 2 } : { db }),
        schema,
        supervise: true,
        superviseIntervalSeconds: 2,
        monitorIntervalSeconds: 2,
      });
      boss.on("error", () => {
        errors++;
      });
      await boss.start();
      if (i === 0)
        await boss
          .createQueue(QUEUE, { heartbeatSeconds: 10, retryLimit: 5, retryDelay: 0, expireInSeconds: 86400 })
          .catch(() => {});
      bosses.push(boss);
      await pool.query(`INSERT INTO ${fleet.schema}.sim_workers (id) VALUES ($1) ON CONFLICT DO NOTHING`, [
        i,
      ]);
    }
    for (let i = 0; i < n; i++) {
      const boss = bosses[i] as PgBoss;
      for (let s = 0; s < o.slots; s++) {
        loops.push(
          (async () => {
            await sleep(Math.random() * 500);
            while (!stop.signal.aborted) {
              const t = performance.now();
              try {
                await boss.fetch(QUEUE, { batchSize: 1 });
                if (measuring) {
                  latencies.push(performance.now() - t);
                  fetches++;
                }
              } catch {
                errors++;
              }
              await sleep(500, stop.signal);
            }
          })(),
        );
      }
      loops.push(
        (async () => {
          await sleep(Math.random() * 2000);
          while (!stop.signal.aborted) {
            await pool
              .query(
                `UPDATE ${fleet.schema}.sim_workers SET heartbeat_at = now(), current = '[]' WHERE id = $1`,
                [i],
              )
              .catch(() => {
                errors++;
              });
            await sleep(2000, stop.signal);
          }
        })(),
      );
    }
    await sleep(3000); // settle
    measuring = true;
    const sampler = new Sampler(admin, () => []);
    const self0 = process.cpuUsage();
    const w0 = Date.now();
    const t0 = performance.now();
    await sleep(o.simSeconds * 1000);
    const dt = (performance.now() - t0) / 1000;
    measuring = false;
    const self1 = process.cpuUsage(self0);
    await sampler.sample();
    sampler.stop();
    const cpu = sampler.between(w0 - 1000, Date.now(), []);
    return {
      asked: n * o.slots * 2,
      done: round(fetches / dt, 0),
      p50: q(latencies, 0.5),
      p99: q(latencies, 0.99),
      xact: Math.round(cpu.xactPerS),
      machine: round(cpu.machine, 2),
      pgCores: round(cpu.postgres, 2),
      selfCores: round((self1.user + self1.system) / 1e6 / dt, 2),
      errors,
    };
  } finally {
    stop.abort();
    await Promise.all(loops);
    for (const b of bosses) await b.stop({ graceful: false, close: false }).catch(() => {});
    await pool.end();
  }
}

// ---------------------------------------------------------------------------------------------
// Processes, projects, fleets

interface Proc {
  proc: ChildProcess;
  output(): string;
  waitFor(re: RegExp, ms: number): Promise<void>;
  done: Promise<{ code: number | null; signal: string | null }>;
}

function spawnAutolab(args: string[], cwd: string): Proc {
  const proc = spawn(process.execPath, [CLI, ...args], {
    cwd,
    env: {
      ...process.env,
      ...GIT_ENV,
      NO_COLOR: "1",
      NODE_COMPILE_CACHE: join(tmpdir(), "autolab-bench-compile-cache"),
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  const waiters = new Set<() => void>();
  const add = (d: string) => {
    out += d;
    if (out.length > 200_000) out = out.slice(-100_000);
    for (const w of [...waiters]) w();
  };
  proc.stdout?.setEncoding("utf8").on("data", add);
  proc.stderr?.setEncoding("utf8").on("data", add);
  const done = new Promise<{ code: number | null; signal: string | null }>((res) =>
    proc.on("close", (code, signal) => {
      res({ code, signal });
      for (const w of [...waiters]) w();
    }),
  );
  const waitFor = (re: RegExp, ms: number) =>
    new Promise<void>((res, rej) => {
      const check = () => {
        if (re.test(out)) {
          clear();
          res();
        } else if (proc.exitCode !== null || proc.signalCode !== null) {
          clear();
          rej(new Error(`autolab ${args[0]} exited before printing ${re}\n${out.slice(-3000)}`));
        }
      };
      const timer = setTimeout(() => {
        clear();
        rej(new Error(`timed out waiting for ${re}\n${out.slice(-3000)}`));
      }, ms);
      const clear = () => {
        clearTimeout(timer);
        waiters.delete(check);
      };
      waiters.add(check);
      check();
    });
  return { proc, output: () => out, waitFor, done };
}

interface WorkerHandle {
  name: string;
  cache: string;
  slots: number;
  proc: ChildProcess;
  ready: Promise<void>;
  done: Promise<unknown>;
}

function launchWorker(h: Omit<WorkerHandle, "proc" | "ready" | "done">, url: string): WorkerHandle {
  const p = spawnAutolab(
    ["worker", "--db", url, "--name", h.name, "--cache", h.cache, "--slots", String(h.slots)],
    tmpdir(),
  );
  return {
    ...h,
    proc: p.proc,
    ready: p.waitFor(new RegExp(`worker ${h.name}: \\d+ slots`), 120_000),
    done: p.done,
  };
}

function restartWorker(w: WorkerHandle, fleet: { url: string }): void {
  Object.assign(w, launchWorker({ name: w.name, cache: w.cache, slots: w.slots }, fleet.url));
}

async function startWorkers(fleet: { url: string }, o: Opts, cacheRoot: string): Promise<WorkerHandle[]> {
  const ws: WorkerHandle[] = [];
  for (let i = 0; i < o.workers; i++) {
    const cache = join(cacheRoot, `w${i}`);
    mkdirSync(cache, { recursive: true });
    ws.push(launchWorker({ name: `bench-w${i}`, cache, slots: o.slots }, fleet.url));
    // Started one after another: eight Node processes compiling at once on two cores take long.
    await ws[i]?.ready;
  }
  return ws;
}

async function stopWorkers(ws: WorkerHandle[]): Promise<void> {
  for (const w of ws) if (w.proc.exitCode === null && w.proc.signalCode === null) w.proc.kill("SIGTERM");
  const all = Promise.all(ws.map((w) => w.done));
  const t = setTimeout(() => {
    for (const w of ws) if (w.proc.exitCode === null && w.proc.signalCode === null) w.proc.kill("SIGKILL");
  }, 30_000);
  await all;
  clearTimeout(t);
}

function newFleet(url: string, prefix: string): { url: string; schema: string; connectionString: string } {
  const schema = `${prefix}_${randomBytes(3).toString("hex")}`;
  const u = new URL(url);
  const connectionString = u.toString();
  u.searchParams.set("schema", schema);
  return { url: u.toString(), schema, connectionString };
}

async function dropFleet(admin: pg.Client, schema: string): Promise<void> {
  await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
  await admin.query(`DROP SCHEMA IF EXISTS ${schema}_queue CASCADE`).catch(() => {});
}

/** A two-knob project whose command sleeps `trialS` seconds and then scores the knobs with awk. */
function makeProject(root: string, trialS: number): { dir: string } {
  const dir = join(root, "project");
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "knobs.py"), "X = 0.9\nY = 3\n");
  writeFileSync(
    join(dir, "score.awk"),
    '/^X =/ { x = $3 }\n/^Y =/ { y = $3 }\nEND { print "score: " (x - 0.3) ^ 2 + (y - 7) ^ 2 / 100 }\n',
  );
  writeFileSync(
    join(dir, "program.md"),
    `---
name: cluster-bench
objective: { metric: score, direction: minimize }
run:
  command: sleep ${trialS}; awk -f score.awk knobs.py
  budget: ${trialS + 30}s
files:
  editable: [knobs.py]
  protected: [score.awk]
acceptance: greedy
search:
  X: { low: 0.01, high: 1 }
  Y: { low: 1, high: 20, int: true }
---
`,
  );
  const g = (a: string[]) =>
    execFileSync("git", a, { cwd: dir, env: { ...process.env, ...GIT_ENV }, stdio: "pipe" });
  g(["init", "-q", "-b", "main"]);
  g(["add", "-A"]);
  g(["-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-qm", "init"]);
  return { dir };
}

// ---------------------------------------------------------------------------------------------
// Measurement helpers

async function fleetConnections(admin: pg.Client, schema: string): Promise<number> {
  const r = await admin.query<{ c: string }>(
    "SELECT count(*) AS c FROM pg_stat_activity WHERE application_name = $1 OR (datname = current_database() AND pid <> pg_backend_pid() AND application_name = '')",
    [`autolab-fleet/${schema}`],
  );
  return Number(r.rows[0]?.c ?? 0);
}

async function dbStats(admin: pg.Client): Promise<{ xacts: number }> {
  const r = await admin.query<{ x: string }>(
    "SELECT xact_commit + xact_rollback AS x FROM pg_stat_database WHERE datname = current_database()",
  );
  return { xacts: Number(r.rows[0]?.x ?? 0) };
}

/**
 * CPU and the database's transaction count, sampled every second while a part runs: per process
 * (PostgreSQL's backends come and go, so each is counted from its first to its last sample),
 * the machine's busy share, and `pg_stat_database`'s commits + rollbacks.
 */
class Sampler {
  readonly samples: {
    t: number;
    busy: number;
    total: number;
    xacts: number;
    ticks: Map<number, { ticks: number; postgres: boolean }>;
  }[] = [];
  readonly #timer: ReturnType<typeof setInterval>;
  #busy = false;

  readonly #admin: pg.Client;
  readonly #tracked: () => number[];

  constructor(admin: pg.Client, tracked: () => number[]) {
    this.#admin = admin;
    this.#tracked = tracked;
    this.#timer = setInterval(() => void this.sample(), 1000);
  }

  async sample(): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    try {
      const xacts = (await dbStats(this.#admin)).xacts;
      const stat = readFileSync("/proc/stat", "utf8").split("\n")[0]?.split(/\s+/).slice(1).map(Number) ?? [];
      const total = stat.reduce((a, b) => a + b, 0);
      const busy = total - (stat[3] ?? 0) - (stat[4] ?? 0);
      const ticks = new Map<number, { ticks: number; postgres: boolean }>();
      for (const d of readdirSync("/proc")) {
        if (!/^\d+$/.test(d)) continue;
        const t = procTicks(Number(d), "postgres");
        if (t !== undefined) ticks.set(Number(d), { ticks: t, postgres: true });
      }
      for (const p of this.#tracked()) {
        const t = procTicks(p);
        if (t !== undefined) ticks.set(p, { ticks: t, postgres: false });
      }
      this.samples.push({ t: Date.now(), busy, total, xacts, ticks });
    } finally {
      this.#busy = false;
    }
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  /** Between two wall-clock times (ms): machine busy share, cores used by postgres and by the given pids, transactions/s. */
  between(
    from: number,
    to: number,
    pids: number[],
  ): { machine: number; postgres: number; tracked: number; xactPerS: number; cores: number } {
    const inside = this.samples.filter((x) => x.t >= from && x.t <= to);
    const a = inside[0];
    const b = inside[inside.length - 1];
    const cores = readFileSync("/proc/stat", "utf8")
      .split("\n")
      .filter((l) => /^cpu\d/.test(l)).length;
    if (!a || !b || a === b)
      return { machine: Number.NaN, postgres: Number.NaN, tracked: Number.NaN, xactPerS: Number.NaN, cores };
    const dt = (b.t - a.t) / 1000;
    const first = new Map<number, number>();
    const last = new Map<number, { ticks: number; postgres: boolean }>();
    for (const x of inside)
      for (const [pid, v] of x.ticks) {
        if (!first.has(pid)) first.set(pid, x === a ? v.ticks : 0);
        last.set(pid, v);
      }
    let postgres = 0;
    let tracked = 0;
    for (const [pid, v] of last) {
      const d = v.ticks - (first.get(pid) ?? 0);
      if (v.postgres) postgres += d;
      else if (pids.includes(pid)) tracked += d;
    }
    return {
      machine: (b.busy - a.busy) / Math.max(1, b.total - a.total),
      postgres: postgres / TICK / dt,
      tracked: tracked / TICK / dt,
      xactPerS: (b.xacts - a.xacts) / dt,
      cores,
    };
  }
}

const TICK = 100; // USER_HZ

function procTicks(pid: number, comm?: string): number | undefined {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8");
    const close = s.lastIndexOf(")");
    if (comm && s.slice(s.indexOf("(") + 1, close) !== comm) return undefined;
    const f = s.slice(close + 2).split(" ");
    return Number(f[11]) + Number(f[12]); // utime + stime
  } catch {
    return undefined;
  }
}

function overlap(a: number, b: number, from: number, to: number): number {
  return Math.max(0, Math.min(b, to) - Math.max(a, from));
}

function q(xs: number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return Math.round(s[Math.min(s.length - 1, Math.floor(p * s.length))] as number);
}

function mean(xs: number[]): number {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : Number.NaN;
}

function round(x: number, d = 1): number {
  const k = 10 ** d;
  return Math.round(x * k) / k;
}

function pct(x: number): string {
  return `${(x * 100).toFixed(1)}%`;
}

function pad(x: number, w = 7): string {
  return String(x).padStart(w);
}

function kb(x: number): string {
  return x >= 1024 ? `${(x / 1024).toFixed(1)} KiB` : `${Math.round(x)} B`;
}

function loadavg(): string {
  return readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
}

function secs(t0: number): string {
  return `[${((Date.now() - t0) / 1000).toFixed(0).padStart(4)} s]`;
}

function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((res) => {
    if (signal?.aborted) return res();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      res();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}
