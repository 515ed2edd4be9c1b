import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createScriptedAgent, type ScriptedStep } from "../src/agents/scripted-agent.ts";
import { createRun } from "../src/app/create-run.ts";
import type { LoopEvent } from "../src/core/events.ts";
import { slotSeed } from "../src/core/trial-seeds.ts";
import { buildContext } from "../src/core/views.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { runScripted } from "./helpers/scripted-run.ts";
import { git, valueProject } from "./helpers/value-project.ts";

const setX = (x: number): ScriptedStep["edits"] => ({ "value.mjs": `export const X = ${x};\n` });
const project = valueProject;

const run = runScripted;

describe("the research loop", () => {
  it("keeps improvements, discards the rest, and the branch follows the best", async () => {
    const dir = project();
    const { experiments, events } = await run(dir, [
      { hypothesis: "X 5 → 3", edits: setX(3) },
      { hypothesis: "X 3 → 4", edits: setX(4) },
      { hypothesis: "X 3 → 1", edits: setX(1) },
    ]);
    expect(experiments.map((e) => [e.n, e.decision?.action])).toEqual([
      [0, "keep"],
      [1, "keep"],
      [2, "discard"],
      [3, "keep"],
    ]);
    expect(experiments[2]?.parentCommit).toBe(experiments[1]?.commit);
    expect(experiments[3]?.parentCommit).toBe(experiments[1]?.commit);
    expect(git(dir, "rev-parse", "autolab/t")).toBe(experiments[3]?.commit);
    // Every candidate stays reachable, whatever its fate.
    for (const e of experiments) expect(git(dir, "rev-parse", `refs/autolab/t/${e.n}`)).toBe(e.commit);
    expect(git(dir, "show", "autolab/t:value.mjs")).toBe("export const X = 1;");
    // The user's checkout is untouched.
    expect(readFileSync(join(dir, "value.mjs"), "utf8")).toBe("export const X = 5;\n");
    expect(experiments[2]?.decision?.mechanismConfirmed).toBe(false);
    expect(experiments[1]?.decision?.mechanismConfirmed).toBe(true);
    // Progress metrics stream as events.
    expect(events.some((e) => e.type === "progress" && e.name === "train_loss")).toBe(true);
  });

  it("writes the experiment row and the trial start before the trial runs", async () => {
    const dir = project();
    const seen: string[] = [];
    const { SqliteLedger } = await import("../src/ledger/sqlite-ledger.ts");
    const outcome = await createRun({
      program: dir,
      tag: "t",
      maxExperiments: 1,
      agent: createScriptedAgent([{ hypothesis: "X 5 → 2", edits: setX(2) }]),
      onEvent: (e) => {
        if (e.type !== "trial_started") return;
        const probe = new SqliteLedger(join(dir, ".autolab", "lab.db"));
        const run = probe.getRun("t");
        const exp = run ? probe.getExperiment(run.id, e.n) : undefined;
        seen.push(`${e.n}:${exp ? exp.trials.length : "missing"}`);
        probe.close();
      },
    });
    outcome.lab.ledger.close();
    expect(seen).toEqual(["0:1", "1:1"]);
  });

  it("rejects a candidate that edits a protected file, without running it, and restores the file", async () => {
    const dir = project();
    const { experiments, events } = await run(dir, [
      {
        hypothesis: "cheat",
        edits: { "evaluate.mjs": 'console.log("score: -1000");\n', ...setX(4) },
      },
      { hypothesis: "X 5 → 4", edits: setX(4) },
    ]);
    const cheat = experiments[1];
    expect(cheat?.decision?.action).toBe("reject");
    expect(cheat?.decision?.reason).toMatch(/scope: changed protected file evaluate\.mjs/);
    expect(cheat?.trials).toHaveLength(0);
    expect(events.filter((e) => e.type === "trial_started" && e.n === 1)).toHaveLength(0);
    // The attempt is on record, the best and the worktree are not affected.
    expect(git(dir, "show", `${cheat?.commit}:evaluate.mjs`)).toContain("-1000");
    const wt = join(dir, ".autolab", "worktrees", "t");
    expect(readFileSync(join(wt, "evaluate.mjs"), "utf8")).not.toContain("-1000");
    expect(experiments[2]?.decision?.action).toBe("keep");
    expect(experiments[2]?.decision?.metric).toBe(4);
  });

  it("rejects new files outside the editable set and empty proposals; records a crash and goes on", async () => {
    const dir = project();
    const { experiments } = await run(dir, [
      { hypothesis: "add a helper", edits: { "helper.mjs": "export {};\n", ...setX(4) } },
      { hypothesis: "nothing", edits: {} },
      { hypothesis: "empty the editable file", edits: { "value.mjs": "" } },
      { hypothesis: "X 5 → 4", edits: setX(4) },
    ]);
    expect(experiments[1]?.decision?.reason).toMatch(/non-editable file helper\.mjs/);
    expect(experiments[2]?.decision?.reason).toMatch(/^no change/);
    expect(experiments[3]?.decision?.action).toBe("crash");
    expect(experiments[3]?.decision?.reason).toMatch(/exit/);
    expect(experiments[4]?.decision?.action).toBe("keep");
    expect(existsSync(join(dir, ".autolab", "worktrees", "t", "helper.mjs"))).toBe(false);
  });

  it("rejects a symlinked editable file", async () => {
    const dir = project();
    const agent = createScriptedAgent([{ hypothesis: "link", edits: {} }]);
    const linking = {
      name: "linker",
      async propose(ctx: Parameters<typeof agent.propose>[0]) {
        const target = join(ctx.worktree, "value.mjs");
        execFileSync("rm", [target]);
        symlinkSync("/etc/hostname", target);
        return { hypothesis: "read the host name" };
      },
    };
    const outcome = await createRun({ program: dir, tag: "t", maxExperiments: 1, agent: linking });
    outcome.lab.ledger.close();
    expect(outcome.experiments[1]?.decision?.reason).toMatch(/symlinks: value\.mjs/);
  });

  it("rejects a candidate that violates a constraint, naming it", async () => {
    const dir = project({ constraints: ["mem_mb <= 350"] });
    const { experiments } = await run(dir, [{ hypothesis: "X 5 → 4", edits: setX(4) }]);
    // The baseline itself (mem 500) is not judged against constraints; the candidate is.
    expect(experiments[1]?.decision?.action).toBe("reject");
    expect(experiments[1]?.decision?.reason).toMatch(/constraint: mem_mb 400 > 350/);
  });

  it("stops with a clear error when the baseline fails", async () => {
    const dir = project({ command: "node does-not-exist.mjs" });
    await expect(run(dir, [{ hypothesis: "x", edits: setX(1) }])).rejects.toMatchObject({
      code: "BASELINE_FAILED",
    });
  });

  it("never shows holdout metrics in the agent's context", async () => {
    const dir = project();
    const seenContexts: string[] = [];
    const outcome = await createRun({
      program: dir,
      tag: "t",
      maxExperiments: 2,
      agent: {
        name: "peek",
        async propose(ctx) {
          seenContexts.push(ctx.contextText, JSON.stringify(ctx.history), JSON.stringify(ctx.best));
          writeFileSync(
            join(ctx.worktree, "value.mjs"),
            `export const X = ${4 - seenContexts.length / 3};\n`,
          );
          return { hypothesis: "lower X", mechanism: "smaller is better" };
        },
      },
    });
    const text = buildContext(outcome.lab.program, outcome.run, outcome.experiments);
    outcome.lab.ledger.close();
    for (const c of [...seenContexts, text]) {
      expect(c).not.toContain("holdout_score");
      expect(c).not.toContain("1000.125");
      expect(c).not.toContain("1005.125");
    }
    expect(text).toContain("Best: #2");
  });
});

