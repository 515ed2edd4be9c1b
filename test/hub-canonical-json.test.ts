import { describe, expect, it } from "vitest";
import { mulberry32 } from "../src/core/random.ts";
import { canonicalBytes, canonicalize } from "../src/hub/canonical-json.ts";

/** A double from its IEEE-754 bits, as RFC 8785 Appendix B writes them. */
function fromHex(hex: string): number {
  return Buffer.from(hex, "hex").readDoubleBE(0);
}

function refused(value: unknown): string {
  try {
    canonicalize(value);
  } catch (e) {
    expect((e as { code?: string }).code).toBe("CANONICAL_JSON_INVALID");
    return (e as Error).message;
  }
  throw new Error("not refused");
}

describe("canonical JSON: RFC 8785's own examples", () => {
  it("§3.2.2's sample: literals, numbers and string escapes", () => {
    // The RFC's input text, parsed as a receiver would parse it.
    const input = `{
      "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
      "string": "\\u20ac$\\u000F\\u000aA'\\u0042\\u0022\\u005c\\\\\\"\\/",
      "literals": [null, true, false]
    }`;
    expect(canonicalize(JSON.parse(input))).toBe(
      `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA'B\\"\\\\\\\\\\"/"}`,
    );
  });

  it("§3.2.3's sample: keys sorted by UTF-16 code units", () => {
    const input = `{
      "\\u20ac": "Euro Sign",
      "\\r": "Carriage Return",
      "\\ufb33": "Hebrew Letter Dalet With Dagesh",
      "1": "One",
      "\\ud83d\\ude00": "Emoji: Grinning Face",
      "\\u0080": "Control",
      "\\u00f6": "Latin Small Letter O With Diaeresis"
    }`;
    // Read back as text: JSON.parse would list the integer-like key "1" first again.
    // The emoji (U+1F600, code units D83D DE00) sorts before U+FB33: by code point it would not.
    expect(canonicalize(JSON.parse(input))).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",' +
        '"\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    );
  });

  // Appendix B: IEEE-754 bits → the canonical number text.
  const appendixB: [string, string][] = [
    ["0000000000000000", "0"],
    ["8000000000000000", "0"], // minus zero
    ["0000000000000001", "5e-324"],
    ["8000000000000001", "-5e-324"],
    ["7fefffffffffffff", "1.7976931348623157e+308"],
    ["ffefffffffffffff", "-1.7976931348623157e+308"],
    ["4340000000000000", "9007199254740992"],
    ["c340000000000000", "-9007199254740992"],
    ["4430000000000000", "295147905179352830000"],
    ["44b52d02c7e14af5", "9.999999999999997e+22"],
    ["44b52d02c7e14af6", "1e+23"],
    ["44b52d02c7e14af7", "1.0000000000000001e+23"],
    ["444b1ae4d6e2ef4e", "999999999999999700000"],
    ["444b1ae4d6e2ef4f", "999999999999999900000"],
    ["444b1ae4d6e2ef50", "1e+21"],
    ["3eb0c6f7a0b5ed8c", "9.999999999999997e-7"],
    ["3eb0c6f7a0b5ed8d", "0.000001"],
    ["41b3de4355555553", "333333333.3333332"],
    ["41b3de4355555554", "333333333.33333325"],
    ["41b3de4355555555", "333333333.3333333"],
    ["41b3de4355555556", "333333333.3333334"],
    ["41b3de4355555557", "333333333.33333343"],
    ["becbf647612f3696", "-0.0000033333333333333333"],
    ["43143ff3c1cb0959", "1424953923781206.2"],
  ];
  it.each(appendixB)("Appendix B: %s → %s", (hex, text) => {
    expect(canonicalize(fromHex(hex))).toBe(text);
  });

  it("Appendix B: NaN and Infinity are errors", () => {
    expect(refused(fromHex("7fffffffffffffff"))).toContain("NaN");
    expect(refused(fromHex("7ff0000000000000"))).toContain("Infinity");
    expect(refused(-Infinity)).toContain("-Infinity");
  });
});

describe("canonical JSON: what it refuses (never drops)", () => {
  it.each([
    ["undefined", undefined],
    ["undefined in an object", { a: undefined }],
    ["undefined in an array", [undefined]],
    ["a function", () => 1],
    ["a symbol", Symbol("s")],
    ["a BigInt", 10n],
    ["a Date", new Date(0)],
    ["a Map", new Map()],
    ["a class instance", new (class Point {})()],
    ["a lone high surrogate", "a\uD800b"],
    ["a lone low surrogate", "\uDC00"],
    ["a lone surrogate in a key", { "\uD83D": 1 }],
    // biome-ignore lint/suspicious/noSparseArray: the hole is the test
    ["a hole in an array", [1, , 3]],
  ])("%s", (_what, value) => {
    refused(value);
  });

  it("a cycle", () => {
    const a: Record<string, unknown> = {};
    a.self = a;
    expect(refused(a)).toContain("cycle");
  });

  it("names where the bad value is", () => {
    expect(refused({ metrics: { loss: [1, Number.NaN] } })).toContain("$.metrics.loss[1]");
  });

  it("accepts the same object twice when it is not a cycle, and objects without a prototype", () => {
    const shared = { x: 1 };
    expect(canonicalize({ a: shared, b: shared })).toBe('{"a":{"x":1},"b":{"x":1}}');
    const bare = Object.assign(Object.create(null), { b: 1, a: 2 });
    expect(canonicalize(bare)).toBe('{"a":2,"b":1}');
  });
});

