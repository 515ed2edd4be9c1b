/**
 * The proxy ladder end to end (program.md `ladder:`): real trials, real git, real SQLite. The
 * project scores C on a cheaper rung (AUTOLAB_BUDGET_S below run.budget) and X at run.budget,
 * so a test sets what the cheap proxy says and what the expensive truth is independently.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { describe, expect, it } from "vitest";
import { createScriptedAgent, type ScriptedStep } from "../src/agents/scripted-agent.ts";
import { alarmsOf, ladderOf } from "../src/app/alarms.ts";
import { createRun } from "../src/app/create-run.ts";
import { statusOf } from "../src/app/status.ts";
import { AutolabError } from "../src/core/errors.ts";
import type { LoopEvent } from "../src/core/events.ts";
import type { ExperimentRecord } from "../src/core/ledger.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { loadProgram, parseProgram } from "../src/program/parse.ts";
import { createToyProject, programMd, readLedger, runCli } from "./helpers/toy-project.ts";
import { git } from "./helpers/value-project.ts";

/** value.mjs holds X (the score at run.budget) and C (the score on any cheaper rung). */
function ladderProject(ladder: string, start = { c: 6, x: 5 }): string {
  const dir = mkdtempSync(join(tmpdir(), "autolab-ladder-"));
  writeFileSync(join(dir, "value.mjs"), `export const X = ${start.x};\nexport const C = ${start.c};\n`);
  writeFileSync(
    join(dir, "run.mjs"),
    `import { writeFileSync } from "node:fs";
import { C, X } from "./value.mjs";
const full = Number(process.env.AUTOLAB_BUDGET_S) >= 5;
writeFileSync("out.txt", String(full ? X : C));
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
name: ladder-test
objective: { metric: score, direction: minimize }
run:
  command: node run.mjs
  evaluate: node evaluate.mjs
  budget: 5s
files:
  editable: [value.mjs]
  protected: [run.mjs, evaluate.mjs]
outputs: [out.txt]
acceptance: greedy
${ladder}
---
Lower X.
`,
  );
  git(dir, "init", "-q", "-b", "main");
  git(dir, "add", "-A");
  git(dir, "commit", "-qm", "init");
  return dir;
}

const set = (c: number, x: number, hypothesis = `C ${c}, X ${x}`): ScriptedStep => ({
  hypothesis,
  edits: { "value.mjs": `export const X = ${x};\nexport const C = ${c};\n` },
});

async function run(
  dir: string,
  steps: ScriptedStep[],
  signal?: AbortSignal,
  onEvent?: (e: LoopEvent) => void,
) {
  const events: LoopEvent[] = [];
  const outcome = await createRun({
    program: dir,
    tag: "t",
    maxExperiments: steps.length,
    agent: createScriptedAgent(steps),
    onEvent: (e) => {
      events.push(e);
      onEvent?.(e);
    },
    ...(signal ? { signal } : {}),
  });
  outcome.lab.ledger.close();
  return { ...outcome, events };
}

const budgets = (e: ExperimentRecord | undefined) =>
  (e?.trials ?? []).map((t) => `${t.budgetMs}:${t.result?.status}:${t.result?.metrics.score ?? "-"}`);

