/**
 * The advisor (docs/advisor.md) in real runs: real git, real processes, real SQLite. The
 * researcher is scripted; the advisor is a scripted agent (or the `command` backend through the
 * CLI), asked after discards in a row or on a plateau, in the serial loop and with slots.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createScriptedAgent, type ScriptedStep } from "../src/agents/scripted-agent.ts";
import { createRun } from "../src/app/create-run.ts";
import { revisitOf } from "../src/core/advisor.ts";
import { AgentFailure } from "../src/core/agent-failure.ts";
import type { LoopEvent } from "../src/core/events.ts";
import type { Agent, Proposal, ProposalContext } from "../src/core/types.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { probeSandbox } from "../src/runner/sandbox.ts";
import { runCli } from "./helpers/toy-project.ts";
import { git, valueProject } from "./helpers/value-project.ts";

const setX = (x: number): ScriptedStep["edits"] => ({ "value.mjs": `export const X = ${x};\n` });

/** A value project (score = X, minimize, baseline 5) whose program.md has `advisor:` (and maybe `slots:`). */
function project(advisor: string, extra = ""): string {
  const dir = valueProject();
  const path = join(dir, "program.md");
  writeFileSync(
    path,
    readFileSync(path, "utf8").replace("---\nLower", `advisor: ${advisor}\n${extra}---\nLower`),
  );
  git(dir, "commit", "-qam", "advisor");
  return dir;
}

/** An advisor whose answers are given in order (the last repeats); records every context it got. */
function advisor(
  answers: Array<Proposal | ((ctx: ProposalContext) => Promise<Proposal>)>,
): Agent & { contexts: ProposalContext[] } {
  const contexts: ProposalContext[] = [];
  return {
    name: "scripted-advisor",
    contexts,
    async propose(ctx) {
      contexts.push(ctx);
      const a = answers[Math.min(contexts.length - 1, answers.length - 1)];
      if (!a) throw new Error("no answer");
      return typeof a === "function" ? a(ctx) : a;
    },
  };
}

/** A scripted researcher that also keeps the context text of every proposal. */
function researcher(steps: ScriptedStep[]): Agent & { texts: string[] } {
  const inner = createScriptedAgent(steps);
  const texts: string[] = [];
  return {
    name: "scripted",
    texts,
    propose(ctx) {
      texts.push(ctx.contextText);
      return inner.propose(ctx);
    },
  };
}

function notebook(dir: string) {
  const ledger = new SqliteLedger(join(dir, ".autolab", "lab.db"));
  const run = ledger.getRun("t");
  if (!run) throw new Error("no run");
  const out = { exps: ledger.listExperiments(run.id), advice: ledger.listAdvice(run.id) };
  ledger.close();
  return out;
}

