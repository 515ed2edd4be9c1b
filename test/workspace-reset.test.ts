/**
 * The byte-exact reset (src/workspace/reset.ts through GitWorkspace.cleanTree), property-based:
 * random worktree states — names of any bytes (non-UTF-8 included), files, directories, empty
 * directories, FIFOs, sockets, symlinks, hard links, modes such as 000 directories and setuid
 * files, nesting, committed paths replaced or re-moded — and after the reset the tree must be
 * exactly the commit as git checks it out, plus the kept paths (setup's files, a cache) as they
 * were, plus the declared outputs that are regular files or directories of them (the others
 * refused and gone). Runs as root here and in CI: permissions stop nothing, so the test checks
 * that 000 directories and odd modes are removed or restored, not that they were readable.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { lstatSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findRepo, GitWorkspace } from "../src/workspace/git-workspace.ts";
import { cleanupTemp, gitSync, tempDir } from "./helpers/git-project.ts";

afterAll(() => cleanupTemp());

/** A byte-string path (latin1: one char per byte) → what lstat says of the entry. */
type Listing = Map<string, string>;

const hex = (s: string) => Buffer.from(s, "latin1").toString("hex");

/** Every entry below `root` (the worktree's `.git` file excepted), by bytes; never follows a link. */
function listing(root: string): Listing {
  const out: Listing = new Map();
  const walk = (rel: string) => {
    const abs = Buffer.from(rel ? `${root}/${rel}` : root, "latin1");
    for (const n of readdirSync(abs, { encoding: "buffer" })) {
      const name = n.toString("latin1");
      if (!rel && name === ".git") continue;
      const child = rel ? `${rel}/${name}` : name;
      out.set(child, describeEntry(Buffer.from(`${root}/${child}`, "latin1")));
      if (lstatSync(Buffer.from(`${root}/${child}`, "latin1")).isDirectory()) walk(child);
    }
  };
  walk("");
  return out;
}

function describeEntry(abs: Buffer): string {
  const st = lstatSync(abs);
  const mode = (st.mode & 0o7777).toString(8);
  if (st.isFile())
    return `file ${mode} ${createHash("sha256").update(readFileSync(abs)).digest("hex").slice(0, 16)}`;
  if (st.isDirectory()) return `dir ${mode}`;
  if (st.isSymbolicLink())
    return `link -> ${hex(readlinkSync(abs, { encoding: "buffer" }).toString("latin1"))}`;
  if (st.isFIFO()) return "fifo";
  if (st.isSocket()) return "socket";
  return "other";
}

/** The committed files (text names, and one that is not UTF-8), written with Python so any byte goes. */
const COMMITTED: Array<{ path: string; content: string; mode?: number; link?: string }> = [
  { path: "train.py", content: "SHRINK = 0.5\n" },
  { path: "run.sh", content: "#!/bin/sh\necho hi\n", mode: 0o755 },
  { path: "data/val.csv", content: "x,y\n1,2\n" },
  { path: "data/deep/x.txt", content: "deep\n" },
  { path: "\xff\xfebin.dat", content: "not utf-8 name\n" },
  { path: "\xc3\xa9t\xc3\xa9.txt", content: "utf-8 name\n" },
  { path: "link", content: "", link: "train.py" },
];
/** Setup's files and a declared cache (kept as they are), and two declared outputs. */
const SETUP = "setup";
const CACHE = ".cache";
const OUTPUTS = ["out/model.json", "outdir"];

/** Names the generator draws from: committed and kept names, so that states collide with them. */
const NAMES = [
  "train.py",
  "run.sh",
  "data",
  "deep",
  "x.txt",
  "link",
  "\xff\xfebin.dat",
  "setup",
  ".cache",
  "out",
  "model.json",
  "outdir",
  "a",
  "b",
  "\xff",
  "\xc3\xa9",
  "new\nline",
  "sp ace",
];