describe("the proxy ladder in the loop", () => {
  it("discards a candidate on the cheap rung without a full-budget trial", async () => {
    const dir = ladderProject("ladder: { budgets: [1s], promote: 0.3 }");
    const { experiments } = await run(dir, [set(9, 1, "good at 5s, bad at 1s")]);
    const [base, cand] = experiments;
    // The baseline measured the rung first, then its usual trial at run.budget; its value is
    // the full-budget one (X = 5), not mixed with the rung's (C = 6).
    expect(budgets(base)).toEqual(["1000:ok:6", "5000:ok:5"]);
    expect(base?.decision).toMatchObject({ action: "keep", metric: 5 });
    expect(cand?.decision?.action).toBe("discard");
    expect(cand?.decision?.reason).toBe(
      "not promoted from the 1s rung: score 9 ranks 2 of 2 (top 30% promoted; the best, #0, has 6 there)",
    );
    // One trial, at the rung's budget, and the trial saw that budget.
    expect(budgets(cand)).toEqual(["1000:ok:9"]);
    expect(cand?.trials[0]?.env.AUTOLAB_BUDGET_S).toBe("1");
    expect(cand?.trials[0]?.seed).toBe(base?.trials[1]?.seed);
  });

  it("promotes a candidate that ranks at the top of every rung; it climbs and is kept", async () => {
    const dir = ladderProject("ladder:\n  budgets: [1s, 2s]\n  promote: 0.3");
    const { experiments, events, run: record } = await run(dir, [set(4, 3), set(5, 2), set(3.5, 2.5)]);
    const [base, first, second, third] = experiments;
    expect(budgets(base)).toEqual(["1000:ok:6", "2000:ok:6", "5000:ok:5"]);
    expect(budgets(first)).toEqual(["1000:ok:4", "2000:ok:4", "5000:ok:3"]);
    expect(first?.decision).toMatchObject({ action: "keep", metric: 3 });
    // Ranked against every value the 1s rung has seen (6, 4, 5); the best's there is 4.
    expect(budgets(second)).toEqual(["1000:ok:5"]);
    expect(second?.decision?.reason).toBe(
      "not promoted from the 1s rung: score 5 ranks 2 of 3 (top 30% promoted; the best, #1, has 4 there)",
    );
    // First of 4 on the 1s rung (the top 30% of 4 values are 2), first of 3 on the 2s rung.
    expect(budgets(third)).toEqual(["1000:ok:3.5", "2000:ok:3.5", "5000:ok:2.5"]);
    expect(third?.decision).toMatchObject({ action: "keep", metric: 2.5 });
    const started = events.flatMap((e) => (e.type === "trial_started" && e.n === 1 ? [e.budgetMs] : []));
    expect(started).toEqual([1000, 2000, 5000]);

    const program = loadProgram(dir);
    const steps = ladderOf(program, experiments);
    expect(steps?.map((s) => [s.low, s.high, s.measured, s.promoted])).toEqual([
      ["1s", "2s", 3, 2],
      ["2s", "5s", 2, 2],
    ]);
    expect(steps?.[1]?.check.reason).toBe("proxy 2s → 5s: 3 of 12 paired results needed before judging");
    expect(alarmsOf(program, experiments)).toEqual([]);
    expect(statusOf(record, experiments, program).ladder).toEqual([
      { low: "1s", high: "2s", measured: 3, promoted: 2, rho: 1, pairs: 3 },
      { low: "2s", high: "5s", measured: 2, promoted: 2, rho: 1, pairs: 3 },
    ]);
  });

  it("climbs the same way in a parallel run (slots: 2)", async () => {
    const dir = ladderProject("ladder: { budgets: [1s] }\nslots: 2");
    const { experiments } = await run(dir, [set(4, 3), set(9, 1)]);
    const [base, ...cands] = experiments;
    // The baseline's full-budget trials run first on the slots at once, then its rung.
    expect(budgets(base).sort()).toEqual(["1000:ok:6", "5000:ok:5"]);
    const good = cands.find((e) => e.hypothesis === "C 4, X 3");
    const bad = cands.find((e) => e.hypothesis === "C 9, X 1");
    expect(budgets(good)).toEqual(["1000:ok:4", "5000:ok:3"]);
    expect(good?.decision).toMatchObject({ action: "keep", metric: 3 });
    expect(budgets(bad)).toEqual(["1000:ok:9"]);
    expect(bad?.decision?.reason).toMatch(/^not promoted from the 1s rung/);
  });

  it("refuses a --budget at or below the last rung", async () => {
    const dir = ladderProject("ladder: { budgets: [1s, 2s] }");
    await expect(createRun({ program: dir, tag: "t", budgetMs: 2000, maxExperiments: 1 })).rejects.toThrow(
      /--budget 2s is not above the proxy ladder's last rung \(2s\)/,
    );
  });

  it("raises the proxy alarm when the cheap rung ranks candidates against the expensive one", async () => {
    const dir = ladderProject("ladder: { budgets: [1s], promote: 1, min_pairs: 3 }", { c: 5, x: 5 });
    // Every candidate climbs (promote: 1); the cheap values run opposite to the expensive ones.
    const { experiments, events } = await run(dir, [set(6, 4), set(3, 7), set(7, 3)]);
    expect(experiments.map((e) => e.decision?.action)).toEqual(["keep", "keep", "discard", "keep"]);
    const alarms = events.filter((e) => e.type === "alarm");
    // #2 (discarded at run.budget) made the third pair, rho = -1: recorded once, on #2.
    expect(alarms).toEqual([
      {
        type: "alarm",
        kind: "proxy:1s→5s",
        n: 2,
        reason: expect.stringMatching(
          /^proxy 1s → 5s stopped predicting: rank correlation -1\.00 over 3 candidates < 0\.2; /,
        ),
      },
    ]);
    const db = new DatabaseSync(join(dir, ".autolab", "lab.db"), { readOnly: true });
    const notes = db.prepare("SELECT text FROM notes").all() as { text: string }[];
    db.close();
    expect(notes.map((n) => n.text.split(":")[0])).toEqual(["ALARM proxy"]);
    const program = loadProgram(dir);
    expect(alarmsOf(program, experiments).map((a) => a.kind)).toEqual(["proxy:1s→5s"]);
  });

  it("a run stopped during a rung trial continues at that rung; finished rung trials count", async () => {
    const dir = ladderProject("ladder: { budgets: [1s, 2s], promote: 0.5 }");
    const stop = new AbortController();
    await run(dir, [set(4, 3)], stop.signal, (e) => {
      if (e.type === "trial_started" && e.n === 1 && e.budgetMs === 2000) stop.abort();
    });
    const { experiments } = await run(dir, [set(4, 3)]);
    expect(experiments.map((e) => e.n)).toEqual([0, 1]);
    expect(budgets(experiments[1])).toEqual(["1000:ok:4", "2000:interrupted:-", "2000:ok:4", "5000:ok:3"]);
    expect(experiments[1]?.decision?.action).toBe("keep");
  });

  it("a baseline that fails on a rung stops the run, naming the rung", async () => {
    const dir = ladderProject("ladder: [1s]");
    writeFileSync(join(dir, "run.mjs"), "if (Number(process.env.AUTOLAB_BUDGET_S) < 5) process.exit(3);\n");
    git(dir, "commit", "-qam", "crash on the rung");
    const err = await run(dir, [set(4, 3)]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AutolabError);
    expect((err as AutolabError).message).toMatch(
      /the baseline \(the unmodified project\) failed: crash on the 1s rung/,
    );
  });
});

