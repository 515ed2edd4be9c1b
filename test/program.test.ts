import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { AutolabError } from "../src/core/errors.ts";
import { formatDuration } from "../src/core/format.ts";
import { parseDuration } from "../src/program/duration.ts";
import { defaultGraceMs, loadProgram, parseProgram } from "../src/program/parse.ts";

const TINY_LM = `---
name: tiny-lm
objective: { metric: val_bpb, direction: minimize }
run:
  setup: node prepare.ts
  command: node train.ts
  evaluate: node evaluate.ts
  budget: 10s
files:
  editable: [train.ts]
  protected: [prepare.ts, evaluate.ts]
metrics:
  holdout: [test_bpb]
  progress: train_loss
constraints: ["peak_rss_mb <= 4096"]
agent: builtin
search:
  LEARNING_RATE: { low: 1e-4, high: 1e-1, log: true }
  HIDDEN: { low: 16, high: 512, int: true, log: true }
---

# Research directions

Try a wider model.
`;

const MINIMAL = `---
name: m
objective: { metric: loss, direction: maximize }
run:
  command: python train.py
  budget: 2m
files:
  editable: [train.py]
---
`;

/** The PROGRAM_INVALID (or other) error parseProgram throws for `text`. */
function failure(text: string, file = "lab/program.md", code = "PROGRAM_INVALID"): AutolabError {
  try {
    parseProgram(text, file);
  } catch (err) {
    expect(err).toBeInstanceOf(AutolabError);
    expect((err as AutolabError).code).toBe(code);
    return err as AutolabError;
  }
  throw new Error("expected the program to be rejected");
}

/** The message line that reports `field`, asserting it names the file and line. */
function reported(err: AutolabError, line: number, field: string): string {
  const found = err.message.split("\n").find((l) => l.includes(`lab/program.md:${line}  ${field}:`));
  expect(found, `no line "lab/program.md:${line}  ${field}:" in\n${err.message}`).toBeDefined();
  return found ?? "";
}

/** TINY_LM with one line replaced (1-based line of the file). */
function withLine(line: number, replacement: string): string {
  const lines = TINY_LM.split("\n");
  lines[line - 1] = replacement;
  return lines.join("\n");
}

describe("parseProgram: valid programs", () => {
  it("parses the tiny-lm program", () => {
    const p = parseProgram(TINY_LM, "examples/tiny-lm/program.md");
    expect(p).toEqual({
      path: resolve("examples/tiny-lm/program.md"),
      name: "tiny-lm",
      objective: { metric: "val_bpb", direction: "minimize" },
      run: {
        setup: "node prepare.ts",
        command: "node train.ts",
        evaluate: "node evaluate.ts",
        budgetMs: 10_000,
        graceMs: 2_000,
        setupTimeoutMs: 600_000,
        evaluateTimeoutMs: 120_000,
      },
      files: { editable: ["train.ts"], protected: ["prepare.ts", "evaluate.ts"], holdout: [] },
      outputs: [],
      sandbox: { enabled: true, required: false, network: false, caches: [], env: [], limits: {} },
      metrics: { holdout: ["test_bpb"], progress: "train_loss" },
      constraints: ["peak_rss_mb <= 4096"],
      acceptance: "noise",
      agent: { backend: "builtin", args: [], env: {} },
      search: {
        LEARNING_RATE: { low: 1e-4, high: 0.1, log: true, int: false },
        HIDDEN: { low: 16, high: 512, log: true, int: true },
      },
      directions: "# Research directions\n\nTry a wider model.",
    });
  });

  it("fills in defaults", () => {
    const p = parseProgram(MINIMAL, "program.md");
    expect(p.run).toEqual({
      command: "python train.py",
      budgetMs: 120_000,
      graceMs: 12_000,
      setupTimeoutMs: 600_000,
      evaluateTimeoutMs: 120_000,
    });
    expect(p.files.protected).toEqual([]);
    expect(p.metrics).toEqual({ holdout: [] });
    expect(p.constraints).toEqual([]);
    expect(p.agent).toEqual({ backend: "builtin", args: [], env: {} });
    expect(p.search).toEqual({});
    expect(p.directions).toBe("");
    expect("setup" in p.run).toBe(false);
    expect("evaluate" in p.run).toBe(false);
  });

  it("clamps the default grace to [2s, 30s] and honours an explicit one", () => {
    expect(defaultGraceMs(500)).toBe(2_000);
    expect(defaultGraceMs(60_000)).toBe(6_000);
    expect(defaultGraceMs(3_600_000)).toBe(30_000);
    const p = parseProgram(
      MINIMAL.replace("budget: 2m", "budget: 90\n  grace: 0s\n  evaluate_timeout: 30s"),
      "p.md",
    );
    expect(p.run).toMatchObject({ budgetMs: 90_000, graceMs: 0, evaluateTimeoutMs: 30_000 });
  });

  it("normalizes file paths", () => {
    const p = parseProgram(
      MINIMAL.replace("editable: [train.py]", "editable: [./src/train.py, models/]"),
      "p.md",
    );
    expect(p.files.editable).toEqual(["src/train.py", "models"]);
  });

  it("accepts CRLF line endings and a byte-order mark", () => {
    const p = parseProgram(`\uFEFF${TINY_LM.replace(/\n/g, "\r\n")}`, "p.md");
    expect(p.name).toBe("tiny-lm");
    expect(p.directions).toBe("# Research directions\n\nTry a wider model.");
  });
});

