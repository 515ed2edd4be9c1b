/**
 * The hub's verifier trials (src/hub/hub-trials.ts) against hostile candidates, with real
 * PostgreSQL, real `autolab worker` processes, real git bundles from the hub's bare repository and
 * the real sandbox (docs/hub.md "Verifier trials: what a hostile candidate can and cannot do").
 * Each attack is a candidate commit run as a verifier trial: it must come back as a `failure` or
 * as the value the harness measured, never a value the candidate forged, and leave the worker's
 * machine as it was. Skipped without PostgreSQL (failing in CI, AUTOLAB_REQUIRE_PG=1).
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { type AddressInfo, createServer, type Socket } from "node:net";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isAutolabError } from "../src/core/errors.ts";
import type { TrialSpec } from "../src/core/types.ts";
import { storeBundle } from "../src/fleet/bundles.ts";
import { openFleetDb, parseFleetUrl } from "../src/fleet/db.ts";
import { FleetExecutor } from "../src/fleet/fleet-executor.ts";
import { UNTRUSTED_PROCESSES } from "../src/fleet/worker-trial.ts";
import {
  checkHubProgram,
  fleetHubTrials,
  HubTrialNotRun,
  type HubTrials,
  hubJobKey,
  localWorkers,
} from "../src/hub/hub-trials.ts";
import type { HubTrial } from "../src/hub/verification-policy.ts";
import { parseProgram } from "../src/program/index.ts";
import { limitEnforcement } from "../src/runner/sandbox.ts";
import {
  fleetSchemaOfFile,
  NO_PG,
  NO_PG_REASON,
  PG_URL,
  requirePgCase,
  testClient,
} from "./helpers/fleet-db.ts";
import { type CliProcess, commitAll, git, spawnCli, toysOfFile } from "./helpers/toy-project.ts";

const { toy, removeLater } = toysOfFile();
const { url, schema } = fleetSchemaOfFile();
/** A fleet of its own for the hub's in-process worker slots (no `autolab worker` takes its jobs). */
const local = fleetSchemaOfFile();
requirePgCase();

/** The hub's program: the protected evaluate step measures the command's model against a holdout. */
const PROGRAM = `---
name: hub-toy
objective: { metric: score, direction: minimize }
run:
  command: node train.mjs
  evaluate: node evaluate.mjs
  budget: 3s
  grace: 1s
files:
  editable: [train.mjs]
  protected: [evaluate.mjs, "scoring/**"]
  holdout: [answers.json]
outputs: [out/]
sandbox: { limits: { processes: 64 } }
acceptance: greedy
---
# A toy hub program

Fit w: the score is scale * (w - target)^2 plus a little per seed.
`;

const EVALUATE = `import { readFileSync } from "node:fs";
const { target } = JSON.parse(readFileSync("answers.json", "utf8"));
const { scale } = JSON.parse(readFileSync("scoring/scale.json", "utf8"));
const { w } = JSON.parse(readFileSync("out/model.json", "utf8"));
const seed = Number(process.env.AUTOLAB_SEED);
console.log("score: " + (scale * (w - target) ** 2 + (seed % 10) / 100));
`;

/** What the harness measures for w on a seed (target 3, scale 1). */
const measured = (w: number, seed: number) => (w - 3) ** 2 + (seed % 10) / 100;

/** train.mjs: `body` (the attack), then the model `w` (an expression) in out/model.json. */
function trainMjs(body: string, w = "0"): string {
  return `import { mkdirSync, writeFileSync } from "node:fs";
${body}
mkdirSync("out", { recursive: true });
writeFileSync("out/model.json", JSON.stringify({ w: ${w} }));
`;
}

/** A secret the worker's environment holds: no trial may see it. */
const SECRET = `hub-secret-${randomBytes(6).toString("hex")}`;