describe("canonical JSON: shapes", () => {
  it("nested arrays and objects, no whitespace, keys sorted at every depth", () => {
    expect(canonicalize({ z: [[3, [2, { b: 1, a: [] }]], {}], a: { y: null, x: true } })).toBe(
      '{"a":{"x":true,"y":null},"z":[[3,[2,{"a":[],"b":1}]],{}]}',
    );
  });

  it("integer-like keys are sorted as strings, not first the way Object.keys lists them", () => {
    expect(canonicalize({ b: 1, 10: 2, 9: 3, a: 4 })).toBe('{"10":2,"9":3,"a":4,"b":1}');
  });

  it("non-ASCII keys: code units, not locale order", () => {
    // "é" (U+00E9) after "z" by code unit; a locale compare would put it before.
    expect(canonicalize({ é: 1, z: 2, E: 3, e: 4 })).toBe('{"E":3,"e":4,"z":2,"é":1}');
    // U+FF21 comes before U+1F600 by code point, after it by code unit (D83D < FF21).
    expect(canonicalize({ "\uFF21": 1, "😀": 2 })).toBe('{"😀":2,"Ａ":1}');
  });

  it("number-format games canonicalize equal: 1.0 and 1, 1e2 and 100, -0 and 0", () => {
    expect(canonicalize(JSON.parse("[1.0, 1e2, -0, 0.10, 1E-7]"))).toBe("[1,100,0,0.1,1e-7]");
    expect(canonicalize(JSON.parse('{"a":1.0}'))).toBe(canonicalize(JSON.parse('{ "a" : 1 }')));
  });

  it("control characters use the short escapes or lower-case \\u00xx; / and non-ASCII stay literal", () => {
    expect(canonicalize("\b\t\n\f\r\u0001\u001f\u007f/é\u2028")).toBe(
      '"\\b\\t\\n\\f\\r\\u0001\\u001f\u007f/é\u2028"',
    );
  });

  it("the bytes are UTF-8", () => {
    expect(canonicalBytes({ k: "€" }).toString("hex")).toBe(Buffer.from('{"k":"€"}', "utf8").toString("hex"));
  });
});

/** A small seeded generator of JSON values (fast-check is not a dependency). */
function generator(seed: number) {
  const rand = mulberry32(seed);
  const int = (n: number) => Math.floor(rand() * n);
  const alphabet = [
    "a",
    "b",
    "Z",
    "0",
    "é",
    "€",
    "😀",
    "\uFB33",
    "\u0080",
    "\n",
    '"',
    "\\",
    "\u0001",
    " ",
    "/",
  ];
  const str = (): string => Array.from({ length: int(6) }, () => alphabet[int(alphabet.length)]).join("");
  const num = (): number => {
    switch (int(6)) {
      case 0:
        return int(2000) - 1000;
      case 1:
        return (rand() - 0.5) * 10 ** (int(40) - 20);
      case 2:
        return fromHex(Array.from({ length: 8 }, () => int(256).toString(16).padStart(2, "0")).join(""));
      case 3:
        return -0;
      case 4:
        return Number.MAX_SAFE_INTEGER * (rand() < 0.5 ? 1 : -1);
      default:
        return rand();
    }
  };
  const value = (depth: number): unknown => {
    const k = int(depth > 3 ? 4 : 6);
    if (k === 0) return null;
    if (k === 1) return rand() < 0.5;
    if (k === 2) {
      const n = num();
      return Number.isFinite(n) ? n : 0;
    }
    if (k === 3) return str();
    if (k === 4) return Array.from({ length: int(4) }, () => value(depth + 1));
    const o: Record<string, unknown> = {};
    for (let i = int(5); i > 0; i--) o[str()] = value(depth + 1);
    return o;
  };
  return { value: () => value(0), int };
}

/** The same value with every object's keys inserted in a shuffled order. */
function shuffled(v: unknown, int: (n: number) => number): unknown {
  if (Array.isArray(v)) return v.map((x) => shuffled(x, int));
  if (v === null || typeof v !== "object") return v;
  const entries = Object.entries(v);
  for (let i = entries.length - 1; i > 0; i--) {
    const j = int(i + 1);
    [entries[i], entries[j]] = [entries[j] as [string, unknown], entries[i] as [string, unknown]];
  }
  return Object.fromEntries(entries.map(([k, x]) => [k, shuffled(x, int)]));
}

describe("canonical JSON: properties over 2,000 seeded values", () => {
  const seeds = Array.from({ length: 2000 }, (_, i) => i + 1);

  it("canonicalize(JSON.parse(canonicalize(x))) === canonicalize(x), and it is valid JSON", () => {
    for (const seed of seeds) {
      const x = generator(seed).value();
      const c = canonicalize(x);
      expect(canonicalize(JSON.parse(c)), `seed ${seed}`).toBe(c);
    }
  });

  it("the key order of the input never changes the output", () => {
    for (const seed of seeds) {
      const g = generator(seed);
      const x = g.value();
      expect(canonicalize(shuffled(x, g.int)), `seed ${seed}`).toBe(canonicalize(x));
    }
  });

  it("pretty-printing and re-parsing never changes the output", () => {
    for (const seed of seeds.slice(0, 500)) {
      const x = generator(seed).value();
      expect(canonicalize(JSON.parse(JSON.stringify(x, null, 2))), `seed ${seed}`).toBe(canonicalize(x));
    }
  });
});