function firstCandidate(dir: string): ExperimentRecord | undefined {
  const ledger = new SqliteLedger(join(dir, ".autolab", "lab.db"));
  try {
    return ledger.getExperiment(ledger.latestRun()?.id as number, 1);
  } finally {
    ledger.close();
  }
}

describe("kill -9 during the ladder, then resume (AUTOLAB_CRASH_AT)", () => {
  // Trials: baseline 1s (1), baseline 5s (2), candidate #1 on the 1s rung (3).
  for (const point of ["after-trial-start", "after-trial-result"] as const) {
    it(`${point}:3`, async () => {
      const t = createToyProject();
      try {
        writeFileSync(
          join(t.dir, "program.md"),
          programMd({}, t.scratch).replace("search:", "ladder: [1s]\nsearch:"),
        );
        t.git(["-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qam", "ladder"]);
        const crashed = await runCli(["run", "-n", "2"], {
          cwd: t.dir,
          env: { AUTOLAB_CRASH_AT: `${point}:3` },
        });
        expect(crashed.signal, crashed.stdout + crashed.stderr).toBe("SIGKILL");
        const atCrash = firstCandidate(t.dir);
        expect(atCrash?.decision).toBeUndefined();
        expect(atCrash?.trials.map((x) => [x.budgetMs, x.result?.status])).toEqual([
          [1000, point === "after-trial-start" ? undefined : "ok"],
        ]);
        const done = await runCli(["run", "-n", "2"], { cwd: t.dir });
        expect(done.code, done.stdout + done.stderr).toBe(0);

        const raw = readLedger(t.dir);
        expect(raw.decisions).toHaveLength(3);
        expect(raw.trialResults).toHaveLength(raw.trialStarts.length);
        const first = firstCandidate(t.dir);
        const rung = (first?.trials ?? []).filter((x) => x.budgetMs === 1000).map((x) => x.result?.status);
        // The rung's trial ran once for real: again only if the crash left it unfinished.
        expect(rung).toEqual(point === "after-trial-start" ? ["interrupted", "ok"] : ["ok"]);
      } finally {
        t.cleanup();
      }
    });
  }
});

