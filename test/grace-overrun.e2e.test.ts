/**
 * A grace-window overrun (issue #34, "Bad input and faults"): a command that finishes after its
 * budget but inside the grace window is accepted as before, and said to be one — in the run's
 * progress and in `autolab show`.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { graceOverrun } from "../src/core/trial-step.ts";
import { runCli } from "./helpers/toy-project.ts";
import { git, valueProject } from "./helpers/value-project.ts";

it("graceOverrun: seconds past the budget of a command that finished", () => {
  expect(graceOverrun({ status: "ok", wallS: 1.6 }, 1000)).toBe(0.6);
  expect(graceOverrun({ status: "ok", wallS: 0.9 }, 1000)).toBeUndefined();
  expect(graceOverrun({ status: "timeout", wallS: 3 }, 1000)).toBeUndefined();
  expect(graceOverrun({ status: "crash", wallS: 1.5 }, 1000)).toBe(0.5);
});

it("a baseline that overruns its budget inside the grace window is kept and shown as an overrun", async () => {
  const dir = valueProject({ command: "sleep 1.6 && node run.mjs", budget: "1s" });
  const path = join(dir, "program.md");
  writeFileSync(path, readFileSync(path, "utf8").replace("  budget: 1s", "  budget: 1s\n  grace: 5s"));
  git(dir, "commit", "-qam", "grace");
  const r = await runCli(["run", "--tag", "t", "-n", "0"], { cwd: dir });
  expect(r.code).toBe(0);
  expect(r.stdout).toMatch(/#0 trial 1: ran [\d.]+s past its budget, inside the grace window \(accepted/);
  const show = await runCli(["show", "0"], { cwd: dir });
  expect(show.stdout).toMatch(
    /Trial 1 \(seed \d+, budget 1s\): ok \[overran its budget by [\d.]+s, inside the grace window\]/,
  );
}, 120_000);
