/**
 * The byte-exact reset (docs/security.md, "A byte-exact reset"): before each trial and before
 * evaluate, the worktree holds the commit's entries, the paths kept (setup's files, declared
 * caches, declared outputs) and nothing else, whatever a trial left there. `git status` is no
 * guide to that: it does not show empty directories, FIFOs or sockets, decodes names, cannot
 * enter a directory its user may not read, and ignores a mode change that keeps the exec bit.
 *
 * So the tree is walked, by bytes: one `git ls-tree` of the commit says what belongs, one readdir
 * per directory says what is there. Names are handled as latin1 strings (one char per byte, so
 * any name round-trips through `Buffer.from(name, "latin1")`); keep paths, which are text, are
 * converted to the same form. Symlinks are never followed (lstat only). Whatever cannot be
 * removed is a RESET_FAILED error naming it: the caller fails the trial closed.
 */
import type { Stats } from "node:fs";
import { chmod, lstat, readdir, rmdir, unlink } from "node:fs/promises";
import { AutolabError } from "../core/errors.ts";

const SYMLINK = 0o120000;
const GITLINK = 0o160000;
const EXECUTABLE = 0o100755;

/** The harness's umask, read once: git writes files and directories with it (0666/0777 & ~umask). */
const UMASK = process.umask();
const FILE_MODE = 0o666 & ~UMASK;
const EXEC_MODE = 0o777 & ~UMASK;
const DIR_MODE = 0o777 & ~UMASK;

/** A text path (UTF-8) as the walk's byte string. */
export function byteKey(path: string): string {
  return Buffer.from(path, "utf8").toString("latin1");
}

/** A byte string as a path argument for fs. */
function fsPath(key: string): Buffer {
  return Buffer.from(key, "latin1");
}

/**
 * A byte-string path as text for a reason or an error: UTF-8 when it is, `\xNN` for bytes that
 * are not and for control characters (a name must not write to the terminal that shows it).
 */
export function shownPath(key: string): string {
  const bytes = fsPath(key);
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    text = [...bytes].map((b) => (b < 0x80 ? String.fromCharCode(b) : `\\x${b.toString(16)}`)).join("");
  }
  let shown = "";
  for (const c of text) {
    const code = c.charCodeAt(0);
    shown += code < 0x20 || (code >= 0x7f && code <= 0x9f) ? `\\x${code.toString(16).padStart(2, "0")}` : c;
  }
  return shown;
}

/** `git ls-tree -r -z --full-tree` output → repo-relative byte-string path → git mode. */
export function parseTree(out: Buffer): Map<string, number> {
  const entries = new Map<string, number>();
  for (const rec of out.toString("latin1").split("\0")) {
    if (!rec) continue;
    const tab = rec.indexOf("\t");
    // "<mode> SP <type> SP <object> TAB <path>"
    entries.set(rec.slice(tab + 1), Number.parseInt(rec.slice(0, rec.indexOf(" ")), 8));
  }
  return entries;
}

/** Every proper ancestor directory of each path ("a/b/c" → "a", "a/b"). */
function ancestors(paths: Iterable<string>): Set<string> {
  const out = new Set<string>();
  for (const p of paths) {
    for (let i = p.indexOf("/"); i !== -1; i = p.indexOf("/", i + 1)) out.add(p.slice(0, i));
  }
  return out;
}

function failed(key: string, what: string, err: unknown): AutolabError {
  const code = (err as NodeJS.ErrnoException).code ?? String(err);
  return new AutolabError(
    "RESET_FAILED",
    `${shownPath(key)} in the worktree cannot be ${what} (${code}): the tree a trial or evaluate starts in would not be the commit's.`,
    "Something outside autolab holds it (another user's file, an immutable attribute, a mount): remove it by hand; until then every trial fails.",
  );
}

/** `root` and a byte-string path below it ("" is root) as an fs path. */
function at(rootKey: string, rel: string): Buffer {
  return fsPath(rel ? `${rootKey}/${rel}` : rootKey);
}

/** lstat, or undefined when the entry is gone. */
async function statAt(rootKey: string, rel: string): Promise<Stats | undefined> {
  try {
    return await lstat(at(rootKey, rel));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw failed(rel, "examined", err);
  }
}

