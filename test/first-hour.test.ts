/**
 * A newcomer's first hour (issue #36 item 11): the small things a first session trips on, each
 * pinned where it is made.
 */
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { createAgent } from "../src/agents/index.ts";
import { createProgress } from "../src/cli/progress.ts";
import { exitCodeOf } from "../src/core/error-codes.ts";
import { formatCount } from "../src/core/format.ts";
import type { AgentConfig, Program } from "../src/core/types.ts";
import { parseProgram } from "../src/program/index.ts";

const PROGRAM = (extra: string) =>
  `---\nname: t\nobjective: { metric: score, direction: minimize }\nrun:\n  command: node train.mjs\n  budget: 5s\nfiles:\n  editable: [train.mjs]\n${extra}---\n`;

describe("first-hour details", () => {
  it("counts agree with their noun: 1 experiment, 2 experiments", () => {
    expect(formatCount(1, "experiment")).toBe("1 experiment");
    expect(formatCount(0, "experiment")).toBe("0 experiments");
    expect(formatCount(2, "experiment")).toBe("2 experiments");
    const out = new PassThrough();
    let text = "";
    out.on("data", (d: Buffer) => {
      text += d.toString();
    });
    const p = createProgress({ out: out as unknown as NodeJS.WriteStream, tty: false });
    p.onEvent({
      type: "run_started",
      tag: "t",
      branch: "autolab/t",
      metric: "score",
      resumed: true,
      experiments: 1,
    });
    p.stop();
    expect(text).toContain("Resuming run t (1 experiment so far)");
  });

  it("--agent Claude gets a did-you-mean", async () => {
    await expect(
      createAgent({ backend: "Claude" } as unknown as AgentConfig, {} as Program, 0),
    ).rejects.toMatchObject({
      code: "AGENT_UNKNOWN",
      message: expect.stringMatching(/did you mean "claude"\?/),
    });
  });

  it("an unknown export format is a bad command line: exit 2, as docs/cli.md says of a bad value", () => {
    expect(exitCodeOf("BAD_FORMAT")).toBe(2);
  });

  it("a misspelt `budgt:` at the top level is told that budget lives under run:", () => {
    let message = "";
    try {
      parseProgram(PROGRAM("budgt: 5m\n"), "/p/program.md");
    } catch (err) {
      message = String((err as Error).message);
    }
    expect(message).toMatch(/budgt/);
    expect(message).toMatch(/run\.budget/);
  });
});
