/**
 * The one door for files that code the harness did not write could have touched (docs/security.md
 * "One door for untrusted files"): a path where another process could have put a symlink, a
 * FIFO, a socket, a device or a huge file instead of the file expected.
 *
 * Reading: `readUntrusted` opens with O_NOFOLLOW (a symlink as the last component is refused,
 * never followed), O_NONBLOCK (opening a FIFO or a device never waits for a peer) and O_NOCTTY,
 * then decides on the opened descriptor (fstat: no race between a check and the open): only a
 * regular file with one name is read, and at most `maxBytes` of it. Everything else is a
 * refusal with its reason, never an exception: the caller records it and goes on.
 *
 * Writing: `openUntrustedForWrite` / `writeUntrusted` do the same for a file the caller writes
 * in a directory someone else could also write: no symlink followed, no FIFO opened, no file
 * with a second name (a hard link to a file elsewhere) truncated. `freshDir` makes a directory
 * that did not exist before (mkdir without `recursive`: an existing entry, symlink included, is
 * never reused), so the caller's writes land where nobody prepared anything.
 *
 * Only the last component is guarded: the directories above `path` must be the caller's own
 * (where no untrusted process can write).
 */
import {
  closeSync,
  constants,
  fstatSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readSync,
  type Stats,
  writeSync,
} from "node:fs";
import { basename, join } from "node:path";

export interface UntrustedReadOptions {
  /** At most this many bytes are read. */
  maxBytes: number;
  /** Which part of a larger file is kept: its start (default) or its end (a log explains itself last). */
  keep?: "head" | "tail";
}

export type UntrustedRead =
  | { ok: true; bytes: Buffer; size: number; truncated: boolean }
  /** `missing`: nothing at the path (often not an attack: a file never written). */
  | { ok: false; missing: boolean; reason: string };

export type UntrustedText =
  | { ok: true; text: string; size: number; truncated: boolean }
  | { ok: false; missing: boolean; reason: string };

/** The open(2) flags of every untrusted read (for a reader that follows a growing file itself). */
export const UNTRUSTED_READ_FLAGS =
  constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;
const WRITE_FLAGS =
  constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;

/** Reads at most `maxBytes` of the regular file at `path`; anything else is refused with a reason. */
export function readUntrusted(path: string, opts: UntrustedReadOptions): UntrustedRead {
  let fd: number;
  try {
    fd = openSync(path, UNTRUSTED_READ_FLAGS);
  } catch (err) {
    return openRefusal(err);
  }
  try {
    const st = fstatSync(fd);
    const wrong = whyNotPlainFile(st);
    if (wrong) return { ok: false, missing: false, reason: wrong };
    const max = Math.max(0, Math.floor(opts.maxBytes));
    const size = st.size;
    const truncated = size > max;
    const start = truncated && opts.keep === "tail" ? size - max : 0;
    const buf = Buffer.allocUnsafe(Math.min(size, max));
    let got = 0;
    // A file that shrinks while it is read ends early; one that grows is cut at what fstat said.
    while (got < buf.length) {
      const n = readSync(fd, buf, got, buf.length - got, start + got);
      if (n === 0) break;
      got += n;
    }
    return { ok: true, bytes: got === buf.length ? buf : buf.subarray(0, got), size, truncated };
  } catch (err) {
    return { ok: false, missing: false, reason: `unreadable (${errorCode(err)})` };
  } finally {
    closeSync(fd);
  }
}

/** readUntrusted decoded as UTF-8 (a cut multi-byte character becomes U+FFFD). */
export function readUntrustedText(path: string, opts: UntrustedReadOptions): UntrustedText {
  const r = readUntrusted(path, opts);
  return r.ok ? { ok: true, text: r.bytes.toString("utf8"), size: r.size, truncated: r.truncated } : r;
}

/** The text a caller records instead of a refused file: `[refused: <name> is <reason>; not read]`. */
export function refusedText(path: string, reason: string): string {
  return `[refused: ${basename(path)} is ${reason}; not read]`;
}

