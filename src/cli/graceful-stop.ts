/**
 * Ctrl-C (or SIGTERM) once for a command that runs cells (bench, tournament): no new cell
 * starts, the running ones finish and are recorded (a cell cut short would not have had its
 * budget). Twice: leave at once — the running cells start again from fresh clones on the next
 * invocation. The command sets exit code 130 when it stopped with cells left.
 */
export function gracefulStop(command: string): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const stop = () => {
    if (controller.signal.aborted) process.exit(130);
    process.stderr.write(
      `${command}: stopping after the running cells (run it again to resume; Ctrl-C again to quit now)\n`,
    );
    controller.abort();
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  return {
    signal: controller.signal,
    dispose() {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
    },
  };
}
