// `autolab doctor`'s checks against fake machines (src/app/doctor.ts): what each one reports,
// and that every warning and failure carries its fix. The CLI end to end: doctor.e2e.test.ts.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Check,
  checkGit,
  checkGpus,
  checkJudges,
  checkNode,
  checkNotebook,
  checkProgram,
  checkResearcher,
  checkSandbox,
  type DoctorEnv,
  type ProgramOutput,
  realEnv,
  researchersOf,
  runDoctor,
} from "../src/app/doctor.ts";
import { renderChecks } from "../src/cli/doctor-command.ts";
import type { AgentConfig, Program } from "../src/core/types.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { tempDir } from "./helpers/git-project.ts";
import { REPO_ROOT } from "./helpers/toy-project.ts";

type Programs = Record<string, (args: string[]) => ProgramOutput>;

/** A machine with the given programs installed (nothing else), bwrap working unless told. */
function fakeEnv(
  o: {
    programs?: Programs;
    env?: NodeJS.ProcessEnv;
    node?: string;
    executables?: string[];
    sandbox?: DoctorEnv["probeSandbox"];
  } = {},
): DoctorEnv & { connects: string[] } {
  const connects: string[] = [];
  const real = realEnv();
  return {
    env: o.env ?? {},
    nodeVersion: o.node ?? "24.21.0",
    engines: ">=24",
    run: (file, args) => o.programs?.[file]?.(args),
    probeSandbox: o.sandbox ?? (() => ({ ok: true, version: "0.8.0", bwrap: "/usr/bin/bwrap" })),
    findExecutable: (name) => (o.executables?.includes(name) ? `/fake/bin/${name}` : undefined),
    connect: async (host, port) => {
      connects.push(`${host}:${port}`);
      return real.connect(host, port);
    },
    connects,
  };
}

const out = (stdout: string, code = 0): ProgramOutput => ({ code, stdout, stderr: "" });
const GIT: Programs["git"] = (args) =>
  args[0] === "--version"
    ? out("git version 2.39.5\n")
    : args[1] === "user.name"
      ? out("Ada\n")
      : out("ada@example.com\n");

/** A program.md in a new directory. */
function project(frontmatter: string): string {
  const dir = tempDir("autolab-doctor-");
  writeFileSync(
    join(dir, "program.md"),
    `---\nname: doc\nobjective: { metric: loss, direction: minimize }\nrun: { command: node train.mjs, budget: 5s }\nfiles: { editable: [train.mjs] }\n${frontmatter}---\nDirections.\n`,
  );
  writeFileSync(join(dir, "train.mjs"), "const LR = 0.1;\nconsole.log('loss: 1');\n");
  return dir;
}

function loaded(dir: string): Program {
  const r = checkProgram(dir);
  if (!r.program) throw new Error(`program.md did not load: ${r.check.detail}`);
  return r.program;
}

const agent = (c: Partial<AgentConfig> & { backend: string }): AgentConfig => ({ args: [], env: {}, ...c });

function expectFixes(checks: Check[]): void {
  for (const c of checks) if (c.status !== "ok") expect(c.fix, `${c.name}: ${c.detail}`).toBeTruthy();
}

describe("doctor: git", () => {
  it("reports the version and the identity", () => {
    const checks = checkGit(fakeEnv({ programs: { git: GIT } }), "/nonexistent");
    expect(checks.map((c) => [c.name, c.status, c.detail])).toEqual([
      ["git", "ok", "git 2.39.5"],
      ["git identity", "ok", "Ada <ada@example.com>"],
    ]);
  });

  it("fails without git, naming how to install it", () => {
    const [c] = checkGit(fakeEnv(), "/");
    expect(c?.status).toBe("fail");
    expect(c?.detail).toBe("git is not installed");
    expect(c?.fix).toMatch(/apt-get install git/);
  });

  it("warns without an identity, with the commands that set one", () => {
    const checks = checkGit(
      fakeEnv({ programs: { git: (a) => (a[0] === "--version" ? out("git version 2.47.0") : out("", 1)) } }),
      "/",
    );
    expect(checks[1]?.status).toBe("warn");
    expect(checks[1]?.fix).toMatch(/git config --global user\.name/);
  });
});

describe("doctor: node", () => {
  it("accepts the engines' major and later, fails older ones with the fix", () => {
    expect(checkNode(fakeEnv({ node: "24.0.0" })).status).toBe("ok");
    expect(checkNode(fakeEnv({ node: "25.1.0" })).status).toBe("ok");
    const old = checkNode(fakeEnv({ node: "22.18.0" }));
    expect(old.status).toBe("fail");
    expect(old.detail).toBe("Node.js 22.18.0, but autolab needs >=24");
    expect(old.fix).toMatch(/Node\.js 24/);
  });
});

