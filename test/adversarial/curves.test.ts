/**
 * Issue #34 class 4, "Trial-printed curves are believed": a kept candidate that printed a fake
 * progress curve (`train_loss: 0.01`) made the pruner discard every later challenger ("worse by
 * Infinity standard errors, σ 0"), an honest better one among them. Progress values a trial
 * prints are claims: a curve becomes the pruner's reference only once it agrees with what the
 * protected evaluator measured of the same trials (docs/security.md "Curves are claims").
 *
 * The project (test/helpers/value-project.ts): run.mjs (protected) prints train_loss = X·(1 + 1/s)
 * over 20 steps of 100 ms and writes X; evaluate.mjs (protected) scores X. value.mjs, the editable
 * file, is imported by run.mjs: it can rewrite what run.mjs prints.
 */
import { describe, expect, it } from "vitest";
import type { ScriptedStep } from "../../src/agents/scripted-agent.ts";
import { runScripted } from "../helpers/scripted-run.ts";
import { valueProject } from "../helpers/value-project.ts";

const setX = (x: number, extra = ""): ScriptedStep => ({
  hypothesis: `X → ${x}${extra ? " (and a curve of its own)" : ""}`,
  edits: { "value.mjs": `${extra}export const X = ${x};\n` },
});

/** value.mjs code that replaces every train_loss run.mjs prints with 0.01: a flat, fake curve. */
const FAKE_CURVE = `const print = console.log;
console.log = (...a) => print(...a.map((s) => String(s).replace(/train_loss=[^\\s]+/, "train_loss=0.01")));
`;

describe("trial-printed curves are claims", () => {
  it("a kept candidate's fake curve does not prune an honest, better challenger", async () => {
    const dir = valueProject({ steps: 20, budget: "4s" });
    const { experiments } = await runScripted(dir, [setX(4, FAKE_CURVE), setX(3)]);
    const story = experiments
      .map(
        (e) =>
          `#${e.n} ${e.decision?.action}: ${e.decision?.reason} [${e.trials.map((t) => t.result?.status)}]`,
      )
      .join("\n");
    const [, faker, honest] = experiments;
    // The faker is better (X 4 < 5) and kept: its evaluated value is real, its curve is not.
    expect(faker?.decision?.action, story).toBe("keep");
    expect(
      faker?.trials[0]?.result?.progress?.every(([, v]) => v === 0.01),
      story,
    ).toBe(true);
    // The honest challenger runs to the end and is kept with its measured value.
    expect(
      honest?.trials.map((t) => t.result?.status),
      story,
    ).toEqual(["ok"]);
    expect(honest?.decision?.action, story).toBe("keep");
    expect(honest?.decision?.metric, story).toBe(3);
  });

  it("an honest curve still prunes a clearly worse challenger", async () => {
    const dir = valueProject({ steps: 20, budget: "4s" });
    const { experiments } = await runScripted(dir, [setX(3), setX(9)]);
    const bad = experiments[2];
    expect(bad?.trials[0]?.result?.status).toBe("pruned");
    expect(bad?.decision?.reason).toMatch(/^pruned: /);
    expect(bad?.decision?.reason).not.toMatch(/Infinity|σ 0(?![.\d])/);
  });
});
