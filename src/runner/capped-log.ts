import { closeSync, writeSync } from "node:fs";
import { StringDecoder } from "node:string_decoder";
import { SecretLineStream } from "../core/secrets.ts";
import { openUntrustedForWrite } from "../core/untrusted-file.ts";

/**
 * A log file that never grows past `capBytes`. The head (the first quarter of the cap) is written
 * as it arrives, so a running trial's log can be read; after that a rolling tail (the rest of the
 * cap) is kept in memory and written on close, after a marker line `[autolab: N bytes elided]`.
 * The tail gets most of the room because that is where a crash explains itself.
 *
 * Secrets never reach the file (docs/security.md "Secrets are never recorded"): what arrives is
 * decoded as UTF-8 and passed a line at a time through the secret redactor (src/core/secrets.ts)
 * before anything is written or kept; a partial line waits for its newline (or for close).
 * `bytes` counts what arrived, the cap applies to what is written.
 *
 * The file is opened through src/core/untrusted-file.ts: a symlink, FIFO or hard link at `path`
 * (planted where a researcher can write) throws instead of being written through.
 */
export class CappedLog {
  readonly path: string;
  readonly #fd: number;
  readonly #headCap: number;
  readonly #tailCap: number;
  #headWritten = 0;
  #lastHeadByte = 10;
  #tail: Buffer[] = [];
  #tailBytes = 0;
  #total = 0;
  /** Bytes after redaction: what head, elided and tail add up to. */
  #kept = 0;
  #closed = false;
  readonly #decoder = new StringDecoder("utf8");
  readonly #secrets = new SecretLineStream();
  /** Set when a write failed (e.g. ENOSPC: disk full); the log stops there, the trial goes on. */
  error: NodeJS.ErrnoException | undefined;

  constructor(path: string, capBytes = 5 * 1024 * 1024) {
    this.path = path;
    this.#fd = openUntrustedForWrite(path);
    const cap = Math.max(1024, capBytes);
    // Room for the marker line, so head + marker + tail stays within the cap.
    const usable = Number.isFinite(cap) ? cap - 64 : cap;
    this.#headCap = Math.floor(usable / 4);
    this.#tailCap = usable - this.#headCap;
  }

  /** Total bytes received, including elided ones. */
  get bytes(): number {
    return this.#total;
  }

  write(chunk: Buffer): void {
    if (this.#closed) return;
    this.#total += chunk.length;
    const text = this.#secrets.push(this.#decoder.write(chunk));
    if (text) this.#keep(Buffer.from(text));
  }

  #keep(chunk: Buffer): void {
    this.#kept += chunk.length;
    let rest = chunk;
    if (this.#headWritten < this.#headCap) {
      const n = Math.min(rest.length, this.#headCap - this.#headWritten);
      this.#safeWrite(rest.subarray(0, n));
      this.#headWritten += n;
      this.#lastHeadByte = rest[n - 1] ?? this.#lastHeadByte;
      rest = rest.subarray(n);
      if (rest.length === 0) return;
    }
    this.#tail.push(rest);
    this.#tailBytes += rest.length;
    // Drop whole chunks from the front while the remainder still covers the tail budget.
    while (this.#tail.length > 1 && this.#tailBytes - (this.#tail[0] as Buffer).length >= this.#tailCap) {
      this.#tailBytes -= (this.#tail.shift() as Buffer).length;
    }
  }

  /** Writes the tail (and the elision marker, if anything was dropped) and closes the file. */
  close(): void {
    if (this.#closed) return;
    try {
      const last = this.#secrets.push(this.#decoder.end()) + this.#secrets.flush();
      if (last) this.#keep(Buffer.from(last));
    } catch {
      // A log must never take the harness down.
    }
    this.#closed = true;
    try {
      let tail = Buffer.concat(this.#tail, this.#tailBytes);
      if (tail.length > this.#tailCap) {
        tail = tail.subarray(tail.length - this.#tailCap);
        // Start the kept tail at a line boundary when one is near, so no half line follows the marker.
        const nl = tail.indexOf(10);
        if (nl !== -1 && nl < 4096) tail = tail.subarray(nl + 1);
      }
      const elided = this.#kept - this.#headWritten - tail.length;
      if (elided > 0) {
        const lead = this.#lastHeadByte === 10 ? "" : "\n";
        this.#safeWrite(Buffer.from(`${lead}[autolab: ${elided} bytes elided]\n`));
      }
      this.#safeWrite(tail);
    } finally {
      this.#tail = [];
      try {
        closeSync(this.#fd);
      } catch (err) {
        this.error ??= err as NodeJS.ErrnoException;
      }
    }
  }

  /** A log must never take the harness down: after a failed write, stop writing and remember why. */
  #safeWrite(buf: Buffer): void {
    if (this.error) return;
    try {
      writeAll(this.#fd, buf);
    } catch (err) {
      this.error = err as NodeJS.ErrnoException;
    }
  }
}

function writeAll(fd: number, buf: Buffer): void {
  let off = 0;
  while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off);
}