let project: string;
let hubData: string;
let gitDir: string;
let root: string;
let cache: string;
let workerHome: string;
let logDir: string;
let worker: CliProcess;
let trials: HubTrials;
const commits = new Map<string, string>();
/** A listener on the host's loopback: the network attack must not reach it. */
let listener: { port: number; connections: number; close(): Promise<void> };

/** A candidate commit on the root, fetched into the hub's bare repository as the gates would. */
function candidate(name: string, train: string): string {
  git(project, ["checkout", "-q", "-B", name, root]);
  writeFileSync(join(project, "train.mjs"), train);
  commitAll(project, name);
  const sha = git(project, ["rev-parse", "HEAD"]).trim();
  git(gitDir, ["fetch", "-q", project, `+refs/heads/${name}:refs/hub/c/${sha}`]);
  commits.set(name, sha);
  return sha;
}

async function hubRun(
  name: string,
  seed: number,
  key = `hub-${name}-r0-v0-candidate-${seed}`,
): Promise<HubTrial> {
  const commit = commits.get(name);
  if (!commit) throw new Error(`no candidate ${name}`);
  return trials.run({ key, commit, seed, label: `${name} seed ${seed}` });
}

/** The trial's own stdout, as the worker sent it back. */
function stdoutOf(key: string): string {
  return readFileSync(join(logDir, hubJobKey(key), "stdout.log"), "utf8");
}

function alive(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Live processes whose command line contains `marker`. */
function processesWith(marker: string): number[] {
  const out: number[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, "latin1");
      const stat = readFileSync(`/proc/${d}/stat`, "latin1");
      if (cmd.includes(marker) && stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z") out.push(Number(d));
    } catch {}
  }
  return out;
}

