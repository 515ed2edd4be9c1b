import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { git } from "./value-project.ts";

/** A project scored by `score` (a JS expression of X), X a knob of the built-in optimizer. */
export function knobProject(opts: {
  score: string;
  knob: string;
  crashUnless?: string;
  acceptance?: string;
}): string {
  const dir = mkdtempSync(join(tmpdir(), "autolab-search-faults-"));
  writeFileSync(join(dir, "value.mjs"), "export const X = 5;\n");
  writeFileSync(
    join(dir, "run.mjs"),
    `import { X } from "./value.mjs";
${opts.crashUnless ? `if (!(${opts.crashUnless})) { console.error("X out of range: " + X); process.exit(3); }` : ""}
console.log("score: " + (${opts.score}));
`,
  );
  writeFileSync(
    join(dir, "program.md"),
    `---
name: search-faults
objective: { metric: score, direction: minimize }
run:
  command: node run.mjs
  budget: 5s
files:
  editable: [value.mjs]
  protected: [run.mjs]
acceptance: ${opts.acceptance ?? "greedy"}
agent: builtin
search:
  X: ${opts.knob}
---
Lower the score.
`,
  );
  git(dir, "init", "-q", "-b", "main");
  git(dir, "add", "-A");
  git(dir, "commit", "-qm", "init");
  return dir;
}