describe("doctor: sandbox", () => {
  const broken = () => ({
    ok: false as const,
    reason: "bubblewrap (bwrap) is not installed",
    hint: "apt-get install bubblewrap",
  });

  it("ok with bubblewrap's version", () => {
    expect(checkSandbox(fakeEnv(), undefined)).toMatchObject({
      status: "ok",
      detail: "bubblewrap 0.8.0 (/usr/bin/bwrap)",
    });
  });

  it("warns without one (runs go unsandboxed), fails when program.md requires one", () => {
    const env = fakeEnv({ sandbox: broken });
    expect(checkSandbox(env, loaded(project("")))).toMatchObject({
      status: "warn",
      fix: "apt-get install bubblewrap",
    });
    expect(checkSandbox(env, loaded(project("sandbox: { required: true }\n")))).toMatchObject({
      status: "fail",
      fix: "apt-get install bubblewrap",
    });
  });

  it("warns when program.md turns it off, without probing", () => {
    const env = fakeEnv({
      sandbox: () => {
        throw new Error("probed");
      },
    });
    expect(checkSandbox(env, loaded(project("sandbox: off\n"))).detail).toMatch(
      /sandbox: off in program\.md/,
    );
  });
});

describe("doctor: program.md", () => {
  it("fails without one, pointing at autolab init", () => {
    const r = checkProgram(tempDir("autolab-doctor-empty-"));
    expect(r.program).toBeUndefined();
    expect(r.check).toMatchObject({ status: "fail" });
    expect(r.check.fix).toMatch(/autolab init/);
  });

  it("fails on a program.md that does not parse, with its error and fix", () => {
    const dir = project("budget_typo: 3\n");
    const r = checkProgram(dir);
    expect(r.check.status).toBe("fail");
    expect(r.check.detail).toMatch(/budget_typo/);
    expect(r.check.fix).toBeTruthy();
  });
});

