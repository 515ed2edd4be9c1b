/**
 * The library surface (src/index.ts, package.json "exports"; docs/library.md): the example of
 * docs/library.md, examples/library/embed.ts, run as a user would run it — a separate Node
 * process importing "autolab" — with its own researcher and executor on a real project.
 */
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import * as autolab from "../src/index.ts";
import { SqliteLedger } from "../src/index.ts";
import { cleanupTemp, gitSync, tempDir } from "./helpers/git-project.ts";
import { REPO_ROOT } from "./helpers/toy-project.ts";

afterAll(cleanupTemp);

const PROGRAM = `---
name: step
objective: { metric: score, direction: minimize }
run:
  command: node train.mjs
  budget: 10s
files:
  editable: [train.mjs]
acceptance: greedy
---
Make STEP close to 0.1.
`;

describe("autolab as a library", () => {
  it("exports the entry points docs/library.md names", () => {
    for (const name of [
      "createRun",
      "loadProgram",
      "parseProgram",
      "LocalExecutor",
      "SqliteLedger",
      "createJudge",
      "openKnowledgeStore",
      "knowledgePath",
      "treeOf",
      "chooseNode",
      "judgeFor",
      "createObjectivesJudge",
      "paretoFront",
      "frontOf",
      // Measuring research itself (docs/learning.md).
      "loadSuite",
      "runBench",
      "benchSummary",
      "writeBenchReport",
      "renderBenchMarkdown",
      "incumbentOf",
      "readVariant",
      "runTournament",
      "rankVariants",
      "tournamentSummary",
      "writeTournamentReport",
      "evolve",
      "nextProgram",
      "exportTrajectories",
      "parseRubric",
      "gradeAnswer",
    ])
      expect(typeof (autolab as Record<string, unknown>)[name], name).toBe("function");
  });

  it("searches the knowledge store (prior work) through the public surface", () => {
    const store = autolab.openKnowledgeStore(join(tempDir("autolab-library-knowledge-"), "k.db"));
    try {
      const e: autolab.KnowledgeEntry = {
        project: "/p/program.md",
        projectName: "p",
        run: "r",
        n: 1,
        date: "2026-11-22T00:00:00.000Z",
        hypothesis: "wider layers",
        action: "keep",
        reason: "better",
        metric: "loss",
        direction: "minimize",
        value: 1,
      };
      expect(store.record([e])).toBe(1);
      expect(store.search("wider", 3).map((h) => h.hypothesis)).toEqual(["wider layers"]);
      expect(store.search("wider", 3, { exclude: { project: "/p/program.md", run: "r" } })).toEqual([]);
    } finally {
      store.close();
    }
  });

  it("grades with a rubric and picks the curriculum's next program through the public surface", async () => {
    const rubric = autolab.parseRubric(
      "Grade the note.\n\n## question\nThe note states its question.\n- 0: none\n- 1: vague\n- 2: precise\n",
      "rubric.md",
    );
    expect(rubric.criteria.map((c) => c.id)).toEqual(["question"]);
    expect(() => autolab.parseRubric("## question\nwieght: 2\n", "rubric.md")).toThrow(
      /did you mean "weight"/,
    );
    const ev: autolab.RubricEvaluation = {
      rubricFile: "rubric.md",
      rubric,
      grade: ["note.md"],
      judges: [{ name: "j", provider: "openai-compatible", baseUrl: "http://127.0.0.1:9/v1", model: "m" }],
      panel: "all",
      canaryMax: 30,
      canaryEvery: 1,
      judgeTimeoutMs: 1000,
      disagreement: 0.5,
    };
    const report = await autolab.gradeAnswer(ev, "What does X do to Y?", {
      seedIndex: 0,
      ask: async () => '{"level": 2, "reason": "a precise question"}',
    });
    expect(report.status).toBe("ok");
    expect(report.metrics.rubric_score).toBe(100);
    const choice = autolab.nextProgram([
      { name: "easy", runs: 10, successes: 10 },
      { name: "frontier", runs: 10, successes: 5 },
    ]);
    expect(choice?.name).toBe("frontier");
  });

  it("the embedding example runs the loop with its own researcher and executor", async () => {
    const dir = tempDir("autolab-library-");
    writeFileSync(join(dir, "program.md"), PROGRAM);
    writeFileSync(
      join(dir, "train.mjs"),
      "const STEP = 1.6;\nconsole.log(`score: ${Math.abs(STEP - 0.1)}`);\n",
    );
    gitSync(dir, "init", "-q");
    gitSync(dir, "add", "-A");
    gitSync(dir, "commit", "-qm", "init");

    // "autolab" resolves to the package's dist/ (published) or, with this condition, to src/.
    const embed = join(REPO_ROOT, "examples", "library", "embed.ts");
    const r = spawnSync(process.execPath, ["--conditions=autolab-source", embed, dir], {
      cwd: REPO_ROOT,
      encoding: "utf8",
      timeout: 120_000,
    });
    expect(r.status, r.stdout + r.stderr).toBe(0);
    // The executor's log line for every trial, the listener's line for every decision.
    expect(r.stdout).toMatch(/trial \(seed \d+\): ok/);
    expect(r.stdout).toMatch(/#1 keep/);
    expect(r.stdout).toMatch(/stopped: .*; best #3/);

    const ledger = new SqliteLedger(join(dir, ".autolab", "lab.db"));
    try {
      const run = ledger.listRuns()[0];
      const exps = ledger.listExperiments(run?.id as number);
      expect(exps.map((e) => e.hypothesis)).toEqual([
        "baseline",
        "STEP 1.6 → 0.8",
        "STEP 0.8 → 0.4",
        "STEP 0.4 → 0.2",
      ]);
    } finally {
      ledger.close();
    }

    // The run's trajectories, as `autolab export --format trajectories` writes them.
    const records: { schema: string; n: number; proposal: { hypothesis: string } }[] = [];
    for await (const line of autolab.exportTrajectories({ program: dir })) records.push(JSON.parse(line));
    expect(records.map((r) => [r.schema, r.n, r.proposal.hypothesis])).toEqual([
      ["autolab.trajectory/1", 1, "STEP 1.6 → 0.8"],
      ["autolab.trajectory/1", 2, "STEP 0.8 → 0.4"],
      ["autolab.trajectory/1", 3, "STEP 0.4 → 0.2"],
    ]);
    // Left early, it closes the notebook (a second export still reads it).
    for await (const _ of autolab.exportTrajectories({ program: dir, format: "trajectories-sft" })) break;
    const chats: string[] = [];
    for await (const line of autolab.exportTrajectories({ program: dir, format: "trajectories-sft" }))
      chats.push(line);
    expect(chats).toHaveLength(3);
    await expect(autolab.exportTrajectories({ program: dir, tag: "nope" }).next()).rejects.toMatchObject({
      code: "RUN_NOT_FOUND",
    });
  });
});