/** Paths the commit, the kept paths and the outputs hold: half the ops land on one of them. */
const KNOWN: string[][] = [
  ["train.py"],
  ["run.sh"],
  ["data"],
  ["data", "val.csv"],
  ["data", "deep"],
  ["data", "deep", "x.txt"],
  ["\xff\xfebin.dat"],
  ["link"],
  [SETUP],
  [SETUP, "s1"],
  [CACHE],
  [CACHE, "c1"],
  ["out"],
  ["out", "model.json"],
  ["outdir"],
  ["outdir", "f"],
  ["outdir", "sub", "g"],
];

type Kind = "file" | "dir" | "fifo" | "socket" | "symlink" | "hardlink" | "remove" | "chmod";
interface Op {
  path: string[];
  kind: Kind;
  mode: number;
  content: string;
  target: string;
}

const opArb: fc.Arbitrary<Op> = fc.record({
  path: fc.oneof(
    fc.constantFrom(...KNOWN),
    fc.array(fc.constantFrom(...NAMES), { minLength: 1, maxLength: 4 }),
  ),
  kind: fc.constantFrom<Kind>(
    "file",
    "file",
    "dir",
    "dir",
    "fifo",
    "socket",
    "symlink",
    "hardlink",
    "remove",
    "chmod",
    "chmod",
  ),
  mode: fc.constantFrom(-1, -1, 0, 0o000, 0o500, 0o600, 0o644, 0o755, 0o777, 0o4755, 0o1777),
  content: fc.string({ maxLength: 8 }),
  target: fc.constantFrom("train.py", "../x", "/etc/passwd", "data", "setup/s1", "\xff"),
});

/** Python that applies the ops (hex-encoded byte paths) in `root`; an op that cannot apply is skipped. */
const APPLY_PY = `
import json, os, socket, sys
root = sys.argv[1].encode()
chmods = []
for op in json.loads(sys.stdin.read()):
    p = os.path.join(root, bytes.fromhex(op["path"]))
    try:
        os.makedirs(os.path.dirname(p), exist_ok=True)
        k = op["kind"]
        if k == "chmod":
            if op["mode"] >= 0 and os.path.lexists(p):
                chmods.append((p, op["mode"]))
            continue
        if k == "remove":
            if os.path.isdir(p) and not os.path.islink(p):
                import shutil
                shutil.rmtree(p)
            else:
                os.unlink(p)
            continue
        if os.path.lexists(p) and k != "dir":
            if os.path.isdir(p) and not os.path.islink(p):
                import shutil
                shutil.rmtree(p)
            else:
                os.unlink(p)
        if k == "file":
            with open(p, "wb") as f:
                f.write(op["content"].encode())
        elif k == "dir":
            os.makedirs(p, exist_ok=True)
        elif k == "fifo":
            os.mkfifo(p)
        elif k == "socket":
            s = socket.socket(socket.AF_UNIX)
            s.bind(p)
            s.close()
        elif k == "symlink":
            os.symlink(bytes.fromhex(op["target"]), p)
        elif k == "hardlink":
            # Only inside the tree: a hard link to a file outside it (/etc/passwd) would let a
            # chmod below change that file for the whole machine (this test runs as root).
            t = os.path.normpath(os.path.join(root, bytes.fromhex(op["target"])))
            if not t.startswith(root + b"/"):
                continue
            os.link(t, p)
        if op["mode"] >= 0:
            chmods.append((p, op["mode"]))
    except OSError:
        pass
for p, m in reversed(chmods):
    try:
        if not os.path.islink(p):
            os.chmod(p, m)
    except OSError:
        pass
`;

function apply(root: string, ops: Op[]): void {
  const json = JSON.stringify(
    ops.map((o) => ({
      ...o,
      path: hex(o.path.join("/")),
      target: hex(Buffer.from(o.target, "utf8").toString("latin1")),
    })),
  );
  execFileSync("/usr/bin/python3", ["-c", APPLY_PY, root], { input: json });
}

/** The parents of a byte-string path ("a/b/c" → "a", "a/b"). */
function parents(p: string): string[] {
  const out: string[] = [];
  for (let i = p.indexOf("/"); i !== -1; i = p.indexOf("/", i + 1)) out.push(p.slice(0, i));
  return out;
}

