import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { suggestGp } from "../src/agents/builtin/gp.ts";
import { createRng } from "../src/agents/builtin/rng.ts";
import { suggestTpe } from "../src/agents/builtin/tpe.ts";
import { handleError } from "../src/cli/errors.ts";
import { recordDecision } from "../src/core/decide.ts";
import { ERROR_CODES, type ErrorCode, exitCodeOf } from "../src/core/error-codes.ts";
import { AutolabError } from "../src/core/errors.ts";
import type { ExperimentRecord } from "../src/core/ledger.ts";
import type { LoopDeps } from "../src/core/loop-deps.ts";
import { runStep } from "../src/core/propose.ts";
import { runTrial } from "../src/core/trial-step.ts";
import { REPO_ROOT } from "./helpers/toy-project.ts";

/** Every .ts file under src/. */
function sources(dir = join(REPO_ROOT, "src")): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

describe("error codes: one table (src/core/error-codes.ts)", () => {
  const codes = Object.keys(ERROR_CODES) as ErrorCode[];

  it("docs/cli.md lists every code with its exit code and HTTP status", () => {
    const doc = readFileSync(join(REPO_ROOT, "docs", "cli.md"), "utf8");
    for (const c of codes)
      expect(doc, c).toContain(`| \`${c}\` | ${exitCodeOf(c)} | ${ERROR_CODES[c].http} |`);
  });

  it("every code in the table is raised somewhere (no dead entries)", () => {
    const text = sources()
      .filter((f) => !f.endsWith("error-codes.ts"))
      .map((f) => readFileSync(f, "utf8"))
      .join("\n");
    for (const c of codes) expect(text.includes(`"${c}"`), c).toBe(true);
  });

  it("a broken invariant exits 70 like any bug; a bad command line 2; the rest 1", () => {
    expect(exitCodeOf("NO_BEST")).toBe(70);
    expect(exitCodeOf("BAD_FLAG")).toBe(2);
    expect(exitCodeOf("PROGRAM_INVALID")).toBe(1);
    const printed: string[] = [];
    const write = vi.spyOn(process.stderr, "write").mockImplementation((chunk) => {
      printed.push(String(chunk));
      return true;
    });
    try {
      expect(handleError(new AutolabError("NO_BEST", "the run has no measured best."))).toBe(70);
      expect(printed.join("")).toMatch(/internal error — please report/);
      printed.length = 0;
      expect(handleError(new AutolabError("PROGRAM_INVALID", "bad", "fix it"))).toBe(1);
      expect(printed.join("")).toBe("autolab: bad\n  fix: fix it\n");
    } finally {
      write.mockRestore();
    }
  });
});

/** Just what the phases read before their invariant checks: a notebook without the rows they need. */
const emptyNotebook = {
  program: { objective: { metric: "loss" }, run: { budgetMs: 1000 } },
  ledger: { listExperiments: () => [], getExperiment: () => undefined },
  run: { id: 1 },
} as unknown as LoopDeps;

describe("a broken invariant is a bug (exit 70, HTTP 500), never the user's error", () => {
  const sites: [string, () => unknown][] = [
    ["propose: no measured best", () => runStep(emptyNotebook)],
    [
      "decide: no measured best",
      () =>
        recordDecision(emptyNotebook, { n: 1 } as ExperimentRecord, { action: "discard" } as never, () => {}),
    ],
    ["trial: the experiment row is missing", () => runTrial(emptyNotebook, 3, 0, () => {}, undefined)],
    [
      "GP: an empty search space",
      () => suggestGp({}, [], createRng(1), { direction: "minimize", startup: 1 }),
    ],
    ["TPE: an empty search space", () => suggestTpe({}, [], createRng(1), { direction: "minimize" })],
  ];
  it.each(sites)("%s", async (_, site) => {
    const err = await (async () => site())().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AutolabError);
    const code = (err as AutolabError).code;
    expect(ERROR_CODES[code].kind).toBe("bug");
    expect(ERROR_CODES[code].http).toBe(500);
    expect(exitCodeOf(code)).toBe(70);
  });
});
