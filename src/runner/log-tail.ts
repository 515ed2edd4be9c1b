/**
 * The last lines a process printed, stdout and stderr interleaved in arrival order: what the
 * notebook and the agent see of a trial. A line redrawn with `\r` (a progress bar) is replaced by
 * its next version, as on a terminal, so a bar does not push everything else out.
 */
export class LogTail {
  readonly #maxLines: number;
  readonly #maxChars: number;
  #lines: string[] = [];
  #redrawn = false;

  constructor(maxLines = 40, maxChars = 4096) {
    this.#maxLines = maxLines;
    this.#maxChars = maxChars;
  }

  push(line: string, redrawn = false): void {
    if (this.#redrawn) this.#lines.pop();
    this.#redrawn = redrawn;
    this.#lines.push(line.length > this.#maxChars ? `${line.slice(0, this.#maxChars - 1)}…` : line);
    if (this.#lines.length > this.#maxLines * 2) this.#lines = this.#lines.slice(-this.#maxLines);
  }

  /** The tail as text: at most `maxLines` lines and `maxChars` characters, ending with the latest line. */
  text(): string {
    const lines = this.#lines.slice(-this.#maxLines);
    let out = lines.join("\n");
    if (out.length > this.#maxChars) {
      out = out.slice(out.length - this.#maxChars);
      const nl = out.indexOf("\n");
      if (nl !== -1 && nl < out.length - 1) out = out.slice(nl + 1);
    }
    return out;
  }
}
