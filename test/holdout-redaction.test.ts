/**
 * Holdout values never reach an agent: not through the notebook views (buildContext, toView,
 * failures), not through `autolab context` / `autolab failures`, not through the prompts of the
 * cli and llm researchers, not through the MCP tools — while `autolab status`, for people,
 * still shows the holdout canary's alarm with its values.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildPrompt } from "../src/agents/cli/prompt.ts";
import { researcherInstructions } from "../src/agents/llm/instructions.ts";
import { createScriptedAgent, type ScriptedStep } from "../src/agents/scripted-agent.ts";
import { createRun } from "../src/app/create-run.ts";
import { statusOf } from "../src/app/status.ts";
import type { LoopEvent } from "../src/core/events.ts";
import type { ExperimentRecord, RunRecord } from "../src/core/ledger.ts";
import type { Program, ProposalContext } from "../src/core/types.ts";
import {
  agentAlarms,
  buildAdvisorContext,
  buildContext,
  failuresText,
  HOLDOUT_REDACTED,
  holdoutNames,
  redactHoldouts,
  redactHoldoutsDeep,
  toView,
} from "../src/core/views.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { writeRun } from "./helpers/notebook-fixture.ts";
import { runCli } from "./helpers/toy-project.ts";

const CLI = resolve(dirname(fileURLToPath(import.meta.url)), "..", "src", "cli", "main.ts");
const ID = ["-c", "user.name=t", "-c", "user.email=t@localhost"];
const git = (cwd: string, ...args: string[]) =>
  execFileSync("git", [...ID, ...args], { cwd, encoding: "utf8" });

/** A holdout value the trials leak, in every format a trial or a reason can carry it. */
const LEAK = "4242.4242";
const LEAK_LINES = [
  `holdout_score: ${LEAK}`,
  `METRIC holdout_score=${LEAK} step=300`,
  `{"holdout_score": ${LEAK}, "step": 300}`,
  `eval done, holdout_score ${LEAK} after 3 epochs`,
];
/** Anything that looks like a holdout value: the leak, the canary's values (7770–7779), the name with a number. */
function expectNoHoldoutValue(text: string): void {
  expect(text).not.toContain("4242");
  expect(text).not.toMatch(/777\d\.\d/);
  expect(text).not.toMatch(/holdout_score\W{0,4}[-+]?\d/);
}

describe("redactHoldouts", () => {
  const H = ["test_bpb", "loss"];
  it("replaces a metric line naming a holdout, in the three dialects, whole", () => {
    for (const line of [
      "test_bpb: 2.1",
      "  test_bpb :  2.1e-3\r",
      "METRIC val_bpb=2.9 test_bpb=2.1 step=3",
      '{"val_bpb": 2.9, "test_bpb": 2.1}',
      "{'test_bpb': 2.1}",
      "test_bpb: nan",
      "test_bpb: -Infinity",
    ]) {
      expect(redactHoldouts(line, H)).toBe(HOLDOUT_REDACTED);
    }
  });

  it("replaces a holdout's name with a number after it to the end of the line, and a number right before it", () => {
    expect(redactHoldouts("step 100 | loss 2.3 | lr 0.1", H)).toBe(`step 100 | ${HOLDOUT_REDACTED}`);
    expect(redactHoldouts("holdout test_bpb moved 3 → 3.08 (5.7σ worse)", H)).toBe(
      `holdout ${HOLDOUT_REDACTED}`,
    );
    expect(redactHoldouts("exited with code 1: got 2.1 test_bpb", H)).toBe(
      `exited with code 1: got ${HOLDOUT_REDACTED}`,
    );
    expect(redactHoldouts('  "test_bpb": 2.1,', H)).toBe(`  "${HOLDOUT_REDACTED}`);
  });

  it("leaves other metrics, mentions without a number, and longer names alone", () => {
    for (const line of [
      "val_bpb: 2.9",
      "val_loss: 2.3",
      "test_bpb_v2: 3",
      "loading the test_bpb split",
      "KeyError('test_bpb')",
      "no numbers here",
    ]) {
      expect(redactHoldouts(line, H)).toBe(line);
    }
    expect(redactHoldouts("test_bpb: 2.1", [])).toBe("test_bpb: 2.1");
    const multi = "step 1\ntest_bpb: 2.1\nval_bpb: 2.9\n";
    expect(redactHoldouts(multi, H)).toBe(`step 1\n${HOLDOUT_REDACTED}\nval_bpb: 2.9\n`);
    // Idempotent, and a name with regex characters is taken literally.
    expect(redactHoldouts(redactHoldouts(multi, H), H)).toBe(redactHoldouts(multi, H));
    expect(redactHoldouts("eval.acc 0.9\nevalXacc 0.9", ["eval.acc"])).toBe(
      `${HOLDOUT_REDACTED}\nevalXacc 0.9`,
    );
  });

  it("takes names from the program and from the run's contract", () => {
    const program = { metrics: { holdout: ["a"] } } as Pick<Program, "metrics">;
    const run = { contract: { "metrics.holdout": ["b", "a"] } } as unknown as RunRecord;
    expect(holdoutNames(program, run)).toEqual(["a", "b"]);
    expect(redactHoldouts("b: 1", program)).toBe("b: 1");
    expect(redactHoldouts("b: 1", holdoutNames(program, run))).toBe(HOLDOUT_REDACTED);
  });

  it("agentAlarms drops the holdout canary's alarms and redacts the rest; redactHoldoutsDeep walks JSON", () => {
    const alarms = [
      { kind: "overfitting:test_bpb", reason: "overfitting: … test_bpb moved 3 → 3.08" },
      { kind: "leakage:test_bpb", reason: "leakage: holdout test_bpb improved" },
      { kind: "too-noisy", reason: "too noisy: val_bpb σ 2" },
      { kind: "proxy:30s→2m", reason: "proxy stopped predicting (test_bpb 2.2)" },
    ];
    expect(agentAlarms(alarms, H)).toEqual([
      { kind: "too-noisy", reason: "too noisy: val_bpb σ 2" },
      { kind: "proxy:30s→2m", reason: `proxy stopped predicting (${HOLDOUT_REDACTED}` },
    ]);
    expect(redactHoldoutsDeep({ a: ["test_bpb: 1", { b: "loss 2" }], n: 3, z: null }, H)).toEqual({
      a: [HOLDOUT_REDACTED, { b: HOLDOUT_REDACTED }],
      n: 3,
      z: null,
    });
  });
});

