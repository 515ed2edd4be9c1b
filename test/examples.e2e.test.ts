/**
 * The examples beyond ML (examples/speedup, compiler-flags, prompt-rubric) end to end, as a
 * user meets them: `autolab init --example NAME` into an empty directory, then a short
 * `autolab run` with the real CLI and the built-in optimizer, then `autolab log --json`.
 * Plus each protected evaluator run directly on planted candidates: a wrong implementation,
 * a flag that changes the output, a prompt scored through a model endpoint.
 */
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { listExamples } from "../src/app/init.ts";
import { loadProgram } from "../src/program/index.ts";
import { GIT_ENV, REPO_ROOT, runCli } from "./helpers/toy-project.ts";

const EXAMPLES = ["speedup", "compiler-flags", "prompt-rubric"] as const;
const work = mkdtempSync(join(tmpdir(), "autolab-examples-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

interface Row {
  id: number;
  decision: string | null;
  reason: string | null;
  metric: number | null;
  metrics: Record<string, number>;
  params: Record<string, unknown> | null;
  commit: string;
  hypothesis: string;
}

/** Each run takes well under a minute on an idle 2-core machine; leave room for a loaded one. */
const RUN_TIMEOUT_MS = 120_000;

async function initExample(name: string): Promise<string> {
  const dir = join(work, name);
  const r = await runCli(["init", dir, "--example", name], { cwd: work });
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  expect(r.stdout).toContain("first commit made");
  return dir;
}

async function runAndLog(dir: string, n: number, logFlags: string[] = []): Promise<Row[]> {
  const r = await runCli(["run", "-n", String(n)], { cwd: dir, timeoutMs: RUN_TIMEOUT_MS - 10_000 });
  expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
  const log = await runCli(["log", "--json", ...logFlags], { cwd: dir });
  expect(log.code).toBe(0);
  return JSON.parse(log.stdout) as Row[];
}

/** A baseline with the metric, and at least one candidate decided on a measured metric. */
function expectProgress(rows: Row[], metric: string): void {
  const [baseline, ...candidates] = rows;
  expect(baseline?.decision).toBe("keep");
  expect(Number.isFinite(baseline?.metric), JSON.stringify(baseline)).toBe(true);
  expect(Number.isFinite(baseline?.metrics[metric])).toBe(true);
  const decided = candidates.filter(
    (r) => ["keep", "discard", "reject"].includes(r.decision ?? "") && Number.isFinite(r.metrics[metric]),
  );
  expect(decided.length, JSON.stringify(rows.map((r) => [r.id, r.decision, r.reason]))).toBeGreaterThan(0);
}

/** `node <script>` in dir with the Node running this test (Node 24: type stripping). */
function node(dir: string, script: string, env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [script], {
    cwd: dir,
    env: { ...process.env, ...env },
    encoding: "utf8",
    timeout: 60_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function metricOf(stdout: string, name: string): number {
  const m = new RegExp(`^${name.replace(/[.]/g, "\\.")}: (\\S+)$`, "m").exec(stdout);
  expect(m, `${name} in:\n${stdout}`).not.toBeNull();
  return Number(m?.[1]);
}

/** A copy of an example (not a git repository) for running its scripts by hand. */
function copyOf(name: string, as: string): string {
  const dir = join(work, as);
  cpSync(join(REPO_ROOT, "examples", name), dir, { recursive: true });
  return dir;
}

function setLine(file: string, name: string, literal: string): void {
  const text = readFileSync(file, "utf8");
  const re = new RegExp(`^((?:const )?${name} = )\\S+?(;?)(\\s|$)`, "m");
  expect(re.test(text), `${name} in ${file}`).toBe(true);
  writeFileSync(file, text.replace(re, `$1${literal}$2$3`));
}

it("init --example lists the new examples, and each program.md parses with its knobs in the editable file", async () => {
  for (const name of EXAMPLES) expect(listExamples()).toContain(name);
  const r = await runCli(["init", join(work, "nope"), "--example", "no-such-example"], { cwd: work });
  expect(r.code).toBe(1);
  for (const name of EXAMPLES) expect(r.stderr).toContain(name);
  for (const name of EXAMPLES) {
    const program = loadProgram(join(REPO_ROOT, "examples", name));
    expect(Object.keys(program.search).length, name).toBeGreaterThanOrEqual(4);
    expect(program.run.evaluate, name).toBeTruthy();
    expect(program.constraints.length + program.metrics.holdout.length, name).toBeGreaterThan(0);
  }
});

describe("speedup", () => {
  it("runs: the baseline, decided candidates, and the wrong Fermat variant never kept", {
    timeout: RUN_TIMEOUT_MS,
  }, async () => {
    const dir = await initExample("speedup");
    // A planted researcher for the second invocation: it switches to the wrong variant.
    writeFileSync(
      join(dir, "plant.mjs"),
      `import { readFileSync, writeFileSync } from "node:fs";
const t = readFileSync("primes.ts", "utf8");
writeFileSync("primes.ts", t.replace(/^const ALGORITHM = .*$/m, 'const ALGORITHM = "fermat";'));
console.log(JSON.stringify({ hypothesis: "a Fermat test is cheaper than trial division" }));
`,
    );
    const git = (...args: string[]) =>
      execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", ...args], {
        cwd: dir,
        env: { ...process.env, ...GIT_ENV },
      });
    git("add", "plant.mjs");
    git("commit", "-qm", "a planted researcher");

    let rows = await runAndLog(dir, 2);
    expectProgress(rows, "time_ms");
    // The agent may change between invocations of one run: resume it for one more experiment.
    const program = join(dir, "program.md");
    writeFileSync(
      program,
      readFileSync(program, "utf8").replace(
        /^agent: builtin$/m,
        'agent: { backend: command, command: "node plant.mjs" }',
      ),
    );
    rows = await runAndLog(dir, 3);
    expect(rows.map((r) => r.id)).toEqual([0, 1, 2, 3]);
    const algorithm = (r: Row) =>
      /^const ALGORITHM = "(\w+)";$/m.exec(git("show", `${r.commit}:primes.ts`).toString())?.[1];
    const planted = rows[3] as Row;
    expect(planted.hypothesis).toContain("Fermat");
    expect(algorithm(planted)).toBe("fermat");
    expect(planted?.decision).toBe("reject");
    expect(planted?.reason).toContain("correct 0");
    expect(planted?.metrics.wrong_answers).toBeGreaterThan(0);
    for (const r of rows) if (algorithm(r) === "fermat") expect(r.decision, `#${r.id}`).not.toBe("keep");
  });

  it("the evaluator checks every answer: a planted wrong implementation scores correct 0", () => {
    const dir = copyOf("speedup", "speedup-planted");
    const good = node(dir, "evaluate.ts");
    expect(good.status, good.stderr).toBe(0);
    expect(metricOf(good.stdout, "correct")).toBe(1);
    expect(metricOf(good.stdout, "time_ms")).toBeGreaterThan(0);

    // The tempting variant passes the smoke test, and fails the evaluator.
    setLine(join(dir, "primes.ts"), "ALGORITHM", '"fermat"');
    const smoke = node(dir, "check.ts");
    expect(smoke.status, smoke.stderr).toBe(0);
    const fermat = node(dir, "evaluate.ts");
    expect(fermat.status).toBe(0);
    expect(metricOf(fermat.stdout, "correct")).toBe(0);
    expect(metricOf(fermat.stdout, "wrong_answers")).toBeGreaterThan(0);
    expect(fermat.stderr).toMatch(/WRONG ANSWERS.*\[\d+, \d+\]/);

    // Off by one on a single edge case (2 is prime) is caught too.
    writeFileSync(
      join(dir, "primes.ts"),
      `import { countPrimes as right } from "./right.ts";
export function countPrimes(ranges: readonly (readonly [number, number])[]): number[] {
  return right(ranges).map((n, i) => (ranges[i]?.[0] === 2 && ranges[i]?.[1] === 2 ? 0 : n));
}
`,
    );
    cpSync(join(REPO_ROOT, "examples", "speedup", "primes.ts"), join(dir, "right.ts"));
    const edge = node(dir, "evaluate.ts");
    expect(metricOf(edge.stdout, "correct")).toBe(0);
    expect(edge.stderr).toContain("for [2, 2], which holds 1 primes");

    // Printing a metric of its own goes to stderr, never into the metrics.
    writeFileSync(
      join(dir, "primes.ts"),
      `console.log("time_ms: 0.001");\nexport { countPrimes } from "./right.ts";\n`,
    );
    const liar = node(dir, "evaluate.ts");
    expect(metricOf(liar.stdout, "time_ms")).toBeGreaterThan(0.001);
    expect(liar.stdout.match(/^time_ms:/gm)).toHaveLength(1);
    expect(liar.stderr).toContain("time_ms: 0.001");
  });
});

/** compiler-flags needs a C compiler (its setup says how to install one; tested above). */
const HAS_GCC = spawnSync("gcc", ["--version"]).status === 0;

describe.skipIf(!HAS_GCC)("compiler-flags", () => {
  it("runs: the baseline and decided candidates with runtime_ms", { timeout: RUN_TIMEOUT_MS }, async () => {
    const dir = await initExample("compiler-flags");
    const rows = await runAndLog(dir, 3);
    expectProgress(rows, "runtime_ms");
    expect(rows[0]?.metrics.correct).toBe(1);
    expect(rows[0]?.metrics.build_ms).toBeGreaterThan(0);
    for (const r of rows) if (r.metrics.correct === 0) expect(r.decision, `#${r.id}`).toBe("reject");
    // the reference outputs are setup's, never committed
    expect(execFileSync("git", ["ls-files"], { cwd: dir, encoding: "utf8" })).not.toContain("data/");
  });

  it("the evaluator rejects a build whose output changed (-ffast-math); build.ts refuses file flags; a missing compiler names the fix", () => {
    const dir = copyOf("compiler-flags", "compiler-flags-planted");
    const prep = node(dir, "prepare.ts");
    expect(prep.status, prep.stderr).toBe(0);
    expect(existsSync(join(dir, "data", "expected.txt"))).toBe(true);
    const conf = join(dir, "flags.conf");
    setLine(conf, "OPT_LEVEL", '"-O2"');
    const build = node(dir, "build.ts");
    expect(build.status, build.stderr).toBe(0);
    const ok = node(dir, "evaluate.ts");
    expect(ok.status, ok.stderr).toBe(0);
    expect(metricOf(ok.stdout, "correct")).toBe(1);

    setLine(conf, "OPT_LEVEL", '"-O3"');
    setLine(conf, "FAST_MATH", "true");
    expect(node(dir, "build.ts").status).toBe(0);
    const fast = node(dir, "evaluate.ts");
    expect(fast.status).toBe(0);
    expect(metricOf(fast.stdout, "correct")).toBe(0);
    expect(fast.stderr).toMatch(/OUTPUT CHANGED.*the reference "(matmul|dot) /);

    setLine(conf, "FAST_MATH", "false");
    setLine(conf, "EXTRA_FLAGS", '"-fplugin=/tmp/x.so"');
    const refused = node(dir, "build.ts");
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain('refusing the flag "-fplugin=/tmp/x.so"');

    const noCc = node(dir, "prepare.ts", { CC: "no-such-compiler-7f3a" });
    expect(noCc.status).toBe(1);
    expect(noCc.stderr).toContain("no C compiler");
    expect(noCc.stderr).toContain("apt-get install gcc");
    expect(noCc.stderr).not.toMatch(/^\s{4}at /m);
  });
});

describe("prompt-rubric", () => {
  it("runs offline: the baseline and decided candidates with score, holdout_score recorded", {
    timeout: RUN_TIMEOUT_MS,
  }, async () => {
    const dir = await initExample("prompt-rubric");
    const rows = await runAndLog(dir, 3);
    expectProgress(rows, "score");
    // holdout_score is recorded, and shown only on request
    expect(rows[0]?.metrics.holdout_score).toBeUndefined();
    const withHoldout = await runCli(["log", "--json", "--holdout"], { cwd: dir });
    const all = JSON.parse(withHoldout.stdout) as Row[];
    expect(Number.isFinite(all[0]?.metrics.holdout_score)).toBe(true);
    const best = Math.max(...rows.filter((r) => r.decision === "keep").map((r) => r.metric ?? 0));
    expect(best).toBeGreaterThanOrEqual(rows[0]?.metric ?? 0);
  });

  it("scores replies from an OpenAI-compatible endpoint when AUTOLAB_EXAMPLE_BASE_URL is set", async () => {
    const dir = copyOf("prompt-rubric", "prompt-rubric-endpoint");
    const offline = node(dir, "evaluate.ts");
    expect(offline.status, offline.stderr).toBe(0);
    expect(offline.stderr).toContain("offline stand-in");
    const offlineScore = metricOf(offline.stdout, "score");
    expect(offlineScore).toBeLessThan(100);

    // A model that writes the perfect reply from the case notes it is sent.
    const seen: { auth?: string; model?: string; system?: string }[] = [];
    const server = createServer((req, res) => {
      let body = "";
      req.on("data", (d) => {
        body += d;
      });
      req.on("end", () => {
        const j = JSON.parse(body) as { model: string; messages: { role: string; content: string }[] };
        const user = j.messages.find((m) => m.role === "user")?.content ?? "";
        seen.push({ auth: req.headers.authorization, model: j.model, system: j.messages[0]?.content });
        const last = user.slice(user.lastIndexOf("Case:"));
        const f = (k: string) => new RegExp(`^${k}: (.*)$`, "m").exec(last)?.[1]?.replace(/\.$/, "") ?? "";
        const steps = f("Steps for the customer");
        const sorry = /not|twice|cracked|without|no refund/.test(f("Message"))
          ? "We are sorry for the trouble. "
          : "";
        const reply = [
          `Hello ${f("Customer")},`,
          `${sorry}About order ${f("Order")}: ${f("Resolution")}.`,
          ...(steps ? steps.split(/;\s*/).map((s) => `- ${s}`) : []),
          "— Acme Support",
        ].join("\n");
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ choices: [{ message: { role: "assistant", content: reply } }] }));
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as AddressInfo).port;
    try {
      const env = {
        AUTOLAB_EXAMPLE_BASE_URL: `http://127.0.0.1:${port}/v1`,
        AUTOLAB_EXAMPLE_MODEL: "test-model",
        AUTOLAB_EXAMPLE_API_KEY: "k-123",
      };
      // spawnSync would block the event loop this server answers on: spawn.
      const online = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const p = spawn(process.execPath, ["evaluate.ts"], { cwd: dir, env: { ...process.env, ...env } });
        let stdout = "";
        let stderr = "";
        p.stdout?.on("data", (d) => {
          stdout += d;
        });
        p.stderr?.on("data", (d) => {
          stderr += d;
        });
        p.on("close", (code) => resolve({ code, stdout, stderr }));
      });
      expect(online.code, online.stderr).toBe(0);
      expect(online.stderr).toContain(`replies from test-model at http://127.0.0.1:${port}/v1`);
      expect(metricOf(online.stdout, "score")).toBe(100);
      expect(metricOf(online.stdout, "holdout_score")).toBe(100);
      expect(seen.length).toBe(9); // six tickets and three held out
      expect(seen[0]).toMatchObject({ auth: "Bearer k-123", model: "test-model" });
    } finally {
      server.close();
    }
    // A configured endpoint that does not answer fails the evaluation (never a silent fallback).
    const down = node(dir, "evaluate.ts", { AUTOLAB_EXAMPLE_BASE_URL: `http://127.0.0.1:${port}/v1` });
    expect(down.status).toBe(1);
    expect(down.stderr).toContain("cannot reach the model");
    expect(down.stderr).toContain("network: true");
    expect(down.stdout).not.toMatch(/^score:/m);
  });
});
