/**
 * rubric.md parsing and program.md's `run.evaluate: { rubric: … }` (docs/learning.md
 * "Rubric-graded evaluation"): the format, and every malformed input a clear error naming the
 * line and the fix.
 */
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { AutolabError } from "../src/core/errors.ts";
import { contractOf } from "../src/program/contract.ts";
import { loadProgram } from "../src/program/parse.ts";
import { parseRubric } from "../src/rubric/rubric.ts";
import { gradedText } from "../src/rubric/trial-grader.ts";

const GOOD = `# A research write-up
Grade what is written, not what was meant.

## question
weight: 2
must_reach: 1
The write-up states the question it answers.
- 0: no question
- 1: a vague question
- 2: a precise, testable question

## evidence
Claims carry the numbers that support them.
\`\`\`
## not a heading: inside a fence
weight: not a key either
\`\`\`
- 0: no numbers
- 1: numbers without
  their source
- 2: numbers with the experiment they came from

## canary
Everything works great. The results are amazing.

## this heading is part of the canary
`;

function fails(text: string): AutolabError {
  try {
    parseRubric(text, "rubric.md");
  } catch (err) {
    expect(err).toBeInstanceOf(AutolabError);
    expect((err as AutolabError).code).toBe("RUBRIC_INVALID");
    return err as AutolabError;
  }
  throw new Error("expected RUBRIC_INVALID");
}

describe("parseRubric", () => {
  it("reads criteria, weights, levels, thresholds, the preamble and the canary", () => {
    const r = parseRubric(GOOD, "rubric.md");
    expect(r.preamble).toBe("# A research write-up\nGrade what is written, not what was meant.");
    expect(r.criteria.map((c) => [c.id, c.line, c.weight, c.max, c.mustReach])).toEqual([
      ["question", 4, 2, 2, 1],
      ["evidence", 12, 1, 2, undefined],
    ]);
    const evidence = r.criteria[1];
    expect(evidence?.description).toContain("## not a heading: inside a fence");
    expect(evidence?.description).toContain("weight: not a key either");
    expect(evidence?.levels[1]).toEqual({ level: 1, description: "numbers without their source" });
    expect(r.canary).toBe(
      "Everything works great. The results are amazing.\n\n## this heading is part of the canary",
    );
  });

  it("names the line and the fix for every problem at once", () => {
    const err = fails(`## clarity
wieght: 2
The text is clear.
- 0: unclear
- 2: clear

## clarity
must_reach: 5
Short.
- 0: long
- 1: short

## Bad Id
weight: -1
- 0: x
`);
    const msg = err.message;
    expect(msg).toContain('rubric.md:2  unknown key "wieght" — did you mean "weight"?');
    expect(msg).toContain('rubric.md:5  criterion "clarity": level 2 where level 1 was expected');
    expect(msg).toContain('rubric.md:7  criterion "clarity" appears twice');
    expect(msg).toContain('rubric.md:7  criterion "clarity": must_reach 5 is above its highest level 1');
    expect(msg).toContain('rubric.md:13  "## Bad Id" is not a criterion id');
    expect(msg).toContain('rubric.md:14  weight "-1" must be a positive number');
    expect(msg).toMatch(/rubric\.md:13 {2}criterion "Bad Id" says nothing about what is judged/);
    expect(msg).toMatch(/rubric\.md:13 {2}criterion "Bad Id" has one level/);
    expect(err.hint).toContain("## question");
  });

  it("rejects a rubric without criteria, an empty canary and a bad level number", () => {
    expect(fails("# just a title\n").message).toContain("rubric.md:1  no criteria");
    expect(fails("## a\nText.\n- 0: no\n- 1: yes\n## canary\n\n").message).toContain(
      'rubric.md:5  "## canary" is empty',
    );
    expect(fails("## a\nText.\n- 0: no\n- 1.5: half\n").message).toContain(
      'rubric.md:4  level "1.5" is not a whole number',
    );
    expect(fails("## a\nText.\n- 0: no\n- 1:\n").message).toContain(
      'rubric.md:4  level 1 of "a" has no description',
    );
    expect(fails("## a\nmust_reach: 0\nText.\n- 0: no\n- 1: yes\n").message).toContain(
      'rubric.md:2  must_reach "0" must be a level ≥ 1',
    );
  });
});

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function project(program: string, rubric?: string): string {
  const dir = mkdtempSync(join(tmpdir(), "rubric-parse-"));
  dirs.push(dir);
  writeFileSync(join(dir, "program.md"), program);
  if (rubric !== undefined) writeFileSync(join(dir, "rubric.md"), rubric);
  return dir;
}

const PROGRAM = (evaluate: string, prot = "[rubric.md]") => `---
name: writeup
objective: { metric: rubric_score, direction: maximize }
run:
  command: "true"
  budget: 10s
  evaluate:
${evaluate}
files:
  editable: [writeup.md]
  protected: ${prot}
---
Improve the write-up.
`;

const EVALUATE = `    rubric: rubric.md
    grade: [writeup.md]
    judges:
      - { name: a, base_url: http://127.0.0.1:9/v1, model: m1 }
      - { provider: anthropic, model: claude-x }
      - { base_url: http://127.0.0.1:9/v1, model: "org/m:7b" }
      - { base_url: http://127.0.0.1:9/v1, model: "org/m:7b" }
    canary_max: 25
    judge_timeout: 30s`;

