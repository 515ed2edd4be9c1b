/**
 * One list of examples (issue #36): README.md's and docs/examples.md's tables name exactly the
 * examples `listExamples()` reads from examples/, so a new example cannot be missing from one.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { exampleNextSteps, listExamples } from "../src/app/init.ts";

const root = join(import.meta.dirname, "..");
/** The example names linked in a markdown table's first column, in one section of a file. */
function tableNames(file: string, linkPrefix: string, section?: string): string[] {
  let text = readFileSync(join(root, file), "utf8");
  if (section !== undefined) {
    const start = text.indexOf(section);
    expect(start, `${section} in ${file}`).toBeGreaterThanOrEqual(0);
    const next = text.indexOf("\n## ", start + section.length);
    text = text.slice(start, next < 0 ? undefined : next);
  }
  const re = new RegExp(`^\\| \\[\`?[^\\]]+\`?\\]\\(${linkPrefix.replace(/[.]/g, "\\.")}([^)]+)\\)`, "gm");
  return [...text.matchAll(re)].map((m) => m[1] as string).sort();
}

const top = listExamples().filter((n) => !n.startsWith("portfolio/"));
const portfolio = listExamples()
  .filter((n) => n.startsWith("portfolio/"))
  .map((n) => n.slice("portfolio/".length));

it("listExamples names every example directory and the portfolio's programs", () => {
  expect(top).toContain("tiny-lm");
  expect(portfolio).toContain("sgd-noisy");
});

it("README's examples table lists exactly the examples", () => {
  expect(tableNames("README.md", "examples/", "## Examples")).toEqual(top);
});

it("docs/examples.md's tables list exactly the examples and the portfolio's programs", () => {
  expect(tableNames("docs/examples.md", "../examples/", "# Examples")).toEqual(top);
  expect(tableNames("docs/examples.md", "../examples/portfolio/", "## Portfolio")).toEqual(portfolio);
});

it("init's Next lines come from the example's README (rubric-writeup starts its judges first)", () => {
  const steps = exampleNextSteps("rubric-writeup") ?? [];
  expect(steps[0]).toMatch(/^node judge-server\.mjs &/);
  expect(steps.some((l) => l.startsWith("autolab run"))).toBe(true);
  expect(exampleNextSteps("portfolio/char-lm")).toBeUndefined();
});
