/**
 * Parallel slots, pipelined proposals, merging of winners found in parallel, roles, and resume
 * after kill -9 with several slots: real git worktrees, real processes, real SQLite.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { createScriptedAgent, type ScriptedStep } from "../src/agents/scripted-agent.ts";
import { createRun } from "../src/app/create-run.ts";
import { treeOf } from "../src/app/tree.ts";
import type { CrashPoint } from "../src/core/crash-points.ts";
import type { LoopEvent } from "../src/core/events.ts";
import { bestOf } from "../src/core/experiments.ts";
import { isTreeNode } from "../src/core/frontier.ts";
import type { ExperimentRecord } from "../src/core/ledger.ts";
import type { Agent, ProposalContext } from "../src/core/types.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { runScripted } from "./helpers/scripted-run.ts";
import { createToyProject, readLedger, runCli, spawnCli, type ToyProject } from "./helpers/toy-project.ts";
import { valueProject } from "./helpers/value-project.ts";

/** Whether pid is a live train.mjs process (a zombie has no command line; a reused pid another). */
function alive(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("train.mjs");
  } catch {
    return false;
  }
}

const ID = ["-c", "user.name=t", "-c", "user.email=t@localhost"];
const git = (cwd: string, ...args: string[]) =>
  execFileSync("git", [...ID, ...args], { cwd, encoding: "utf8" }).trim();

interface PairOptions {
  slots?: string;
  /** Extra frontmatter lines. */
  extra?: string;
  /** Milliseconds each trial sleeps, so trials of different candidates overlap. */
  sleepMs?: number;
}

/** A project scored by A + B (a.mjs and b.mjs editable): two independent improvements can merge. */
function pairProject(o: PairOptions = {}): string {
  const dir = mkdtempSync(join(tmpdir(), "autolab-par-"));
  writeFileSync(join(dir, "a.mjs"), "export const A = 5;\n");
  writeFileSync(join(dir, "b.mjs"), "export const B = 5;\n");
  writeFileSync(
    join(dir, "run.mjs"),
    `import { writeFileSync } from "node:fs";
import { A } from "./a.mjs";
import { B } from "./b.mjs";
await new Promise((r) => setTimeout(r, ${o.sleepMs ?? 600}));
writeFileSync("out.txt", String(A + B));
`,
  );
  writeFileSync(
    join(dir, "evaluate.mjs"),
    `import { readFileSync } from "node:fs";\nconsole.log(\`score: \${Number(readFileSync("out.txt", "utf8"))}\`);\n`,
  );
  writeFileSync(join(dir, ".gitignore"), "out.txt\n");
  writeFileSync(
    join(dir, "program.md"),
    `---
name: pair
objective: { metric: score, direction: minimize }
run:
  command: node run.mjs
  evaluate: node evaluate.mjs
  budget: 10s
files:
  editable: [a.mjs, b.mjs]
  protected: [run.mjs, evaluate.mjs]
outputs: [out.txt]
acceptance: greedy
slots: ${o.slots ?? "2"}
${o.extra ?? ""}---
Lower A + B.
`,
  );
  git(dir, "init", "-q", "-b", "main");
  git(dir, "add", "-A");
  git(dir, "commit", "-qm", "init");
  return dir;
}

const setA = (a: number): ScriptedStep => ({
  hypothesis: `A → ${a}`,
  edits: { "a.mjs": `export const A = ${a};\n` },
});
const setB = (b: number): ScriptedStep => ({
  hypothesis: `B → ${b}`,
  edits: { "b.mjs": `export const B = ${b};\n` },
});

const run = runScripted;

const interval = (e: ExperimentRecord) => {
  const t = e.trials[0];
  return { start: Date.parse(t?.startedAt ?? ""), end: Date.parse(t?.result?.finishedAt ?? "") };
};

const toys: ToyProject[] = [];
afterAll(() => {
  for (const t of toys) t.cleanup();
});