describe("program.md run.evaluate: { rubric: … }", () => {
  it("loads the rubric with the program and fills in the defaults", () => {
    const dir = project(PROGRAM(EVALUATE), GOOD);
    const p = loadProgram(dir);
    expect(p.run.evaluate).toBeUndefined();
    const ev = p.run.rubric;
    expect(ev?.rubric.criteria.map((c) => c.id)).toEqual(["question", "evidence"]);
    expect(ev?.judges.map((j) => [j.name, j.provider, j.model])).toEqual([
      ["a", "openai-compatible", "m1"],
      ["claude-x", "anthropic", "claude-x"],
      ["org_m_7b", "openai-compatible", "org/m:7b"],
      ["org_m_7b-2", "openai-compatible", "org/m:7b"],
    ]);
    expect(ev).toMatchObject({
      panel: 2,
      canaryMax: 25,
      canaryEvery: 1,
      judgeTimeoutMs: 30_000,
      disagreement: 0.5,
    });
    expect(contractOf(p)["run.evaluate.rubric"]).toMatchObject({
      rubric: "rubric.md",
      grade: ["writeup.md"],
    });
  });

  it("a rubric under files.holdout (hidden from researchers) is protected enough", () => {
    const dir = project(
      PROGRAM(EVALUATE, "[]").replace("protected: []", "protected: []\n  holdout: [rubric.md]"),
      GOOD,
    );
    expect(loadProgram(dir).run.rubric?.rubricFile).toBe("rubric.md");
  });

  it("keeps a command next to the rubric", () => {
    const dir = project(PROGRAM(`    command: node check.ts\n${EVALUATE}`), GOOD);
    expect(loadProgram(dir).run.evaluate).toBe("node check.ts");
  });

  it("a malformed rubric.md stops the program load, naming the rubric's line", () => {
    const dir = project(PROGRAM(EVALUATE), "## question\nweigth: 2\nText.\n- 0: no\n- 1: yes\n");
    expect(() => loadProgram(dir)).toThrow(/rubric\.md:2 {2}unknown key "weigth" — did you mean "weight"\?/);
  });

  it("a rubric the researcher could edit, a missing rubric and a judge without its URL are program errors with lines", () => {
    const dir = project(
      PROGRAM(
        `    rubric: rubric.md
    grade: [writeup.md]
    judges:
      - { model: m1 }
      - { name: x, provider: openai, model: m2 }
      - { name: x, provider: openai, model: m3 }`,
        "[]",
      ),
      GOOD,
    );
    let msg = "";
    try {
      loadProgram(dir);
    } catch (err) {
      msg = (err as Error).message;
      expect((err as AutolabError).code).toBe("PROGRAM_INVALID");
    }
    expect(msg).toContain('program.md:8  run.evaluate.rubric: "rubric.md" must be protected');
    expect(msg).toContain(
      "program.md:11  run.evaluate.judges[0]: a judge with provider openai-compatible (the default) needs base_url",
    );
    expect(msg).toContain('program.md:13  run.evaluate.judges[2].name: two judges are named "x"');

    const missing = project(PROGRAM(EVALUATE));
    expect(() => loadProgram(missing)).toThrow(
      /program\.md:8 {2}run\.evaluate\.rubric: "rubric\.md" does not exist next to program\.md/,
    );
  });

  it("rejects unknown keys, no judges and a graded path that leaves the project", () => {
    const dir = project(
      PROGRAM(`    rubric: rubric.md
    grade: [../secret.md]
    judges: []
    canary: 40`),
      GOOD,
    );
    let msg = "";
    try {
      loadProgram(dir);
    } catch (err) {
      msg = (err as Error).message;
    }
    expect(msg).toContain(
      'program.md:9  run.evaluate.grade[0]: "../secret.md" leaves the project: ".." is not allowed',
    );
    expect(msg).toContain("program.md:10  run.evaluate.judges: must list at least one judge");
    expect(msg).toContain(
      'program.md:11  run.evaluate.canary: unknown key "canary"; the keys here are: command, rubric, grade',
    );
  });

  it("an empty evaluate or one of the wrong type says what it takes", () => {
    expect(() => loadProgram(project(PROGRAM(""), GOOD))).toThrow(
      /program\.md:7 {2}run\.evaluate: is empty: expected text or a map/,
    );
    expect(() => loadProgram(project(PROGRAM("    - a list"), GOOD))).toThrow(
      /program\.md:7 {2}run\.evaluate: expected text or a map, got a list/,
    );
  });
});

describe("gradedText", () => {
  it("reads the graded files, refuses a symlink and names a missing file", () => {
    const dir = mkdtempSync(join(tmpdir(), "rubric-files-"));
    dirs.push(dir);
    writeFileSync(join(dir, "a.md"), "first");
    writeFileSync(join(dir, "b.md"), "second");
    expect(gradedText(dir, ["a.md"])).toEqual({ text: "first" });
    expect(gradedText(dir, ["a.md", "b.md"])).toEqual({
      text: "=== a.md ===\nfirst\n\n=== b.md ===\nsecond",
    });
    // The attack: a committed symlink to a host file would send it to the judge's endpoint.
    const secret = join(mkdtempSync(join(tmpdir(), "rubric-secret-")), "key");
    dirs.push(join(secret, ".."));
    writeFileSync(secret, "TOP SECRET");
    symlinkSync(secret, join(dir, "link.md"));
    expect(gradedText(dir, ["link.md"])).toEqual({
      problem: "the graded file link.md is a symlink: it is not read",
    });
    expect(gradedText(dir, ["nope.md"])).toMatchObject({
      problem: expect.stringContaining("nope.md does not exist"),
    });
  });
});
