import { describe, expect, it } from "vitest";
import {
  formatKnobValue,
  formatNumber,
  parseNumberLiteral,
  readKnobs,
  roundKnobValue,
  writeKnob,
} from "../src/agents/builtin/knobs.ts";
import { formatLiteral } from "../src/agents/builtin/literals.ts";
import { createRng } from "../src/agents/builtin/rng.ts";
import { AutolabError } from "../src/core/errors.ts";
import type { Knob, NumericKnob } from "../src/core/types.ts";

const PY = `import torch

# hyperparameters
LEARNING_RATE = 3e-4  # the step size
HIDDEN: int = 128
BATCH_SIZE = 1_024
WARMUP=.5
NOT_A_KNOB = 2 ** 7
DEPTH = 4 if torch.cuda.is_available() else 2
# DROPOUT = 0.3
DROPOUT = 0.1

def f():
    return LEARNING_RATE * 2
`;

const TS = `import { x } from "./x.ts";

export const LEARNING_RATE = 0.001; // step size
const HIDDEN: number = 64;
let STEPS = 1_000
var DECAY = -2.5e-3;   /* decay */
const NAME_LONGER = 7;
`;

/** Numeric knobs with wide bounds: the reading tests are about lines, not ranges. */
function numeric(names: string[]): Record<string, Knob> {
  return Object.fromEntries(names.map((n) => [n, { low: -1e9, high: 1e9, log: false, int: false }]));
}

function caught(fn: () => unknown): AutolabError {
  try {
    fn();
  } catch (err) {
    if (err instanceof AutolabError) return err;
    throw err;
  }
  throw new Error("expected an AutolabError");
}

describe("readKnobs", () => {
  it("finds Python constants, with annotations, comments and separators", () => {
    const knobs = readKnobs(
      [{ path: "train.py", text: PY }],
      numeric(["LEARNING_RATE", "HIDDEN", "BATCH_SIZE", "WARMUP", "DROPOUT"]),
    );
    expect(knobs.get("LEARNING_RATE")).toEqual({ file: "train.py", line: 4, value: 3e-4, literal: "3e-4" });
    expect(knobs.get("HIDDEN")).toMatchObject({ line: 5, value: 128 });
    expect(knobs.get("BATCH_SIZE")).toMatchObject({ value: 1024, literal: "1_024" });
    expect(knobs.get("WARMUP")).toMatchObject({ value: 0.5 });
    // The commented-out line does not count, so DROPOUT is not ambiguous.
    expect(knobs.get("DROPOUT")).toMatchObject({ line: 11, value: 0.1 });
  });

  it("finds JS/TS const, export const, let and var", () => {
    const knobs = readKnobs(
      [{ path: "train.ts", text: TS }],
      numeric(["LEARNING_RATE", "HIDDEN", "STEPS", "DECAY", "NAME_LONGER"]),
    );
    expect(knobs.get("LEARNING_RATE")).toMatchObject({ file: "train.ts", line: 3, value: 0.001 });
    expect(knobs.get("HIDDEN")).toMatchObject({ line: 4, value: 64 });
    expect(knobs.get("STEPS")).toMatchObject({ line: 5, value: 1000 });
    expect(knobs.get("DECAY")).toMatchObject({ line: 6, value: -2.5e-3 });
    expect(knobs.get("NAME_LONGER")).toMatchObject({ value: 7 });
  });

  it("searches several files and handles CRLF line endings", () => {
    const crlf = "A = 1\r\nB = 2.5 # b\r\n";
    const knobs = readKnobs(
      [
        { path: "model.py", text: crlf },
        { path: "train.ts", text: TS },
      ],
      numeric(["B", "HIDDEN"]),
    );
    expect(knobs.get("B")).toMatchObject({ file: "model.py", line: 2, value: 2.5 });
    expect(knobs.get("HIDDEN")).toMatchObject({ file: "train.ts" });
  });

  it("explains a missing knob: name, files searched, expected form", () => {
    const err = caught(() =>
      readKnobs(
        [
          { path: "train.py", text: PY },
          { path: "model.py", text: "" },
        ],
        numeric(["MOMENTUM"]),
      ),
    );
    expect(err.code).toBe("KNOB_NOT_FOUND");
    expect(err.message).toContain("MOMENTUM");
    expect(err.message).toContain("train.py, model.py");
    expect(err.message).toContain("`MOMENTUM = 0.001`");
    expect(err.message).toContain("`const MOMENTUM = 0.001;`");
  });

  it("says when the knob is assigned something that is not a plain number", () => {
    const err = caught(() => readKnobs([{ path: "train.py", text: PY }], numeric(["NOT_A_KNOB"])));
    expect(err.code).toBe("KNOB_NOT_FOUND");
    expect(err.message).toContain("train.py:8: NOT_A_KNOB = 2 ** 7");
  });

  it("refuses a knob defined twice, naming both places", () => {
    const err = caught(() =>
      readKnobs(
        [
          { path: "a.py", text: "LR = 0.1\n" },
          { path: "b.py", text: "x = 1\nLR = 0.2\n" },
        ],
        numeric(["LR"]),
      ),
    );
    expect(err.code).toBe("KNOB_AMBIGUOUS");
    expect(err.message).toContain("a.py:1");
    expect(err.message).toContain("b.py:2");
  });

  it("does not confuse a knob with a longer name or a comparison", () => {
    const text = "LRX = 0.1\nMY_LR = 0.2\nif LR == 3: pass\nLR = 0.3\n";
    expect(readKnobs([{ path: "t.py", text }], numeric(["LR"])).get("LR")).toMatchObject({
      line: 4,
      value: 0.3,
    });
  });
});