describe("doctor: researchers", () => {
  let server: Server;
  let port = 0;
  beforeAll(async () => {
    server = createServer((s) => s.end());
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((done) => server.close(() => done())));

  const program = () => loaded(project(""));

  it("checks the advisor's backend too (program.md advisor:)", () => {
    const withAdvisor = { ...program(), advisor: { agent: agent({ backend: "codex" }), afterDiscards: 8 } };
    expect(researchersOf(withAdvisor).map((r) => [r.who, r.config.backend])).toEqual([
      ["agent", "builtin"],
      ["advisor", "codex"],
    ]);
  });

  it("the built-in optimizer needs nothing", async () => {
    const [c] = await checkResearcher(fakeEnv(), program(), "agent", agent({ backend: "builtin" }));
    expect(c?.status).toBe("ok");
  });

  it("a missing CLI fails with its pinned install command", async () => {
    const checks = await checkResearcher(fakeEnv(), program(), "agent", agent({ backend: "claude" }));
    expect(checks).toHaveLength(1);
    expect(checks[0]?.status).toBe("fail");
    expect(checks[0]?.detail).toMatch(/`claude` is not installed/);
    expect(checks[0]?.fix).toMatch(/npm install -g @anthropic-ai\/claude-code@\d+\.\d+\.\d+/);
  });

  it("an installed CLI: which host key is set, never contacting the vendor", async () => {
    const env = fakeEnv({ executables: ["claude"], env: { ANTHROPIC_API_KEY: "sk-test" } });
    const checks = await checkResearcher(env, program(), "agent", agent({ backend: "claude" }));
    expect(checks.map((c) => [c.status, c.detail])).toEqual([
      ["ok", "installed: /fake/bin/claude"],
      ["ok", "key: ANTHROPIC_API_KEY set"],
    ]);
    expect(env.connects).toEqual([]);
    const none = await checkResearcher(
      fakeEnv({ executables: ["codex"] }),
      program(),
      "agent",
      agent({ backend: "codex" }),
    );
    expect(none[1]).toMatchObject({ status: "warn", detail: expect.stringMatching(/OPENAI_API_KEY/) });
    expectFixes(none);
  });

  it("api_key_env must be set", async () => {
    const config = agent({ backend: "codex", apiKeyEnv: "MY_KEY" });
    const missing = await checkResearcher(fakeEnv({ executables: ["codex"] }), program(), "agent", config);
    expect(missing.at(-1)).toMatchObject({ status: "fail", fix: expect.stringMatching(/export MY_KEY=/) });
    const set = await checkResearcher(
      fakeEnv({ executables: ["codex"], env: { MY_KEY: "k" } }),
      program(),
      "agent",
      config,
    );
    expect(set.at(-1)).toMatchObject({ status: "ok", detail: "key: MY_KEY is set" });
  });

  it("a base_url is reachable when something listens there, and fails when nothing does", async () => {
    const up = fakeEnv({ executables: ["pi"] });
    const ok = await checkResearcher(
      up,
      program(),
      "agent",
      agent({ backend: "pi", model: "m", baseUrl: `http://127.0.0.1:${port}/v1` }),
    );
    expect(ok.at(-1)).toMatchObject({
      status: "ok",
      detail: `base_url http://127.0.0.1:${port} accepts connections`,
    });
    expect(up.connects).toEqual([`127.0.0.1:${port}`]);

    // A port that was free a moment ago: nothing listens there.
    const closed = createServer();
    await new Promise<void>((done) => closed.listen(0, "127.0.0.1", done));
    const freePort = (closed.address() as { port: number }).port;
    await new Promise<void>((done) => closed.close(() => done()));
    const down = await checkResearcher(
      fakeEnv({ executables: ["pi"] }),
      program(),
      "agent",
      agent({ backend: "pi", model: "m", baseUrl: `http://127.0.0.1:${freePort}/v1` }),
    );
    expect(down.at(-1)).toMatchObject({
      status: "fail",
      detail: expect.stringMatching(/not reachable: .*ECONNREFUSED/),
    });
    expectFixes(down);
  });

  it("the llm researcher: its model and key, as the run would resolve them", async () => {
    const bad = await checkResearcher(
      fakeEnv(),
      program(),
      "agent",
      agent({ backend: "llm", provider: "anthropic", model: "m" }),
    );
    expect(bad[0]).toMatchObject({ status: "fail", detail: expect.stringMatching(/ANTHROPIC_API_KEY/) });
    expectFixes(bad);
    const good = await checkResearcher(
      fakeEnv({ env: { ANTHROPIC_API_KEY: "k" } }),
      program(),
      "agent",
      agent({ backend: "llm", provider: "anthropic", model: "m" }),
    );
    expect(good[0]).toMatchObject({ status: "ok", detail: "provider anthropic, model m" });
  });
});

describe("doctor: notebook", () => {
  it("none yet is fine; one with runs opens and says how many", () => {
    const dir = project("");
    expect(checkNotebook(dir)).toMatchObject({ status: "ok", detail: expect.stringMatching(/none yet/) });
    mkdirSync(join(dir, ".autolab"));
    const ledger = new SqliteLedger(join(dir, ".autolab", "lab.db"));
    ledger.close();
    expect(checkNotebook(dir)).toMatchObject({ status: "ok", detail: expect.stringMatching(/: 0 runs$/) });
  });

  it("a damaged notebook fails with how to move it aside", () => {
    const dir = project("");
    mkdirSync(join(dir, ".autolab"));
    writeFileSync(join(dir, ".autolab", "lab.db"), "this is not a database, it is text ".repeat(200));
    const c = checkNotebook(dir);
    expect(c.status).toBe("fail");
    expect(c.detail).toMatch(/damaged/);
    expect(c.fix).toMatch(/mv /);
  });
});

describe("doctor: GPUs", () => {
  const smi = (stdout: string, code = 0): Programs => ({ "nvidia-smi": () => out(stdout, code) });
  const TWO = "GPU 0: NVIDIA H200 (UUID: GPU-aaaa)\nGPU 1: NVIDIA H200 (UUID: GPU-bbbb)\n";

  it("lists the GPUs nvidia-smi -L finds", () => {
    expect(checkGpus(fakeEnv({ programs: smi(TWO) }), undefined)).toEqual({
      name: "gpu",
      status: "ok",
      detail: "GPU 0: NVIDIA H200; GPU 1: NVIDIA H200",
    });
  });

  it("no nvidia-smi: CPU runs only, which is fine unless slots.gpus names GPUs", () => {
    expect(checkGpus(fakeEnv(), undefined)).toMatchObject({
      status: "ok",
      detail: "no NVIDIA GPU found (CPU runs only)",
    });
    const wants = loaded(project("slots: { count: 2, gpus: [0, 1] }\n"));
    expect(checkGpus(fakeEnv(), wants)).toMatchObject({
      status: "fail",
      fix: expect.stringMatching(/slots\.gpus/),
    });
    expect(checkGpus(fakeEnv({ programs: smi(TWO) }), wants).status).toBe("ok");
    const three = loaded(project("slots: { count: 3, gpus: [0, 1, 2] }\n"));
    expect(checkGpus(fakeEnv({ programs: smi(TWO) }), three)).toMatchObject({ status: "fail" });
  });

  it("nvidia-smi that fails: a warning about the driver", () => {
    const c = checkGpus(
      fakeEnv({
        programs: { "nvidia-smi": () => ({ code: 9, stdout: "", stderr: "NVIDIA-SMI has failed\n" }) },
      }),
      undefined,
    );
    expect(c).toMatchObject({ status: "warn", detail: expect.stringMatching(/NVIDIA-SMI has failed/) });
  });
});

describe("doctor: all checks, rendered", () => {
  it("one line per check, a fix under each problem, escaped researcher-reachable text", async () => {
    const dir = project("agent: claude\n");
    const checks = await runDoctor(dir, fakeEnv({ programs: { git: GIT } }));
    expect(checks.map((c) => c.name)).toEqual([
      "git",
      "git identity",
      "node",
      "sandbox",
      "program",
      "researcher claude (agent)",
      "notebook",
      "gpu",
    ]);
    const text = renderChecks([
      ...checks,
      { name: "x", status: "warn", detail: "evil\u001b]0;title\u0007", fix: "f" },
    ]);
    expect(text).toMatch(/^FAIL {2}researcher claude \(agent\): `claude` is not installed/m);
    expect(text).toMatch(/^ {6}fix: Install it: npm install -g @anthropic-ai\/claude-code@/m);
    expect(text).not.toContain("\u001b");
    expect(text).toMatch(/\\x1b\]0;title\\x07/);
    expect(text.trim().split("\n").at(-1)).toBe("1 problem to fix, 1 warning.");
  });
});

