/**
 * Reads a file as it grows (a Slurm job's `--output` on the shared file system): each `poll()`
 * hands the bytes written since the last one to `onChunk`. A file that does not exist yet is
 * simply not read; reading never throws (a trial's outcome is data). Opened as every untrusted
 * file is (src/core/untrusted-file.ts): no symlink followed, no FIFO waited on, regular files only.
 */
import { close, fstat, open, read } from "node:fs";
import { promisify } from "node:util";
import { UNTRUSTED_READ_FLAGS, whyNotPlainFile } from "../../core/untrusted-file.ts";

const openAsync = promisify(open);
const fstatAsync = promisify(fstat);
const readAsync = promisify(read);
const closeAsync = promisify(close);

const CHUNK = 1024 * 1024;

export class FileFollower {
  readonly path: string;
  readonly #onChunk: (chunk: Buffer) => void;
  #offset = 0;

  constructor(path: string, onChunk: (chunk: Buffer) => void) {
    this.path = path;
    this.#onChunk = onChunk;
  }

  /** Bytes read so far. */
  get offset(): number {
    return this.#offset;
  }

  /** Reads what was appended since the last poll (all of it, in chunks). */
  async poll(): Promise<void> {
    let fd: number;
    try {
      fd = await openAsync(this.path, UNTRUSTED_READ_FLAGS);
    } catch {
      return;
    }
    try {
      const st = await fstatAsync(fd);
      if (whyNotPlainFile(st)) return;
      const { size } = st;
      // Truncated or replaced (a requeued job starts its output again): start over.
      if (size < this.#offset) this.#offset = 0;
      const buf = Buffer.alloc(Math.min(CHUNK, Math.max(0, size - this.#offset)));
      while (this.#offset < size) {
        const { bytesRead } = await readAsync(
          fd,
          buf,
          0,
          Math.min(buf.length, size - this.#offset),
          this.#offset,
        );
        if (bytesRead === 0) break;
        this.#offset += bytesRead;
        this.#onChunk(Buffer.from(buf.subarray(0, bytesRead)));
      }
    } catch {
      // An unreadable log is a missing log: the outcome comes from the job's state.
    } finally {
      await closeAsync(fd).catch(() => {});
    }
  }
}