/** The names in a directory, made enterable and writable for its owner first (chmod u+rwx). */
async function enter(rootKey: string, rel: string, st: Stats): Promise<string[]> {
  try {
    if ((st.mode & 0o700) !== 0o700) await chmod(at(rootKey, rel), (st.mode & 0o7777) | 0o700);
    return (await readdir(at(rootKey, rel), { encoding: "buffer" })).map((n) => n.toString("latin1"));
  } catch (err) {
    throw failed(rel, "read", err);
  }
}

/** Removes an entry and everything under it, never following a symlink. */
async function removeAt(rootKey: string, rel: string, st: Stats): Promise<void> {
  if (st.isDirectory()) {
    for (const name of await enter(rootKey, rel, st)) {
      const child = `${rel}/${name}`;
      const cst = await statAt(rootKey, child);
      if (cst) await removeAt(rootKey, child, cst);
    }
  }
  try {
    await (st.isDirectory() ? rmdir(at(rootKey, rel)) : unlink(at(rootKey, rel)));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw failed(rel, "removed", err);
  }
}

export interface ResetInput {
  /** The worktree's top directory (absolute; the repository's root in it). */
  root: string;
  /** The commit's entries (parseTree of `git ls-tree -r -z --full-tree <commit>`). */
  tree: Map<string, number>;
  /** Repo-relative paths left as they are, with everything under them (setup's files, caches, outputs). */
  keep: string[];
}

/**
 * Removes from `root` everything that is neither an entry of the commit, nor kept, nor a
 * directory on the way to one, and every committed entry of the wrong kind or mode (a directory
 * or FIFO where a file was committed, a hard link, a file chmod-ed): `git reset --hard` then
 * writes those again. Directories the walk must enter are made enterable first (chmod u+rwx); the
 * committed ones get git's mode back. The worktree's own `.git` is left alone. Throws
 * RESET_FAILED when something cannot be removed.
 */
export async function removeStrays(input: ResetInput): Promise<void> {
  const rootKey = byteKey(input.root);
  const keep = input.keep.map(byteKey);
  if (keep.some((k) => k === "" || k === ".")) return; // the whole tree is kept
  const { tree } = input;
  const dirs = ancestors(tree.keys());
  const toKeep = ancestors(keep);
  const kept = (rel: string) => keep.some((k) => rel === k || rel.startsWith(`${k}/`));

  /** A directory the commit or a kept path needs: its strays go; it stays (committed) or goes when emptied. */
  const walk = async (rel: string, st: Stats): Promise<void> => {
    let left = 0;
    for (const name of await enter(rootKey, rel, st)) {
      if (rel === "" && name === ".git") left++;
      else if (!(await visit(rel ? `${rel}/${name}` : name))) left++;
    }
    if (rel === "" || dirs.has(rel)) {
      const now = await statAt(rootKey, rel);
      if (now && (now.mode & 0o7777) !== DIR_MODE) {
        try {
          await chmod(at(rootKey, rel), DIR_MODE);
        } catch (err) {
          throw failed(rel, "given its committed mode", err);
        }
      }
    } else if (left === 0) {
      // On the way to a kept path that is not there: an empty directory carries nothing.
      await removeAt(rootKey, rel, st);
    }
  };

  /** One entry below root; true when it is gone. */
  const visit = async (rel: string): Promise<boolean> => {
    if (kept(rel)) return false;
    const st = await statAt(rootKey, rel);
    if (!st) return true;
    const mode = tree.get(rel);
    if (mode !== undefined) {
      if (mode === GITLINK) return false; // a submodule's checkout is git's
      const right =
        mode === SYMLINK
          ? st.isSymbolicLink()
          : st.isFile() &&
            st.nlink === 1 &&
            (st.mode & 0o7777) === (mode === EXECUTABLE ? EXEC_MODE : FILE_MODE);
      if (right) return false;
      await removeAt(rootKey, rel, st); // git reset --hard writes it again
      return true;
    }
    if ((dirs.has(rel) || toKeep.has(rel)) && st.isDirectory()) {
      await walk(rel, st);
      return (await statAt(rootKey, rel)) === undefined;
    }
    await removeAt(rootKey, rel, st);
    return true;
  };

  const st = await statAt(rootKey, "");
  if (!st) throw failed("", "found", Object.assign(new Error("ENOENT"), { code: "ENOENT" }));
  await walk("", st);
}