describe("agent views of a notebook whose trials and alarms carry holdout values", () => {
  it("buildContext, toView, failuresText and both researchers' prompts show none of them", () => {
    const dir = mkdtempSync(join(tmpdir(), "autolab-redact-"));
    const ledger = new SqliteLedger(join(dir, "lab.db"));
    const run = writeRun(ledger, {
      metric: "score",
      holdout: ["holdout_score"],
      experiments: [
        { action: "keep", metric: 5, metrics: { holdout_score: 7772.25 } },
        { action: "keep", metric: 3, metrics: { holdout_score: 7774.25 } },
        ...LEAK_LINES.map((line) => ({
          action: "crash" as const,
          hypothesis: `try ${line.length}`,
          reason: `exited with code 1: ${line}`,
          logTail: `step 1\n${LEAK_LINES.join("\n")}\nTraceback (most recent call last)\n`,
          metrics: { holdout_score: Number(LEAK) },
        })),
        {
          action: "reject",
          hypothesis: "mixed",
          reason: `constraint: holdout_score ${LEAK} > 1\nsecond line ${LEAK} holdout_score`,
        },
      ],
    });
    ledger.addNote(
      run.id,
      null,
      `ALARM overfitting:holdout_score: holdout holdout_score moved 7772.25 → 7774.25`,
    );
    const exps = ledger.listExperiments(run.id);
    ledger.close();
    const program = {
      name: "redact",
      objective: { metric: "score", direction: "minimize" },
      files: { editable: ["value.mjs"], protected: [], holdout: [] },
      metrics: { holdout: ["holdout_score"] },
      run: { command: "node run.mjs", budgetMs: 5000 },
      directions: `Keep holdout_score below ${LEAK}.`,
    } as unknown as Program;

    const context = buildContext(program, run, exps);
    expect(context).toContain("## Failures");
    expect(context).toContain(HOLDOUT_REDACTED);
    expectNoHoldoutValue(context);
    for (const e of exps) expectNoHoldoutValue(JSON.stringify(toView(e, program)));
    const failures = failuresText(exps, program);
    expect(failures).toContain("#2 crash");
    expect(failures).toContain("Traceback");
    expectNoHoldoutValue(failures);
    // The contract's holdouts count even when program.md no longer lists them.
    const drifted = { ...program, metrics: { holdout: [] } } as unknown as Program;
    expectNoHoldoutValue(buildContext(drifted, run, exps));
    // The advisor's brief (docs/advisor.md), with an earlier answer that quoted a log line.
    const quoted = {
      id: 1,
      runId: run.id,
      trigger: "2 discards in a row",
      decided: 2,
      afterN: 2,
      agent: "claude",
      verdict: "garbage" as const,
      ideas: [],
      reason: `no IDEA: line in: ${LEAK_LINES[0]}`,
      createdAt: "",
    };
    for (const p of [program, drifted]) {
      const brief = buildAdvisorContext(p, run, exps, { trigger: "x", advice: [quoted] });
      expect(brief).toContain("## Your earlier advice");
      expectNoHoldoutValue(brief);
      const ctx: ProposalContext = {
        worktree: dir,
        program: p,
        best: { n: 1, metric: 3 },
        history: [],
        contextText: brief,
        logDir: dir,
        task: "advise",
      };
      expectNoHoldoutValue(buildPrompt(ctx));
      expectNoHoldoutValue(researcherInstructions(ctx, 10));
    }

    // The researchers' prompts, even from a context text built without the views.
    for (const contextText of [context, `${LEAK_LINES.join("\n")}\nholdout_score moved 7772.25 → 7774.25`]) {
      const ctx: ProposalContext = {
        worktree: dir,
        program,
        best: { n: 1, metric: 3 },
        history: exps.map((e) => toView(e, program)),
        contextText,
        logDir: dir,
      };
      expectNoHoldoutValue(buildPrompt(ctx));
      expectNoHoldoutValue(researcherInstructions(ctx, 10));
    }
  });
});