describe("resuming a run", () => {
  it("refuses a changed contract but accepts changed directions", async () => {
    const dir = project();
    await run(dir, [{ hypothesis: "X 5 → 4", edits: setX(4) }]);
    const programFile = join(dir, "program.md");
    const original = readFileSync(programFile, "utf8");
    writeFileSync(programFile, original.replace("Lower X.", "Lower X, gently."));
    const ok = await run(dir, [{ hypothesis: "X 4 → 3", edits: setX(3) }], 2);
    expect(ok.experiments).toHaveLength(3);
    writeFileSync(programFile, original.replace("budget: 5s", "budget: 7s"));
    await expect(run(dir, [{ hypothesis: "X 3 → 2", edits: setX(2) }], 3)).rejects.toMatchObject({
      code: "PROGRAM_CHANGED",
      message: expect.stringContaining("run.budget: 5000 → 7000"),
    });
  });

  it("runs setup again when the worktree was recreated", async () => {
    const dir = project({ command: "node run.mjs" });
    const programFile = join(dir, "program.md");
    // Setup counts its runs in a directory outside the project, declared as a cache (writable).
    const scratch = mkdtempSync(join(tmpdir(), "autolab-setup-count-"));
    const counter = join(scratch, "setup-count");
    writeFileSync(
      programFile,
      readFileSync(programFile, "utf8")
        .replace(
          "  command:",
          `  setup: node -e "require('fs').appendFileSync('${counter}', 'x')"\n  command:`,
        )
        .replace("acceptance:", `sandbox: { caches: [${JSON.stringify(scratch)}] }\nacceptance:`),
    );
    git(dir, "commit", "-qam", "setup");
    await run(dir, [{ hypothesis: "X 5 → 4", edits: setX(4) }]);
    await run(dir, [{ hypothesis: "X 4 → 3", edits: setX(3) }], 2);
    expect(readFileSync(counter, "utf8")).toBe("x");
    execFileSync("rm", ["-rf", join(dir, ".autolab", "worktrees", "t")]);
    await run(dir, [{ hypothesis: "X 3 → 2", edits: setX(2) }], 3);
    expect(readFileSync(counter, "utf8")).toBe("xx");
  });
});

