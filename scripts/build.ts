// `npm run build` (and `prepack`): src/ → dist/, what the published package runs. Node does not
// strip types inside node_modules, so the registry package ships JavaScript with declarations;
// the checkout keeps running src/ directly (bin/autolab.mjs picks dist/ only when it exists).
import { spawnSync } from "node:child_process";
import { cpSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dist = join(root, "dist");
rmSync(dist, { recursive: true, force: true });
const tsc = spawnSync(join(root, "node_modules", ".bin", "tsc"), ["-p", join(root, "tsconfig.build.json")], {
  stdio: "inherit",
});
if (tsc.status !== 0) process.exit(tsc.status ?? 1);
// Files read at run time next to a module (import.meta.url): the dashboard's assets, and below,
// the PostgreSQL bridge's worker. Its
// tsconfig.json only type-checks app.js in the checkout.
cpSync(join(root, "src", "server", "assets"), join(dist, "server", "assets"), {
  recursive: true,
  filter: (p) => !p.endsWith("tsconfig.json"),
});
// The PostgreSQL bridge's worker thread is plain JavaScript, loaded by URL next to bridge.js.
cpSync(join(root, "src", "ledger", "pg", "pg-worker.js"), join(dist, "ledger", "pg", "pg-worker.js"));
console.log(`built ${dist}`);
