#!/usr/bin/env node
// Entry point. Written for any Node (no syntax newer than Node 12), so that an old one gets a
// message rather than a stack trace.
//
// Two layouts, told apart by whether src/ exists:
// - the checkout (src/cli/main.ts): TypeScript run by Node's type stripping. Under an older
//   Node (e.g. Debian's Node 20) this shim re-runs itself with the Node 24 that `npm install`
//   put in node_modules (the pinned `node` devDependency).
// - the published package (no src/, dist/cli/main.js: compiled by `npm run build`, which
//   `npm pack` runs): JavaScript, on the Node that started it.
// Both need Node >= 24 (package.json `engines`): the harness itself runs on 22.18 (type stripping,
// node:sqlite), but the examples (`autolab demo`) are TypeScript programs run by the same Node,
// and tiny-lm's train.ts uses process.threadCpuUsage (Node 23.9; not in 22.18).
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { constants } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const source = join(root, "src", "cli", "main.ts");
const compiled = join(root, "dist", "cli", "main.js");
const supported = Number(process.versions.node.split(".")[0]) >= 24;

if (supported) {
  await import(pathToFileURL(existsSync(source) ? source : compiled).href);
} else {
  const local = join(root, "node_modules", "node", "bin", "node");
  if (!existsSync(source) || !existsSync(local)) {
    console.error(
      `autolab needs Node.js 24 or newer; this is ${process.version} (${process.execPath}).\n` +
        (existsSync(source)
          ? `Run \`npm install\` in ${root} (it installs Node 24 locally), or install Node.js 24 LTS.`
          : "Install Node.js 24 LTS (https://nodejs.org/, or `nvm install 24`), then run autolab with it."),
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
}