describe("parseProgram: errors point at file, line and field", () => {
  it("rejects a bad duration", () => {
    const err = failure(withLine(8, "  budget: thirty"));
    const line = reported(err, 8, "run.budget");
    expect(line).toContain('"thirty" is not a duration');
    expect(err.message).toContain("budget: 30s");
  });

  it("reports a missing required field at its parent", () => {
    const err = failure(withLine(6, "  # no command"));
    expect(reported(err, 4, "run.command")).toContain("is required");
    expect(err.message).toContain("command: node train.ts");
  });

  it("suggests the closest known key for an unknown key", () => {
    const err = failure(withLine(8, "  budgett: 10s"));
    expect(reported(err, 8, "run.budgett")).toContain('did you mean "budget"?');
    // The misspelling also leaves budget missing, reported at run:
    reported(err, 4, "run.budget");
  });

  it("maps camelCase keys to their snake_case spelling", () => {
    const err = failure(MINIMAL.replace("budget: 2m", "budget: 2m\n  setupTimeout: 5m"));
    expect(err.message).toContain('unknown key "setupTimeout" — did you mean "setup_timeout"?');
  });

  it("says where a known key in the wrong section belongs", () => {
    const err = failure(withLine(16, "budget: 10s"));
    expect(reported(err, 16, "budget")).toContain("belongs under run: (run.budget)");
  });

  it("shows the right form for a one-word objective", () => {
    const err = failure(withLine(3, "objective: val_bpb"));
    expect(reported(err, 3, "objective")).toContain("expected a map with metric and direction");
    expect(err.message).toContain("objective: { metric: val_bpb, direction: minimize }");
  });

  it("suggests the closest enum value", () => {
    const err = failure(withLine(3, "objective: { metric: val_bpb, direction: minimise }"));
    expect(reported(err, 3, "objective.direction")).toContain('did you mean "minimize"?');
  });

  it("rejects an empty editable list", () => {
    const err = failure(withLine(10, "  editable: []"));
    expect(reported(err, 10, "files.editable")).toContain("at least one file");
  });

  it("rejects paths that leave the project or are absolute", () => {
    const err = failure(withLine(10, "  editable: [train.ts, ../secret.ts, /etc/passwd]"));
    expect(reported(err, 10, "files.editable[1]")).toContain('".." is not allowed');
    expect(reported(err, 10, "files.editable[2]")).toContain("absolute");
  });

  it("rejects a file that is both editable and protected, with block lists too", () => {
    const text = withLine(11, "  protected:\n    - prepare.ts\n    - ./train.ts");
    const err = failure(text);
    expect(reported(err, 13, "files.protected[1]")).toContain("both editable and protected");
  });

  it("rejects a protected directory that contains an editable file", () => {
    const err = failure(withLine(11, "  protected: [.]"));
    expect(reported(err, 11, "files.protected[0]")).toContain("overlaps editable");
  });

  it("rejects the objective metric as a holdout", () => {
    const err = failure(withLine(13, "  holdout: [test_bpb, val_bpb]"));
    expect(reported(err, 13, "metrics.holdout[1]")).toContain("objective metric");
  });

  it("rejects a constraint that does not parse", () => {
    const err = failure(withLine(15, 'constraints: ["peak_rss_mb <= 4096", "wall_s =< 60"]'));
    const line = reported(err, 15, "constraints[1]");
    expect(line).toContain("wall_s");
    expect(line).toContain('did you mean "wall_s <= 60"');
  });

  it("checks knob names and bounds", () => {
    const text = withLine(
      18,
      "  LEARNING-RATE: { low: 1e-4, high: 1e-1 }\n  BAD_BOUNDS: { low: 5, high: 1 }\n  LOG_ZERO: { low: 0, high: 1, log: true }",
    );
    const err = failure(text);
    expect(reported(err, 18, "search.LEARNING-RATE")).toContain("not an identifier");
    expect(reported(err, 19, "search.BAD_BOUNDS.high")).toContain("must be greater than low");
    expect(reported(err, 20, "search.LOG_ZERO.low")).toContain("low > 0");
    expect(err.message).toContain("LEARNING_RATE: { low: 1e-4, high: 1e-1, log: true }");
  });

  it("rejects an unknown knob option with the list of known ones", () => {
    const err = failure(withLine(19, "  HIDDEN: { low: 16, high: 512, step: 2 }"));
    expect(reported(err, 19, "search.HIDDEN.step")).toContain("low, high, log, int");
  });

  it("lists every problem, sorted by line", () => {
    const text = withLine(2, "name: ''")
      .replace("budget: 10s", "budget: -3s")
      .replace("agent: builtin", "agent: 7");
    const err = failure(text);
    expect(err.message).toContain("3 problems");
    const lines = err.message.split("\n").filter((l) => l.startsWith("  lab/program.md:"));
    expect(lines.map((l) => l.split("  ")[1])).toEqual([
      "lab/program.md:2",
      "lab/program.md:8",
      "lab/program.md:16",
    ]);
    expect(lines[2]).toContain("agent: expected a map, got 7");
  });

  it("never shows a raw zod message", () => {
    const err = failure(
      `---\nname: [1]\nobjective: 3\nrun: {}\nfiles: {editable: [1]}\nsearch: {A: {low: x}}\n---\n`,
    );
    expect(err.message).not.toMatch(/Invalid input|received|Too small|Unrecognized/);
  });

  it("reports an empty value as empty", () => {
    const err = failure(withLine(7, "  evaluate:"));
    expect(reported(err, 7, "run.evaluate")).toContain("is empty");
  });
});

