/**
 * Bad input to the built-in optimizer, end to end (issue #17): a search range whose every value
 * crashes the program, an objective on which every configuration ties, a space too small to
 * hold a new configuration. Each is recorded and explained; nothing loops silently.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createRun } from "../src/app/create-run.ts";
import { AutolabError } from "../src/core/errors.ts";
import type { ExperimentRecord } from "../src/core/ledger.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { parseProgram } from "../src/program/parse.ts";
import { knobProject } from "./helpers/knob-project.ts";
import { git } from "./helpers/value-project.ts";

function experiments(dir: string): ExperimentRecord[] {
  const ledger = new SqliteLedger(join(dir, ".autolab", "lab.db"));
  try {
    const run = ledger.getRun("t");
    return run ? ledger.listExperiments(run.id) : [];
  } finally {
    ledger.close();
  }
}

const paramsKey = (e: ExperimentRecord) => JSON.stringify(e.params ?? {});

describe("the built-in optimizer on bad search input", () => {
  it("stops a run whose every candidate crashes, naming the failures and the ranges", async () => {
    // The baseline (X = 5) runs; every value the range holds makes the program exit 3.
    const dir = knobProject({
      score: "X",
      knob: "{ low: 10, high: 1000, log: true }",
      crashUnless: "X < 10",
    });
    const err = await createRun({ program: dir, tag: "t", maxExperiments: 40 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AutolabError);
    const e = err as AutolabError;
    expect(e.code).toBe("TRIALS_FAILING");
    expect(e.message).toMatch(/the last 10 candidates all failed their trials while the baseline ran/);
    expect(e.message).toMatch(/#10 .*exit/);
    expect(e.hint).toMatch(/narrow the knobs in program\.md's search:/);
    expect(e.hint).toMatch(/autolab show 10/);
    const exps = experiments(dir);
    // Stopped at the tenth, not at 40; each one recorded as a crash with its reason.
    expect(exps.map((x) => x.n)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(exps[0]?.decision?.action).toBe("keep");
    for (const x of exps.slice(1)) {
      expect(x.decision?.action).toBe("crash");
      expect(x.trials[0]?.result?.status).toBe("crash");
    }
    // The optimizer moved on each time: ten different configurations.
    expect(new Set(exps.slice(1).map(paramsKey)).size).toBe(10);
  }, 120_000);

  it("continues the stopped run once the ranges are narrowed, as its hint says", async () => {
    const dir = knobProject({
      score: "X",
      knob: "{ low: 10, high: 1000, log: true }",
      crashUnless: "X < 10",
    });
    await expect(createRun({ program: dir, tag: "t", maxExperiments: 40 })).rejects.toMatchObject({
      code: "TRIALS_FAILING",
    });
    const md = join(dir, "program.md");
    writeFileSync(
      md,
      readFileSync(md, "utf8").replace("{ low: 10, high: 1000, log: true }", "{ low: 1, high: 9 }"),
    );
    git(dir, "commit", "-qam", "narrow X");
    const outcome = await createRun({ program: dir, tag: "t", maxExperiments: 13 });
    outcome.lab.ledger.close();
    expect(outcome.stoppedBecause).toMatch(/max-experiments 13/);
    const exps = experiments(dir);
    expect(exps).toHaveLength(14);
    // The new candidates ran: the streak is over.
    expect(exps.slice(11).every((x) => x.trials[0]?.result?.status === "ok")).toBe(true);
  }, 120_000);

  it("stops a parallel run the same way", async () => {
    const dir = knobProject({
      score: "X",
      knob: "{ low: 10, high: 1000, log: true }",
      crashUnless: "X < 10",
    });
    const err = await createRun({ program: dir, tag: "t", maxExperiments: 40, slots: 2 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((err as AutolabError).code).toBe("TRIALS_FAILING");
    // Trials in flight when it stopped are recorded as interrupted, never lost: at most a slot's worth more.
    const exps = experiments(dir).filter((x) => x.n > 0);
    expect(exps.filter((x) => x.decision?.action === "crash").length).toBeGreaterThanOrEqual(10);
    expect(exps.length).toBeLessThan(16);
  }, 120_000);

  it("explores on when every configuration ties, and says the objective is deterministic", async () => {
    const dir = knobProject({ score: "1.5", knob: "{ low: 1, high: 100 }", acceptance: "noise" });
    const outcome = await createRun({ program: dir, tag: "t", maxExperiments: 6 });
    const notes = outcome.lab.ledger.listNotes(outcome.run.id).map((n) => n.text);
    outcome.lab.ledger.close();
    const exps = experiments(dir);
    expect(exps).toHaveLength(7);
    for (const x of exps.slice(1)) {
      expect(x.decision?.action).toBe("discard");
      expect(x.decision?.reason).toMatch(/^not better: score 1\.5 vs best 1\.5/);
    }
    // Said once, not per decision.
    expect(notes.filter((t) => t.startsWith("noise: deterministic"))).toHaveLength(1);
    // Ties give the model nothing to prefer; it still never proposes a configuration twice.
    expect(new Set(exps.map(paramsKey)).size).toBe(7);
  }, 120_000);

  it("re-measures, and says so, once a tiny space holds nothing new", async () => {
    // X ∈ {5, 6}: the baseline is 5, so only one new configuration exists.
    const dir = knobProject({ score: "X", knob: "{ low: 5, high: 6, int: true }" });
    await createRun({ program: dir, tag: "t", maxExperiments: 2 });
    const exps = experiments(dir);
    expect(exps.map((x) => x.params?.X)).toEqual([5, 6, 6]);
    expect(exps[1]?.mechanism ?? "").not.toMatch(/re-measures/);
    expect(exps[2]?.mechanism).toMatch(
      /every nearby configuration was tried, so this re-measures an earlier one/,
    );
  }, 120_000);

  it("refuses a knob with one value, saying how to fix a value", () => {
    const text = `---
name: one
objective: { metric: score, direction: minimize }
run: { command: node run.mjs, budget: 5s }
files: { editable: [value.mjs] }
agent: builtin
search:
  X: { low: 5, high: 5 }
---
`;
    let err: unknown;
    try {
      parseProgram(text, "program.md");
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(AutolabError);
    const shown = `${(err as AutolabError).message}\n${(err as AutolabError).hint ?? ""}`;
    expect(shown).toMatch(/program\.md:8 {2}search\.X\.high/);
    expect(shown).toMatch(
      /high \(5\) must be greater than low \(5\): a knob with one value has nothing to search; leave it out of search:/,
    );
  });
});