/**
 * A real run: the score is X from value.mjs (plus seeded noise); the evaluator prints the holdout
 * 7777.25 − X, which worsens as the score improves: the overfitting canary fires. The last
 * change crashes after printing a holdout value in every format (stderr's last line becomes
 * the crash reason).
 */
function canaryProject(): string {
  const dir = mkdtempSync(join(tmpdir(), "autolab-canary-"));
  writeFileSync(join(dir, "value.mjs"), "export const X = 5;\n");
  writeFileSync(
    join(dir, "run.mjs"),
    `import { writeFileSync } from "node:fs";
import { X } from "./value.mjs";
const seed = Number(process.env.AUTOLAB_SEED ?? 0);
writeFileSync("out.txt", String(X + 0.01 * (((seed * 7919 + 13) % 101) / 50 - 1)));
`,
  );
  writeFileSync(
    join(dir, "evaluate.mjs"),
    `import { readFileSync } from "node:fs";
const x = Number(readFileSync("out.txt", "utf8"));
console.log(\`score: \${x}\`);
console.log(\`holdout_score: \${7777.25 - x}\`);
`,
  );
  writeFileSync(join(dir, ".gitignore"), "out.txt\n");
  writeFileSync(
    join(dir, "program.md"),
    `---
name: canary
objective: { metric: score, direction: minimize }
run:
  command: node run.mjs
  evaluate: node evaluate.mjs
  budget: 10s
files:
  editable: [value.mjs]
  protected: [run.mjs, evaluate.mjs]
outputs: [out.txt]
metrics:
  holdout: [holdout_score]
acceptance: noise
---
Lower X.
`,
  );
  git(dir, "init", "-q", "-b", "main");
  git(dir, "add", "-A");
  git(dir, "commit", "-qm", "init");
  return dir;
}

const setX = (x: number): ScriptedStep["edits"] => ({ "value.mjs": `export const X = ${x};\n` });
const LEAKY_VALUE = `${LEAK_LINES.map((l) => `console.log(${JSON.stringify(l)});`).join("\n")}
console.error(${JSON.stringify(`holdout_score: ${LEAK}`)});
process.exit(1);
export const X = 0;
`;