describe("agent CLIs' install commands", () => {
  it("pin the versions agent-clis/package.json installs (the ones the agent tests run)", async () => {
    const { CLI_BACKENDS, loadPreset } = await import("../src/agents/cli/register.ts");
    const pinned = (
      JSON.parse(readFileSync(join(REPO_ROOT, "agent-clis", "package.json"), "utf8")) as {
        dependencies: Record<string, string>;
      }
    ).dependencies;
    const npmInstalls: string[] = [];
    for (const backend of CLI_BACKENDS) {
      const { install } = await loadPreset(backend);
      const m = /^npm install -g (\S+)@(\d\S*)$/.exec(install);
      if (!install.startsWith("npm ")) continue;
      expect(m, `${backend}: ${install}`).not.toBeNull();
      expect(pinned[m?.[1] ?? ""], backend).toBe(m?.[2]);
      npmInstalls.push(m?.[1] ?? "");
    }
    expect(npmInstalls.sort()).toEqual(Object.keys(pinned).sort());
  });
});

describe("checkJudges", () => {
  it("checks each rubric judge: its key where the provider needs one, its base_url reachable", async () => {
    const server = createServer((socket) => socket.end());
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    const port = (server.address() as { port: number }).port;
    const closed = createServer();
    await new Promise<void>((done) => closed.listen(0, "127.0.0.1", done));
    const freePort = (closed.address() as { port: number }).port;
    await new Promise<void>((done) => closed.close(() => done()));
    try {
      const dir = tempDir("autolab-doctor-judges-");
      writeFileSync(
        join(dir, "program.md"),
        `---
name: doc
objective: { metric: rubric_score, direction: maximize }
run:
  command: node train.mjs
  budget: 5s
  evaluate:
    rubric: rubric.md
    grade: [train.mjs]
    judges:
      - { name: up, base_url: "http://127.0.0.1:${port}/v1", model: m }
      - { name: down, base_url: "http://127.0.0.1:${freePort}/v1", model: m }
      - { name: claude, provider: anthropic, model: claude-x }
files: { editable: [train.mjs], protected: [rubric.md] }
---
Directions.
`,
      );
      writeFileSync(join(dir, "train.mjs"), "console.log('x');\n");
      writeFileSync(join(dir, "rubric.md"), "## a\nText.\n- 0: no\n- 1: yes\n");
      const checks = await checkJudges(fakeEnv({ env: {} }), loaded(dir));
      expect(checks.map((c) => [c.name, c.status])).toEqual([
        ["judge up", "ok"],
        ["judge down", "fail"],
        ["judge claude", "fail"],
      ]);
      expect(checks[1]?.fix).toContain("run.evaluate.judges");
      expect(checks[2]?.detail).toContain("ANTHROPIC_API_KEY");
      const withKey = await checkJudges(fakeEnv({ env: { ANTHROPIC_API_KEY: "k" } }), loaded(dir));
      expect(withKey[2]).toMatchObject({
        status: "ok",
        detail: "anthropic claude-x (key in ANTHROPIC_API_KEY)",
      });
      // runDoctor includes them.
      const all = await runDoctor(dir, fakeEnv({ env: {} }));
      expect(all.filter((c) => c.name.startsWith("judge ")).map((c) => c.name)).toEqual([
        "judge up",
        "judge down",
        "judge claude",
      ]);
    } finally {
      server.close();
    }
  });
});