/**
 * Opens `path` for writing (truncated, or appended to with `append`), creating it if absent.
 * Throws (an Error with code EUNTRUSTED) when it is a symlink, not a regular file, or a regular
 * file with another name: nothing was written then, and nothing truncated.
 */
export function openUntrustedForWrite(path: string, opts: { append?: boolean; mode?: number } = {}): number {
  let fd: number;
  try {
    fd = openSync(path, WRITE_FLAGS | (opts.append ? constants.O_APPEND : 0), opts.mode ?? 0o644);
  } catch (err) {
    const refused = openRefusal(err);
    if (refused.ok || refused.missing || refused.reason.startsWith("unreadable")) throw err;
    throw untrustedError(path, refused.reason);
  }
  try {
    const wrong = whyNotPlainFile(fstatSync(fd));
    if (wrong) throw untrustedError(path, wrong);
    // Truncated only now: O_TRUNC at open would have emptied a hard-linked file before the check.
    if (!opts.append) ftruncateSync(fd, 0);
    return fd;
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

/** Writes `data` to `path` through openUntrustedForWrite (throws as it does). */
export function writeUntrusted(path: string, data: string | Buffer, opts: { append?: boolean } = {}): void {
  const fd = openUntrustedForWrite(path, opts);
  try {
    const buf = typeof data === "string" ? Buffer.from(data) : data;
    let off = 0;
    while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off);
  } finally {
    closeSync(fd);
  }
}

/**
 * A directory under `parent` that did not exist before this call: `parent/name`, or when
 * anything is already there (a directory, a file, a symlink) `parent/name-2`, `name-3`, … The
 * parent is created if needed (it must be the caller's own). Returns the new directory's path.
 */
export function freshDir(parent: string, name: string): string {
  mkdirSync(parent, { recursive: true });
  for (let k = 1; ; k++) {
    const dir = join(parent, k === 1 ? name : `${name}-${k}`);
    try {
      mkdirSync(dir);
      return dir;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST" || k >= 10_000) throw err;
    }
  }
}

/** Why `st` (of an opened descriptor) is not a plain file; undefined when it is: regular, one name. */
export function whyNotPlainFile(
  st: Pick<
    Stats,
    "isFile" | "isFIFO" | "isSocket" | "isDirectory" | "isCharacterDevice" | "isBlockDevice" | "nlink"
  >,
): string | undefined {
  if (st.isFile()) return st.nlink > 1 ? `a hard link (a file with ${st.nlink} names)` : undefined;
  const kind = st.isFIFO()
    ? "a FIFO"
    : st.isSocket()
      ? "a socket"
      : st.isDirectory()
        ? "a directory"
        : st.isCharacterDevice()
          ? "a character device"
          : st.isBlockDevice()
            ? "a block device"
            : "of an unknown kind";
  return `not a regular file (${kind})`;
}

function openRefusal(err: unknown): UntrustedRead {
  const code = errorCode(err);
  if (code === "ENOENT") return { ok: false, missing: true, reason: "missing" };
  // O_NOFOLLOW on a symlink: ELOOP (Linux), EMLINK (FreeBSD), EFTYPE (NetBSD).
  if (code === "ELOOP" || code === "EMLINK" || code === "EFTYPE") {
    return { ok: false, missing: false, reason: "a symbolic link" };
  }
  // A Unix socket cannot be opened (ENXIO); nor a FIFO on some systems for writing.
  if (code === "ENXIO" || code === "EOPNOTSUPP") {
    return { ok: false, missing: false, reason: "not a regular file (a socket or FIFO)" };
  }
  return { ok: false, missing: false, reason: `unreadable (${code})` };
}

function untrustedError(path: string, reason: string): NodeJS.ErrnoException {
  const err: NodeJS.ErrnoException = new Error(`${path} is ${reason}: refused`);
  err.code = "EUNTRUSTED";
  err.path = path;
  return err;
}

function errorCode(err: unknown): string {
  return (err as NodeJS.ErrnoException).code ?? (err as Error).message ?? String(err);
}