describe("the advisor", () => {
  it("is asked after N discards in a row; its stop ends the run cleanly, naming it and its reason", async () => {
    const dir = project("{ agent: claude, after_discards: 2 }");
    const adv = advisor([{ hypothesis: "STOP: X cannot go lower than the best without breaking run.mjs" }]);
    const r = researcher([
      { hypothesis: "X 5 → 6", edits: setX(6) },
      { hypothesis: "X 5 → 7", edits: setX(7) },
      { hypothesis: "X 5 → 8", edits: setX(8) },
    ]);
    const events: LoopEvent[] = [];
    const outcome = await createRun({
      program: dir,
      tag: "t",
      maxExperiments: 10,
      agent: r,
      advisor: adv,
      onEvent: (e) => events.push(e),
    });
    outcome.lab.ledger.close();
    expect(outcome.stoppedBecause).toBe(
      "the advisor (scripted-advisor) stopped the run after #2: X cannot go lower than the best without breaking run.mjs",
    );
    const { exps, advice } = notebook(dir);
    // Two discards, then the advisor; nothing proposed after its stop; everything decided.
    expect(exps.map((e) => [e.n, e.decision?.action])).toEqual([
      [0, "keep"],
      [1, "discard"],
      [2, "discard"],
    ]);
    expect(r.texts).toHaveLength(2);
    expect(advice).toMatchObject([
      { verdict: "stop", trigger: "2 discards in a row", afterN: 2, decided: 2, agent: "scripted-advisor" },
    ]);
    expect(adv.contexts[0]?.task).toBe("advise");
    expect(events.filter((e) => e.type === "advice")).toHaveLength(1);
    // The branch holds the best and the worktree is clean.
    expect(git(dir, "rev-parse", "autolab/t")).toBe(exps[0]?.commit);
    expect(git(join(dir, ".autolab", "worktrees", "t"), "status", "--porcelain")).toBe("");

    // status, the report and the dashboard's data (the CLI, another process) say why it stopped.
    const status = await runCli(["status"], { cwd: dir });
    expect(status.stdout).toContain("Stopped by the advisor (scripted-advisor) after #2: X cannot go lower");
    const json = JSON.parse((await runCli(["status", "--json"], { cwd: dir })).stdout);
    expect(json.advisor).toMatchObject({
      asked: 1,
      stop: { reason: expect.stringContaining("X cannot go lower") },
    });
    expect((await runCli(["report"], { cwd: dir })).code).toBe(0);
    const report = readFileSync(join(dir, ".autolab", "reports", "t", "report.md"), "utf8");
    expect(report).toContain("**Stopped:** the advisor (scripted-advisor) stopped the run after #2");
    expect(report).toContain("- after #2 (2 discards in a row), scripted-advisor: STOP: X cannot go lower");
  });

  it("puts its ideas into the next researcher's context, marked as its own; a revisit is marked", async () => {
    const dir = project("{ agent: claude, after_discards: 2 }");
    const adv = advisor([{ hypothesis: "IDEA: set X to 1\nIDEA: revisit #1: X = 6 lost to #0 only" }]);
    const r = researcher([
      { hypothesis: "X 5 → 6", edits: setX(6) },
      { hypothesis: "X 5 → 7", edits: setX(7) },
      { hypothesis: "revisit #1: X 5 → 6 again", edits: setX(6) },
    ]);
    const outcome = await createRun({ program: dir, tag: "t", maxExperiments: 3, agent: r, advisor: adv });
    outcome.lab.ledger.close();
    expect(outcome.stoppedBecause).toBe("reached --max-experiments 3");
    expect(r.texts[1]).not.toContain("advisor's ideas");
    expect(r.texts[2]).toContain("## The advisor's ideas (after #2; suggestions, not results)");
    expect(r.texts[2]).toContain("- [advisor] set X to 1");
    expect(r.texts[2]).toContain("- [advisor] revisit #1: X = 6 lost to #0 only");
    const { exps, advice } = notebook(dir);
    expect(advice).toMatchObject([
      { verdict: "ideas", ideas: ["set X to 1", "revisit #1: X = 6 lost to #0 only"] },
    ]);
    expect(revisitOf(exps[3]?.hypothesis ?? "")).toBe(1);
    const show = await runCli(["show", "3", "--json"], { cwd: dir });
    expect(JSON.parse(show.stdout)).toMatchObject({ id: 3, revisitOf: 1 });
  });

  it("marks in its brief the discards judged against a best that has since been superseded", async () => {
    const dir = project("{ agent: claude, after_discards: 2 }");
    const adv = advisor([{ hypothesis: "STOP: enough" }]);
    const r = researcher([
      { hypothesis: "X 5 → 3", edits: setX(3) },
      { hypothesis: "X 3 → 4", edits: setX(4) },
      { hypothesis: "X 3 → 1", edits: setX(1) },
      { hypothesis: "X 1 → 2", edits: setX(2) },
      { hypothesis: "X 1 → 6", edits: setX(6) },
    ]);
    const outcome = await createRun({ program: dir, tag: "t", maxExperiments: 9, agent: r, advisor: adv });
    outcome.lab.ledger.close();
    const { exps } = notebook(dir);
    expect(exps.map((e) => e.decision?.action)).toEqual([
      "keep",
      "keep",
      "discard",
      "keep",
      "discard",
      "discard",
    ]);
    const text = adv.contexts[0]?.contextText ?? "";
    expect(text).toContain("Best: #3 score = 1 (baseline 5).");
    expect(text).toMatch(
      /- #2 X 3 → 4 \(score=4\) → .*\[judged against #1, since superseded by #3: may be revisited as `revisit #2`\]/,
    );
    expect(text).not.toContain("revisit #4");
    expect(text).not.toContain("revisit #5");
  });

  it("records garbage (unparseable, a crash, a timeout, an edit) and the run goes on", async () => {
    const dir = project("{ agent: claude, after_discards: 1 }");
    const adv = advisor([
      { hypothesis: "I think the run is going fine." },
      async () => {
        throw new AgentFailure("timeout", "no answer within 15m");
      },
      async (ctx) => {
        writeFileSync(join(ctx.worktree, "value.mjs"), "export const X = -100;\n");
        return { hypothesis: "IDEA: take my edit" };
      },
      async () => {
        throw new Error("segfault");
      },
    ]);
    const r = researcher([
      { hypothesis: "X 5 → 6", edits: setX(6) },
      { hypothesis: "X 5 → 7", edits: setX(7) },
      { hypothesis: "X 5 → 8", edits: setX(8) },
      { hypothesis: "X 5 → 9", edits: setX(9) },
      { hypothesis: "X 5 → 10", edits: setX(10) },
    ]);
    const outcome = await createRun({ program: dir, tag: "t", maxExperiments: 5, agent: r, advisor: adv });
    outcome.lab.ledger.close();
    expect(outcome.stoppedBecause).toBe("reached --max-experiments 5");
    const { exps, advice } = notebook(dir);
    expect(exps).toHaveLength(6);
    expect(advice.map((a) => a.verdict)).toEqual(["garbage", "garbage", "garbage", "garbage"]);
    expect(advice[0]?.reason).toContain(
      "no `IDEA:` or `STOP:` line in the answer: I think the run is going fine.",
    );
    expect(advice[1]?.reason).toBe("the advisor timed out: no answer within 15m");
    expect(advice[2]?.reason).toContain("the advisor edited files (value.mjs)");
    expect(advice[3]?.reason).toBe("the advisor failed: segfault");
    // The advisor's edit was reset: the next candidate is the researcher's X = 9 on the best.
    expect(git(dir, "show", `${exps[4]?.commit}:value.mjs`)).toBe("export const X = 9;");
    expect(git(dir, "diff", "--stat", exps[0]?.commit ?? "", exps[4]?.parentCommit ?? "")).toBe("");
    // Ideas never came, so no researcher context lists any.
    for (const t of r.texts) expect(t).not.toContain("[advisor]");
  });

  it("is asked on a plateau (rejections count there, not among discards)", async () => {
    const dir = project("{ agent: claude, after_discards: 50, plateau: 3 }");
    const adv = advisor([{ hypothesis: "STOP: plateau" }]);
    const r = researcher([
      { hypothesis: "X 5 → 6", edits: setX(6) },
      { hypothesis: "nothing", edits: {} },
      { hypothesis: "X 5 → 7", edits: setX(7) },
      { hypothesis: "X 5 → 8", edits: setX(8) },
    ]);
    const outcome = await createRun({ program: dir, tag: "t", maxExperiments: 10, agent: r, advisor: adv });
    outcome.lab.ledger.close();
    const { exps, advice } = notebook(dir);
    expect(exps.map((e) => e.decision?.action)).toEqual(["keep", "discard", "reject", "discard"]);
    expect(advice).toMatchObject([{ verdict: "stop", trigger: "plateau: 3 experiments without a keep" }]);
    expect(outcome.stoppedBecause).toContain("stopped the run after #3: plateau");
  });

  it("never shows the advisor holdout values or the evaluator's code", async () => {
    const dir = project("{ agent: claude, after_discards: 2 }");
    const adv = advisor([{ hypothesis: "STOP: done" }]);
    const r = researcher([
      // A researcher that read a holdout value somewhere and wrote it into its hypothesis.
      {
        hypothesis: "X 5 → 6, holdout_score was 1005.125",
        mechanism: "holdout_score: 1005.125",
        edits: setX(6),
      },
      { hypothesis: "X 5 → 7", edits: setX(7) },
    ]);
    const outcome = await createRun({ program: dir, tag: "t", maxExperiments: 5, agent: r, advisor: adv });
    outcome.lab.ledger.close();
    const text = adv.contexts[0]?.contextText ?? "";
    expect(text).toContain("Recent discards");
    expect(text).toContain("#1 X 5 → 6");
    // The holdout's values: 1005.125 (baseline), 1006.125, 1007.125 — none is in the brief.
    expect(text).not.toMatch(/100[5-7]\.125/);
    expect(text).toContain("[holdout redacted]");
    // Not a line of evaluate.mjs (nor of run.mjs, protected too).
    for (const file of ["evaluate.mjs", "run.mjs"]) {
      for (const line of readFileSync(join(dir, file), "utf8")
        .split("\n")
        .filter((l) => l.trim().length > 12))
        expect(text).not.toContain(line.trim());
    }
    expect(adv.contexts[0]?.history).toEqual([]);
  });

  it("with slots: is asked too, and its stop ends the parallel run after the queued candidates", async () => {
    const dir = project("{ agent: claude, after_discards: 2 }", "slots: 2\n");
    const adv = advisor([{ hypothesis: "STOP: two slots, nothing better" }]);
    const r = researcher([
      { hypothesis: "X 5 → 6", edits: setX(6) },
      { hypothesis: "X 5 → 7", edits: setX(7) },
      { hypothesis: "X 5 → 8", edits: setX(8) },
    ]);
    const outcome = await createRun({ program: dir, tag: "t", maxExperiments: 12, agent: r, advisor: adv });
    outcome.lab.ledger.close();
    expect(outcome.stoppedBecause).toMatch(
      /^the advisor \(scripted-advisor\) stopped the run after #\d+: two slots/,
    );
    const { exps, advice } = notebook(dir);
    expect(advice).toHaveLength(1);
    expect(advice[0]?.verdict).toBe("stop");
    // Far fewer than 12; every candidate proposed is decided (the queue was drained).
    expect(exps.length).toBeLessThan(8);
    for (const e of exps) expect(e.decision).toBeDefined();
    // Candidates proposed while it answered were finished; status still names the stop.
    const status = await runCli(["status"], { cwd: dir });
    expect(status.stdout).toContain("Stopped by the advisor (scripted-advisor) after #");
  });

  it("through the CLI with the command backend: a stop ends `autolab run` and status says why", async () => {
    const dir = project(
      `{ agent: { backend: command, command: "echo '{\\"hypothesis\\": \\"STOP: the command advisor has seen enough\\"}'" }, after_discards: 1 }`,
      'agent: { backend: command, command: "echo \'export const X = 9;\' > value.mjs; echo \'{\\"hypothesis\\": \\"X to 9\\"}\'" }\n',
    );
    const res = await runCli(["run", "--tag", "t", "-n", "5"], { cwd: dir });
    expect(res.stderr).not.toMatch(/\bat .*\.ts:\d+/);
    expect(res.code).toBe(0);
    expect(res.stdout).toContain("advisor (command) after #1: STOP — the command advisor has seen enough");
    expect(res.stdout).toContain(
      "Run t stopped: the advisor (command) stopped the run after #1: the command advisor has seen enough.",
    );
    const { exps, advice } = notebook(dir);
    expect(exps).toHaveLength(2);
    expect(advice).toMatchObject([{ verdict: "stop", agent: "command" }]);
    const status = await runCli(["status"], { cwd: dir });
    expect(status.stdout).toContain(
      "Stopped by the advisor (command) after #1: the command advisor has seen enough",
    );
  });

  it("through the CLI: an advisor that hangs is killed at its timeout, recorded, and the run goes on", async () => {
    const dir = project(
      '{ agent: { backend: command, command: "sleep 60", timeout: 2s }, after_discards: 1 }',
      'agent: { backend: command, command: "echo \'export const X = 9;\' > value.mjs; echo \'{\\"hypothesis\\": \\"X to 9\\"}\'" }\n',
    );
    const res = await runCli(["run", "--tag", "t", "-n", "2"], { cwd: dir });
    expect(res.code).toBe(0);
    expect(res.stdout).toContain("Run t stopped: reached --max-experiments 2.");
    expect(res.stdout).toMatch(/advisor \(command\) after #1: answer not used \(the advisor timed out/);
    const { exps, advice } = notebook(dir);
    expect(exps.map((e) => e.decision?.action)).toEqual(["keep", "discard", "discard"]);
    expect(advice.map((a) => a.verdict)).toEqual(["garbage"]);
    expect(advice[0]?.reason).toMatch(/^the advisor timed out/);
    // `autolab context` shows a researcher's view: no ideas came, so none is listed.
    const ctx = await runCli(["context"], { cwd: dir });
    expect(ctx.stdout).not.toContain("[advisor]");
  });

  it("through the CLI: a broken advisor config is a clear error before anything is written", async () => {
    const noCommand = project("{ agent: command, after_discards: 2 }");
    const res = await runCli(["run", "--tag", "t", "-n", "1"], { cwd: noCommand });
    expect(res.code).toBe(1);
    expect(res.stderr).toContain("program.md `advisor.agent`: agent backend command needs agent.command");
    expect(res.stderr).not.toMatch(/\bat .*\.ts:\d+/);
    expect(git(noCommand, "branch", "--list", "autolab/*")).toBe("");

    const builtin = project("builtin");
    const bad = await runCli(["run", "--tag", "t", "-n", "1"], { cwd: builtin });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/program\.md:\d+ .*the built-in optimizer cannot advise/s);
  });

  it.skipIf(!probeSandbox().ok && process.env.CI !== "true")(
    "through the CLI: the advisor runs in the researcher's sandbox (the notebook out of its sight)",
    async () => {
      // The advisor looks for the notebook (.autolab/lab.db, two levels above its worktree) and
      // says in its stop reason whether it could see it.
      const look = `test -e ../../lab.db && r=SEEN || r=HIDDEN; echo "{\\"hypothesis\\": \\"STOP: notebook $r\\"}"`;
      const dir = project(
        `{ agent: { backend: command, command: ${JSON.stringify(look)} }, after_discards: 1 }`,
        'agent: { backend: command, command: "echo \'export const X = 9;\' > value.mjs; echo \'{\\"hypothesis\\": \\"X to 9\\"}\'" }\n',
      );
      const res = await runCli(["run", "--tag", "t", "-n", "3"], { cwd: dir });
      expect(res.code, res.stderr).toBe(0);
      expect(res.stdout).not.toContain("UNSANDBOXED");
      const { advice } = notebook(dir);
      expect(advice.map((a) => [a.verdict, a.reason])).toEqual([["stop", "notebook HIDDEN"]]);
    },
  );
});