/** A program whose search: lists `knobs`, one per line from line 10. */
function withSearch(...knobs: string[]): string {
  const head = MINIMAL.replace(/---\n$/, "");
  return `${head}search:\n${knobs.map((k) => `  ${k}`).join("\n")}\n---\n`;
}

describe("parseProgram: categorical and conditional knobs", () => {
  it("parses choices of text, numbers and booleans, and conditions (one choice or a list)", () => {
    const p = parseProgram(
      withSearch(
        "OPTIMIZER: { choices: [adam, sgd, lion] }",
        "MOMENTUM: { low: 0.5, high: 0.99, when: { OPTIMIZER: sgd } }",
        "NESTEROV: { choices: [true, false], when: { OPTIMIZER: [sgd, lion] } }",
        'WIDTH: { choices: [64, 128, "auto"] }',
        "LR: { low: 1e-4, high: 1e-1, log: true }",
      ),
      "program.md",
    );
    expect(p.search).toEqual({
      OPTIMIZER: { choices: ["adam", "sgd", "lion"] },
      MOMENTUM: { low: 0.5, high: 0.99, log: false, int: false, when: { OPTIMIZER: ["sgd"] } },
      NESTEROV: { choices: [true, false], when: { OPTIMIZER: ["sgd", "lion"] } },
      WIDTH: { choices: [64, 128, "auto"] },
      LR: { low: 1e-4, high: 1e-1, log: true, int: false },
    });
  });

  it("rejects too few choices, duplicates, values that are not scalars, and numeric options on a categorical knob", () => {
    const err = failure(
      withSearch(
        "A: { choices: [] }",
        "B: { choices: [adam] }",
        "C: { choices: [adam, sgd, adam] }",
        "D: { choices: [adam, { x: 1 }] }",
        'E: { choices: ["a\\nb", c] }',
        "F: { choices: [a, b], low: 0 }",
        "G: { log: true }",
        "H: { choices: [1, 1.0] }",
        "I: { choices: adam }",
      ),
    );
    expect(reported(err, 10, "search.A.choices")).toContain("at least two choices");
    expect(reported(err, 11, "search.B.choices")).toContain("at least two choices");
    expect(reported(err, 12, "search.C.choices[2]")).toContain('"adam" is listed twice');
    expect(reported(err, 13, "search.D.choices[1]")).toContain("text, a number or true/false");
    expect(reported(err, 14, "search.E.choices[0]")).toContain("control character");
    expect(reported(err, 15, "search.F.low")).toContain("a categorical knob (choices:) has no low");
    expect(reported(err, 16, "search.G.low")).toContain("is required");
    expect(reported(err, 17, "search.H.choices[1]")).toContain("1 is listed twice");
    expect(reported(err, 18, "search.I.choices")).toContain("expected a list");
    expect(err.message).toContain("OPTIMIZER: { choices: [adam, sgd, lion] }");
  });

  it("checks conditions: an existing categorical knob, its choices, not itself", () => {
    const err = failure(
      withSearch(
        "OPTIMIZER: { choices: [adam, sgd] }",
        "LR: { low: 0.1, high: 1 }",
        "M1: { low: 0, high: 1, when: { OPTIMISER: sgd } }",
        "M2: { low: 0, high: 1, when: { OPTIMIZER: sgdd } }",
        "M3: { low: 0, high: 1, when: { LR: 0.1 } }",
        "M4: { low: 0, high: 1, when: { OPTIMIZER: [] } }",
        "S: { choices: [x, y], when: { S: x } }",
        "W: { choices: [64, 128] }",
        'M5: { low: 0, high: 1, when: { W: "64", OPTIMIZER: [adam, nope] } }',
        "M6: { low: 0, high: 1, when: {} }",
      ),
    );
    expect(reported(err, 12, "search.M1.when.OPTIMISER")).toContain(
      'OPTIMISER is not a knob of search: — did you mean "OPTIMIZER"?',
    );
    expect(reported(err, 13, "search.M2.when.OPTIMIZER")).toContain(
      '"sgdd" is not a choice of OPTIMIZER ("adam", "sgd") — did you mean "sgd"?',
    );
    expect(reported(err, 14, "search.M3.when.LR")).toContain("LR is numeric");
    expect(reported(err, 15, "search.M4.when.OPTIMIZER")).toContain("at least one choice");
    expect(reported(err, 16, "search.S.when.S")).toContain("on itself");
    // Text and numbers differ: "64" is not the choice 64.
    expect(reported(err, 18, "search.M5.when.W")).toContain('"64" is not a choice of W (64, 128)');
    expect(reported(err, 18, "search.M5.when.OPTIMIZER[1]")).toContain('"nope" is not a choice of OPTIMIZER');
    expect(reported(err, 19, "search.M6.when")).toContain("names no knob");
    expect(err.message).toContain("MOMENTUM: { low: 0.5, high: 0.99, when: { OPTIMIZER: sgd } }");
  });

  it("rejects conditions that form a cycle, once, at the knob that starts it", () => {
    const err = failure(
      withSearch(
        "A: { choices: [x, y], when: { B: p } }",
        "B: { choices: [p, q], when: { C: u } }",
        "C: { choices: [u, v], when: { A: x } }",
        "D: { low: 0, high: 1, when: { A: y } }",
      ),
    );
    expect(reported(err, 10, "search.A.when")).toContain("a cycle: A → B → C → A");
    expect(err.message).toContain("1 problem");
  });
});

