/**
 * One spelling per path (src/core/file-patterns.ts normalizePath): the schema gives every
 * `files:` entry this spelling, and the matchers apply the same function to entries of a
 * Program built by hand, so the two can never disagree. And one place says where a lab's
 * notebook is (src/app/lab.ts locateNotebook), for run, the views and serve alike.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { locateNotebook } from "../src/app/lab.ts";
import { fileMatcher, normalizePath } from "../src/core/file-patterns.ts";
import { parseProgram } from "../src/program/index.ts";

describe("normalizePath", () => {
  it("one spelling: no ./, no trailing slash, forward slashes, the project itself as .", () => {
    expect(normalizePath("./src/train.ts")).toBe("src/train.ts");
    expect(normalizePath("././data/")).toBe("data");
    expect(normalizePath(" work//x.ts ")).toBe("work/x.ts");
    expect(normalizePath("src\\model.py")).toBe("src/model.py");
    expect(normalizePath("data/**/")).toBe("data/**");
    expect(normalizePath(".")).toBe(".");
    expect(normalizePath("./")).toBe(".");
  });

  it("program.md's entries get it", () => {
    const p = parseProgram(
      [
        "---",
        "name: m",
        "objective: { metric: loss, direction: minimize }",
        "run: { command: python train.py, budget: 2m }",
        "files:",
        '  editable: ["./train.py", "work/"]',
        '  protected: ["./eval//"]',
        "---",
        "",
      ].join("\n"),
      "program.md",
    );
    expect(p.files.editable).toEqual(["train.py", "work"]);
    expect(p.files.protected).toEqual(["eval"]);
  });

  it("a hand-built entry matches as its normal spelling does", () => {
    const m = fileMatcher(["./work//", "data\\*.csv"]);
    expect(m("work/impl.mjs")).toBe(true);
    expect(m("data/a.csv")).toBe(true);
    expect(m("lib/util.mjs")).toBe(false);
  });
});

describe("locateNotebook", () => {
  it("a project directory or its program.md: the same notebook in .autolab/", () => {
    const dir = mkdtempSync(join(tmpdir(), "autolab-locate-"));
    try {
      const want = {
        file: join(dir, "program.md"),
        stateDir: join(dir, ".autolab"),
        db: join(dir, ".autolab", "lab.db"),
      };
      expect(locateNotebook(dir)).toEqual(want);
      expect(locateNotebook(join(dir, "program.md"))).toEqual(want);
      const other = join(dir, "sub", "other.md");
      expect(locateNotebook(other)).toEqual({
        file: other,
        stateDir: join(dir, "sub", ".autolab"),
        db: join(dir, "sub", ".autolab", "lab.db"),
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
