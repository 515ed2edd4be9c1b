/**
 * A closed stdout or stderr — `autolab log | head -3`, `autolab run | head`, a terminal that
 * went away — is a normal end, not a crash: Node ignores SIGPIPE and reports each write to a
 * closed pipe as an EPIPE "error" event, which without a listener is an uncaught exception
 * with a stack trace. Here such errors are taken as "the reader is gone": later writes are
 * dropped, and whoever registered with `onOutputClosed` stops (`run` stops the way Ctrl-C
 * does, `watch` quits). A view without a listener simply finishes, with its exit code.
 */

type Stream = "stdout" | "stderr";
type Listener = (stream: Stream) => void;

const listeners = new Set<Listener>();
const closed = new Set<Stream>();
let installed = false;

// A reader that went away: the pipe's other end closed (EPIPE), or the stream was torn down.
const GONE = new Set(["EPIPE", "ECONNRESET", "ERR_STREAM_DESTROYED", "ERR_STREAM_WRITE_AFTER_END"]);

/** Installs the listeners on process.stdout and process.stderr (once; main.ts does it first). */
export function guardOutput(): void {
  if (installed) return;
  installed = true;
  for (const [name, stream] of [
    ["stdout", process.stdout],
    ["stderr", process.stderr],
  ] as const) {
    stream.on("error", (err: NodeJS.ErrnoException) => {
      if (!GONE.has(err.code ?? "")) throw err;
      if (closed.has(name)) return;
      closed.add(name);
      for (const l of [...listeners]) l(name);
    });
  }
}

/**
 * Calls `fn` with the stream's name when stdout or stderr is found closed (at once for one
 * already found closed); returns the unsubscribe.
 */
export function onOutputClosed(fn: Listener): () => void {
  for (const name of closed) fn(name);
  listeners.add(fn);
  return () => listeners.delete(fn);
}