describe("parseProgram: slots and org", () => {
  it("has no slots and no org unless asked (the serial loop)", () => {
    const p = parseProgram(MINIMAL, "program.md");
    expect(p.slots).toBeUndefined();
    expect(p.org).toBeUndefined();
  });

  it("reads a slot count, GPUs and proposers; gpus fix the count", () => {
    expect(parseProgram(`${MINIMAL.slice(0, -4)}slots: 4\n---\n`, "p.md").slots).toEqual({
      count: 4,
      proposers: 4,
    });
    expect(parseProgram(`${MINIMAL.slice(0, -4)}slots: { gpus: [0, 1, 2] }\n---\n`, "p.md").slots).toEqual({
      count: 3,
      gpus: [0, 1, 2],
      proposers: 3,
    });
    expect(
      parseProgram(`${MINIMAL.slice(0, -4)}slots: { count: 8, proposers: 2 }\n---\n`, "p.md").slots,
    ).toEqual({
      count: 8,
      proposers: 2,
    });
  });

  it("reads org: as a directory or a map with a policy", () => {
    expect(parseProgram(`${MINIMAL.slice(0, -4)}org: team/\n---\n`, "p.md").org).toEqual({
      roles: "team/",
      policy: "bandit",
    });
    expect(
      parseProgram(`${MINIMAL.slice(0, -4)}org: { roles: org, policy: round-robin }\n---\n`, "p.md").org,
    ).toEqual({ roles: "org", policy: "round-robin" });
  });

  it("names the field of a bad slot count, GPU list or policy", () => {
    const lines = MINIMAL.split("\n").length - 1;
    const bad = (extra: string) => failure(`${MINIMAL.slice(0, -4)}${extra}\n---\n`);
    expect(reported(bad("slots: 0"), lines, "slots.count")).toContain("at least 1");
    expect(bad("slots: { gpus: [-1] }").message).toContain("GPU indices are 0 or more");
    expect(reported(bad("org: { policy: greedy }"), lines, "org.policy")).toContain("round-robin");
    expect(reported(bad("slots: { cuont: 2 }"), lines, "slots.cuont")).toContain(
      "the keys here are: count, gpus, proposers",
    );
  });
});

