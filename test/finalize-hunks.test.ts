/**
 * The pure part of `autolab finalize`: zero-context diffs parsed into hunks, and which kept
 * change depends on which from overlapping or neighbouring lines (src/app/finalize-hunks.ts),
 * and the verdict of `--verify` on a change measured alone.
 */
import { describe, expect, it } from "vitest";
import {
  type ChangeHunks,
  closure,
  type Hunk,
  hunkDependencies,
  parseDiff,
} from "../src/app/finalize-hunks.ts";
import { verdictOf } from "../src/app/finalize-verify.ts";

const h = (oldStart: number, oldCount: number, newStart: number, newCount: number): Hunk => ({
  oldStart,
  oldCount,
  newStart,
  newCount,
});
const change = (n: number, files: Record<string, Hunk[] | "whole">): ChangeHunks => ({
  n,
  files: Object.entries(files).map(([path, hs]) =>
    hs === "whole" ? { path, hunks: [], whole: true } : { path, hunks: hs, whole: false },
  ),
});
const deps = (changes: ChangeHunks[]) =>
  Object.fromEntries([...hunkDependencies(changes)].map(([n, ds]) => [n, ds.map((d) => d.on)]));

describe("parseDiff", () => {
  it("reads files and hunks of `git diff -U0`, including new, deleted, binary and mode-only files", () => {
    const diff = [
      "diff --git a/src/a.py b/src/a.py",
      "index 1111111..2222222 100644",
      "--- a/src/a.py",
      "+++ b/src/a.py",
      "@@ -3 +3 @@ def f():",
      "-    return 1",
      "+    return 2",
      "@@ -10,0 +11,2 @@",
      "+x = 1",
      "+y = 2",
      "diff --git a/new.txt b/new.txt",
      "new file mode 100644",
      "--- /dev/null",
      "+++ b/new.txt",
      "@@ -0,0 +1 @@",
      "+hello",
      "diff --git a/old.txt b/old.txt",
      "deleted file mode 100644",
      "--- a/old.txt",
      "+++ /dev/null",
      "@@ -1,2 +0,0 @@",
      "-a",
      "-b",
      "diff --git a/img.png b/img.png",
      "Binary files a/img.png and b/img.png differ",
      "diff --git a/run.sh b/run.sh",
      "old mode 100644",
      "new mode 100755",
      'diff --git "a/caf\\303\\251 x.txt" "b/caf\\303\\251 x.txt"',
      '--- "a/caf\\303\\251 x.txt"',
      '+++ "b/caf\\303\\251 x.txt"',
      "@@ -1 +1 @@",
      "-a",
      "+b",
      "",
    ].join("\n");
    expect(parseDiff(diff)).toEqual([
      { path: "src/a.py", hunks: [h(3, 1, 3, 1), h(10, 0, 11, 2)], whole: false },
      { path: "new.txt", hunks: [h(0, 0, 1, 1)], whole: false },
      { path: "old.txt", hunks: [h(1, 2, 0, 0)], whole: false },
      { path: "img.png", hunks: [], whole: true },
      { path: "run.sh", hunks: [], whole: true },
      { path: "café x.txt", hunks: [h(1, 1, 1, 1)], whole: false },
    ]);
  });
});

