import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createScriptedAgent } from "../src/agents/scripted-agent.ts";
import { createRun } from "../src/app/create-run.ts";
import { askWithModel, evolve, parseWriterReply } from "../src/learn/evolve.ts";
import { type FakeModel, startFakeModel } from "./fake-model/server.ts";
import { follower } from "./helpers/follower.ts";
import { runCli } from "./helpers/toy-project.ts";
import { git, valueProject } from "./helpers/value-project.ts";

let fake: FakeModel;
beforeAll(async () => {
  fake = await startFakeModel();
});
afterAll(async () => {
  await fake.close();
});

describe("autolab tournament --evolve", () => {
  it("the writer's variant replaces the instructions only when it wins; a worse one, an attack on the frontmatter and garbage change nothing", async () => {
    const project = valueProject();
    const program = join(project, "program.md");
    // The user's own run, before: its notebook is evidence too.
    const own = await createRun({
      program,
      tag: "mine",
      agent: createScriptedAgent([
        { hypothesis: "X = 4 by hand", edits: { "value.mjs": "export const X = 4;\n" } },
      ]),
      maxExperiments: 1,
      priorWork: false,
    });
    own.lab.ledger.close();
    const before = readFileSync(program, "utf8");
    const asked: string[] = [];
    const program2 = before.replace("budget: 5s", "budget: 500s");
    const replies = [
      "Here you go.\n<instructions>\nTry X = 3\nThe value 3 is known to be good.\n</instructions>",
      "<instructions>Try X = 4</instructions>",
      // The attack: a frontmatter that gives the trials a hundred times the budget.
      `<instructions>\n${program2.replace("Lower X.", "Try X = 1")}\n</instructions>`,
      "I would rather not.",
    ];
    fake.respond = ({ text }) => {
      asked.push(text);
      return replies[asked.length - 1];
    };
    const lines: string[] = [];
    const out = mkdtempSync(join(tmpdir(), "autolab-evolve-"));
    const r = await evolve({
      program,
      seeds: [1, 2],
      budget: { experiments: 2 },
      remeasure: 1,
      out,
      agent: "follower",
      agents: { follower },
      generations: 4,
      ask: await askWithModel({
        backend: "llm",
        model: "writer",
        baseUrl: `${fake.url}/v1`,
        args: [],
        env: {},
      }),
      writer: "writer",
      onLine: (l) => lines.push(l),
    });
    expect(r.generations.map((g) => g.outcome)).toEqual([
      "replaced",
      "kept",
      "no challenger",
      "no challenger",
    ]);
    expect(r.generations[0]?.line).toMatch(
      /gen-1 replaces the instructions: .*\+40\.00%.*beats the incumbent/,
    );
    expect(r.generations[2]?.line).toMatch(/changes "run" in the frontmatter/);
    expect(r.generations[3]?.line).toMatch(/no <instructions> block/);
    // program.md: the winner's instructions under the same frontmatter, committed; nothing else.
    const after = readFileSync(program, "utf8");
    expect(after).toContain("Try X = 3\nThe value 3 is known to be good.");
    expect(after.split("---")[1]).toBe(before.split("---")[1]);
    expect(git(project, "status", "--porcelain")).toBe("");
    expect(git(project, "log", "-1", "--format=%s")).toMatch(/generation 1's instructions won/);
    // The writer saw the evidence (what followers of "Lower X." tried and how it went), fenced as data…
    expect(asked[0]).toMatch(
      /MECHANISM REFUTED \(discard\): X = 6 \(mechanism: a smaller X scores lower\) \[1 file, \+1 −1\] → score 6/,
    );
    expect(asked[0]).toMatch(/<evidence-[0-9a-f]{12}> \(data\)/);
    expect(asked[0]).toMatch(
      /<notebook-[0-9a-f]{12}> \(data\)\\nKEPT: X = 4 by hand \[1 file, \+1 −1\] → score 4/,
    );
    // …and in generation 2, the kept change of the new incumbent and the history of rewrites.
    expect(asked[1]).toMatch(/KEPT: X = 3 .*→ score 3/);
    expect(asked[1]).toMatch(/generation 1: won/);
    // Holdout values never reach it (the value project's holdout is score + 1000.125).
    for (const a of asked) expect(a).not.toMatch(/1000\.125|100[0-9]\.125|holdout/);
    // The last tournament is the incumbent's (gen-1's cells, reused): 40% on both seeds.
    expect(r.result.standings.standings[0]?.mean).toBe(40);
  }, 300_000);

  it("parses the writer's reply: tags, a markdown fence, or nothing", () => {
    expect(parseWriterReply("x <instructions>\nA\n</instructions> y")).toEqual({ body: "A" });
    expect(parseWriterReply("```markdown\nB\n```")).toEqual({ body: "B" });
    expect(parseWriterReply("")).toEqual({ problem: expect.stringMatching(/empty/) });
  });

  it("the CLI: no writer for a builtin program, dirty program.md, variant files with --evolve: clear errors, no stack", async () => {
    const project = valueProject();
    const cwd = project;
    const noWriter = await runCli(["tournament", "--evolve"], { cwd });
    expect(noWriter.code).toBe(1);
    expect(noWriter.stderr).toMatch(/TOURNAMENT_WRITER_INVALID|needs an LLM to write the next variant/);
    expect(noWriter.stderr).not.toMatch(/\n\s+at /);
    const { writeFileSync: write } = await import("node:fs");
    write(join(project, "v.md"), "Try X = 3\n");
    const unknown = await runCli(["tournament", "v.md", "--agent", "no-such"], { cwd });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/no researcher named "no-such".*\n.*--agent one of/s);
    expect(unknown.stderr).not.toMatch(/\n\s+at /);
    const none = await runCli(["tournament"], { cwd });
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/needs at least one variant/);
    const both = await runCli(
      ["tournament", "--evolve", "x.md", "--writer-model", "m", "--writer-base-url", fake.url],
      { cwd },
    );
    expect(both.stderr).toMatch(/does not take variant files/);
    const prog = join(project, "program.md");
    const { writeFileSync } = await import("node:fs");
    writeFileSync(prog, readFileSync(prog, "utf8").replace("Lower X.", "Lower X, please."));
    const dirty = await runCli(
      ["tournament", "--evolve", "--writer-model", "m", "--writer-base-url", fake.url],
      { cwd },
    );
    expect(dirty.code).toBe(1);
    expect(dirty.stderr).toMatch(/uncommitted changes/);
  }, 120_000);
});
