import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ID = ["-c", "user.name=t", "-c", "user.email=t@localhost"];
export const git = (cwd: string, ...args: string[]) =>
  execFileSync("git", [...ID, ...args], { cwd, encoding: "utf8" }).trim();

/**
 * A project whose score is the number in value.mjs (editable); run.mjs and evaluate.mjs are
 * protected. evaluate.mjs also prints a holdout metric that no agent view may show.
 */
export function valueProject(extra: { constraints?: string[]; command?: string } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), "autolab-loop-"));
  writeFileSync(join(dir, "value.mjs"), "export const X = 5;\n");
  writeFileSync(
    join(dir, "run.mjs"),
    'import { writeFileSync } from "node:fs";\nimport { X } from "./value.mjs";\nconsole.log(`METRIC train_loss=${X * 2}`);\nwriteFileSync("out.txt", String(X));\n',
  );
  writeFileSync(
    join(dir, "evaluate.mjs"),
    'import { readFileSync } from "node:fs";\nconst x = Number(readFileSync("out.txt", "utf8"));\nconsole.log(`score: ${x}`);\nconsole.log(`holdout_score: ${x + 1000.125}`);\nconsole.log(`mem_mb: ${x * 100}`);\n',
  );
  writeFileSync(join(dir, ".gitignore"), "out.txt\n");
  const constraints = extra.constraints ? `constraints: ${JSON.stringify(extra.constraints)}\n` : "";
  writeFileSync(
    join(dir, "program.md"),
    `---
name: loop-test
objective: { metric: score, direction: minimize }
run:
  command: ${extra.command ?? "node run.mjs"}
  evaluate: node evaluate.mjs
  budget: 5s
files:
  editable: [value.mjs]
  protected: [run.mjs, evaluate.mjs]
metrics:
  holdout: [holdout_score]
  progress: train_loss
${constraints}---
Lower X.
`,
  );
  git(dir, "init", "-q", "-b", "main");
  git(dir, "add", "-A");
  git(dir, "commit", "-qm", "init");
  return dir;
}
