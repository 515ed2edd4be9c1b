// compiler-flags: setup. PROTECTED: experiments may not edit this file.
//
// Run once per workspace (`node prepare.ts`, from this directory): checks that a C compiler
// is there ($CC, default gcc), builds a reference binary of bench.c with plain flags and
// writes what it prints for each of the evaluator's inputs to data/expected.txt (a holdout:
// trials cannot read it, only evaluate.ts). Does nothing when data/expected.txt is current.

import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";

/** The evaluator's inputs: one run of bench per seed, all of this size. */
export const SEEDS = [1, 2, 3, 4, 5, 6, 7];
export const SIZE = 400;
export const EXPECTED = path.join("data", "expected.txt");
const REFERENCE_FLAGS = ["-std=c11", "-O1"];

export function compiler(): string {
  return process.env.CC?.trim() || "gcc";
}

/** Exits with the fix when there is no C compiler. */
export function requireCompiler(): void {
  const cc = compiler();
  const probe = spawnSync(cc, ["--version"], { encoding: "utf8" });
  if (probe.error || probe.status !== 0) {
    console.error(
      `prepare: no C compiler: \`${cc} --version\` ${probe.error ? `failed (${(probe.error as NodeJS.ErrnoException).code ?? probe.error.message})` : `exited with ${probe.status}`}.\n` +
        "  Install one (Debian/Ubuntu: `sudo apt-get install gcc`; Fedora: `sudo dnf install gcc`; macOS: `xcode-select --install`)," +
        " or point CC at one (program.md passes CC through: `CC=clang autolab run`).",
    );
    process.exit(1);
  }
}

function main(): void {
  requireCompiler();
  const source = readFileSync("bench.c");
  const stamp = `# bench.c ${createHash("sha256").update(source).digest("hex")} size ${SIZE} seeds ${SEEDS.join(",")}`;
  if (existsSync(EXPECTED) && readFileSync(EXPECTED, "utf8").startsWith(`${stamp}\n`)) return;
  mkdirSync("data", { recursive: true });
  const binary = path.join("data", "reference");
  const build = spawnSync(compiler(), [...REFERENCE_FLAGS, "-o", binary, "bench.c", "-lm"], {
    encoding: "utf8",
  });
  if (build.status !== 0) {
    console.error(`prepare: building the reference failed:\n${build.stderr}`);
    process.exit(1);
  }
  const lines = [stamp];
  for (const seed of SEEDS) {
    const run = spawnSync(path.resolve(binary), [String(seed), String(SIZE)], { encoding: "utf8" });
    if (run.status !== 0) {
      console.error(`prepare: the reference failed on seed ${seed}:\n${run.stderr}`);
      process.exit(1);
    }
    lines.push(`seed ${seed}`, run.stdout.trimEnd());
  }
  rmSync(binary, { force: true });
  writeFileSync(EXPECTED, `${lines.join("\n")}\n`);
  console.log(`prepare: wrote ${EXPECTED} with ${compiler()}`);
}

if (process.argv[1] === import.meta.filename) main();
