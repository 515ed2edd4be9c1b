// compiler-flags: the build, run as each trial's command. PROTECTED.
//
// Reads the flags from flags.conf (the editable file), checks them, and compiles bench.c:
//   $CC -std=c11 <flags> -o out/bench bench.c -lm
// then prints build_ms (the compiler's wall time), binary_kb and flags (the command line, on
// stderr). -std=c11 is fixed: in ISO C mode gcc does not fuse a * b + c into one rounding
// (-ffp-contract=off), so flags that merely pick instructions cannot change the results.
//
// Only optimisation flags get through: -O…, -f…, -fno-…, -m…, minus those that read or write
// files or load code (-fplugin, -fprofile-…, -fdump-…, …). Anything else stops the build.

import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { compiler, requireCompiler } from "./prepare.ts";

const FLAG =
  /^-(?:O(?:[0-3sz]|fast|g)?|f[a-z0-9][a-z0-9+-]*(?:=[A-Za-z0-9_.,+-]+)?|m[a-z0-9][a-z0-9-]*(?:=[A-Za-z0-9_.,+-]+)?)$/;
const REFUSED =
  /^-f(?:no-)?(?:plugin|profile|auto-profile|dump|save-|stack-usage|callgraph|opt-info|diagnostics|record|debug-prefix|file-prefix|macro-prefix|lto|sanitize|instrument|coverage|test-coverage|branch-probabilities|asynchronous-unwind|exceptions|wrapper|pie|pic|PIC|PIE)/;

function fail(message: string): never {
  console.error(`build: ${message}`);
  process.exit(1);
}

/** `NAME = value` lines of flags.conf (a string in double quotes, true or false). */
export function readConf(text: string): Map<string, string | boolean> {
  const conf = new Map<string, string | boolean>();
  text.split("\n").forEach((raw, i) => {
    const line = raw.replace(/\s+#.*$/, "").trim();
    if (!line || line.startsWith("#")) return;
    const m = /^([A-Z_][A-Z0-9_]*)\s*=\s*(?:"([^"\\]*)"|(true|false))$/.exec(line);
    if (!m) fail(`flags.conf:${i + 1}: expected NAME = "text" or NAME = true/false, got: ${raw.trim()}`);
    conf.set(m[1] as string, m[2] ?? m[3] === "true");
  });
  return conf;
}

export function flagsOf(conf: Map<string, string | boolean>): string[] {
  const known = new Set(["OPT_LEVEL", "UNROLL_LOOPS", "MARCH_NATIVE", "FAST_MATH", "EXTRA_FLAGS"]);
  for (const name of conf.keys()) if (!known.has(name)) fail(`flags.conf: unknown setting ${name}`);
  const text = (name: string) => {
    const v = conf.get(name) ?? "";
    if (typeof v !== "string") fail(`flags.conf: ${name} must be a string in double quotes`);
    return v;
  };
  const bool = (name: string) => {
    const v = conf.get(name) ?? false;
    if (typeof v !== "boolean") fail(`flags.conf: ${name} must be true or false`);
    return v;
  };
  const flags = [text("OPT_LEVEL")];
  if (bool("UNROLL_LOOPS")) flags.push("-funroll-loops");
  if (bool("MARCH_NATIVE")) flags.push("-march=native");
  if (bool("FAST_MATH")) flags.push("-ffast-math");
  flags.push(...text("EXTRA_FLAGS").split(/\s+/).filter(Boolean));
  for (const f of flags) {
    if (!FLAG.test(f) || REFUSED.test(f))
      fail(
        `refusing the flag ${JSON.stringify(f)}: only optimisation flags (-O…, -f…, -m…) that touch no files are allowed`,
      );
  }
  return flags;
}

function main(): void {
  requireCompiler();
  const flags = flagsOf(readConf(readFileSync("flags.conf", "utf8")));
  const args = ["-std=c11", ...flags, "-o", "out/bench", "bench.c", "-lm"];
  console.error(`build: ${compiler()} ${args.join(" ")}`);
  rmSync("out", { recursive: true, force: true });
  mkdirSync("out");
  const t0 = performance.now();
  const cc = spawnSync(compiler(), args, { encoding: "utf8" });
  const ms = performance.now() - t0;
  if (cc.error) fail(`could not run ${compiler()}: ${cc.error.message}`);
  if (cc.status !== 0) fail(`the compiler failed (exit ${cc.status}):\n${cc.stderr}`);
  console.log(`build_ms: ${ms.toFixed(1)}`);
  console.log(`binary_kb: ${(statSync("out/bench").size / 1024).toFixed(1)}`);
}

if (process.argv[1] === import.meta.filename) main();