describe("writeKnob", () => {
  it("rewrites only the number, every other byte identical", () => {
    const out = writeKnob(PY, "LEARNING_RATE", "0.0012");
    expect(out).toBe(PY.replace("LEARNING_RATE = 3e-4  #", "LEARNING_RATE = 0.0012  #"));
    const ts = writeKnob(TS, "DECAY", "1e-5");
    expect(ts).toBe(TS.replace("var DECAY = -2.5e-3;   /* decay */", "var DECAY = 1e-5;   /* decay */"));
  });

  it("keeps CRLF line endings and non-UTF-8 bytes (latin1 round trip)", () => {
    const bytes = Buffer.concat([
      Buffer.from("# caf"),
      Buffer.from([0xe9, 0xa0, 0xff]),
      Buffer.from("\r\nHIDDEN = 64\r\nx = 1\r\n"),
    ]);
    const text = bytes.toString("latin1");
    const out = Buffer.from(writeKnob(text, "HIDDEN", 128), "latin1");
    const expected = Buffer.concat([
      Buffer.from("# caf"),
      Buffer.from([0xe9, 0xa0, 0xff]),
      Buffer.from("\r\nHIDDEN = 128\r\nx = 1\r\n"),
    ]);
    expect(out.equals(expected)).toBe(true);
  });

  it("rejects a value that is not a plain literal, and a missing knob", () => {
    expect(() => writeKnob(PY, "HIDDEN", "128; import os")).toThrow(/not a plain literal/);
    expect(() => writeKnob(PY, "HIDDEN", '"a"; import os')).toThrow(/not a plain literal/);
    expect(() => writeKnob(PY, "HIDDEN", '"a\nimport os"')).toThrow(/not a plain literal/);
    expect(caught(() => writeKnob(PY, "NOPE", 1)).code).toBe("KNOB_NOT_FOUND");
    expect(caught(() => writeKnob("A = 1\nA = 2\n", "A", 3)).code).toBe("KNOB_AMBIGUOUS");
  });
});

describe("formatKnobValue", () => {
  const lr: NumericKnob = { low: 1e-6, high: 1, log: true, int: false };
  const hidden: NumericKnob = { low: 16, high: 512, log: true, int: true };
  const dropout: NumericKnob = { low: 0, high: 0.5, log: false, int: false };
  const big: NumericKnob = { low: 1, high: 1e9, log: true, int: false };

  it("writes integers as integers and floats readably", () => {
    expect(formatKnobValue(137.4, hidden)).toBe("137");
    expect(formatKnobValue(0.00123456, lr)).toBe("0.00123");
    expect(formatKnobValue(0.0012, lr)).toBe("0.0012");
    expect(formatKnobValue(3.0004e-5, lr)).toBe("3e-5");
    expect(formatKnobValue(1.5e-4, lr)).toBe("1.5e-4");
    expect(formatKnobValue(0.5, lr)).toBe("0.5");
    expect(formatKnobValue(12.5, big)).toBe("12.5");
    expect(formatKnobValue(2, big)).toBe("2.0");
    expect(formatKnobValue(2.5e7, big)).toBe("2.5e7");
    expect(formatKnobValue(0.12345, dropout)).toBe("0.123");
    expect(formatKnobValue(0.0001, dropout)).toBe("0.0");
  });

  it("clamps to the bounds", () => {
    expect(roundKnobValue(1000, hidden)).toBe(512);
    expect(roundKnobValue(1e-9, lr)).toBe(1e-6);
    // Rounding 0.1236 to 3 digits would leave [low, high]: the bound itself is written.
    expect(formatKnobValue(0.12359, { low: 0.01, high: 0.1236, log: true, int: false })).toBe("0.1236");
  });

  it("round-trips: parsing the written text gives exactly the recorded value", () => {
    const rng = createRng(7);
    const knobs: NumericKnob[] = [
      lr,
      hidden,
      dropout,
      big,
      { low: 0.9, high: 0.999, log: false, int: false },
      { low: -3, high: 3, log: false, int: false },
      { low: 0, high: 100_000, log: false, int: true },
      { low: 1e-12, high: 1e-8, log: true, int: false },
    ];
    const bad: string[] = [];
    for (let i = 0; i < 20_000; i++) {
      const knob = knobs[i % knobs.length] as NumericKnob;
      const u = rng.next();
      const x = knob.log
        ? Math.exp(Math.log(knob.low) + u * (Math.log(knob.high) - Math.log(knob.low)))
        : knob.low + u * (knob.high - knob.low);
      const recorded = roundKnobValue(x, knob);
      const text = formatKnobValue(x, knob);
      const ok =
        parseNumberLiteral(text) === recorded &&
        Number(text) === recorded &&
        recorded >= knob.low &&
        recorded <= knob.high &&
        // Formatting the recorded value again is a fixed point.
        formatKnobValue(recorded, knob) === text;
      if (!ok) bad.push(`${x} -> ${text} (recorded ${recorded})`);
    }
    expect(bad).toEqual([]);
  });

  it("formatNumber is exact for any double", () => {
    for (const v of [0.1 + 0.2, 1 / 3, 123456.789, 1e-7, 6.02e23, -4.5e-4]) {
      expect(Number(formatNumber(v, false))).toBe(v);
    }
  });
});