describe("parallel slots", () => {
  it("runs candidates at once on separate slots and worktrees; two independent wins both reach the best", async () => {
    const dir = pairProject();
    const { experiments: exps } = await run(dir, [setA(3), setB(2)], 2);
    const [e1, e2] = [exps[1] as ExperimentRecord, exps[2] as ExperimentRecord];
    // Both were built on the baseline and ran at the same time, on different slots.
    expect(e1.parentCommit).toBe(exps[0]?.commit);
    expect(e2.parentCommit).toBe(exps[0]?.commit);
    expect(new Set(exps.flatMap((e) => e.trials.map((t) => t.slot)))).toEqual(new Set([0, 1]));
    // Trials of different experiments overlapped (the first candidate may even run beside the
    // baseline, on the slot the baseline leaves free).
    const spans = exps.map(interval);
    const overlap = spans.some((a, i) => spans.some((b, j) => i < j && a.start < b.end && b.start < a.end));
    expect(overlap).toBe(true);
    expect(existsSync(join(dir, ".autolab", "worktrees", "t.s1"))).toBe(true);
    expect(existsSync(join(dir, ".autolab", "worktrees", "t.p0"))).toBe(true);

    // The first to finish was kept; the other beat its parent, was rebased onto the new best as
    // experiment 3 and evaluated again: both changes are in the best.
    const firstKept = [e1, e2].find((e) => e.decision?.action === "keep") as ExperimentRecord;
    const rebased = [e1, e2].find((e) => e !== firstKept) as ExperimentRecord;
    expect(rebased.decision?.action).toBe("discard");
    expect(rebased.decision?.reason).toMatch(/rebased onto it as #3, which is evaluated again/);
    const merged = exps[3] as ExperimentRecord;
    expect(merged.rebaseOf).toBe(rebased.n);
    expect(merged.parentCommit).toBe(firstKept.commit);
    expect(merged.decision?.action).toBe("keep");
    expect(merged.decision?.metric).toBe(5);
    expect(merged.trials).toHaveLength(1);
    expect(git(dir, "rev-parse", "autolab/t")).toBe(merged.commit);
    expect(git(dir, "show", "autolab/t:a.mjs")).toBe("export const A = 3;");
    expect(git(dir, "show", "autolab/t:b.mjs")).toBe("export const B = 2;");
    expect(git(dir, "rev-parse", "refs/autolab/t/3")).toBe(merged.commit);
  });

  it("proposes and starts candidates on free slots while the baseline is measured, judging them after it", async () => {
    // Greedy: the baseline is one trial on slot 0, so slot 1 is free from the start.
    const dir = pairProject({ sleepMs: 800 });
    const { experiments: exps } = await run(dir, [setA(4), setB(4)], 2);
    const base = exps[0] as ExperimentRecord;
    const baseDecided = Date.parse(base.decision?.decidedAt ?? "");
    const early = exps.filter((e) => e.n > 0 && Date.parse(e.trials[0]?.startedAt ?? "") < baseDecided);
    expect(early.length).toBeGreaterThan(0);
    for (const e of early) {
      expect(e.parentCommit).toBe(base.commit);
      expect(e.trials[0]?.slot).toBe(1);
      // Judged after the baseline, against it.
      expect(Date.parse(e.decision?.decidedAt ?? "")).toBeGreaterThanOrEqual(baseDecided);
      expect(e.decision?.reason).toMatch(/vs best 10 \(#0\)/);
    }
  });

  it("rejects a winner whose change conflicts with the new best as stale, naming the file", async () => {
    const dir = pairProject();
    const { experiments: exps } = await run(dir, [setA(3), setA(4)], 2);
    const decided = exps.slice(1).map((e) => e.decision?.action);
    expect(decided.filter((a) => a === "keep")).toHaveLength(1);
    const stale = exps.find((e) => e.decision?.action === "reject") as ExperimentRecord;
    expect(stale.decision?.reason).toMatch(/^stale: .*conflicts with the new best #\d+ in a\.mjs/);
    expect(exps.some((e) => e.rebaseOf !== undefined)).toBe(false);
  });

  it("rebases a tuner's conflicting knob values onto the new best instead of rejecting them", async () => {
    // The built-in optimizer sets every knob (LR, WIDTH) in train.mjs, so two candidates made
    // in parallel conflict line by line; every trial scores better than the last ("decreasing").
    const t = createToyProject({ slots: 2, score: "decreasing" });
    toys.push(t);
    const outcome = await createRun({ program: t.dir, tag: "t", maxExperiments: 4 });
    outcome.lab.ledger.close();
    const exps = outcome.experiments;
    expect(exps.some((e) => /conflicts/.test(e.decision?.reason ?? ""))).toBe(false);
    const merges = exps.filter((e) => e.rebaseOf !== undefined);
    expect(merges.length).toBeGreaterThan(0);
    for (const m of merges) {
      const original = exps.find((e) => e.n === m.rebaseOf) as ExperimentRecord;
      const best = exps.find((e) => e.commit === m.parentCommit) as ExperimentRecord;
      // The merge is the new best with the original's knob values, and nothing else.
      expect(m.params).toEqual({ ...best.params, ...original.params });
      const text = git(t.dir, "show", `${m.commit}:train.mjs`);
      expect(text).toContain(
        `const LR = ${git(t.dir, "show", `${original.commit}:train.mjs`).match(/const LR = (.*);/)?.[1]};`,
      );
      expect(git(t.dir, "diff", "--stat", best.commit, m.commit)).toMatch(/train\.mjs \| +[1-4] /);
    }
  });

  it("tells the judge the run's budget (--max-experiments), as the serial loop does", async () => {
    // The noise rule explores while more than 20% of the budget is left: a first trial inside
    // the noise that is not promising costs one trial and says so. Without the budget it would
    // get the full test (test/loop.test.ts "knows the budget" is the serial twin).
    const dir = valueProject({ acceptance: "noise", noise: 0.05 });
    writeFileSync(
      join(dir, "program.md"),
      readFileSync(join(dir, "program.md"), "utf8").replace("---\nLower", "slots: 2\n---\nLower"),
    );
    git(dir, "commit", "-qam", "two slots");
    const setX = (x: number): ScriptedStep => ({
      hypothesis: `X 5 → ${x}`,
      edits: { "value.mjs": `export const X = ${x};\n` },
    });
    // After the list, the agent repeats its last step: clear losses, one trial each.
    const { experiments: exps } = await run(dir, [setX(4.99), setX(6)], 10);
    expect(new Set(exps.flatMap((e) => e.trials.map((t) => t.slot)))).toEqual(new Set([0, 1]));
    expect(exps.filter((e) => e.n > 0 && e.rebaseOf === undefined)).toHaveLength(10);
    const inside = exps.find((e) => e.hypothesis === "X 5 → 4.99") as ExperimentRecord;
    // Judged before most of the run was proposed: at most 5 of the 10 experiments existed then
    // (how many depends on how fast the other slot's proposals came).
    expect(inside.decision?.reason).toMatch(
      /^not promising: .* while exploring \((50|60|70|80|90)% of the budget left/,
    );
    expect(inside.trials).toHaveLength(1);
  });

  it("never re-measures the incumbent twice on one seed when slots judge against it at once", async () => {
    // Three clearly better candidates start together; each asks for the incumbent to run on its
    // seeds (or the incumbent's next slot). Concurrent re-measurements must take different seeds: the same
    // seed twice is the same measurement twice (here the noise is a function of the seed).
    const dir = valueProject({ acceptance: "noise", noise: 0.05 });
    writeFileSync(
      join(dir, "program.md"),
      readFileSync(join(dir, "program.md"), "utf8").replace("---\nLower", "slots: 3\n---\nLower"),
    );
    git(dir, "commit", "-qam", "three slots");
    const setX = (x: number): ScriptedStep => ({
      hypothesis: `X 5 → ${x}`,
      edits: { "value.mjs": `export const X = ${x};\n` },
    });
    const { experiments: exps } = await run(dir, [setX(4), setX(3.9), setX(3.8), setX(6)], 6);
    const baseline = exps.find((e) => e.n === 0) as ExperimentRecord;
    expect(baseline.trials.length).toBeGreaterThan(3); // re-measured
    for (const e of exps) {
      const seeds = e.trials.filter((t) => t.result && t.result.status !== "interrupted").map((t) => t.seed);
      expect(new Set(seeds).size, `#${e.n} seeds ${seeds.join(", ")}`).toBe(seeds.length);
    }
  });

  it("--slots turns a serial program parallel for one invocation", async () => {
    const dir = pairProject({ sleepMs: 300 });
    writeFileSync(
      join(dir, "program.md"),
      readFileSync(join(dir, "program.md"), "utf8").replace("slots: 2\n", ""),
    );
    git(dir, "commit", "-qam", "serial program");
    const outcome = await createRun({
      program: dir,
      tag: "t",
      maxExperiments: 2,
      slots: 2,
      agent: createScriptedAgent([setA(4), setB(4)]),
    });
    outcome.lab.ledger.close();
    // Trials ran on both slots (a candidate may run beside the baseline on slot 1).
    const slots = outcome.experiments.flatMap((e) => e.trials.map((t) => t.slot));
    expect(new Set(slots)).toEqual(new Set([0, 1]));
  });

  it("discards a winner whose change the new best already holds (the same idea found twice)", async () => {
    const dir = pairProject();
    const { experiments: exps } = await run(dir, [setA(3), setA(3)], 2);
    const [e1, e2] = [exps[1] as ExperimentRecord, exps[2] as ExperimentRecord];
    const kept = [e1, e2].find((e) => e.decision?.action === "keep") as ExperimentRecord;
    const other = [e1, e2].find((e) => e !== kept) as ExperimentRecord;
    expect(other.decision?.action).toBe("discard");
    expect(other.decision?.reason).toMatch(
      new RegExp(`the same change is already in the new best #${kept.n}$`),
    );
    expect(exps).toHaveLength(3);
    expect(git(dir, "rev-parse", "autolab/t")).toBe(kept.commit);
  });

  it.skipIf(existsSync("/dev/nvidiactl"))(
    "sandboxed, slots that name GPUs on a machine without /dev/nvidia* stop with a clear message",
    async () => {
      const dir = pairProject({ slots: "{ gpus: [0, 1] }" });
      await expect(run(dir, [setA(4)], 1)).rejects.toThrow(
        /slots name GPUs \(0, 1\).*no \/dev\/nvidia\* device/,
      );
    },
  );

  it("gives each slot its GPU (CUDA_VISIBLE_DEVICES) and records the slot of every trial", async () => {
    // No GPU here: unsandboxed, the assignment of CUDA_VISIBLE_DEVICES is still what is tested.
    const dir = pairProject({ slots: "{ gpus: [2, 5] }", sleepMs: 300, extra: "sandbox: off\n" });
    const { experiments: exps } = await run(dir, [setA(4), setB(4), setA(2), setB(1)], 4);
    const trials = exps.flatMap((e) => e.trials);
    expect(trials.every((t) => t.slot === 0 || t.slot === 1)).toBe(true);
    for (const t of trials) {
      expect(t.env.CUDA_VISIBLE_DEVICES).toBe(t.slot === 0 ? "2" : "5");
      expect(t.env.AUTOLAB_SLOT).toBe(String(t.slot));
    }
    expect(new Set(trials.map((t) => t.slot)).size).toBe(2);
    const ledger = new SqliteLedger(join(dir, ".autolab", "lab.db"));
    const runRec = ledger.getRun("t");
    expect(runRec && ledger.listSessions(runRec.id).map((s) => s.slots)).toEqual([2]);
    ledger.close();
  });
});

describe("an organization of roles", () => {
  it("lets each role propose through its own agent, with its instructions and its editable subset", async () => {
    const dir = pairProject({ extra: "org: { roles: org/, policy: round-robin }\n", sleepMs: 200 });
    mkdirSync(join(dir, "org"));
    mkdirSync(join(dir, "tools"));
    // A command agent: lowers one constant by 1, says whether it saw its role's instructions,
    // and (for role b) also tries to edit a.mjs, outside its editable subset, on its 2nd call.
    writeFileSync(
      join(dir, "tools", "lower.mjs"),
      `import { readFileSync, writeFileSync, appendFileSync } from "node:fs";
const [file, name, promptFile] = process.argv.slice(2);
const prompt = readFileSync(promptFile, "utf8");
const src = readFileSync(file, "utf8");
const v = Number(/= (\\d+)/.exec(src)[1]);
writeFileSync(file, \`export const \${name} = \${v - 1};\\n\`);
const saw = prompt.includes("## Your role: " + (name === "A" ? "alpha" : "beta")) && prompt.includes("INSTRUCTIONS-" + name);
console.log(JSON.stringify({ hypothesis: \`\${name} \${v} → \${v - 1} (saw role: \${saw})\`, mechanism: "smaller is better" }));
`,
    );
    const role = (name: string, file: string, konst: string, editable: string) =>
      `---\nname: ${name}\ndescription: lowers ${konst}\nagent: { backend: command, command: "node tools/lower.mjs ${file} ${konst} {prompt_file}" }\neditable: [${editable}]\n---\nINSTRUCTIONS-${konst}: lower ${konst}.\n`;
    writeFileSync(join(dir, "org", "alpha.md"), role("alpha", "a.mjs", "A", "a.mjs"));
    // beta edits b.mjs but may only edit a.mjs: every proposal of beta is out of its scope.
    writeFileSync(join(dir, "org", "beta.md"), role("beta", "b.mjs", "B", "a.mjs"));
    git(dir, "add", "-A");
    git(dir, "commit", "-qm", "org");
    const outcome = await createRun({ program: dir, tag: "t", maxExperiments: 4 });
    outcome.lab.ledger.close();
    const exps = outcome.experiments.filter((e) => e.n > 0);
    const byRole = (r: string) => exps.filter((e) => e.role === r);
    expect(byRole("alpha").length).toBeGreaterThanOrEqual(2);
    expect(byRole("beta").length).toBeGreaterThanOrEqual(2);
    for (const e of byRole("alpha")) expect(e.hypothesis).toMatch(/saw role: true/);
    for (const e of byRole("beta").filter((x) => x.rebaseOf === undefined)) {
      expect(e.decision?.action).toBe("reject");
      expect(e.decision?.reason).toMatch(/scope: changed non-editable file b\.mjs/);
    }
    expect(byRole("alpha").some((e) => e.decision?.action === "keep")).toBe(true);
    expect(git(dir, "show", "autolab/t:b.mjs")).toBe("export const B = 5;");
  });

  it("refuses an org directory without role files, naming it", async () => {
    const dir = pairProject({ extra: "org: team/\n" });
    await expect(createRun({ program: dir, tag: "t", maxExperiments: 1 })).rejects.toThrow(
      /team.*holds no role files/,
    );
  });
});

/** pairProject driven by a command agent that lowers A on odd calls and B on even ones (a CLI run). */
function alternatingProject(): string {
  const dir = pairProject({
    extra: 'agent: { backend: command, command: "node tools/alt.mjs" }\n',
    sleepMs: 300,
  });
  mkdirSync(join(dir, "tools"));
  // The researcher is sandboxed (nothing outside its worktree and logs is writable): it
  // alternates by the experiment number in its prompt file's path (<logs>/<n>/agent/prompt.md).
  writeFileSync(
    join(dir, "tools", "alt.mjs"),
    `import { readFileSync, writeFileSync } from "node:fs";
const i = Number(/\\/(\\d+)\\/agent\\//.exec(process.env.AUTOLAB_PROMPT_FILE ?? "")?.[1] ?? 0);
const [file, name] = i % 2 === 1 ? ["a.mjs", "A"] : ["b.mjs", "B"];
const v = Number(/= (-?\\d+)/.exec(readFileSync(file, "utf8"))[1]);
writeFileSync(file, \`export const \${name} = \${v - 1};\\n\`);
console.log(JSON.stringify({ hypothesis: \`\${name} \${v} → \${v - 1}\` }));
`,
  );
  writeFileSync(join(dir, ".gitignore"), "out.txt\n.autolab-calls\n");
  git(dir, "add", "-A");
  git(dir, "commit", "-qm", "alternating agent");
  return dir;
}

describe("kill -9 of a run with several slots, then resume", () => {
  const N = 4;
  const cases: { point: CrashPoint; k: number; hooks?: boolean }[] = [
    { point: "after-commit", k: 2 },
    { point: "after-row", k: 3 },
    { point: "after-trial-start", k: 3 },
    { point: "after-trial-result", k: 3 },
    { point: "after-decision", k: 2 },
    // program.md hooks: a hook's row, whichever comes 4th (before or after hooks of two slots).
    { point: "after-hook", k: 4, hooks: true },
  ];
  for (const { point, k, hooks } of cases) {
    it(`${point}:${k}`, async () => {
      const t = createToyProject({
        slots: 2,
        sleepMs: 150,
        ...(hooks ? { hooks: { before: "echo before $AUTOLAB_N", after: "echo after $AUTOLAB_N" } } : {}),
      });
      toys.push(t);
      const crashed = await runCli(["run", "-n", String(N)], {
        cwd: t.dir,
        env: { AUTOLAB_CRASH_AT: `${point}:${k}` },
      });
      expect(crashed.signal, crashed.stdout + crashed.stderr).toBe("SIGKILL");
      for (let i = 0; i < 3; i++) {
        const r = await runCli(["run", "-n", String(N)], { cwd: t.dir });
        expect(r.stderr, r.stdout).not.toMatch(/internal error/);
        if (r.code === 0) break;
      }
      const db = readLedger(t.dir);
      const tag = db.runs[0]?.tag as string;
      // Nothing lost: every candidate ref has its row, every row its decision, every trial start its result.
      const refs = t
        .git(["for-each-ref", "--format=%(refname)", `refs/autolab/${tag}/`])
        .trim()
        .split("\n")
        .map((r) => Number(r.split("/").pop()));
      expect(new Set(db.experiments.map((e) => e.n))).toEqual(new Set(refs));
      expect(db.decisions).toHaveLength(db.experiments.length);
      expect(db.trialResults).toHaveLength(db.trialStarts.length);
      expect(db.experiments.filter((e) => e.n > 0 && e.rebase_of === null).length).toBeGreaterThanOrEqual(N);
      // The ratchet: kept experiments in order of n, each built on the previous one; the branch at the last.
      const kept = db.experiments
        .filter((e) => db.decisions.find((d) => d.experiment_id === e.id)?.action === "keep")
        .sort((a, b) => a.n - b.n);
      for (let i = 1; i < kept.length; i++) expect(kept[i]?.parent_commit).toBe(kept[i - 1]?.commit_sha);
      expect(t.git(["rev-parse", `autolab/${tag}`]).trim()).toBe(kept.at(-1)?.commit_sha);
      if (hooks) {
        // Every decided experiment had its after hook (once, or again where the kill cut it off).
        const sql = new DatabaseSync(join(t.dir, ".autolab", "lab.db"), { readOnly: true });
        const rows = sql.prepare("SELECT n, phase, status, output FROM hook_runs").all() as {
          n: number;
          phase: string;
          status: string;
          output: string;
        }[];
        sql.close();
        const after = new Set(rows.filter((h) => h.phase === "after").map((h) => h.n));
        const missing = db.experiments.filter((e) => !after.has(e.n)).map((e) => e.n);
        // At most the one experiment whose decision the kill separated from its after hook.
        expect(missing.length, `no after hook for ${missing.join(", ")}`).toBeLessThanOrEqual(1);
        expect(rows.every((h) => h.status === "ok" && h.output === `${h.phase} ${h.n}`)).toBe(true);
      }
    });
  }

  it("killed while both slots run trials: both are interrupted, their processes reaped, and run again", async () => {
    // Invocations 1 and 2 (the first two candidates) hang far beyond any budget.
    const t = createToyProject({ slots: 2, plan: ["ok", "hang", "hang"] });
    toys.push(t);
    const p = spawnCli(["run", "-n", "3"], { cwd: t.dir });
    await p.waitFor(/#2 trial 1 started/);
    await p.waitFor(/#1 trial 1 started/);
    p.child.kill("SIGKILL");
    expect((await p.done).signal).toBe("SIGKILL");
    const pids = t.invocations();
    const r = await runCli(["run", "-n", "3"], { cwd: t.dir });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const db = readLedger(t.dir);
    expect(db.decisions).toHaveLength(db.experiments.length);
    expect(db.trialResults).toHaveLength(db.trialStarts.length);
    const statuses = (n: number) => {
      const e = db.experiments.find((x) => x.n === n);
      return db.trialStarts
        .filter((s) => s.experiment_id === e?.id)
        .map((s) => db.trialResults.find((x) => x.trial_id === s.id)?.status);
    };
    // Each was run again after the interruption (the rerun's fate depends on which invocation
    // the toy counts it as: the hanging ones are 1 and 2, whatever order they started in).
    for (const n of [1, 2]) {
      expect(statuses(n)[0]).toBe("interrupted");
      expect(statuses(n)).toHaveLength(2);
    }
    // No trial process of the killed harness outlived the resume (hangs would run for minutes).
    const started = readFileSync(join(t.scratch, "invocations"), "utf8").trim().split("\n").map(Number);
    expect(started.length).toBeGreaterThanOrEqual(pids);
    for (const pid of started) expect(alive(pid), `trial process ${pid}`).toBe(false);
  });

  it("after-merge-commit:1 — the rebased winner is adopted, not merged twice", async () => {
    const dir = alternatingProject();
    const crashed = await runCli(["run", "-n", "2", "--tag", "t"], {
      cwd: dir,
      env: { AUTOLAB_CRASH_AT: "after-merge-commit:1" },
    });
    expect(crashed.signal, crashed.stdout + crashed.stderr).toBe("SIGKILL");
    const r = await runCli(["run", "-n", "2", "--tag", "t"], { cwd: dir });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const db = readLedger(dir);
    const merges = db.experiments.filter((e) => e.rebase_of !== null);
    expect(merges).toHaveLength(1);
    const merge = merges[0] as (typeof merges)[number];
    const original = db.experiments.find((e) => e.n === merge.rebase_of);
    const decision = (id: number | undefined) => db.decisions.find((d) => d.experiment_id === id);
    expect(decision(original?.id)?.action).toBe("discard");
    expect(decision(original?.id)?.reason).toMatch(new RegExp(`rebased onto it as #${merge.n}`));
    expect(decision(merge.id)?.action).toBe("keep");
    expect(db.decisions).toHaveLength(db.experiments.length);
    expect(git(dir, "show", "autolab/t:a.mjs") + git(dir, "show", "autolab/t:b.mjs")).toBe(
      "export const A = 4;export const B = 4;",
    );
  });
});

/**
 * valueProject (greedy, minimize X) with `frontier:` and `slots: 2` in program.md, each trial
 * sleeping 300 ms so candidates overlap and the best moves while others run.
 */
function parallelFrontierProject(frontier: string): string {
  const dir = valueProject();
  const p = join(dir, "program.md");
  writeFileSync(
    p,
    readFileSync(p, "utf8").replace("acceptance: greedy\n", `acceptance: greedy\n${frontier}\nslots: 2\n`),
  );
  const r = join(dir, "run.mjs");
  writeFileSync(r, `await new Promise((r) => setTimeout(r, 300));\n${readFileSync(r, "utf8")}`);
  git(dir, "commit", "-qam", "frontier with slots");
  return dir;
}

/**
 * Lowers X from whatever node it is given — by one, or by `offBest` when its notebook says the
 * frontier chose a node other than the best; its hypothesis names that node.
 */
function stepDownFrom(offBest = 1): Agent {
  return {
    name: "step-down",
    async propose(ctx: ProposalContext) {
      const file = join(ctx.worktree, "value.mjs");
      const x = Number(/X = (-?\d+)/.exec(readFileSync(file, "utf8"))?.[1]);
      const y = x - (ctx.contextText.includes("You build on kept node") ? offBest : 1);
      writeFileSync(file, `export const X = ${y};\n`);
      return { hypothesis: `X ${x} → ${y} on #${ctx.best.n}` };
    },
  };
}

const xAt = (dir: string, e: ExperimentRecord) =>
  Number(/X = (-?\d+)/.exec(git(dir, "show", `${e.commit}:value.mjs`))?.[1]);

/** What every parallel frontier run must hold, whatever the timing of its slots. */
function expectTreeRun(dir: string, exps: ExperimentRecord[], events: LoopEvent[]): void {
  // Nothing merged or rebased: a tree keeps its branches apart; every experiment decided once.
  expect(exps.filter((e) => e.rebaseOf !== undefined)).toEqual([]);
  expect(exps.every((e) => e.decision !== undefined)).toBe(true);
  for (const e of exps) {
    expect(events.filter((v) => v.type === "decision" && v.n === e.n).length, `#${e.n}`).toBeLessThanOrEqual(
      1,
    );
  }
  for (const e of exps.slice(1)) {
    const parent = exps.find((x) => x.commit === e.parentCommit);
    // The parent is recorded: an earlier kept node (a keep or a tree node), the one the
    // researcher was given, and the candidate is that node's X lowered by one.
    expect(parent, `#${e.n}'s parent`).toBeDefined();
    expect((parent as ExperimentRecord).n).toBeLessThan(e.n);
    expect(isTreeNode(parent as ExperimentRecord), `#${e.n}'s parent #${parent?.n}`).toBe(true);
    expect(e.hypothesis).toMatch(new RegExp(` on #${parent?.n}$`));
    expect(xAt(dir, e)).toBeLessThan(xAt(dir, parent as ExperimentRecord));
    expect(e.hypothesis).toBe(`X ${xAt(dir, parent as ExperimentRecord)} → ${xAt(dir, e)} on #${parent?.n}`);
    // Every candidate beats its parent: a keep or a tree node, never stale, never merged.
    expect(
      e.decision?.action === "keep" || e.decision?.treeNode === true,
      `#${e.n}: ${e.decision?.reason}`,
    ).toBe(true);
    expect(e.decision?.reason).not.toMatch(/stale|rebased/);
  }
  // The ratchet: keeps in order of n, each better than the one before; the branch at the last.
  const kept = exps.filter((e) => e.decision?.action === "keep");
  for (let i = 1; i < kept.length; i++) {
    const [prev, keep] = [kept[i - 1] as ExperimentRecord, kept[i] as ExperimentRecord];
    expect(keep.decision?.metric).toBeLessThan(prev.decision?.metric as number);
    // A keep grown on another branch than the best moved the ratchet sideways, saying so.
    if (keep.parentCommit !== prev.commit) {
      expect(keep.decision?.reason).toMatch(new RegExp(`; beats the best #${prev.n} \\(.*\\) too$`));
    }
  }
  // A candidate that beat the best too but was numbered before a best kept meanwhile stays a
  // tree node (keeps go in order of n).
  for (const e of exps.filter((x) => x.decision?.treeNode && /too, but/.test(x.decision.reason))) {
    const later = Number(/beats the best #(\d+)/.exec(e.decision?.reason ?? "")?.[1]);
    expect(later).toBeGreaterThan(e.n);
  }
  expect(git(dir, "rev-parse", "autolab/t")).toBe(bestOf(exps)?.commit);
  expect(readFileSync(join(dir, "value.mjs"), "utf8")).toBe("export const X = 5;\n");
}

describe("a branching frontier with parallel slots", () => {
  it("grows candidates from kept nodes other than the best on two slots; tree nodes, no merges, the branch on the best", async () => {
    const dir = parallelFrontierProject("frontier: { strategy: top_k, k: 3 }");
    const events: LoopEvent[] = [];
    const outcome = await createRun({
      program: dir,
      tag: "t",
      maxExperiments: 12,
      agent: stepDownFrom(),
      onEvent: (e) => events.push(e),
    });
    const exps = outcome.lab.ledger.listExperiments(outcome.run.id);
    outcome.lab.ledger.close();
    expect(exps).toHaveLength(13);
    // Both slots ran trials.
    expect(new Set(exps.flatMap((e) => e.trials.map((t) => t.slot)))).toEqual(new Set([0, 1]));
    expectTreeRun(dir, exps, events);
    // Some candidates grew from a node that was not the best when they were proposed (the
    // proposal_started event names it), and their recorded parent is that node.
    const branched = events.filter(
      (e): e is Extract<LoopEvent, { type: "proposal_started" }> =>
        e.type === "proposal_started" && e.parent !== undefined,
    );
    expect(branched.length).toBeGreaterThan(0);
    for (const b of branched) {
      const e = exps.find((x) => x.n === b.n) as ExperimentRecord;
      expect(e.parentCommit).toBe(exps.find((x) => x.n === b.parent)?.commit);
    }
    expect(exps.some((e) => e.decision?.treeNode === true)).toBe(true);
    // The tree report, GET /api/tree and the dashboard draw (app/tree.ts): every node under its parent.
    const tree = treeOf(outcome.run, exps);
    expect(tree.branched).toBe(true);
    for (const node of tree.nodes.slice(1)) {
      const e = exps.find((x) => x.n === node.n) as ExperimentRecord;
      expect(node.parent).toBe(exps.find((x) => x.commit === e.parentCommit)?.n);
    }
    expect(tree.nodes.filter((x) => x.best).map((x) => x.n)).toEqual([bestOf(exps)?.n]);
  });

  it("a candidate grown on another branch that beats the best moves the ratchet sideways, as serially", async () => {
    const dir = parallelFrontierProject("frontier: { strategy: top_k, k: 3 }");
    const events: LoopEvent[] = [];
    const outcome = await createRun({
      program: dir,
      tag: "t",
      maxExperiments: 10,
      agent: stepDownFrom(3),
      onEvent: (e) => events.push(e),
    });
    const exps = outcome.lab.ledger.listExperiments(outcome.run.id);
    outcome.lab.ledger.close();
    expect(exps).toHaveLength(11);
    expectTreeRun(dir, exps, events);
    // At least one keep whose parent is not the keep before it: the ratchet moved sideways to
    // the candidate's own commit (not a merge of both branches).
    const kept = exps.filter((e) => e.decision?.action === "keep");
    const sideways = kept.filter((e, i) => i > 0 && e.parentCommit !== kept[i - 1]?.commit);
    expect(sideways.length).toBeGreaterThan(0);
    for (const e of sideways) {
      const prev = kept[kept.indexOf(e) - 1] as ExperimentRecord;
      expect(() => git(dir, "merge-base", "--is-ancestor", prev.commit, e.commit)).toThrow();
    }
  });

  it("a candidate left undecided on a tree node is judged against that node when the parallel run resumes", async () => {
    const dir = parallelFrontierProject("frontier: { strategy: top_k, k: 3 }");
    const first = await createRun({ program: dir, tag: "t", maxExperiments: 6, agent: stepDownFrom() });
    const ledger = first.lab.ledger;
    const before = ledger.listExperiments(first.run.id);
    const node = before.find((e) => e.decision?.treeNode);
    if (!node) throw new Error("the first session made no tree node");
    // As a kill after the experiment row leaves it: commit + ref + row, no trial, no decision.
    const wt = join(dir, ".autolab", "worktrees", "t");
    git(wt, "checkout", "-q", "--detach", node.commit);
    const x = xAt(dir, node) - 1;
    writeFileSync(join(wt, "value.mjs"), `export const X = ${x};\n`);
    git(wt, "commit", "-qam", "candidate on a tree node");
    const sha = git(wt, "rev-parse", "HEAD");
    const n = Math.max(...before.map((e) => e.n)) + 1;
    git(dir, "update-ref", `refs/autolab/t/${n}`, sha);
    ledger.addExperiment({
      runId: first.run.id,
      n,
      agent: "step-down",
      parentCommit: node.commit,
      commit: sha,
      ref: `refs/autolab/t/${n}`,
      hypothesis: `X ${x + 1} → ${x} on #${node.n}`,
      diff: { files: 1, insertions: 1, deletions: 1 },
    });
    ledger.close();

    const events: LoopEvent[] = [];
    const again = await createRun({
      program: dir,
      tag: "t",
      maxExperiments: n + 1,
      agent: stepDownFrom(),
      onEvent: (e) => events.push(e),
    });
    const exps = again.lab.ledger.listExperiments(first.run.id);
    again.lab.ledger.close();
    expect(exps.length).toBeGreaterThan(n + 1);
    const resumed = exps.find((e) => e.n === n) as ExperimentRecord;
    const best = bestOf(before) as ExperimentRecord;
    // Judged against #node (X one lower beats it), kept or a tree node by the best: not stale,
    // not rebased onto the best.
    expect(resumed.parentCommit).toBe(node.commit);
    if (x < (best.decision?.metric as number)) expect(resumed.decision?.action).toBe("keep");
    else expect(resumed.decision).toMatchObject({ action: "discard", treeNode: true });
    expectTreeRun(dir, exps, events);
  });
  it("an org's roles branch too: each proposal builds on a kept node, winners decided on the tree", async () => {
    const dir = pairProject({
      extra: "org: { roles: org/, policy: round-robin }\nfrontier: { strategy: top_k, k: 3 }\n",
      sleepMs: 200,
    });
    mkdirSync(join(dir, "org"));
    mkdirSync(join(dir, "tools"));
    // A command agent: lowers one constant by 1 in whatever node its worktree holds.
    writeFileSync(
      join(dir, "tools", "lower.mjs"),
      `import { readFileSync, writeFileSync } from "node:fs";
const [file, name] = process.argv.slice(2);
const v = Number(/= (-?\\d+)/.exec(readFileSync(file, "utf8"))[1]);
writeFileSync(file, \`export const \${name} = \${v - 1};\\n\`);
console.log(JSON.stringify({ hypothesis: \`\${name} \${v} → \${v - 1}\` }));
`,
    );
    const role = (name: string, file: string, konst: string) =>
      `---\nname: ${name}\ndescription: lowers ${konst}\nagent: { backend: command, command: "node tools/lower.mjs ${file} ${konst}" }\neditable: [${file}]\n---\nLower ${konst}.\n`;
    writeFileSync(join(dir, "org", "alpha.md"), role("alpha", "a.mjs", "A"));
    writeFileSync(join(dir, "org", "beta.md"), role("beta", "b.mjs", "B"));
    git(dir, "add", "-A");
    git(dir, "commit", "-qm", "org");
    const outcome = await createRun({ program: dir, tag: "t", maxExperiments: 6 });
    outcome.lab.ledger.close();
    const exps = outcome.experiments;
    expect(exps).toHaveLength(7);
    const score = (e: ExperimentRecord) =>
      ["a.mjs", "b.mjs"]
        .map((f) => Number(/= (-?\d+)/.exec(git(dir, "show", `${e.commit}:${f}`))?.[1]))
        .reduce((a, b) => a + b, 0);
    expect(new Set(exps.slice(1).map((e) => e.role))).toEqual(new Set(["alpha", "beta"]));
    for (const e of exps.slice(1)) {
      const parent = exps.find((x) => x.n < e.n && x.commit === e.parentCommit && isTreeNode(x));
      expect(parent, `#${e.n}'s parent`).toBeDefined();
      expect(score(e)).toBe(score(parent as ExperimentRecord) - 1);
      expect(e.rebaseOf).toBeUndefined();
      expect(
        e.decision?.action === "keep" || e.decision?.treeNode === true,
        `#${e.n}: ${e.decision?.reason}`,
      ).toBe(true);
    }
    expect(git(dir, "rev-parse", "autolab/t")).toBe(bestOf(exps)?.commit);
  });

  it("kill -9 after a decision of a branching parallel run, then resume: nothing lost, nothing merged, the branch on the best", async () => {
    const t = createToyProject({ slots: 2, sleepMs: 150 });
    toys.push(t);
    const p = join(t.dir, "program.md");
    writeFileSync(
      p,
      readFileSync(p, "utf8").replace("slots: 2\n", "slots: 2\nfrontier: { strategy: top_k, k: 3 }\n"),
    );
    git(t.dir, "commit", "-qam", "frontier");
    const crashed = await runCli(["run", "-n", "6"], {
      cwd: t.dir,
      env: { AUTOLAB_CRASH_AT: "after-decision:4" },
    });
    expect(crashed.signal, crashed.stdout + crashed.stderr).toBe("SIGKILL");
    const r = await runCli(["run", "-n", "6"], { cwd: t.dir });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const db = readLedger(t.dir);
    const tag = db.runs[0]?.tag as string;
    const refs = t
      .git(["for-each-ref", "--format=%(refname)", `refs/autolab/${tag}/`])
      .trim()
      .split("\n")
      .map((x) => Number(x.split("/").pop()));
    expect(new Set(db.experiments.map((e) => e.n))).toEqual(new Set(refs));
    expect(db.decisions).toHaveLength(db.experiments.length);
    expect(db.trialResults).toHaveLength(db.trialStarts.length);
    expect(db.experiments.filter((e) => e.rebase_of !== null)).toEqual([]);
    const sql = new DatabaseSync(join(t.dir, ".autolab", "lab.db"), { readOnly: true });
    const treeNodes = new Set(
      (
        sql.prepare("SELECT experiment_id FROM decisions WHERE tree_node = 1").all() as {
          experiment_id: number;
        }[]
      ).map((d) => d.experiment_id),
    );
    sql.close();
    const decision = (id: number) => db.decisions.find((d) => d.experiment_id === id);
    const nodes = db.experiments.filter((e) => decision(e.id)?.action === "keep" || treeNodes.has(e.id));
    // Every candidate grew from an earlier kept node of the tree.
    for (const e of db.experiments.filter((x) => x.n > 0)) {
      expect(
        nodes.some((x) => x.n < e.n && x.commit_sha === e.parent_commit),
        `#${e.n}`,
      ).toBe(true);
    }
    // Keeps in order of n, each better than the last; the branch at the last keep.
    const kept = db.experiments.filter((e) => decision(e.id)?.action === "keep").sort((a, b) => a.n - b.n);
    for (let i = 1; i < kept.length; i++) {
      expect(decision(kept[i]?.id as number)?.metric).toBeLessThan(
        decision(kept[i - 1]?.id as number)?.metric as number,
      );
    }
    expect(t.git(["rev-parse", `autolab/${tag}`]).trim()).toBe(kept.at(-1)?.commit_sha);
  });
});
