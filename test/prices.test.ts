/** Prices (issue #36): the table, and program.md's agent.price for a model the table lacks. */
import { expect, it } from "vitest";
import { costOf } from "../src/agents/llm/prices.ts";
import { parseProgram } from "../src/program/index.ts";

it("agent.price wins over the table and prices a model it does not list", () => {
  expect(costOf("openai-compatible", "my-local-32b", 1_000_000, 1_000_000)).toBeUndefined();
  expect(
    costOf("openai-compatible", "my-local-32b", 2_000_000, 500_000, { input: 0.2, output: 0.6 }),
  ).toBeCloseTo(0.7);
  expect(costOf("anthropic", "claude-sonnet-4-5", 1_000_000, 0)).toBe(3);
  expect(costOf("anthropic", "claude-sonnet-4-5", 1_000_000, 0, { input: 1, output: 1 })).toBe(1);
});

it("program.md's agent.price parses, and a bad one is a clear error", () => {
  const base = (price: string) =>
    `---\nname: p\nobjective: { metric: s, direction: minimize }\nrun: { command: "true", budget: 5s }\nfiles: { editable: [a.py] }\nagent: { backend: llm, model: m, base_url: "http://127.0.0.1:1/v1", price: ${price} }\n---\n`;
  expect(parseProgram(base("{ input: 0.2, output: 0.6 }"), "/x/program.md").agent.price).toEqual({
    input: 0.2,
    output: 0.6,
  });
  expect(() => parseProgram(base("{ input: -1, output: 0.6 }"), "/x/program.md")).toThrow(/price/);
});
