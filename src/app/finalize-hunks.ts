/**
 * Which kept changes of a run depend on which, from their hunks alone (pure: `autolab finalize`
 * reads the diffs with git and hands them here).
 *
 * The kept changes of a run form a chain: change k's diff goes from the best before it to its
 * commit, so its line numbers are those of the file after changes 1…k−1. For every file we keep
 * the ranges of lines each earlier change wrote, mapped forward through every later change, and
 * change k depends on change i when one of k's hunks touches or is adjacent to a range of i's.
 * Adjacency matters because git's three-way merge refuses changes to neighbouring lines (a
 * change to line 6 does not apply without the change to line 5 it was made after), while one
 * unchanged line between two changes lets both apply alone. A change with no line numbers
 * (a binary file, a mode change of a file with no hunk) touches the whole file.
 */

/** One hunk of a zero-context diff (`git diff -U0`): old and new line ranges. */
export interface Hunk {
  oldStart: number;
  oldCount: number;
  newStart: number;
  newCount: number;
}

/** A file a change touches, with its hunks; `whole` when the diff gives no line numbers (binary). */
export interface FileChange {
  path: string;
  hunks: Hunk[];
  whole: boolean;
}

/** One kept change, in the order of the chain. */
export interface ChangeHunks {
  n: number;
  files: FileChange[];
}

/** Why change `on` is needed by another: the files where their lines meet. */
export interface HunkDependency {
  on: number;
  paths: string[];
}

/**
 * Parses `git diff -U0 --no-renames` output into files and hunks. Paths are repository-relative
 * (`b/` side; the `a/` side for a deleted file). Quoted paths (unusual characters) are unquoted.
 */
export function parseDiff(diff: string): FileChange[] {
  const files: FileChange[] = [];
  let cur: FileChange | undefined;
  for (const line of diff.split("\n")) {
    if (line.startsWith("diff --git ")) {
      cur = { path: pathOfHeader(line), hunks: [], whole: false };
      files.push(cur);
      continue;
    }
    if (!cur) continue;
    if (line.startsWith("+++ ") && line !== "+++ /dev/null") {
      cur.path = stripSide(line.slice(4));
    } else if (line.startsWith("--- ") && line !== "--- /dev/null" && cur.hunks.length === 0) {
      cur.path = stripSide(line.slice(4));
    } else if (line.startsWith("@@ ")) {
      const m = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/.exec(line);
      if (m) {
        cur.hunks.push({
          oldStart: Number(m[1]),
          oldCount: m[2] === undefined ? 1 : Number(m[2]),
          newStart: Number(m[3]),
          newCount: m[4] === undefined ? 1 : Number(m[4]),
        });
      }
    } else if (line.startsWith("Binary files ") || line.startsWith("GIT binary patch")) {
      cur.whole = true;
    }
  }
  // A file with neither hunks nor a binary marker changed only its mode (or is an empty new
  // file): no line numbers, so it counts as the whole file.
  for (const f of files) if (f.hunks.length === 0) f.whole = true;
  return files;
}

function pathOfHeader(line: string): string {
  // "diff --git a/x b/x": the b side. Quoted when the path has unusual characters.
  const rest = line.slice("diff --git ".length);
  const quoted = /"b\/((?:[^"\\]|\\.)*)"$/.exec(rest);
  if (quoted) return unquote(quoted[1] ?? "");
  const i = rest.lastIndexOf(" b/");
  return i >= 0 ? rest.slice(i + 3) : rest;
}

function stripSide(p: string): string {
  const s = p.startsWith('"') ? unquote(p.slice(1, -1)) : p;
  return s.replace(/^[ab]\//, "");
}

function unquote(s: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < s.length; i++) {
    const c = s[i] as string;
    if (c !== "\\") {
      bytes.push(...Buffer.from(c, "utf8"));
      continue;
    }
    const next = s[++i] ?? "";
    if (/[0-7]/.test(next)) {
      bytes.push(Number.parseInt(s.slice(i, i + 3), 8));
      i += 2;
    } else
      bytes.push(({ n: 10, t: 9, '"': 34, "\\": 92 } as Record<string, number>)[next] ?? next.charCodeAt(0));
  }
  return Buffer.from(bytes).toString("utf8");
}