describe("a run whose canary fires and whose trial prints holdout values", () => {
  let dir = "";
  const events: LoopEvent[] = [];
  const contexts: ProposalContext[] = [];
  let exps: ExperimentRecord[] = [];
  let run: RunRecord;
  let program: Program;
  const clients: Client[] = [];

  beforeAll(async () => {
    dir = canaryProject();
    const scripted = createScriptedAgent([
      { hypothesis: "X 5 → 3", edits: setX(3) },
      { hypothesis: "X 3 → 1", edits: setX(1) },
      { hypothesis: "X 1 → 0.5", edits: setX(0.5) },
      { hypothesis: "print everything and crash", edits: { "value.mjs": LEAKY_VALUE } },
      { hypothesis: "X 0.5 → 0.4", edits: setX(0.4) },
    ]);
    const outcome = await createRun({
      program: dir,
      tag: "c",
      maxExperiments: 5,
      agent: {
        name: "peek",
        propose(ctx) {
          contexts.push(ctx);
          return scripted.propose(ctx);
        },
      },
      onEvent: (e) => events.push(e),
    });
    exps = outcome.experiments;
    run = outcome.run;
    program = outcome.lab.program;
    outcome.lab.ledger.close();
  }, 120_000);

  afterAll(async () => {
    for (const c of clients.splice(0)) await c.close();
  });

  it("raised the canary and recorded the crash with the leaked values (the setting of the test)", () => {
    expect(events.filter((e) => e.type === "alarm").map((e) => e.type === "alarm" && e.kind)).toContain(
      "overfitting:holdout_score",
    );
    const crash = exps.find((e) => e.decision?.action === "crash");
    expect(crash?.decision?.reason).toContain(`holdout_score: ${LEAK}`);
    const tail = crash?.trials.at(-1)?.result?.logTail ?? "";
    for (const line of LEAK_LINES) expect(tail).toContain(line);
    const ledger = new SqliteLedger(join(dir, ".autolab", "lab.db"));
    const notes = ledger.db.prepare("SELECT text FROM notes").all() as { text: string }[];
    ledger.close();
    expect(notes.map((n) => n.text).join("\n")).toMatch(/ALARM overfitting:holdout_score: .*777\d\.\d/);
    // The people's status shows it, values included.
    const status = statusOf(run, exps, program);
    expect(status.alarms.find((a) => a.kind === "overfitting:holdout_score")?.reason).toMatch(/777\d\.\d/);
  });

  it("the researcher's contexts, views and prompts carry none of them", () => {
    expect(contexts.length).toBe(5);
    const last = contexts.at(-1) as ProposalContext;
    expect(last.contextText).toContain("print everything and crash → crash");
    for (const ctx of contexts) {
      expectNoHoldoutValue(ctx.contextText);
      expectNoHoldoutValue(JSON.stringify(ctx.history));
      expectNoHoldoutValue(buildPrompt(ctx));
      expectNoHoldoutValue(researcherInstructions(ctx, 10));
    }
    expectNoHoldoutValue(buildContext(program, run, exps));
    expectNoHoldoutValue(failuresText(exps, program));
  });

  it("autolab context and autolab failures carry none of them; autolab status still shows the alarm", async () => {
    for (const args of [["context"], ["failures"], ["failures", "--json"]]) {
      const r = await runCli([...args, "-t", "c"], { cwd: dir });
      expect(r.code, r.stderr).toBe(0);
      expectNoHoldoutValue(r.stdout);
    }
    const failures = await runCli(["failures", "-t", "c"], { cwd: dir });
    expect(failures.stdout).toContain(HOLDOUT_REDACTED);
    const status = await runCli(["status", "-t", "c"], { cwd: dir });
    expect(status.stdout).toMatch(/ALARM overfitting:holdout_score: overfitting: .*777\d\.\d/);
  });

  it("the MCP tools carry none of them, and a crash reported by run_experiment is redacted too", async () => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [CLI, "mcp", "-p", dir, "-t", "c"],
      stderr: "pipe",
      // The SDK passes only a few variables by default: the tests' knowledge store must reach it.
      env: { ...getDefaultEnvironment(), AUTOLAB_KNOWLEDGE: process.env.AUTOLAB_KNOWLEDGE as string },
    });
    const client = new Client({ name: "test-agent", version: "1.0.0" });
    await client.connect(transport);
    clients.push(client);
    const call = async (name: string, args: Record<string, unknown> = {}) => {
      const res = (await client.callTool({ name, arguments: args })) as { content: { text: string }[] };
      return res.content.map((c) => c.text).join("\n");
    };
    const context = await call("context");
    expect(context).toContain("## Failures");
    expectNoHoldoutValue(context);
    const failures = await call("failures");
    expect(failures).toContain("crash");
    expectNoHoldoutValue(failures);
    const status = await call("status");
    expectNoHoldoutValue(status);
    const parsed = JSON.parse(status) as { alarms: { kind: string }[]; counts: { total: number } };
    expect(parsed.alarms.map((a) => a.kind)).not.toContain("overfitting:holdout_score");
    expect(parsed.counts.total).toBe(exps.length);

    writeFileSync(join(dir, ".autolab", "worktrees", "c", "value.mjs"), LEAKY_VALUE);
    const crashed = await call("run_experiment", { hypothesis: "crash again" });
    expect(crashed).toMatch(/: crash\./);
    expect(crashed).toContain(HOLDOUT_REDACTED);
    expectNoHoldoutValue(crashed);
    expect(await call("note", { text: "holdout looks fine" })).toBe("Noted.");
    expectNoHoldoutValue(await call("status"));
  }, 60_000);
});
