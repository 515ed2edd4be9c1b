/**
 * Registers every coding-agent CLI preset as an agent backend. A preset is one file,
 * `presets/<backend>.ts`, default-exporting a CliPreset; it is found here by its file name and
 * only loaded when a run uses it.
 */
import { readdirSync } from "node:fs";
import { dirname, extname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { registerAgent } from "../registry.ts";
import { createCliAgent } from "./cli-agent.ts";
import type { CliPreset } from "./preset.ts";

const PRESETS_DIR = join(dirname(fileURLToPath(import.meta.url)), "presets");
/** ".ts" in the checkout, ".js" in the published package (dist/, compiled; declarations beside). */
const EXT = extname(fileURLToPath(import.meta.url));
const PRESET_FILE = new RegExp(`^[a-z0-9-]+\\${EXT}$`);

/** Backend names of the installed presets (their file names). */
export const CLI_BACKENDS: readonly string[] = readdirSync(PRESETS_DIR)
  .filter((f) => PRESET_FILE.test(f))
  .map((f) => f.slice(0, -EXT.length))
  .sort();

export async function loadPreset(backend: string): Promise<CliPreset> {
  const mod = (await import(pathToFileURL(join(PRESETS_DIR, `${backend}${EXT}`)).href)) as {
    default: CliPreset;
  };
  return mod.default;
}

for (const backend of CLI_BACKENDS) {
  registerAgent(backend, async (config, program) =>
    createCliAgent(await loadPreset(backend), config, program),
  );
}