describe("parseProgram: hooks", () => {
  const lines = MINIMAL.split("\n").length - 1;
  const withHooks = (extra: string) => `${MINIMAL.slice(0, -4)}${extra}\n---\n`;

  it("reads before, after and budget; the grace is a trial's of that budget; no hooks: absent", () => {
    expect(parseProgram(MINIMAL, "p.md").hooks).toBeUndefined();
    expect(parseProgram(withHooks("hooks: { after: node plot.mjs }"), "p.md").hooks).toEqual({
      after: "node plot.mjs",
      budgetMs: 30_000,
      graceMs: 3000,
    });
    expect(
      parseProgram(withHooks("hooks: { before: node a.mjs, after: node b.mjs, budget: 2m }"), "p.md").hooks,
    ).toEqual({ before: "node a.mjs", after: "node b.mjs", budgetMs: 120_000, graceMs: 12_000 });
  });

  it("names the field of an unknown key, a bad budget, an empty command or no hook at all", () => {
    const bad = (extra: string) => failure(withHooks(extra));
    expect(reported(bad("hooks: { befor: node a.mjs }"), lines, "hooks.befor")).toContain(
      'did you mean "before"',
    );
    expect(reported(bad("hooks: { after: x, budget: soon }"), lines, "hooks.budget")).toContain(
      '"soon" is not a duration',
    );
    expect(reported(bad("hooks: { after: x, budget: 0s }"), lines, "hooks.budget")).toContain(
      "longer than zero",
    );
    expect(reported(bad('hooks: { after: "" }'), lines, "hooks.after")).toContain("must not be empty");
    expect(reported(bad("hooks: { budget: 10s }"), lines, "hooks")).toContain("names no hook");
  });
});

