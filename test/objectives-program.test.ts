/**
 * Several objectives in program.md: the form, and every bad input reported at its YAML line.
 */
import { describe, expect, it } from "vitest";
import { AutolabError } from "../src/core/errors.ts";
import { contractChanges, contractOf } from "../src/program/contract.ts";
import { parseProgram } from "../src/program/parse.ts";

/** A program whose objective section is `objective` (starting on line 3). */
function program(objective: string): string {
  return `---
name: m
${objective}
run:
  command: node train.ts
  budget: 2m
files:
  editable: [train.ts]
---
`;
}

function failure(text: string): AutolabError {
  try {
    parseProgram(text, "lab/program.md");
  } catch (err) {
    expect(err).toBeInstanceOf(AutolabError);
    expect((err as AutolabError).code).toBe("PROGRAM_INVALID");
    return err as AutolabError;
  }
  throw new Error("expected the program to be rejected");
}

function reported(err: AutolabError, line: number, field: string): string {
  const found = err.message.split("\n").find((l) => l.includes(`lab/program.md:${line}  ${field}:`));
  expect(found, `no line "lab/program.md:${line}  ${field}:" in\n${err.message}`).toBeDefined();
  return found ?? "";
}

const PARETO = `objective:
  metrics:
    - { metric: loss, direction: minimize }
    - { metric: latency_ms, direction: minimize }
  mode: pareto`;

describe("objective: several metrics", () => {
  it("one objective stays as it was, without objectives", () => {
    const p = parseProgram(program("objective: { metric: loss, direction: minimize }"), "p.md");
    expect(p.objective).toEqual({ metric: "loss", direction: "minimize" });
    expect(p.objectives).toBeUndefined();
  });

  it("pareto: the first listed metric is the primary objective", () => {
    const p = parseProgram(program(PARETO), "p.md");
    expect(p.objective).toEqual({ metric: "loss", direction: "minimize" });
    expect(p.objectives).toEqual({
      mode: "pareto",
      metrics: [
        { metric: "loss", direction: "minimize" },
        { metric: "latency_ms", direction: "minimize" },
      ],
    });
  });

  it("mode defaults to pareto; threshold_then_optimize carries its bar", () => {
    const p = parseProgram(
      program(`objective:
  metrics: [{ metric: accuracy, direction: maximize }, { metric: size, direction: minimize }]`),
      "p.md",
    );
    expect(p.objectives?.mode).toBe("pareto");
    const t = parseProgram(
      program(`objective:
  metrics: [{ metric: accuracy, direction: maximize }, { metric: size, direction: minimize }]
  mode: threshold_then_optimize
  threshold: { metric: accuracy, bar: 0.9 }`),
      "p.md",
    );
    expect(t.objectives).toMatchObject({
      mode: "threshold_then_optimize",
      threshold: { metric: "accuracy", bar: 0.9 },
    });
  });

  it("the same metric twice: reported on the second entry's line", () => {
    const err = failure(
      program(`objective:
  metrics:
    - { metric: loss, direction: minimize }
    - { metric: loss, direction: maximize }`),
    );
    expect(reported(err, 6, "objective.metrics[1].metric")).toContain('"loss" is listed twice');
  });

  it("an unknown direction: reported on its line, with the two it may be", () => {
    const err = failure(
      program(`objective:
  metrics:
    - { metric: loss, direction: minimize }
    - { metric: speed, direction: fastest }`),
    );
    const line = reported(err, 6, "objective.metrics[1].direction");
    expect(line).toContain("minimize");
    expect(line).toContain("maximize");
  });

  it("one metric, or four: 2 or 3 entries", () => {
    const one = failure(
      program(`objective:
  metrics:
    - { metric: loss, direction: minimize }`),
    );
    expect(reported(one, 4, "objective.metrics")).toContain("lists 1 metric: several objectives: 2 or 3");
    const four = failure(
      program(`objective:
  metrics:
    - { metric: a, direction: minimize }
    - { metric: b, direction: minimize }
    - { metric: c, direction: minimize }
    - { metric: d, direction: minimize }`),
    );
    expect(reported(four, 4, "objective.metrics")).toContain("lists 4 metrics");
  });

  it("a threshold on a metric that is not listed", () => {
    const err = failure(
      program(`objective:
  metrics: [{ metric: accuracy, direction: maximize }, { metric: size, direction: minimize }]
  mode: threshold_then_optimize
  threshold:
    metric: acuracy
    bar: 0.9`),
    );
    expect(reported(err, 7, "objective.threshold.metric")).toContain(
      '"acuracy" is not one of the objective\'s metrics (accuracy, size)',
    );
  });

  it("threshold_then_optimize without a threshold, with three metrics; a threshold in pareto mode", () => {
    const err = failure(
      program(`objective:
  metrics: [{ metric: a, direction: maximize }, { metric: b, direction: minimize }, { metric: c, direction: minimize }]
  mode: threshold_then_optimize`),
    );
    expect(reported(err, 5, "objective.mode")).toContain("needs threshold:");
    expect(reported(err, 4, "objective.metrics")).toContain("exactly two metrics");
    const pareto = failure(program(`${PARETO}\n  threshold: { metric: loss, bar: 1 }`));
    expect(reported(pareto, 8, "objective.threshold")).toContain("threshold_then_optimize only");
  });

  it("both forms at once, or neither, or a mode on one metric", () => {
    const both = failure(program(`${PARETO}\n  metric: loss`));
    expect(reported(both, 8, "objective.metric")).toContain("not both");
    const neither = failure(program("objective: { direction: minimize }"));
    expect(neither.message).toContain("objective.metric: is required");
    const mode = failure(program("objective: { metric: loss, direction: minimize, mode: pareto }"));
    expect(mode.message).toContain("objective.mode: applies to several objectives only");
  });

  it("an unknown key in an entry gets a did-you-mean", () => {
    const err = failure(
      program(`objective:
  metrics:
    - { metric: loss, direction: minimize }
    - { metric: size, directon: minimize }`),
    );
    expect(err.message).toContain('did you mean "direction"');
  });

  it("the listed metrics are part of the run's contract; the mode and the bar are not", () => {
    const p = parseProgram(program(PARETO), "p.md");
    const one = parseProgram(program("objective: { metric: loss, direction: minimize }"), "p.md");
    expect(contractOf(one)).not.toHaveProperty(["objective.metrics"]);
    const changed = contractChanges(contractOf(one), contractOf(p));
    expect(changed).toEqual([expect.stringMatching(/^objective\.metrics: null → \[\{"metric":"loss"/)]);
    const threshold = parseProgram(
      program(
        `${PARETO.replace("mode: pareto", "mode: threshold_then_optimize")}\n  threshold: { metric: loss, bar: 1 }`,
      ),
      "p.md",
    );
    expect(contractChanges(contractOf(p), contractOf(threshold))).toEqual([]);
  });

  it("an objective metric cannot be a holdout", () => {
    const err = failure(program(PARETO).replace("files:", "metrics: { holdout: [latency_ms] }\nfiles:"));
    expect(err.message).toContain('"latency_ms" is an objective metric');
  });
});
