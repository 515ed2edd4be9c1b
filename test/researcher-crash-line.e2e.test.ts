/**
 * A researcher that crashes shows why at the terminal (issue #36): the crash line is followed by
 * the last lines of its output and, when they name a path its sandbox hides, a hint. The lines
 * are not recorded in the notebook (they are the failed researcher's own text).
 */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";
import { AgentFailure, failureForTerminal } from "../src/core/agent-failure.ts";
import { runCli } from "./helpers/toy-project.ts";
import { git, valueProject } from "./helpers/value-project.ts";

it("failureForTerminal keeps the last lines and names a hidden path", () => {
  const f = new AgentFailure(
    "crashed",
    "the agent command exited with code 127",
    "line 1\nline 2\nbash: /tmp/x/r.sh: No such file or directory\n",
  );
  expect(failureForTerminal(f)).toEqual({
    lines: ["line 1", "line 2", "bash: /tmp/x/r.sh: No such file or directory"],
    hint: "/tmp/x/r.sh is outside what the researcher's sandbox shows (the host's /tmp and home are hidden: docs/security.md); put what it needs inside the project",
  });
  const long = new AgentFailure("crashed", "x", Array.from({ length: 9 }, (_, i) => `l${i}`).join("\n"));
  expect(failureForTerminal(long)?.lines).toEqual(["l4", "l5", "l6", "l7", "l8"]);
  expect(failureForTerminal(long)?.hint).toBeUndefined();
  expect(failureForTerminal(new AgentFailure("crashed", "x", ""))).toBeUndefined();
});

it("a command researcher whose script is in the host's /tmp: the crash line carries its stderr and the hint", async () => {
  const dir = valueProject();
  const scripts = mkdtempSync(join(tmpdir(), "autolab-researcher-script-"));
  const script = join(scripts, "r.sh");
  writeFileSync(script, 'echo \'{"hypothesis": "never runs"}\'\n');
  const path = join(dir, "program.md");
  writeFileSync(
    path,
    readFileSync(path, "utf8").replace(
      "---\nLower",
      `agent: { backend: command, command: "bash ${script}" }\n---\nLower`,
    ),
  );
  git(dir, "commit", "-qam", "command researcher");
  const r = await runCli(["run", "--tag", "t", "-n", "1"], { cwd: dir });
  expect(r.stdout).toMatch(/#1 crash .*agent crashed: the agent command exited with code 127/);
  expect(r.stdout).toContain(`    | bash: ${script}: No such file or directory`);
  expect(r.stdout).toContain(`    hint: ${script} is outside what the researcher's sandbox shows`);
  // The notebook keeps the harness's words only.
  const log = await runCli(["log", "--json"], { cwd: dir });
  expect(log.stdout).not.toContain("No such file or directory");
});