/** An output the reset must keep: a regular file, or a directory of regular files (one at least) and directories. */
function validOutput(before: Listing, out: string): boolean {
  const own = before.get(out);
  if (!own) return false;
  if (own.startsWith("file ")) return true;
  if (!own.startsWith("dir ")) return false;
  const inside = [...before].filter(([p]) => p.startsWith(`${out}/`)).map(([, d]) => d);
  return (
    inside.every((d) => d.startsWith("file ") || d.startsWith("dir ")) &&
    inside.some((d) => d.startsWith("file "))
  );
}

/** A directory the reset had to enter keeps its mode with u+rwx added. */
function entered(desc: string): string {
  if (!desc.startsWith("dir ")) return desc;
  return `dir ${(Number.parseInt(desc.slice(4), 8) | 0o700).toString(8)}`;
}

/**
 * What the tree must be after the reset: the commit as checked out (`pristine`), plus each kept
 * path (and everything under it) as it was when every directory on its way was a directory —
 * those directories entered (u+rwx) unless committed — plus the valid outputs likewise.
 */
function expected(pristine: Listing, before: Listing, keep: string[], outputs: string[]): Listing {
  const out: Listing = new Map(pristine);
  for (const k of [...keep, ...outputs]) {
    const own = before.get(k);
    if (!own) continue;
    if (parents(k).some((d) => !before.get(d)?.startsWith("dir "))) continue;
    if (outputs.includes(k) && !validOutput(before, k)) continue;
    for (const d of parents(k)) if (!pristine.has(d)) out.set(d, entered(before.get(d) as string));
    const isOutput = outputs.includes(k);
    out.set(k, isOutput ? entered(own) : own);
    for (const [p, d] of before) if (p.startsWith(`${k}/`)) out.set(p, isOutput ? entered(d) : d);
  }
  return out;
}

const op = (path: string[], kind: Kind, mode = -1, target = ""): Op => ({
  path,
  kind,
  mode,
  content: "x",
  target,
});

/** Always tried first: each kind the issue names once (what git status never shows, odd modes). */
const EXAMPLE: Op[] = [
  op(["\xff\xfe-state"], "file"),
  op(["memo", "k=v"], "dir"),
  op(["locked"], "dir", 0o000),
  op(["sealed", "inner", "x"], "file", 0o000),
  op(["sealed"], "chmod", 0o000),
  op(["pipe"], "fifo"),
  op(["sock"], "socket"),
  op(["hard"], "hardlink", -1, "train.py"),
  op(["train.py"], "chmod", 0o000),
  op(["run.sh"], "chmod", 0o4755),
  op(["data"], "chmod", 0o000),
  op(["out", "model.json"], "dir"),
  op(["outdir", "f"], "fifo"),
  op([SETUP, "x"], "fifo"),
];

const show = (l: Listing) =>
  [...l]
    .map(([p, d]) => `${JSON.stringify(p)} ${d}`)
    .sort()
    .join("\n");