describe("hunkDependencies", () => {
  it("a change to the same or a neighbouring line depends on the earlier change; one line between does not", () => {
    // #1 changes line 5. #2 changes line 5 again, #3 line 6 (adjacent), #4 line 7 (one line between).
    expect(deps([change(1, { f: [h(5, 1, 5, 1)] }), change(2, { f: [h(5, 1, 5, 1)] })])).toEqual({
      1: [],
      2: [1],
    });
    expect(deps([change(1, { f: [h(5, 1, 5, 1)] }), change(3, { f: [h(6, 1, 6, 1)] })])).toEqual({
      1: [],
      3: [1],
    });
    expect(deps([change(1, { f: [h(5, 1, 5, 1)] }), change(4, { f: [h(7, 1, 7, 1)] })])).toEqual({
      1: [],
      4: [],
    });
    expect(deps([change(1, { f: [h(5, 1, 5, 1)] }), change(5, { f: [h(3, 1, 3, 1)] })])).toEqual({
      1: [],
      5: [],
    });
  });

  it("other files never meet", () => {
    expect(deps([change(1, { f: [h(5, 1, 5, 1)] }), change(2, { g: [h(5, 1, 5, 1)] })])).toEqual({
      1: [],
      2: [],
    });
  });

  it("maps earlier lines through later changes: lines inserted above move them down", () => {
    // #1 changes line 20; #2 inserts 10 lines after line 1 (independent); #3 changes line 30,
    // which is #1's line 20 after #2's insertion.
    const c = [
      change(1, { f: [h(20, 1, 20, 1)] }),
      change(2, { f: [h(1, 0, 2, 10)] }),
      change(3, { f: [h(30, 1, 30, 1)] }),
    ];
    expect(deps(c)).toEqual({ 1: [], 2: [], 3: [1] });
    // Line 20 of the file after #2 is an untouched line: nobody's.
    expect(deps([c[0] as ChangeHunks, c[1] as ChangeHunks, change(4, { f: [h(18, 1, 18, 1)] })])).toEqual({
      1: [],
      2: [],
      4: [],
    });
  });

  it("a deletion leaves a point its neighbours meet; an insertion owns the lines it wrote", () => {
    // #1 deletes line 5 (the file's line 6 becomes line 5); #2 changes the new line 5 (adjacent).
    expect(deps([change(1, { f: [h(5, 1, 4, 0)] }), change(2, { f: [h(5, 1, 5, 1)] })])).toEqual({
      1: [],
      2: [1],
    });
    // #2 inserts after the new line 5: one line (the old line 6) between the two points.
    expect(deps([change(1, { f: [h(5, 1, 4, 0)] }), change(2, { f: [h(5, 0, 6, 1)] })])).toEqual({
      1: [],
      2: [],
    });
    expect(deps([change(1, { f: [h(5, 1, 4, 0)] }), change(2, { f: [h(4, 0, 5, 1)] })])).toEqual({
      1: [],
      2: [1],
    });
    // #1 inserts lines 6–7; #2 changes line 9 (line 8 between): independent; #3 changes line 7.
    const ins = change(1, { f: [h(5, 0, 6, 2)] });
    expect(deps([ins, change(2, { f: [h(9, 1, 9, 1)] })])).toEqual({ 1: [], 2: [] });
    expect(deps([ins, change(3, { f: [h(7, 1, 7, 1)] })])).toEqual({ 1: [], 3: [1] });
  });

  it("a file without line numbers (binary, mode) meets every change to that file, before and after", () => {
    const c = [
      change(1, { f: [h(5, 1, 5, 1)] }),
      change(2, { f: "whole" }),
      change(3, { f: [h(50, 1, 50, 1)] }),
    ];
    expect(deps(c)).toEqual({ 1: [], 2: [1], 3: [2] });
  });

  it("lists the files where they meet", () => {
    const out = hunkDependencies([
      change(1, { a: [h(1, 1, 1, 1)], b: [h(1, 1, 1, 1)] }),
      change(2, { b: [h(2, 1, 2, 1)], a: [h(1, 1, 1, 1)] }),
    ]);
    expect(out.get(2)).toEqual([{ on: 1, paths: ["a", "b"] }]);
  });
});

describe("closure", () => {
  it("is the change and everything it needs, oldest first", () => {
    const direct = new Map([
      [1, []],
      [2, [1]],
      [3, []],
      [4, [2, 3]],
    ]);
    expect(closure(4, direct)).toEqual([1, 2, 3, 4]);
    expect(closure(3, direct)).toEqual([3]);
  });
});

describe("verdictOf (finalize --verify)", () => {
  it("holds beyond 2σ, is not significant within it, has no gain at or below zero", () => {
    expect(verdictOf(1, 0.4, false)).toBe("holds");
    expect(verdictOf(0.8, 0.4, false)).toBe("not-significant");
    expect(verdictOf(0.5, 0.4, false)).toBe("not-significant");
    expect(verdictOf(0, 0.4, false)).toBe("no-gain");
    expect(verdictOf(-3, 0.4, false)).toBe("no-gain");
  });
  it("an exact objective (σ 0) or an unknown σ: any gain holds; a failed trial is said as such", () => {
    expect(verdictOf(1e-9, 0, false)).toBe("holds");
    expect(verdictOf(0.1, Number.NaN, false)).toBe("holds");
    expect(verdictOf(5, 0.1, true)).toBe("failed");
    expect(verdictOf(Number.NaN, 0.1, false)).toBe("failed");
  });
});