describe("parseProgram: YAML and frontmatter errors", () => {
  it("reports malformed YAML with the file line", () => {
    const err = failure(withLine(10, "  editable: [train.ts"));
    expect(err.message).toContain("not valid YAML");
    expect(err.message).toMatch(/lab\/program\.md:1[01]:\d+ {2}YAML:/);
  });

  it("reports a bad indent at its line", () => {
    // `budget` indented under `command: a` continues that value: YAML flags line 4.
    const err = failure(`---\nname: x\nrun:\n  command: a\n    budget: 1s\n---\n`);
    expect(err.message).toMatch(/lab\/program\.md:4:\d+ {2}YAML:/);
    const tabbed = failure(`---\nname: x\nrun:\n  command: a\n\tbudget: 1s\n---\n`);
    expect(tabbed.message).toMatch(/lab\/program\.md:5:\d+ {2}YAML:/);
  });

  it("reports duplicate keys", () => {
    const err = failure(`---\nname: x\nname: y\n---\n`);
    expect(err.message).toContain("lab/program.md:3:1  YAML: Map keys must be unique");
  });

  it("explains a missing frontmatter with a minimal program", () => {
    const err = failure("# Just directions\nname: x\n");
    expect(err.message).toContain("lab/program.md:1");
    expect(err.message).toContain("has no frontmatter");
    expect(err.message).toContain("objective: { metric: val_loss, direction: minimize }");
  });

  it("explains an unclosed frontmatter", () => {
    const err = failure("---\nname: x\n");
    expect(err.message).toContain("no closing `---`");
  });

  it("lists the required fields of an empty frontmatter", () => {
    const err = failure("---\n---\nbody\n");
    for (const field of ["name", "objective", "run", "files"])
      expect(err.message).toContain(`${field}: is required`);
  });

  it("rejects a frontmatter that is not a map", () => {
    const err = failure("---\n- a\n- b\n---\n");
    expect(err.message).toContain("must be a YAML map");
  });

  it("counts lines from the opening --- after leading blank lines", () => {
    const err = failure(`\n\n${withLine(8, "  budget: nope")}`);
    reported(err, 10, "run.budget");
  });
});

describe("docs/program.md", () => {
  it("has a complete example that parses", () => {
    const doc = readFileSync(new URL("../docs/program.md", import.meta.url), "utf8");
    const example = doc.split("## A complete example")[1]?.match(/```text\n([\s\S]*?)\n```/)?.[1];
    expect(example).toBeDefined();
    const p = parseProgram(example ?? "", "docs-example/program.md");
    expect(p.name).toBe("tiny-lm");
    expect(Object.keys(p.search)).toContain("LEARNING_RATE");
    expect(p.directions).toContain("Research directions");
  });
});

describe("loadProgram", () => {
  const dir = mkdtempSync(join(tmpdir(), "autolab-program-"));

  it("reads a file, or program.md in a directory", () => {
    const file = join(dir, "program.md");
    writeFileSync(file, TINY_LM);
    expect(loadProgram(file).path).toBe(file);
    expect(loadProgram(dir).name).toBe("tiny-lm");
  });

  it("tells the user to run autolab init when the file is missing", () => {
    const empty = join(dir, "empty");
    mkdirSync(empty);
    for (const path of [join(dir, "nope.md"), empty]) {
      try {
        loadProgram(path);
        throw new Error("expected PROGRAM_NOT_FOUND");
      } catch (err) {
        expect((err as AutolabError).code).toBe("PROGRAM_NOT_FOUND");
        expect((err as AutolabError).message).toContain("autolab init");
      }
    }
  });
});