/**
 * What the walk would remove, without removing it: the top-most entries of `root` that are not
 * the commit's nor on the way to them (empty directories, FIFOs and names of any bytes included),
 * as byte-string paths, directories with a trailing "/". How setup's files are found (a
 * directory setup made, even empty, is setup's). Committed entries of the wrong kind are not
 * listed, and a directory that cannot be read is not entered.
 */
export async function strays(root: string, tree: Map<string, number>): Promise<string[]> {
  const rootKey = byteKey(root);
  const dirs = ancestors(tree.keys());
  const out: string[] = [];
  const walk = async (rel: string): Promise<void> => {
    let names: Buffer[];
    try {
      names = await readdir(at(rootKey, rel), { encoding: "buffer" });
    } catch {
      return;
    }
    for (const n of names) {
      const name = n.toString("latin1");
      if (rel === "" && name === ".git") continue;
      const child = rel ? `${rel}/${name}` : name;
      if (tree.has(child)) continue;
      const st = await statAt(rootKey, child);
      if (!st) continue;
      if (dirs.has(child) && st.isDirectory()) await walk(child);
      else if (!dirs.has(child)) out.push(st.isDirectory() ? `${child}/` : child);
    }
  };
  await walk("");
  return out.sort();
}

/**
 * Declared outputs (repo-relative) that evaluate must not open, each with its reason: an output
 * is a regular file, or a directory whose tree holds regular files (at least one) and
 * directories only. Anything else (a FIFO, a socket, a device, a symlink, an empty directory
 * where a file was declared) is removed here, before evaluate could open or follow it. A missing
 * output is not refused here (the caller reports it as not written).
 */
export async function refuseOutputs(
  root: string,
  outputs: string[],
  /** The commit's entries: the directories they need are never removed. */
  tree: Map<string, number>,
): Promise<string[]> {
  const rootKey = byteKey(root);
  const committedDirs = ancestors(tree.keys());
  const reasons: string[] = [];
  for (const out of outputs) {
    const key = byteKey(out);
    const st = await statAt(rootKey, key);
    if (!st) continue;
    const problem = st.isDirectory() ? await dirProblem(rootKey, key) : kindProblem(st);
    if (!problem) continue;
    reasons.push(`${shownPath(key)} ${problem}`);
    await removeAt(rootKey, key, st);
    // Directories that held only the refused output go with it, as the walk would have removed them.
    for (const dir of [...ancestors([key])].reverse()) {
      if (committedDirs.has(dir)) break;
      const names = await readdir(at(rootKey, dir)).catch(() => ["?"]);
      if (names.length > 0) break;
      await rmdir(at(rootKey, dir)).catch((err: unknown) => {
        throw failed(dir, "removed", err);
      });
    }
  }
  return reasons;
}

/** Why an entry that is not a directory is no output (undefined for a regular file). */
function kindProblem(st: Stats): string | undefined {
  if (st.isFile()) return undefined;
  if (st.isSymbolicLink()) return "is a symbolic link (not followed)";
  if (st.isFIFO()) return "is a FIFO (not opened)";
  if (st.isSocket()) return "is a socket";
  if (st.isCharacterDevice() || st.isBlockDevice()) return "is a device node";
  return "is not a regular file";
}

/** Why a directory is no output: something in it is neither a regular file nor a directory, or it holds no file. */
async function dirProblem(rootKey: string, key: string): Promise<string | undefined> {
  let files = 0;
  const walk = async (rel: string, st: Stats): Promise<string | undefined> => {
    for (const name of await enter(rootKey, rel, st)) {
      const child = `${rel}/${name}`;
      const cst = await statAt(rootKey, child);
      if (!cst) continue;
      const p = cst.isDirectory() ? await walk(child, cst) : kindProblem(cst);
      if (p) return cst.isDirectory() ? p : `holds ${shownPath(child)}, which ${p}`;
      if (!cst.isDirectory()) files++;
    }
    return undefined;
  };
  const st = await statAt(rootKey, key);
  if (!st) return undefined;
  const problem = await walk(key, st);
  if (problem) return problem;
  return files === 0
    ? "is a directory holding no file (an output is a regular file or a directory of them)"
    : undefined;
}
