/**
 * `npm run bench -- <name>`: runs bench/<name>.ts. Every benchmark prints its figures as
 * it goes and, as its last line, one JSON object of them (results go in docs/benchmarks.md).
 */
import { existsSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const names = readdirSync(here)
  .filter((f) => f.endsWith(".ts") && f !== "run.ts" && !f.startsWith("_"))
  .map((f) => f.slice(0, -3));
const name = process.argv[2];
if (!name || !existsSync(join(here, `${name}.ts`)) || name === "run") {
  console.error(`usage: npm run bench -- <name>\nbenchmarks: ${names.join(", ")}`);
  process.exit(2);
}
const mod = (await import(pathToFileURL(join(here, `${name}.ts`)).href)) as {
  main: (args: string[]) => Promise<unknown>;
};
const figures = await mod.main(process.argv.slice(3));
console.log(JSON.stringify(figures));
