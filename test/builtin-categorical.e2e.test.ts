/**
 * End-to-end: `autolab run` with the built-in optimizer over a project whose knobs include a
 * categorical one, a conditional one and a boolean, then what `log`, `show` and `status` say.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keyOf, makeDims } from "../src/agents/builtin/space.ts";
import type { Knob, Params } from "../src/core/types.ts";
import { GIT_ENV, runCli } from "./helpers/toy-project.ts";

const TRAIN = `const OPTIMIZER = "adam";
const MOMENTUM = 0.6; // sgd only
const USE_BN = true;
const LR = 0.3;

const base = { adam: 0.5, sgd: 0, lion: 0.8 }[OPTIMIZER];
const momentum = OPTIMIZER === "sgd" ? 4 * (MOMENTUM - 0.9) ** 2 : 0;
console.log("score: " + (base + momentum + (USE_BN ? 0 : 0.3) + (Math.log10(LR) + 2) ** 2));
`;

const PROGRAM = `---
name: categorical
objective: { metric: score, direction: minimize }
run: { command: node train.mjs, budget: 10s }
files: { editable: [train.mjs] }
acceptance: greedy
search:
  OPTIMIZER: { choices: [adam, sgd, lion] }
  MOMENTUM: { low: 0.5, high: 0.99, when: { OPTIMIZER: sgd } }
  USE_BN: { choices: [true, false] }
  LR: { low: 0.0001, high: 1, log: true }
---
Tune the optimizer.
`;

const SPACE: Record<string, Knob> = {
  OPTIMIZER: { choices: ["adam", "sgd", "lion"] },
  MOMENTUM: { low: 0.5, high: 0.99, log: false, int: false, when: { OPTIMIZER: ["sgd"] } },
  USE_BN: { choices: [true, false] },
  LR: { low: 0.0001, high: 1, log: true, int: false },
};

interface Row {
  id: number;
  hypothesis: string;
  commit: string;
  parent: string;
  decision: string;
  params: Params | null;
}

const dir = mkdtempSync(join(tmpdir(), "autolab-categorical-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function git(...args: string[]): string {
  return execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", ...args], {
    cwd: dir,
    encoding: "utf8",
    env: { ...process.env, ...GIT_ENV },
  });
}

const lineOf = (text: string, name: string) =>
  text.split("\n").find((l) => l.startsWith(`const ${name} =`)) as string;

describe("a run of the built-in optimizer with categorical and conditional knobs", () => {
  let rows: Row[];

  beforeAll(async () => {
    writeFileSync(join(dir, "train.mjs"), TRAIN);
    writeFileSync(join(dir, "program.md"), PROGRAM);
    git("init", "-q", "-b", "main");
    git("add", "-A");
    git("commit", "-qm", "init");
    const r = await runCli(["run", "-n", "8"], { cwd: dir });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const log = await runCli(["log", "--json"], { cwd: dir });
    expect(log.code).toBe(0);
    rows = JSON.parse(log.stdout) as Row[];
  });

  it("records the full configuration of every experiment, as its commit's files say it", () => {
    expect(rows.map((r) => r.id)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect(rows[0]?.params).toEqual({ OPTIMIZER: "adam", MOMENTUM: 0.6, USE_BN: true, LR: 0.3 });
    for (const r of rows) {
      const p = r.params as Params;
      const text = git("show", `${r.commit}:train.mjs`);
      expect(lineOf(text, "OPTIMIZER"), `#${r.id}`).toBe(`const OPTIMIZER = ${JSON.stringify(p.OPTIMIZER)};`);
      expect(lineOf(text, "USE_BN"), `#${r.id}`).toBe(`const USE_BN = ${p.USE_BN};`);
      expect(lineOf(text, "MOMENTUM"), `#${r.id}`).toMatch(
        new RegExp(`^const MOMENTUM = ${p.MOMENTUM}(\\.0)?; // sgd only$`),
      );
      expect(["keep", "discard"]).toContain(r.decision);
    }
  });

  it("leaves the conditional knob untouched where it is inactive, and never repeats a configuration", () => {
    const dims = makeDims(SPACE);
    const keys = rows.map((r) => keyOf(dims, r.params as Params));
    expect(new Set(keys).size).toBe(keys.length);
    for (const r of rows.slice(1)) {
      if ((r.params as Params).OPTIMIZER === "sgd") continue;
      const parent = git("show", `${r.parent}:train.mjs`);
      const mine = git("show", `${r.commit}:train.mjs`);
      expect(lineOf(mine, "MOMENTUM"), `#${r.id}`).toBe(lineOf(parent, "MOMENTUM"));
      expect(r.hypothesis).not.toContain("MOMENTUM");
    }
  });

  it("show and status render text values (quoted in the terminal)", async () => {
    const opt = (r: Row | undefined) => r?.params?.OPTIMIZER;
    const parentOf = (r: Row) => rows.find((x) => x.commit === r.parent);
    const changed = rows.find((r) => r.id > 0 && opt(r) !== opt(parentOf(r)));
    expect(changed, "no experiment changed OPTIMIZER").toBeDefined();
    const r = changed as Row;
    expect(r.hypothesis).toContain(`OPTIMIZER ${opt(parentOf(r))} → ${opt(r)}`);
    const show = await runCli(["show", String(r.id)], { cwd: dir });
    expect(show.code).toBe(0);
    expect(show.stdout).toContain(`OPTIMIZER=${JSON.stringify(opt(r))}`);
    const status = await runCli(["status", "--json"], { cwd: dir });
    expect(status.code).toBe(0);
    const s = JSON.parse(status.stdout) as {
      predictedBest: { id: number } | null;
      counts: { total: number };
    };
    expect(s.counts.total).toBe(9);
    expect(s.predictedBest).not.toBeNull();
  });
});
