#!/usr/bin/env node
// Entry point. autolab is TypeScript run by Node's type stripping, which needs Node >= 22.18
// (Node 24 LTS is the target). Under an older Node (e.g. Debian's Node 20) this shim re-runs
// itself with the Node 24 that `npm install` put in node_modules (the pinned `node` package).
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { constants } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const [major, minor] = process.versions.node.split(".").map(Number);
const supported = major > 22 || (major === 22 && minor >= 18);

if (!supported) {
  const local = join(root, "node_modules", "node", "bin", "node");
  if (!existsSync(local)) {
    console.error(
      `autolab needs Node.js 24 (this is ${process.version}).\n` +
        `Run \`npm install\` in ${root} (it installs Node 24 locally), or install Node.js 24 LTS.`,
    );
    process.exit(1);
  }
  // fd 3 is a pipe the child watches: when this process dies (even by kill -9), the child
  // reads its end and stops too (src/cli/shim-parent.ts), so no harness outlives the PID the
  // user started.
  const child = spawn(local, [fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
    stdio: ["inherit", "inherit", "inherit", "pipe"],
    env: { ...process.env, AUTOLAB_SHIM: "1" },
  });
  // Pass signals on, so Ctrl-C / kill reach the real harness (which then stops its trial).
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(sig, () => child.kill(sig));
  child.on("exit", (code, signal) => process.exit(code ?? 128 + (constants.signals[signal] ?? 0)));
} else {
  await import(pathToFileURL(join(root, "src", "cli", "main.ts")).href);
}