describe("durations", () => {
  it("parses units, compounds and bare seconds", () => {
    expect(parseDuration("500ms")).toBe(500);
    expect(parseDuration("30s")).toBe(30_000);
    expect(parseDuration("2m")).toBe(120_000);
    expect(parseDuration("1h")).toBe(3_600_000);
    expect(parseDuration("1m30s")).toBe(90_000);
    expect(parseDuration("1.5s")).toBe(1_500);
    expect(parseDuration(" 10 s ")).toBe(10_000);
    expect(parseDuration("2min")).toBe(120_000);
    expect(parseDuration(30)).toBe(30_000);
    expect(parseDuration(0.25)).toBe(250);
    expect(parseDuration("45")).toBe(45_000);
    expect(parseDuration("0s")).toBe(0);
  });

  it("rejects what is not a duration", () => {
    for (const bad of ["", "thirty", "30x", "s", "-5s", "1e3s", "30 seconds later"]) {
      expect(() => parseDuration(bad), bad).toThrow(/is not a duration/);
    }
    expect(() => parseDuration(-1)).toThrow(AutolabError);
    expect(() => parseDuration(Number.POSITIVE_INFINITY)).toThrow(AutolabError);
  });

  it("formats for people and round-trips", () => {
    expect(formatDuration(250)).toBe("250ms");
    expect(formatDuration(1_500)).toBe("1.5s");
    expect(formatDuration(30_000)).toBe("30s");
    expect(formatDuration(90_000)).toBe("1m30s");
    expect(formatDuration(120_000)).toBe("2m");
    expect(formatDuration(3_900_000)).toBe("1h5m");
    expect(formatDuration(999.7)).toBe("1s");
    expect(formatDuration(59_990)).toBe("1m");
    for (const ms of [0, 7, 1_000, 12_300, 61_000, 7_261_000])
      expect(parseDuration(formatDuration(ms))).toBe(ms);
  });
});

describe("db: (the notebook on PostgreSQL)", () => {
  const withDb = (db: string) => MINIMAL.replace("name: m\n", `name: m\ndb: ${db}\n`);

  it("takes a postgres:// URL without a password", () => {
    expect(() =>
      parseProgram(withDb("postgres://autolab@db.internal/lab?schema=night"), "program.md"),
    ).not.toThrow();
  });

  it("refuses a URL with a password (program.md is committed), never echoing it", () => {
    const err = failure(withDb("postgres://autolab:hunter2@db.internal/lab"));
    expect(err.message).toMatch(/password.*PGPASSWORD/);
    expect(err.message).not.toContain("hunter2");
  });

  it("refuses something that is not a postgres:// URL", () => {
    expect(failure(withDb("mysql://db/lab")).message).toMatch(/not a postgres:\/\/ URL/);
  });
});

describe("programDb: where locateNotebook finds program.md's db:", () => {
  it("reads db: from a program.md, even a broken one, and nothing from a file without it", async () => {
    const { programDb } = await import("../src/program/program-db.ts");
    const dir = mkdtempSync(join(tmpdir(), "autolab-db-"));
    const file = join(dir, "program.md");
    writeFileSync(file, "---\nname: x\ndb: postgres://u@h/lab\nrun: [broken\n---\n");
    expect(programDb(file)).toBeUndefined(); // YAML that does not parse: loadProgram reports it
    writeFileSync(file, "---\nname: x\ndb: postgres://u@h/lab\nrun: 3\n---\n");
    expect(programDb(file)).toBe("postgres://u@h/lab");
    writeFileSync(file, MINIMAL);
    expect(programDb(file)).toBeUndefined();
    expect(programDb(join(dir, "missing.md"))).toBeUndefined();
  });
});