async function eventually<T>(f: () => T, ok: (v: T) => boolean, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (ok(v) || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("the hub's program", () => {
  const base = parseProgram(PROGRAM, "/hub/program.md");
  it("is refused without the sandbox, with the network, with caches, or without an evaluate step — naming the fix", () => {
    expect(() => checkHubProgram(base)).not.toThrow();
    const refused = (p: typeof base, what: RegExp) => {
      try {
        checkHubProgram(p);
        throw new Error("accepted");
      } catch (err) {
        expect(isAutolabError(err) && err.code).toBe("PROGRAM_INVALID");
        expect((err as Error).message).toMatch(what);
        expect(isAutolabError(err) && err.hint).toBeTruthy();
      }
    };
    refused({ ...base, sandbox: { ...base.sandbox, enabled: false } }, /sandbox: off/);
    refused({ ...base, sandbox: { ...base.sandbox, network: true } }, /network: true/);
    refused({ ...base, sandbox: { ...base.sandbox, caches: ["~/.cache/torch"] } }, /sandbox.caches/);
    const { evaluate: _, ...run } = base.run;
    refused({ ...base, run }, /no `run.evaluate`/);
  });
});

describe.skipIf(NO_PG)(`verifier trials on the fleet${NO_PG ? ` (${NO_PG_REASON})` : ""}`, () => {
  beforeAll(async () => {
    const t = toy({});
    project = t.dir;
    writeFileSync(join(project, "program.md"), PROGRAM);
    writeFileSync(join(project, "evaluate.mjs"), EVALUATE);
    mkdirSync(join(project, "scoring"));
    writeFileSync(join(project, "scoring", "scale.json"), '{ "scale": 1 }\n');
    writeFileSync(join(project, "answers.json"), '{ "target": 3 }\n');
    writeFileSync(join(project, "train.mjs"), trainMjs(""));
    commitAll(project, "the hub's program");
    root = git(project, ["rev-parse", "HEAD"]).trim();
    // The hub's data: its bare repository holding the root (HubRepo does this with a safe fetch).
    hubData = removeLater(mkdtempSync(join(tmpdir(), "hub-data-")));
    gitDir = join(hubData, "repo.git");
    mkdirSync(gitDir);
    git(gitDir, ["init", "-q", "--bare"]);
    git(gitDir, ["fetch", "-q", project, `+${root}:refs/hub/root`]);
    logDir = join(hubData, "trial-logs");

    const l = { port: 0, connections: 0, sockets: new Set<Socket>() };
    const server = createServer((s) => {
      l.connections++;
      l.sockets.add(s);
      s.destroy();
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    listener = {
      port: (server.address() as AddressInfo).port,
      get connections() {
        return l.connections;
      },
      close: () => new Promise<void>((r) => server.close(() => r())),
    };

    cache = removeLater(mkdtempSync(join(tmpdir(), "hub-worker-cache-")));
    // The worker's home holds credentials as people keep them: invisible to every trial.
    workerHome = removeLater(mkdtempSync(join(tmpdir(), "hub-worker-home-")));
    writeFileSync(join(workerHome, ".pgpass"), `127.0.0.1:*:*:autolab:${SECRET}\n`, { mode: 0o600 });
    mkdirSync(join(workerHome, ".ssh"));
    writeFileSync(join(workerHome, ".ssh", "id_ed25519"), `${SECRET}\n`, { mode: 0o600 });
    // The worker's environment holds the hub's secrets: the database, a password, a token.
    worker = spawnCli(["worker", "--db", url, "--name", "verifier", "--cache", cache], {
      cwd: tmpdir(),
      timeoutMs: 600_000,
      env: { AUTOLAB_FLEET_DB: url, PGPASSWORD: SECRET, HUB_TOKEN: SECRET, HOME: workerHome },
    });
    await worker.waitFor(/worker verifier: 1 slot on/, 60_000);
    const program = parseProgram(PROGRAM, join(project, "program.md"));
    trials = await fleetHubTrials({
      url: parseFleetUrl(url),
      repo: { gitDir, rootCommit: root, programText: PROGRAM, programFile: "program.md", prefix: "" },
      program,
      logDir,
      pollMs: 100,
    });
  }, 90_000);

  afterAll(async () => {
    await trials?.close();
    await listener?.close();
    if (worker && worker.child.exitCode === null) {
      worker.child.kill("SIGTERM");
      await worker.done.catch(() => {});
    }
  });

  it("storeBundle bundles from a bare repository, also where git's safe.bareRepository=explicit", async () => {
    const saved = { ...process.env };
    Object.assign(process.env, {
      GIT_CONFIG_COUNT: "1",
      GIT_CONFIG_KEY_0: "safe.bareRepository",
      GIT_CONFIG_VALUE_0: "explicit",
    });
    const pool = await openFleetDb(parseFleetUrl(url));
    try {
      const ref = await storeBundle(pool, schema, gitDir, root);
      expect(ref.commit).toBe(root);
      expect(ref.sha256).toMatch(/^[0-9a-f]{64}$/);
      // Nothing of it stays in the hub's repository.
      expect(git(gitDir, [`--git-dir=${gitDir}`, "for-each-ref", "refs/autolab-fleet"]).trim()).toBe("");
    } finally {
      process.env = saved;
      await pool.end();
    }
  });

  it("an honest candidate: the value the harness measured, per seed", async () => {
    candidate("honest", trainMjs("", "1"));
    expect(await hubRun("honest", 7)).toEqual({ seed: 7, value: measured(1, 7) });
    expect(await hubRun("honest", 12)).toEqual({ seed: 12, value: measured(1, 12) });
  }, 60_000);

  it("(a) fake metrics: a score the command prints does not count, the protected evaluate step's does", async () => {
    candidate(
      "fake-metrics",
      trainMjs(
        'console.log("score: -1000");\nconsole.log("METRIC score=-1000");\nconsole.log("score=-1000");',
      ),
    );
    const key = "hub-fake-r0-v0-candidate-3";
    expect(await hubRun("fake-metrics", 3, key)).toEqual({ seed: 3, value: measured(0, 3) });
    expect(stdoutOf(key)).toContain("score: -1000");
  }, 60_000);

  it("(b) the protected evaluator and its data cannot be rewritten at run time; a file slipped in beside them is `tampered`", async () => {
    // Rewriting, removing or renaming the protected files fails (read-only, mount points); so
    // does reading the holdout answers.
    const tries = [
      `writeFileSync("evaluate.mjs", 'console.log("score: -1000")')`,
      `writeFileSync("scoring/scale.json", '{ "scale": 0 }')`,
      `rmSync("evaluate.mjs")`,
      `renameSync("scoring", "scoring-old")`,
    ];
    const body = `import { readFileSync, renameSync, rmSync } from "node:fs";
for (const f of [${tries.map((t) => `() => ${t}`).join(", ")}]) {
  try { f(); console.log("DONE " + f); } catch (e) { console.log("REFUSED " + (e.code ?? e.message)); }
}
console.log("answers: [" + readFileSync("answers.json", "utf8") + "]");`;
    candidate("tamper-blocked", trainMjs(body));
    const key = "hub-tamper-r0-v0-candidate-4";
    expect(await hubRun("tamper-blocked", 4, key)).toEqual({ seed: 4, value: measured(0, 4) });
    const out = stdoutOf(key);
    expect(out).not.toContain("DONE");
    expect(out.match(/REFUSED/g)).toHaveLength(tries.length);
    // The holdout answers are an empty file to the command: only evaluate reads them.
    expect(out).toContain("answers: []");

    // A new file where only protected files may be (scoring/**): the check before evaluate sees it.
    candidate("tamper-slip", trainMjs(`writeFileSync("scoring/override.json", '{ "scale": 0 }');`));
    const r = await hubRun("tamper-slip", 5);
    expect(r.value).toBeUndefined();
    expect(r.failure).toMatch(/^tampered: .*scoring\/override\.json/);
    // The next trial in that worktree starts pristine.
    expect(await hubRun("honest", 5)).toEqual({ seed: 5, value: measured(1, 5) });
  }, 90_000);

  it("(c) network: the host's loopback (a listener, PostgreSQL) is out of reach", async () => {
    const pgPort = Number(new URL(PG_URL as string).port || 5432);
    const body = `import { connect } from "node:net";
const tryConnect = (port) => new Promise((done) => {
  const s = connect(port, "127.0.0.1");
  s.on("connect", () => { s.destroy(); done("connected"); });
  s.on("error", (e) => done(e.code));
  setTimeout(() => { s.destroy(); done("no answer"); }, 1000);
});
console.log("listener: " + await tryConnect(${listener.port}));
console.log("postgres: " + await tryConnect(${pgPort}));`;
    candidate("network", trainMjs(body));
    const key = "hub-net-r0-v0-candidate-6";
    expect(await hubRun("network", 6, key)).toEqual({ seed: 6, value: measured(0, 6) });
    const out = stdoutOf(key);
    expect(out).toMatch(/listener: ECONNREFUSED/);
    expect(out).toMatch(/postgres: ECONNREFUSED/);
    expect(listener.connections).toBe(0);
  }, 60_000);

  it("(d) writes outside its worktree (the worker's cache and repository, $HOME, the host's /tmp, the hub's data) land nowhere", async () => {
    const m = randomBytes(4).toString("hex");
    const project0 = readdirSync(cache).find((d) => d.startsWith("repo.git-")) as string;
    expect(project0).toBeDefined();
    const targets = [
      join(cache, `pwned-${m}`),
      join(cache, project0, `pwned-${m}`),
      join(cache, project0, "repo", `pwned-${m}`),
      join(cache, project0, "repo", ".git", "hooks", `post-checkout`),
      join(cache, project0, "state", `pwned-${m}`),
      join(process.env.HOME ?? homedir(), `pwned-${m}`),
      join(tmpdir(), `pwned-${m}`),
      join("/tmp", `pwned-${m}`),
      join(hubData, `pwned-${m}`),
      join(gitDir, "refs", "heads", `pwned-${m}`),
      join(project, `pwned-${m}`),
      join(cache, project0, "state", `escaped-${m}`),
    ];
    const body = `import { appendFileSync } from "node:fs";
for (const p of ${JSON.stringify(targets)}) {
  try { appendFileSync(p, "pwned\\n"); console.log("WROTE " + p); } catch (e) { console.log("REFUSED " + e.code + " " + p); }
}
try { appendFileSync("../../escaped-${m}", "x"); console.log("WROTE up"); } catch (e) { console.log("REFUSED " + e.code + " up"); }`;
    candidate("writes", trainMjs(body));
    const key = "hub-writes-r0-v0-candidate-7";
    const r = await hubRun("writes", 7, key);
    expect(r).toEqual({ seed: 7, value: measured(0, 7) });
    for (const p of targets) expect(existsSync(p), p).toBe(false);
    // It tried them all (what it could write went to its own private /tmp, gone with it).
    expect(stdoutOf(key).match(/^(WROTE|REFUSED) /gm)).toHaveLength(targets.length + 1);
  }, 60_000);

  it("(e) a fork bomb is bounded by the process limit, the trial ends, nothing is left, the worker runs the next job", async () => {
    const m = `fb${randomBytes(4).toString("hex")}`;
    const body = `import { spawn } from "node:child_process";
spawn("/bin/sh", ["-c", "b() { b & b & wait; }; b # ${m}"], { stdio: "ignore" });
await new Promise((r) => setTimeout(r, 60_000));`;
    candidate("fork-bomb", trainMjs(body));
    const r = await hubRun("fork-bomb", 8);
    expect(r.value).toBeUndefined();
    expect(r.failure).toMatch(/^(timeout|crash): /);
    expect(
      await eventually(
        () => processesWith(m),
        (p) => p.length === 0,
      ),
    ).toEqual([]);
    expect(alive(worker.child.pid)).toBe(true);
    expect(await hubRun("honest", 8)).toEqual({ seed: 8, value: measured(1, 8) });
  }, 90_000);

  it("(f) a time bomb keyed on the claim's seeds shows on fresh ones; the trial sees no hub secret and not which side of a verification it is", async () => {
    const body = `import { readdirSync, readFileSync } from "node:fs";
import { hostname, userInfo } from "node:os";
console.log("ENV " + JSON.stringify(process.env));
for (const f of [".pgpass", ".ssh/id_ed25519"]) {
  try { console.log("HOME " + f + " [" + readFileSync(process.env.HOME + "/" + f, "utf8") + "]"); } catch (e) { console.log("HOME " + f + " " + e.code); }
}
for (const pid of readdirSync("/proc").filter((d) => /^\\d+$/.test(d))) {
  try { console.log("PROC " + pid + " " + readFileSync("/proc/" + pid + "/cmdline", "utf8").replaceAll("\\0", " ")); } catch {}
}
let user = "?";
try { user = userInfo().username; } catch {}
console.log("HOST " + hostname() + " USER " + user + " CWD " + process.cwd());`;
    // Great on the seeds its claim names (1, 2, 3), what it really is elsewhere.
    candidate("time-bomb", trainMjs(body, "[1, 2, 3].includes(Number(process.env.AUTOLAB_SEED)) ? 3 : 0"));
    const claimSeed = "hub-0123456789abcdef-r0-v1-agreement-2";
    const fresh = "hub-0123456789abcdef-r0-v1-candidate-4242";
    expect(await hubRun("time-bomb", 2, claimSeed)).toEqual({ seed: 2, value: measured(3, 2) });
    expect(await hubRun("time-bomb", 4242, fresh)).toEqual({ seed: 4242, value: measured(0, 4242) });

    const out = stdoutOf(fresh);

    const env = JSON.parse(/^ENV (.*)$/m.exec(out)?.[1] ?? "{}") as Record<string, string>;
    // What it can observe: its seed and budget, an opaque token, the sandbox's short list.
    expect(env.AUTOLAB_SEED).toBe("4242");
    expect(env.AUTOLAB_BUDGET_S).toBe("3");
    // The token is the worker's per-lease nonce (what it reaps by): random, not the job's key.
    expect(env.AUTOLAB_TRIAL_TOKEN).toMatch(/^[0-9a-f]{24}$/);
    expect(env.AUTOLAB_TRIAL_TOKEN).not.toBe(hubJobKey(fresh));
    const allowed = new Set([
      "AUTOLAB_SEED",
      "AUTOLAB_BUDGET_S",
      "AUTOLAB_TRIAL_TOKEN",
      "PATH",
      "HOME",
      "USER",
      "LOGNAME",
      "LANG",
      "LANGUAGE",
      "TZ",
      "TERM",
      "SHELL",
      "TMPDIR",
      "PWD", // the shell's
    ]);
    expect(Object.keys(env).filter((k) => !allowed.has(k))).toEqual([]);
    // The worker's home credentials are empty files to it; /proc shows only the sandbox's own processes.
    expect(out).toContain("HOME .pgpass []");
    expect(out).toContain("HOME .ssh/id_ed25519 ENOENT");
    const procs = out.match(/^PROC .*$/gm) ?? [];
    expect(procs.length).toBeGreaterThan(0);
    expect(procs.join("\n")).not.toMatch(/postgres|vitest|cli\/main/);
    // Nothing of the hub's: no database address, no password or token, not the claim, its round or side.
    expect(out).not.toContain(SECRET);
    expect(out).not.toMatch(/postgres(ql)?:\/\//);
    expect(out).not.toContain(schema);
    expect(out).not.toContain("0123456789abcdef");
    expect(out.replaceAll("--die-with-parent", "")).not.toMatch(/candidate|agreement|parent/);
  }, 60_000);

  it("(g) a candidate that sleeps past its budget is killed: failure `timeout`", async () => {
    candidate("sleeper", trainMjs("await new Promise((r) => setTimeout(r, 60_000));"));
    const r = await hubRun("sleeper", 9);
    expect(r.value).toBeUndefined();
    expect(r.failure).toMatch(/^timeout: exceeded budget 3s \+ grace 1s; killed/);
  }, 60_000);

  it("the worker holds on its own: an untrusted job whose program asks for the network runs offline, one with `sandbox: off` is not run", async () => {
    // A coordinator that skipped checkHubProgram (an older hub, a forged job's program text).
    const exec = await FleetExecutor.open(parseFleetUrl(url), { pollMs: 100 });
    const spec = (key: string): TrialSpec => ({
      cwd: gitDir,
      command: "node train.mjs",
      evaluate: "node evaluate.mjs",
      budgetMs: 3000,
      graceMs: 1000,
      evaluateTimeoutMs: 10_000,
      seed: 13,
      logDir: join(logDir, key),
      env: { AUTOLAB_TRIAL_TOKEN: key },
      objective: "score",
    });
    const bind = (programText: string) =>
      exec.bind({
        repoRoot: gitDir,
        prefix: "",
        programFile: "program.md",
        programText,
        baseCommit: root,
        tag: "hub",
        untrusted: true,
      });
    try {
      bind(PROGRAM.replace("sandbox: { limits: { processes: 64 } }", "sandbox: { network: true }"));
      const online = `untrusted-net-${randomBytes(4).toString("hex")}`;
      const r = await exec.runAt(commits.get("network") as string, spec(online));
      expect(r.status).toBe("ok");
      expect(readFileSync(r.stdoutPath, "utf8")).toMatch(/listener: ECONNREFUSED/);
      expect(listener.connections).toBe(0);

      // No process limit in that program: the worker sets one (cgroup pids.max, where it can).
      if (limitEnforcement({ processes: 1 })[0]?.how?.startsWith("cgroup v1")) {
        candidate("pids-probe", trainMjs("await new Promise((r) => setTimeout(r, 2000));"));
        const probe = exec.runAt(
          commits.get("pids-probe") as string,
          spec(`untrusted-pids-${randomBytes(4).toString("hex")}`),
        );
        const max = await eventually(
          () => {
            const dirs = readdirSync("/sys/fs/cgroup/pids").filter((d) =>
              d.startsWith(`autolab-${worker.child.pid}-`),
            );
            return dirs.map((d) => readFileSync(join("/sys/fs/cgroup/pids", d, "pids.max"), "utf8").trim());
          },
          (v) => v.length > 0,
        );
        expect(max).toEqual([String(UNTRUSTED_PROCESSES + 2)]); // + bwrap's own two
        expect((await probe).status).toBe("ok");
      }

      bind(PROGRAM.replace("sandbox: { limits: { processes: 64 } }", "sandbox: off"));
      const open = `untrusted-off-${randomBytes(4).toString("hex")}`;
      const off = await exec.runAt(commits.get("writes") as string, spec(open));
      expect(off.status).toBe("crash");
      expect(off.reason).toMatch(/untrusted and its program says `sandbox: off`; the trial was not run/);
      expect(off.exitCode).toBeNull();
    } finally {
      await exec.close();
    }
  }, 60_000);

  it("a trial the harness cannot run (the root's setup fails) is tried 3 times, then HubTrialNotRun — never a failure against the candidate", async () => {
    // A hub of its own whose program's setup (the operator's code, at the root) always fails.
    const t = toy({});
    const text = PROGRAM.replace(
      "  command: node train.mjs",
      "  setup: node setup.mjs\n  command: node train.mjs",
    );
    writeFileSync(join(t.dir, "program.md"), text);
    writeFileSync(join(t.dir, "setup.mjs"), 'console.error("no data today"); process.exit(1);\n');
    writeFileSync(join(t.dir, "evaluate.mjs"), EVALUATE);
    mkdirSync(join(t.dir, "scoring"));
    writeFileSync(join(t.dir, "scoring", "scale.json"), '{ "scale": 1 }\n');
    writeFileSync(join(t.dir, "answers.json"), '{ "target": 3 }\n');
    writeFileSync(join(t.dir, "train.mjs"), trainMjs(""));
    commitAll(t.dir, "a hub whose setup fails");
    const root2 = t.git(["rev-parse", "HEAD"]).trim();
    const gitDir2 = join(removeLater(mkdtempSync(join(tmpdir(), "hub-data-"))), "repo.git");
    mkdirSync(gitDir2);
    git(gitDir2, ["init", "-q", "--bare"]);
    git(gitDir2, ["fetch", "-q", t.dir, `+${root2}:refs/hub/root`]);
    const broken = await fleetHubTrials({
      url: parseFleetUrl(url),
      repo: { gitDir: gitDir2, rootCommit: root2, programText: text, programFile: "program.md", prefix: "" },
      program: parseProgram(text, join(t.dir, "program.md")),
      logDir: join(logDir, "broken"),
      pollMs: 100,
    });
    const client = await testClient();
    try {
      const key = "hub-broken-r0-v0-candidate-1";
      const err = await broken.run({ key, commit: root2, seed: 1, label: "broken" }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(HubTrialNotRun);
      expect((err as HubTrialNotRun).kind).toBe("harness");
      expect((err as Error).message).toMatch(
        /could not be run 3 times: crash: setup `node setup.mjs` failed/,
      );
      const keys = [1, 2, 3].map((a) => hubJobKey(key, a));
      const ran = await client.query(`SELECT key FROM ${schema}.fleet_results WHERE key = ANY($1)`, [keys]);
      expect(ran.rowCount).toBe(3);
    } finally {
      await client.end();
      await broken.close();
    }
  }, 90_000);

  it("a hub that stops mid-trial and starts again re-attaches to the same fleet job: the trial runs once", async () => {
    candidate("slow", trainMjs("await new Promise((r) => setTimeout(r, 1500));", "2"));
    const key = "hub-restart-r0-v0-candidate-11";
    const jobKey = hubJobKey(key);
    const client = await testClient();
    try {
      const stop = new AbortController();
      const first = trials.run({
        key,
        commit: commits.get("slow") as string,
        seed: 11,
        label: "slow",
        signal: stop.signal,
      });
      for (let i = 0; i < 300; i++) {
        const r = await client.query(
          `SELECT 1 FROM ${schema}.fleet_jobs WHERE key = $1 AND started_at IS NOT NULL`,
          [jobKey],
        );
        if (r.rowCount) break;
        await new Promise((res) => setTimeout(res, 100));
      }
      stop.abort("the hub stopped");
      await expect(first).rejects.toBeInstanceOf(HubTrialNotRun);
      // A new hub process: its own executor on the same database.
      const again = await fleetHubTrials({
        url: parseFleetUrl(url),
        repo: { gitDir, rootCommit: root, programText: PROGRAM, programFile: "program.md", prefix: "" },
        program: parseProgram(PROGRAM, join(project, "program.md")),
        logDir,
        pollMs: 100,
      });
      try {
        expect(
          await again.run({ key, commit: commits.get("slow") as string, seed: 11, label: "slow" }),
        ).toEqual({
          seed: 11,
          value: measured(2, 11),
        });
      } finally {
        await again.close();
      }
      const jobs = await client.query(`SELECT runs FROM ${schema}.fleet_jobs WHERE key = $1`, [jobKey]);
      expect(jobs.rows).toEqual([{ runs: 1 }]);
      const results = await client.query(`SELECT 1 FROM ${schema}.fleet_results WHERE key = $1`, [jobKey]);
      expect(results.rowCount).toBe(1);
    } finally {
      await client.end();
    }
  }, 90_000);

  it("--workers: the hub's own in-process slots run its trials, sandboxed, and stop", async () => {
    const stop = await localWorkers(parseFleetUrl(local.url), 1, {
      cacheDir: removeLater(mkdtempSync(join(tmpdir(), "hub-local-cache-"))),
      name: "hub-local",
    });
    const own = await fleetHubTrials({
      url: parseFleetUrl(local.url),
      repo: { gitDir, rootCommit: root, programText: PROGRAM, programFile: "program.md", prefix: "" },
      program: parseProgram(PROGRAM, join(project, "program.md")),
      logDir: join(hubData, "local-logs"),
      pollMs: 100,
    });
    const client = await testClient();
    try {
      const honest = commits.get("honest") as string;
      expect(await own.run({ key: "hub-local-honest", commit: honest, seed: 21, label: "local" })).toEqual({
        seed: 21,
        value: measured(1, 21),
      });
      const net = await own.run({
        key: "hub-local-net",
        commit: commits.get("network") as string,
        seed: 22,
        label: "local net",
      });
      expect(net).toEqual({ seed: 22, value: measured(0, 22) });
      expect(listener.connections).toBe(0);
      const w = await client.query(`SELECT name FROM ${local.schema}.fleet_workers WHERE stopped_at IS NULL`);
      expect(w.rows.map((r) => r.name)).toEqual(["hub-local"]);
    } finally {
      await own.close();
      await stop();
      await client.end();
    }
    const after = await testClient();
    try {
      const w = await after.query(`SELECT stopped_at FROM ${local.schema}.fleet_workers`);
      expect(w.rows.every((r) => r.stopped_at !== null)).toBe(true);
    } finally {
      await after.end();
    }
  }, 90_000);
});
