/**
 * A lab for `autolab finalize`'s viewers (GET /api/finalize, the dashboard's Finalize panel):
 * a real git repository whose commits are a run's experiments, and a notebook written through
 * SqliteLedger that records them — without running anything.
 *
 * params.txt: A on line 1, C on line 12 (far apart: independent hunks). Kept: #1 (A=1), #3
 * (C=1, hostile markup and a holdout value in its hypothesis), #4 (A=2: the line #1 wrote,
 * so it depends on #1). #2 is discarded.
 */
import { join } from "node:path";
import { createGitProject } from "./git-project.ts";
import { buildNotebook } from "./notebook-fixture.ts";

export const HOSTILE = `<img src=x onerror="window.__pwned=1">Raise C secret_holdout: 41`;

function params(a: number, c: number): string {
  const spacer = Array.from({ length: 10 }, (_, i) => `# spacer ${i}`);
  return [`A = ${a}`, ...spacer, `C = ${c}`, ""].join("\n");
}

export interface FinalizeLab {
  root: string;
  ledgerPath: string;
  base: string;
  /** Experiment n → its commit. */
  commits: Record<number, string>;
}

/** `kept: false`: the same experiments, none kept beyond the baseline. */
export function finalizeLab(opts: { tag?: string; kept?: boolean } = {}): FinalizeLab {
  const repo = createGitProject({ "params.txt": params(0, 0), "program.md": "not a program\n" });
  const base = repo.head as string;
  const commitAt = (parent: string, a: number, c: number, message: string) => {
    repo.git("checkout", "-q", "--detach", parent);
    repo.write({ "params.txt": params(a, c) });
    return repo.commitAll(message);
  };
  const c1 = commitAt(base, 1, 0, "A=1");
  const c2 = commitAt(c1, 5, 0, "A=5");
  const c3 = commitAt(c1, 1, 1, "C=1");
  const c4 = commitAt(c3, 2, 1, "A=2");
  repo.git("checkout", "-q", "main");
  const kept = opts.kept ?? true;
  const keep = (x: "keep" | "discard") => (kept ? x : "discard");
  const ledgerPath = buildNotebook(repo.root, [
    {
      tag: opts.tag ?? "fin",
      programPath: join(repo.root, "program.md"),
      metric: "score",
      holdout: ["secret_holdout"],
      baseCommit: base,
      experiments: [
        { action: "keep", metric: 100, commit: base, parent: base, hypothesis: "baseline" },
        { action: keep("keep"), metric: 90, commit: c1, parent: base, hypothesis: "Raise A to 1" },
        { action: "discard", metric: 95, commit: c2, parent: c1, hypothesis: "Raise A to 5" },
        { action: keep("keep"), metric: 86, commit: c3, parent: c1, hypothesis: HOSTILE },
        { action: keep("keep"), metric: 80, commit: c4, parent: c3, hypothesis: "Raise A to 2" },
      ],
    },
  ]);
  return { root: repo.root, ledgerPath, base, commits: { 1: c1, 2: c2, 3: c3, 4: c4 } };
}