describe("a failing researcher", () => {
  it("records crashes and empty proposals as outcomes, then stops with a diagnosis after a streak", async () => {
    const { AgentFailure } = await import("../src/core/agent-failure.ts");
    const dir = project();
    let calls = 0;
    const flaky = {
      name: "flaky",
      async propose(ctx: { worktree: string }) {
        calls++;
        if (calls === 1) {
          writeFileSync(join(ctx.worktree, "value.mjs"), "export const X = 4;\n");
          return { hypothesis: "X 5 → 4" };
        }
        if (calls === 2) throw new AgentFailure("crashed", "exited with code 1: out of tokens", "tail");
        if (calls === 3) throw new AgentFailure("timeout", "no answer within 2s");
        if (calls === 4) return { hypothesis: "thinking only" };
        throw new AgentFailure("garbage", "no JSON summary in the output");
      },
    };
    const events: LoopEvent[] = [];
    await expect(
      createRun({ program: dir, tag: "t", maxExperiments: 20, agent: flaky, onEvent: (e) => events.push(e) }),
    ).rejects.toMatchObject({ code: "AGENT_FAILING", message: expect.stringContaining("5 times in a row") });
    const { SqliteLedger } = await import("../src/ledger/sqlite-ledger.ts");
    const ledger = new SqliteLedger(join(dir, ".autolab", "lab.db"));
    const exps = ledger.listExperiments(ledger.getRun("t")?.id ?? -1);
    ledger.close();
    expect(exps.map((e) => e.decision?.action)).toEqual([
      "keep",
      "keep",
      "crash",
      "crash",
      "reject",
      "crash",
      "crash",
    ]);
    expect(exps[2]?.decision?.reason).toBe("agent crashed: exited with code 1: out of tokens");
    expect(exps[3]?.hypothesis).toBe("(no proposal: the agent timed out)");
    expect(exps[4]?.decision?.reason).toMatch(/^no change/);
    // Every failed proposal still has a row and a ref, and the best is untouched.
    expect(git(dir, "rev-parse", "autolab/t")).toBe(exps[1]?.commit);
  });
});

