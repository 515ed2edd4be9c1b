import { describe, expect, it } from "vitest";
import {
  formatKnobValue,
  formatNumber,
  parseNumberLiteral,
  readKnobs,
  roundKnobValue,
  writeKnob,
} from "../src/agents/builtin/knobs.ts";
import { createRng } from "../src/agents/builtin/rng.ts";
import { AutolabError } from "../src/core/errors.ts";
import type { Knob } from "../src/core/types.ts";

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
      ["LEARNING_RATE", "HIDDEN", "BATCH_SIZE", "WARMUP", "DROPOUT"],
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
      ["LEARNING_RATE", "HIDDEN", "STEPS", "DECAY", "NAME_LONGER"],
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
      ["B", "HIDDEN"],
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
        ["MOMENTUM"],
      ),
    );
    expect(err.code).toBe("KNOB_NOT_FOUND");
    expect(err.message).toContain("MOMENTUM");
    expect(err.message).toContain("train.py, model.py");
    expect(err.message).toContain("`MOMENTUM = 0.001`");
    expect(err.message).toContain("`const MOMENTUM = 0.001;`");
  });

  it("says when the knob is assigned something that is not a plain number", () => {
    const err = caught(() => readKnobs([{ path: "train.py", text: PY }], ["NOT_A_KNOB"]));
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
        ["LR"],
      ),
    );
    expect(err.code).toBe("KNOB_AMBIGUOUS");
    expect(err.message).toContain("a.py:1");
    expect(err.message).toContain("b.py:2");
  });

  it("does not confuse a knob with a longer name or a comparison", () => {
    const text = "LRX = 0.1\nMY_LR = 0.2\nif LR == 3: pass\nLR = 0.3\n";
    expect(readKnobs([{ path: "t.py", text }], ["LR"]).get("LR")).toMatchObject({ line: 4, value: 0.3 });
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

  it("rejects a value that is not a number literal, and a missing knob", () => {
    expect(() => writeKnob(PY, "HIDDEN", "128; import os")).toThrow(/not a number literal/);
    expect(caught(() => writeKnob(PY, "NOPE", 1)).code).toBe("KNOB_NOT_FOUND");
    expect(caught(() => writeKnob("A = 1\nA = 2\n", "A", 3)).code).toBe("KNOB_AMBIGUOUS");
  });
});

describe("formatKnobValue", () => {
  const lr: Knob = { low: 1e-6, high: 1, log: true, int: false };
  const hidden: Knob = { low: 16, high: 512, log: true, int: true };
  const dropout: Knob = { low: 0, high: 0.5, log: false, int: false };
  const big: Knob = { low: 1, high: 1e9, log: true, int: false };

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
    const knobs: Knob[] = [
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
      const knob = knobs[i % knobs.length] as Knob;
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
