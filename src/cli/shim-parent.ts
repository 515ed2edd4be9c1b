/**
 * Under an older system Node, bin/autolab.mjs re-runs autolab with Node 24 as its child. A
 * `kill -9` of the PID the user started kills only that shim; the child would live on,
 * holding the run's lock. So the shim hands the child one end of a pipe as fd 3 (and sets
 * AUTOLAB_SHIM=1): when the shim dies, for any reason, the kernel closes its end, the child
 * reads end-of-file, and the child stops at once — SIGKILL, what the user asked of the shim.
 * (Trial processes are reaped by the sandbox and on resume, as after any kill -9.)
 *
 * Imported first by main.ts, so it runs before anything else does.
 */
import { fstatSync } from "node:fs";
import { Socket } from "node:net";

if (process.env.AUTOLAB_SHIM === "1") {
  // Not passed on: a process autolab starts (a trial, an agent, autolab itself) has no such fd 3.
  delete process.env.AUTOLAB_SHIM;
  try {
    // The shim's end is a socket pair; anything else on fd 3 was not put there by the shim.
    if (!fstatSync(3).isSocket()) throw new Error("fd 3 is not the shim's pipe");
    const parent = new Socket({ fd: 3, readable: true, writable: false });
    const die = () => process.kill(process.pid, "SIGKILL");
    parent.on("end", die);
    parent.on("close", die);
    parent.on("error", die);
    parent.on("data", () => {});
    // Watching must not keep autolab running once its work is done.
    parent.unref();
  } catch {
    // No usable fd 3 (autolab started with AUTOLAB_SHIM=1 by hand): nothing to watch.
  }
}