describe("categorical knobs: reading and writing literals", () => {
  const PY_CAT = `from typing import Literal

OPTIMIZER = "adam"  # which one
SCHEDULE: Literal['cosine', 'linear'] = 'cosine'
USE_BN = True
WIDTH = 128
SCALE = 2.0
`;
  const TS_CAT = `export const OPT: "adam" | "sgd" = 'sgd';
const FLAG = false; // off
let MODE = "fast"
`;
  const cat = (...choices: (string | number | boolean)[]): Knob => ({ choices });
  const PY_SPACE: Record<string, Knob> = {
    OPTIMIZER: cat("adam", "sgd", "lion"),
    SCHEDULE: cat("cosine", "linear"),
    USE_BN: cat(true, false),
    WIDTH: cat(64, 128, 256),
    SCALE: cat(1, 2, 4),
  };
  const TS_SPACE: Record<string, Knob> = {
    OPT: cat("adam", "sgd"),
    FLAG: cat(true, false),
    MODE: cat("fast", "slow", 'it\'s "quoted"', "back\\slash\\", "héllo ✓"),
  };

  /** Writes `value` the way the builtin agent does (the line's style) and reads it back. */
  function roundTrip(
    text: string,
    file: string,
    space: Record<string, Knob>,
    name: string,
    value: string | number | boolean,
  ) {
    const at = readKnobs([{ path: file, text }], space).get(name);
    if (!at) throw new Error(`no ${name}`);
    const out = writeKnob(text, name, formatLiteral(value, at));
    return { out, read: readKnobs([{ path: file, text: out }], space).get(name) };
  }

  it("reads strings in either quote, numbers and booleans in Python and JS style", () => {
    const py = readKnobs([{ path: "train.py", text: PY_CAT }], PY_SPACE);
    expect(py.get("OPTIMIZER")).toEqual({ file: "train.py", line: 3, value: "adam", literal: '"adam"' });
    expect(py.get("SCHEDULE")).toMatchObject({ line: 4, value: "cosine", literal: "'cosine'" });
    expect(py.get("USE_BN")).toMatchObject({ value: true, literal: "True" });
    expect(py.get("WIDTH")).toMatchObject({ value: 128 });
    expect(py.get("SCALE")).toMatchObject({ value: 2, literal: "2.0" });
    const ts = readKnobs([{ path: "train.ts", text: TS_CAT }], {
      OPT: cat("adam", "sgd"),
      FLAG: cat(true, false),
      MODE: cat("fast", "slow"),
    });
    expect(ts.get("OPT")).toMatchObject({ line: 1, value: "sgd", literal: "'sgd'" });
    expect(ts.get("FLAG")).toMatchObject({ value: false, literal: "false" });
    expect(ts.get("MODE")).toMatchObject({ value: "fast" });
  });

  it("round-trips every kind in the file's own style, changing nothing but the literal", () => {
    const cases: [string, string, Record<string, Knob>, string, string | number | boolean, string][] = [
      [PY_CAT, "train.py", PY_SPACE, "OPTIMIZER", "sgd", 'OPTIMIZER = "sgd"  # which one'],
      [
        PY_CAT,
        "train.py",
        PY_SPACE,
        "SCHEDULE",
        "linear",
        "SCHEDULE: Literal['cosine', 'linear'] = 'linear'",
      ],
      [PY_CAT, "train.py", PY_SPACE, "USE_BN", false, "USE_BN = False"],
      [PY_CAT, "train.py", PY_SPACE, "WIDTH", 256, "WIDTH = 256"],
      // A float line stays a float line in Python.
      [PY_CAT, "train.py", PY_SPACE, "SCALE", 4, "SCALE = 4.0"],
      [TS_CAT, "train.ts", TS_SPACE, "OPT", "adam", 'export const OPT: "adam" | "sgd" = \'adam\';'],
      [TS_CAT, "train.ts", TS_SPACE, "FLAG", true, "const FLAG = true; // off"],
      [TS_CAT, "train.ts", TS_SPACE, "MODE", "slow", 'let MODE = "slow"'],
    ];
    for (const [text, file, space, name, value, line] of cases) {
      const { out, read } = roundTrip(text, file, space, name, value);
      expect(read?.value, name).toBe(value);
      const changed = out.split("\n").filter((l, i) => l !== text.split("\n")[i]);
      expect(changed, name).toEqual([line]);
    }
  });

  it("writes text with quotes, backslashes and non-ASCII as one safe literal (latin1 bytes, UTF-8 text)", () => {
    for (const value of ['it\'s "quoted"', "back\\slash\\", "héllo ✓"]) {
      const { out, read } = roundTrip(TS_CAT, "train.ts", TS_SPACE, "MODE", value);
      expect(read?.value).toBe(value);
      expect(out.split("\n").length).toBe(TS_CAT.split("\n").length);
      expect(out.replace(/^let MODE = .*$/m, "")).toBe(TS_CAT.replace(/^let MODE = .*$/m, ""));
    }
    // In the file the text is UTF-8.
    const { out } = roundTrip(TS_CAT, "train.ts", TS_SPACE, "MODE", "héllo ✓");
    expect(Buffer.from(out, "latin1").toString("utf8")).toContain('let MODE = "héllo ✓"');
  });

  it("a choice cannot break out of its literal into code", () => {
    const evil = '"; import os; os.system("x"); y = "';
    const space = { OPTIMIZER: cat("adam", evil) };
    const { out, read } = roundTrip(PY_CAT, "train.py", space, "OPTIMIZER", evil);
    expect(read?.value).toBe(evil);
    const line = out.split("\n")[2] as string;
    expect(line).toBe(`OPTIMIZER = "\\"; import os; os.system(\\"x\\"); y = \\""  # which one`);
  });

  it("names file, line, value and choices when the line holds something else", () => {
    const err = caught(() =>
      readKnobs([{ path: "train.py", text: PY_CAT }], { ...PY_SPACE, OPTIMIZER: cat("sgd", "lion") }),
    );
    expect(err.code).toBe("KNOB_NOT_A_CHOICE");
    expect(err.message).toBe(
      'knob OPTIMIZER: train.py:3 sets it to "adam", which is not one of its choices in program.md ("sgd", "lion")',
    );
    expect(err.hint).toContain('add "adam" to OPTIMIZER\'s choices');
    // Text and numbers differ.
    const num = caught(() => readKnobs([{ path: "t.py", text: "X = 1\n" }], { X: cat("1", "2") }));
    expect(num.code).toBe("KNOB_NOT_A_CHOICE");
    expect(num.message).toContain('sets it to 1, which is not one of its choices in program.md ("1", "2")');
  });

  it("a numeric knob's line must hold a number", () => {
    const err = caught(() => readKnobs([{ path: "train.py", text: PY_CAT }], numeric(["OPTIMIZER"])));
    expect(err.code).toBe("KNOB_NOT_A_NUMBER");
    expect(err.message).toContain('train.py:3 sets it to "adam"');
  });

  it("refuses a string escape that Python and JS read differently", () => {
    const err = caught(() =>
      readKnobs([{ path: "t.py", text: 'OPT = "a\\qb"\n' }], { OPT: cat("a\\qb", "x") }),
    );
    expect(err.message).toContain(
      't.py:1 holds "a\\qb", a string with an escape Python and JS read differently',
    );
  });

  it("a categorical knob assigned an expression is not found, and says so", () => {
    const err = caught(() =>
      readKnobs([{ path: "t.py", text: 'OPT = "adam" if fast else "sgd"\n' }], { OPT: cat("adam", "sgd") }),
    );
    expect(err.code).toBe("KNOB_NOT_FOUND");
    expect(err.message).toContain("not to one of its choices: t.py:1");
    expect(err.message).toContain('`OPT = "adam"`');
  });
});
