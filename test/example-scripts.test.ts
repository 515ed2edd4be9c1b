/**
 * Every shell script shipped under examples/ parses (`bash -n`) and is run for real by a test
 * (issue #35: examples/slurm/worker-array.sbatch did not parse, and nothing ran it). A script
 * added without a real run fails here until it has one.
 */
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "./helpers/toy-project.ts";

/** Each script → the test file that runs it for real (its path appears in that file). */
const REAL_RUNS: Record<string, string> = {
  "examples/slurm/worker-array.sbatch": "test/slurm-executor.test.ts",
};

/** Files under examples/ that are shell scripts: by extension or by a sh/bash shebang. */
function shellScripts(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    if (name === "node_modules") continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      out.push(...shellScripts(path));
      continue;
    }
    const head = readFileSync(path, "utf8").slice(0, 80);
    if (
      /\.(sh|bash|sbatch)$/.test(name) ||
      /^#!\s*\S*\b(ba|z|da)?sh\b/.test(head) ||
      /^#!\s*\S*env\s+(ba)?sh\b/.test(head)
    )
      out.push(relative(REPO_ROOT, path));
  }
  return out.sort();
}

describe("the shell scripts under examples/", () => {
  const scripts = shellScripts(join(REPO_ROOT, "examples"));

  it("are found (the Slurm worker array is one)", () => {
    expect(scripts).toContain("examples/slurm/worker-array.sbatch");
  });

  it.each(scripts)("%s parses with bash -n", (script) => {
    const r = spawnSync("bash", ["-n", join(REPO_ROOT, script)], { encoding: "utf8" });
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
  });

  it.each(scripts)("%s is run for real by a test", (script) => {
    const runner = REAL_RUNS[script];
    expect(runner, `add a test that runs ${script} and name it in REAL_RUNS`).toBeDefined();
    expect(readFileSync(join(REPO_ROOT, runner as string), "utf8")).toContain(
      script.split("/").slice(-2).join("/"),
    );
  });
});