describe("the byte-exact reset (GitWorkspace.cleanTree)", () => {
  let ws: GitWorkspace;
  let base: string;
  let pristine: Listing;

  beforeAll(async () => {
    const root = tempDir("autolab-reset-");
    gitSync(root, "init", "-q");
    execFileSync(
      "/usr/bin/python3",
      [
        "-c",
        `import json, os, sys
for f in json.loads(sys.stdin.read()):
    p = os.path.join(sys.argv[1].encode(), bytes.fromhex(f["path"]))
    os.makedirs(os.path.dirname(p), exist_ok=True)
    if f.get("link"):
        os.symlink(f["link"].encode(), p)
        continue
    with open(p, "w") as fh:
        fh.write(f["content"])
    if f.get("mode"):
        os.chmod(p, f["mode"])`,
        root,
      ],
      { input: JSON.stringify(COMMITTED.map((f) => ({ ...f, path: hex(f.path) }))) },
    );
    gitSync(root, "add", "-A");
    gitSync(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base");
    base = gitSync(root, "rev-parse", "HEAD").trim();
    ws = await GitWorkspace.open({
      repo: await findRepo(root),
      tag: "reset",
      stateDir: join(root, ".autolab"),
      baseCommit: base,
      protectedFiles: [],
      protectedHashes: {},
    });
    // The commit as `git worktree add` checked it out: what the reset must give back.
    pristine = listing(ws.worktree);
    expect(pristine.get("\xff\xfebin.dat")).toMatch(/^file /);
    expect(pristine.get("link")).toMatch(/^link /);
  });

  // Each case spawns Python and four git processes: seconds on an idle machine, more on a loaded one.
  it("leaves exactly the commit, the kept paths and the valid outputs, whatever the tree held", {
    timeout: 300_000,
  }, async () => {
    const seeding: Op[] = [
      { path: [SETUP, "s1"], kind: "file", mode: -1, content: "setup made me", target: "" },
      { path: [CACHE, "c1"], kind: "file", mode: -1, content: "cached", target: "" },
    ];
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { maxLength: 14 }), fc.boolean(), async (ops, seeded) => {
        apply(ws.worktree, seeded ? [...seeding, ...ops] : ops);
        const before = listing(ws.worktree);
        const keep = [SETUP, CACHE, ...OUTPUTS];
        const refused = await ws.cleanTree(base, keep, OUTPUTS);
        const after = listing(ws.worktree);
        expect(show(after)).toBe(show(expected(pristine, before, [SETUP, CACHE], OUTPUTS)));
        const wronglyShaped = OUTPUTS.filter((o) => before.has(o) && !validOutput(before, o)).filter(
          (o) => !parents(o).some((d) => !before.get(d)?.startsWith("dir ")),
        );
        expect(refused.map((r) => OUTPUTS.find((o) => r.startsWith(`${o} `))).sort()).toEqual(
          wronglyShaped.sort(),
        );
        // Before a trial nothing but the commit, setup's files and the cache is left.
        await ws.cleanTree(base, [SETUP, CACHE]);
        const clean = listing(ws.worktree);
        expect(show(clean)).toBe(show(expected(pristine, after, [SETUP, CACHE], [])));
        // The next case starts from the commit alone.
        await ws.cleanTree(base, []);
        expect(show(listing(ws.worktree))).toBe(show(pristine));
      }),
      { numRuns: Number(process.env.RESET_RUNS ?? 25), examples: [[EXAMPLE, true]] },
    );
  });

  it("lists what setup leaves as the reset sees it: empty directories and FIFOs too (untrackedPaths)", async () => {
    await ws.cleanTree(base, []);
    apply(ws.worktree, [
      op(["made"], "dir"),
      op(["pipe"], "fifo"),
      op(["d", "x"], "file"),
      op(["data", "new.csv"], "file"),
      op(["data", "deep", "empty"], "dir"),
    ]);
    expect(await ws.untrackedPaths()).toEqual(["d/", "data/deep/empty/", "data/new.csv", "made/", "pipe"]);
    await ws.cleanTree(base, ["made", "pipe"]);
    expect(await ws.untrackedPaths()).toEqual(["made/", "pipe"]);
    await ws.cleanTree(base, []);
    expect(await ws.untrackedPaths()).toEqual([]);
  });

  it("names what it cannot remove (RESET_FAILED) instead of leaving it", async () => {
    let immutable = true;
    const f = join(ws.worktree, "pinned");
    execFileSync("sh", ["-c", `echo x > '${f}'`]);
    try {
      execFileSync("chattr", ["+i", f], { stdio: "ignore" });
    } catch {
      immutable = false; // no attribute here (not root, or a filesystem without it)
    }
    try {
      if (immutable)
        await expect(ws.cleanTree(base, [])).rejects.toMatchObject({
          code: "RESET_FAILED",
          message: expect.stringContaining("pinned"),
        });
    } finally {
      if (immutable) execFileSync("chattr", ["-i", f]);
    }
    await ws.cleanTree(base, []);
    expect(show(listing(ws.worktree))).toBe(show(pristine));
  });
});