describe("trustworthy progress in the loop", () => {
  const ledgerOf = async (dir: string) => {
    const { SqliteLedger } = await import("../src/ledger/sqlite-ledger.ts");
    const ledger = new SqliteLedger(join(dir, ".autolab", "lab.db"));
    const exps = ledger.listExperiments(ledger.getRun("t")?.id ?? -1);
    ledger.close();
    return exps;
  };

  it("noise-aware acceptance: repeats the baseline, re-runs results inside the noise, keeps only credible gains", async () => {
    const dir = project({ acceptance: "noise", noise: 0.05 });
    // (The result inside the noise comes last: in the budget's reserve, where it gets the full
    // test; earlier, while exploring, one unpromising trial ends it — the next test.)
    const {
      experiments,
      events,
      run: outcome,
    } = await run(
      dir,
      [
        { hypothesis: "X 5 → 3 (a real gain)", edits: setX(3) },
        { hypothesis: "X 3 → 9 (a clear loss)", edits: setX(9) },
        { hypothesis: "X 3 → 2.999 (inside the noise)", edits: setX(2.999) },
      ],
      3,
      // A secret whose fresh seeds give the tie a first trial inside the noise band (a first
      // trial is unpaired: with another, the tie may land 0.5σ worse and be a "clear loss").
      { seedKey: "b" },
    );
    const [base, real, loss, tiny] = experiments;
    // The baseline ran three times on the run's first three secret seeds (slots 0, 1, 2, which
    // trial k of every experiment shares): that is the first noise sample.
    expect(base?.trials.slice(0, 3).map((t) => t.seed)).toEqual([0, 1, 2].map((k) => slotSeed(outcome, k)));
    expect(base?.trials.slice(0, 3).map((t) => t.seed)).not.toEqual([0, 1, 2]);
    expect(base?.decision?.reason).toMatch(/mean of 3 trials/);
    // The incumbent is evidence too: it is re-measured on its next seeds so that it never has
    // fewer trials than a challenger asked for more (while exploring as many, in the reserve
    // twice as many): the gain, once it was the best, while the last candidate challenged it.
    // (On its challengers' seeds, after them, or its next slots: never one seed twice.)
    expect(new Set(base?.trials.map((t) => t.seed)).size).toBe(base?.trials.length);
    expect(real?.trials.length).toBeGreaterThanOrEqual(tiny?.trials.length ?? 99);
    const judgedOn = Number(/\((\d+) trials\) vs best/.exec(real?.decision?.reason ?? "")?.[1]);
    expect((real?.trials.length ?? 0) - judgedOn).toBeGreaterThan(0);
    // Progress says why the incumbent runs again: for which challenger.
    const again = events.filter((e) => e.type === "trial_started" && e.n === real?.n && e.attempt > judgedOn);
    expect(again.length).toBe((real?.trials.length ?? 0) - judgedOn);
    for (const e of again) expect(e.type === "trial_started" && e.against).toBe(tiny?.n);
    // A result inside the noise is re-run, and not kept.
    expect(tiny?.trials.length).toBeGreaterThan(1);
    expect(tiny?.decision?.action).toBe("discard");
    // A real gain is kept, and the value it carries is noise-corrected: its trials' mean shrunk
    // toward the best it beat — never its luckiest trial (see docs/trust.md).
    expect(real?.decision?.action).toBe("keep");
    // Every σ is explained: where it came from is in the reason the notebook keeps.
    expect(real?.decision?.reason).toMatch(/σ [\d.e-]+ pooled from \d+ configurations and \d+ trials/);
    // Its trials when it was decided (later, as the incumbent, it was re-measured).
    const values = (real?.trials ?? []).slice(0, judgedOn).map((t) => t.result?.metrics.score as number);
    expect(values.length).toBeGreaterThanOrEqual(2);
    const mean = values.reduce((a, b) => a + b, 0) / values.length;
    expect(real?.decision?.metric).toBeGreaterThanOrEqual(mean);
    expect(real?.decision?.metric).toBeGreaterThan(Math.min(...values));
    expect(real?.decision?.metric).toBeLessThan(base?.decision?.metric as number);
    // A clear loss costs one trial.
    expect(loss?.trials).toHaveLength(1);
    expect(loss?.decision?.action).toBe("discard");
  });

  it("knows the budget: while much of it is left, a candidate whose first trial is not promising costs one trial", async () => {
    const dir = project({ acceptance: "noise", noise: 0.05 });
    const { experiments } = await run(dir, [
      { hypothesis: "X 5 → 4.99 (inside the noise)", edits: setX(4.99) },
      { hypothesis: "X 5 → 4.98 (inside the noise, in the reserve)", edits: setX(4.98) },
    ]);
    const [, early, late] = experiments;
    expect(early?.trials).toHaveLength(1);
    expect(early?.decision?.reason).toMatch(/^not promising: .* while exploring \(50% of the budget left/);
    expect(late?.trials.length).toBeGreaterThan(1);
  });

  it("a deterministic objective: said once in the notebook, and values compared exactly", async () => {
    const dir = project({ acceptance: "noise", noise: 0 });
    const { experiments } = await run(dir, [
      { hypothesis: "X 5 → 4", edits: setX(4) },
      { hypothesis: "X 4 → 3", edits: setX(3) },
      { hypothesis: "X 3 → 3.5", edits: setX(3.5) },
    ]);
    const [, first, second, third] = experiments;
    // The first candidate is measured twice (one configuration's identical repeats prove nothing).
    expect(first?.trials.length).toBe(2);
    expect(first?.decision?.reason).toMatch(/deterministic: repeats of 2 configurations/);
    expect(second?.decision?.action).toBe("keep");
    expect(second?.trials.length).toBe(1);
    expect(third?.decision?.action).toBe("discard");
    const ledger = new SqliteLedger(join(dir, ".autolab", "lab.db"));
    const runId = ledger.getRun("t")?.id as number;
    const notes = ledger.listNotes(runId).filter((n) => n.text.startsWith("noise: deterministic"));
    ledger.close();
    expect(notes).toHaveLength(1);
  });

  it("compares trials that share a seed pairwise: a small gain that is the same on every seed is kept", async () => {
    // This project's noise is a function of AUTOLAB_SEED alone, so candidate and best trials
    // with one seed differ by exactly the change (common random numbers); unpaired, a 0.03 gain
    // against a seed-to-seed spread of ~0.03 is not credible.
    const dir = project({ acceptance: "noise", noise: 0.05 });
    const { experiments } = await run(dir, [{ hypothesis: "X 5 → 4.97", edits: setX(4.97) }]);
    const [base, cand] = experiments;
    expect(cand?.decision?.action).toBe("keep");
    expect(cand?.decision?.reason).toMatch(/paired on \d+ seeds/);
    // Its first trial ran on a fresh seed (no trial had used it), the rest are pairs: the best
    // has a trial on each of them (its slots, or re-measured on the candidate's).
    const first = cand?.trials[0]?.seed;
    expect(base?.trials.slice(0, 3).map((t) => t.seed)).not.toContain(first);
    const seeds = new Set(base?.trials.map((t) => t.seed));
    expect(cand?.trials.filter((t) => seeds.has(t.seed)).length).toBeGreaterThanOrEqual(2);
  });

  it("prunes a trial whose learning curve is confidently worse than the best's, and records it", async () => {
    const dir = project({ steps: 20, budget: "4s" });
    const { experiments } = await run(dir, [
      { hypothesis: "X 5 → 3", edits: setX(3) },
      { hypothesis: "X 3 → 9", edits: setX(9) },
    ]);
    const kept = experiments[1];
    expect(kept?.decision?.action).toBe("keep");
    expect(kept?.trials[0]?.result?.progress?.length).toBe(20);
    const bad = experiments[2];
    expect(bad?.trials[0]?.result?.status).toBe("pruned");
    expect(bad?.decision?.action).toBe("discard");
    expect(bad?.decision?.reason).toMatch(/^pruned: /);
    // It stopped well before running its 2 s of steps to the end.
    expect(bad?.trials[0]?.result?.progress?.length).toBeLessThan(20);
  });

  it("raises an overfitting alarm when the objective improves while the holdout worsens", async () => {
    const dir = project({ acceptance: "noise", noise: 0.01, holdout: "inverse" });
    const events: LoopEvent[] = [];
    const outcome = await createRun({
      program: dir,
      tag: "t",
      maxExperiments: 3,
      agent: createScriptedAgent([
        { hypothesis: "X 5 → 3", edits: setX(3) },
        { hypothesis: "X 3 → 1", edits: setX(1) },
        { hypothesis: "X 1 → 0.5", edits: setX(0.5) },
      ]),
      onEvent: (e) => events.push(e),
    });
    const { statusOf } = await import("../src/app/status.ts");
    const status = statusOf(outcome.run, outcome.experiments, outcome.lab.program);
    outcome.lab.ledger.close();
    const alarms = events.filter((e) => e.type === "alarm");
    expect(alarms.map((a) => a.type === "alarm" && a.kind)).toEqual(["overfitting:holdout_score"]);
    expect(status.alarms.map((a) => a.kind)).toContain("overfitting:holdout_score");
    expect(status.noise?.sigma).toBeGreaterThan(0);
    // The agent's context never mentions it (holdouts are not shown to agents).
    const exps = await ledgerOf(dir);
    expect(buildContext(outcome.lab.program, outcome.run, exps)).not.toMatch(/holdout/);
  });
});