/**
 * A range of lines a change wrote, in the current coordinates of its file: `lo`…`hi` inclusive.
 * A deletion wrote no line: it is the point between two lines (`lo = hi = line + 0.5`).
 */
interface Owned {
  n: number;
  lo: number;
  hi: number;
}

/** The old side of a hunk as an interval (a pure insertion is the point after oldStart). */
function oldSpan(h: Hunk): [number, number] {
  return h.oldCount === 0 ? [h.oldStart + 0.5, h.oldStart + 0.5] : [h.oldStart, h.oldStart + h.oldCount - 1];
}

function newSpan(h: Hunk): [number, number] {
  return h.newCount === 0 ? [h.newStart + 0.5, h.newStart + 0.5] : [h.newStart, h.newStart + h.newCount - 1];
}

/** Touching or neighbouring: no unchanged line between the two spans (a point is between two lines). */
function meets(a: [number, number], b: [number, number]): boolean {
  const [first, second] = a[0] <= b[0] ? [a, b] : [b, a];
  if (second[0] <= first[1]) return true;
  // Whole lines strictly between the end of one and the start of the other.
  return Math.ceil(second[0]) - Math.floor(first[1]) - 1 <= 0;
}

/** Maps a position of the old file through a change's hunks to the new file. */
function mapPosition(p: number, hunks: Hunk[]): number {
  let delta = 0;
  for (const h of hunks) {
    const [lo, hi] = oldSpan(h);
    if (hi < p && !(h.oldCount === 0 && lo === p)) {
      delta += h.newCount - h.oldCount;
      continue;
    }
    if (lo <= p && p <= hi) {
      // Inside a replaced block: the position lands on the block that replaced it.
      const [nlo] = newSpan(h);
      return nlo;
    }
    break;
  }
  return p + delta;
}

/**
 * Dependencies of each change on earlier ones (direct only; a branch takes their closure):
 * change n → the earlier changes whose lines its hunks meet, oldest first.
 */
export function hunkDependencies(changes: readonly ChangeHunks[]): Map<number, HunkDependency[]> {
  const owned = new Map<string, Owned[]>();
  const wholeOwners = new Map<string, Set<number>>();
  const out = new Map<number, HunkDependency[]>();
  for (const c of changes) {
    const deps = new Map<number, Set<string>>();
    const add = (on: number, path: string) => {
      if (on === c.n) return;
      if (!deps.has(on)) deps.set(on, new Set());
      deps.get(on)?.add(path);
    };
    for (const f of c.files) {
      const ranges = owned.get(f.path) ?? [];
      for (const w of wholeOwners.get(f.path) ?? []) add(w, f.path);
      if (f.whole) {
        for (const r of ranges) add(r.n, f.path);
      } else {
        for (const h of f.hunks) {
          const span = oldSpan(h);
          for (const r of ranges) if (meets(span, [r.lo, r.hi])) add(r.n, f.path);
        }
      }
    }
    out.set(
      c.n,
      [...deps.entries()]
        .sort((a, b) => a[0] - b[0])
        .map(([on, paths]) => ({ on, paths: [...paths].sort() })),
    );
    // Now the file is the one after change c: earlier ranges move, c's own lines are added.
    for (const f of c.files) {
      if (f.whole) {
        if (!wholeOwners.has(f.path)) wholeOwners.set(f.path, new Set());
        wholeOwners.get(f.path)?.add(c.n);
        continue;
      }
      const moved = (owned.get(f.path) ?? []).map((r) => ({
        n: r.n,
        lo: mapPosition(r.lo, f.hunks),
        hi: Math.max(mapPosition(r.lo, f.hunks), mapPosition(r.hi, f.hunks)),
      }));
      for (const h of f.hunks) {
        const [lo, hi] = newSpan(h);
        moved.push({ n: c.n, lo, hi });
      }
      owned.set(f.path, moved);
    }
  }
  return out;
}

/** The change and everything it needs, oldest first (the order the branch applies them in). */
export function closure(n: number, direct: ReadonlyMap<number, readonly number[]>): number[] {
  const seen = new Set<number>();
  const visit = (k: number) => {
    if (seen.has(k)) return;
    seen.add(k);
    for (const d of direct.get(k) ?? []) visit(d);
  };
  visit(n);
  return [...seen].sort((a, b) => a - b);
}
