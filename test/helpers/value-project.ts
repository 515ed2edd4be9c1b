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
export interface ValueProjectOptions {
  constraints?: string[];
  command?: string;
  acceptance?: "greedy" | "noise" | "greedy-final" | "posterior";
  /** Seeded measurement noise added to X (amplitude of a value in [-a, a]), from AUTOLAB_SEED. */
  noise?: number;
  /** "inverse": the holdout worsens as the score improves (an overfitting canary should fire). */
  holdout?: "tracks" | "inverse";
  /** Print train_loss = X·(1 + 1/step) over `steps` steps of 100 ms (a learning curve to prune). */
  steps?: number;
  budget?: string;
}

export function valueProject(extra: ValueProjectOptions = {}): string {
  const dir = mkdtempSync(join(tmpdir(), "autolab-loop-"));
  writeFileSync(join(dir, "value.mjs"), "export const X = 5;\n");
  const amp = extra.noise ?? 0;
  writeFileSync(
    join(dir, "run.mjs"),
    `import { writeFileSync } from "node:fs";
import { X } from "./value.mjs";
const seed = Number(process.env.AUTOLAB_SEED ?? 0);
const noise = ${amp} * (((seed * 7919 + 13) % 101) / 50 - 1);
const steps = ${extra.steps ?? 0};
for (let s = 1; s <= steps; s++) {
  console.log(\`METRIC train_loss=\${X * (1 + 1 / s)}\`);
  await new Promise((r) => setTimeout(r, 100));
}
if (!steps) console.log(\`METRIC train_loss=\${X * 2}\`);
writeFileSync("out.txt", String(X + noise));
`,
  );
  const holdout = extra.holdout === "inverse" ? "1000 - x" : "x + 1000.125";
  writeFileSync(
    join(dir, "evaluate.mjs"),
    `import { readFileSync } from "node:fs";\nconst x = Number(readFileSync("out.txt", "utf8"));\nconsole.log(\`score: \${x}\`);\nconsole.log(\`holdout_score: \${${holdout}}\`);\nconsole.log(\`mem_mb: \${x * 100}\`);\n`,
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
  budget: ${extra.budget ?? "5s"}
files:
  editable: [value.mjs]
  protected: [run.mjs, evaluate.mjs]
outputs: [out.txt]
metrics:
  holdout: [holdout_score]
  progress: train_loss
acceptance: ${extra.acceptance ?? "greedy"}
${constraints}---
Lower X.
`,
  );
  git(dir, "init", "-q", "-b", "main");
  git(dir, "add", "-A");
  git(dir, "commit", "-qm", "init");
  return dir;
}
