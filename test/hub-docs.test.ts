/**
 * docs/hub.md's limits match the code (issue #35: the docs said seeds ≥ 3 while the hub took 1).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { DEFAULT_LIMITS } from "../src/hub/gates.ts";

const doc = readFileSync(join(import.meta.dirname, "..", "docs", "hub.md"), "utf8");

it("the gates table states the hub's default seedsMin", () => {
  const gate = doc.split("\n").find((l) => l.startsWith("| 9 |"));
  expect(gate).toBeDefined();
  expect(gate).toContain(`\`seedsMin\` seeds (default ${DEFAULT_LIMITS.seedsMin}`);
  expect(doc).not.toMatch(/seeds ≥ \d/);
});

it("the claim field table's seed count matches the claim schema's 1–64", () => {
  expect(doc).toMatch(/\| `seeds` \| the seeds of the trials \| 1–64 distinct integers/);
  expect(DEFAULT_LIMITS.seedsMin).toBeGreaterThanOrEqual(1);
});
