import { describe, expect, it } from "vitest";
import type { ScriptedStep } from "../src/agents/scripted-agent.ts";
import { runScripted } from "./helpers/scripted-run.ts";
import { valueProject } from "./helpers/value-project.ts";

const setX = (x: number): ScriptedStep["edits"] => ({ "value.mjs": `export const X = ${x};\n` });

describe("acceptance: greedy-final and posterior in a real run (issue #38)", () => {
  for (const acceptance of ["greedy-final", "posterior"] as const) {
    // Under load a run of 14 trials takes a while: the reserve doubles the last ones.
    it(`${acceptance}: one trial per challenger while exploring, the answer re-measured in the reserve`, {
      timeout: 240_000,
    }, async () => {
      const dir = valueProject({ acceptance, noise: 0.05 });
      const { experiments } = await runScripted(dir, [
        { hypothesis: "X 5 → 3 (a real gain)", edits: setX(3) },
        { hypothesis: "X 3 → 9 (a clear loss)", edits: setX(9) },
        { hypothesis: "X 3 → 8 (another loss)", edits: setX(8) },
        { hypothesis: "X 3 → 2.5 (a gain, in the reserve)", edits: setX(2.5) },
      ]);
      const [base, real, loss, , late] = experiments;
      // Two baseline trials on two different secret seeds: the first noise sample.
      expect(new Set(base?.trials.slice(0, 2).map((t) => t.seed)).size).toBe(2);
      // Exploring: one trial decides, a gain is built on at once, a loss costs one trial.
      expect(real?.decision?.action).toBe("keep");
      expect(real?.decision?.reason).toMatch(/exploring \(\d+% of the budget left\)/);
      expect(loss?.trials).toHaveLength(1);
      expect(loss?.decision?.action).toBe("discard");
      // The last experiment is in the reserve: the answer (#1) is re-measured to 4 trials on
      // its next seeds first, then the challenger is measured to as many before it replaces it.
      expect(new Set(real?.trials.map((t) => t.seed)).size).toBe(4);
      expect(late?.trials).toHaveLength(4);
      expect(late?.decision?.action).toBe("keep");
      expect(late?.decision?.reason).toMatch(/better after as many trials as the answer \(4\)/);
      // Four experiments cannot hold a 15% reserve of three re-measurements: said, with the
      // smallest budget that can.
      expect(late?.decision?.reason).toMatch(/budget \(4\) is too small .* smallest that can: 20/);
    });
  }
});