describe("program.md ladder:", () => {
  const program = (ladder: string, budget = "10m") =>
    `---\nname: m\nobjective: { metric: loss, direction: minimize }\nrun:\n  command: python train.py\n  budget: ${budget}\nfiles:\n  editable: [train.py]\n${ladder}\n---\n`;
  const failure = (text: string): string => {
    try {
      parseProgram(text, "lab/program.md");
    } catch (err) {
      expect((err as AutolabError).code).toBe("PROGRAM_INVALID");
      return (err as AutolabError).message;
    }
    throw new Error("expected the program to be rejected");
  };

  it("parses the map and the list shorthand, with defaults, each rung with its own grace", () => {
    expect(parseProgram(program("ladder:\n  budgets: [30s, 2m]\n  promote: 0.3"), "p.md").ladder).toEqual({
      rungs: [
        { budgetMs: 30_000, graceMs: 3_000 },
        { budgetMs: 120_000, graceMs: 12_000 },
      ],
      promote: 0.3,
      alarmBelow: 0.2,
      minPairs: 12,
    });
    const short = parseProgram(program("ladder: [30s]"), "p.md").ladder;
    expect(short).toMatchObject({ rungs: [{ budgetMs: 30_000 }], promote: 1 / 3 });
    expect(parseProgram(program(""), "p.md").ladder).toBeUndefined();
  });

  it("rejects rungs that are not below run.budget or not ascending, naming the field and line", () => {
    const msg = failure(program("ladder:\n  budgets: [2m, 30s, 10m]"));
    expect(msg).toContain(
      "lab/program.md:10  ladder.budgets[1]: 30s does not come after 2m: list the rungs cheapest first",
    );
    expect(msg).toContain(
      "lab/program.md:10  ladder.budgets[2]: 10m is not below run.budget (10m): list only the cheaper rungs; run.budget is the top rung",
    );
    expect(msg).toContain("budgets: [30s, 2m]");
  });

  it("rejects a bad fraction, a bad duration and an unknown key", () => {
    const msg = failure(program("ladder:\n  budgets: [soon]\n  promote: 1.5\n  min_pair: 4"));
    expect(msg).toContain('lab/program.md:10  ladder.budgets[0]: "soon" is not a duration');
    expect(msg).toContain("lab/program.md:11  ladder.promote: must be a fraction above 0 and at most 1");
    expect(msg).toContain(
      'lab/program.md:12  ladder.min_pair: unknown key "min_pair" — did you mean "min_pairs"?',
    );
    expect(failure(program("ladder: { budgets: [] }"))).toContain(
      "ladder.budgets: must list at least one budget cheaper than run.budget",
    );
  });
});
