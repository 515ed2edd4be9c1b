import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterEach, describe, expect, it } from "vitest";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { git, valueProject } from "./helpers/value-project.ts";

const CLI = resolve(dirname(fileURLToPath(import.meta.url)), "..", "src", "cli", "main.ts");
const clients: Client[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) await c.close();
});

async function connect(dir: string): Promise<Client> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, "mcp", "-p", dir, "-t", "m"],
    stderr: "pipe",
  });
  const client = new Client({ name: "test-agent", version: "1.0.0" });
  await client.connect(transport);
  clients.push(client);
  return client;
}

async function call(
  client: Client,
  name: string,
  args: Record<string, unknown> = {},
): Promise<{ text: string; isError: boolean }> {
  const res = (await client.callTool({ name, arguments: args })) as {
    content: { text: string }[];
    isError?: boolean;
  };
  return { text: res.content.map((c) => c.text).join("\n"), isError: res.isError === true };
}

describe("autolab mcp", () => {
  it("lets an interactive agent read the notebook, run its edits as experiments, and take notes", async () => {
    const dir = valueProject();
    const client = await connect(dir);
    const tools = (await client.listTools()).tools.map((t) => t.name).sort();
    expect(tools).toEqual([
      "advise",
      "context",
      "failures",
      "finalize_plan",
      "note",
      "run_experiment",
      "status",
    ]);
    // Nothing kept beyond the baseline yet: a clear tool error.
    const none = await call(client, "finalize_plan");
    expect(none).toEqual({
      isError: true,
      text: expect.stringContaining("kept no change beyond its baseline"),
    });

    const ctx = await call(client, "context");
    expect(ctx.isError).toBe(false);
    const worktree = join(dir, ".autolab", "worktrees", "m");
    expect(ctx.text).toContain(worktree);
    expect(ctx.text).toContain("Best: #0 score = 5");
    expect(ctx.text).not.toContain("holdout_score");

    // The agent edits the worktree itself, then asks the harness to run it.
    writeFileSync(join(worktree, "value.mjs"), "export const X = 3;\n");
    const kept = await call(client, "run_experiment", {
      hypothesis: "X 5 → 3",
      mechanism: "smaller is better",
    });
    expect(kept.text).toMatch(/Experiment #1: keep\. score = 3\./);

    writeFileSync(join(worktree, "value.mjs"), "export const X = 4;\n");
    const discarded = await call(client, "run_experiment", { hypothesis: "X 3 → 4" });
    expect(discarded.text).toMatch(/Experiment #2: discard/);
    expect(readFileSync(join(worktree, "value.mjs"), "utf8")).toBe("export const X = 3;\n");

    // Editing the evaluator is rejected without running, and the file is restored.
    writeFileSync(join(worktree, "evaluate.mjs"), 'console.log("score: -1")\n');
    const cheat = await call(client, "run_experiment", { hypothesis: "better evaluation" });
    expect(cheat.text).toMatch(/Experiment #3: reject\..*protected file evaluate\.mjs/s);
    expect(readFileSync(join(worktree, "evaluate.mjs"), "utf8")).not.toContain("-1");

    expect((await call(client, "note", { text: "X below 3 untested", experiment: 1 })).text).toBe("Noted.");
    const status = JSON.parse((await call(client, "status")).text) as {
      best: { id: number };
      counts: { total: number };
    };
    expect(status.best.id).toBe(1);
    expect(status.counts.total).toBe(4);
    expect((await call(client, "failures")).text).toContain("#3 reject");
    // The dry-run plan: one branch for the kept #1, nothing written.
    const plan = await call(client, "finalize_plan");
    expect(plan.text).toContain("autolab-finalize/m/1-x-5-3");
    expect(plan.text).toContain("dry run: nothing written");
    expect(git(dir, "branch", "--list", "autolab-finalize/*")).toBe("");

    const ledger = new SqliteLedger(join(dir, ".autolab", "lab.db"));
    const exps = ledger.listExperiments(ledger.getRun("m")?.id ?? -1);
    ledger.close();
    expect(exps[1]?.agent).toBe("mcp:test-agent");
    expect(exps[1]?.mechanism).toBe("smaller is better");
    expect(git(dir, "rev-parse", "autolab/m")).toBe(exps[1]?.commit);
  });

  it("lets the client act as the advisor: the brief, ideas into the context, garbage recorded as such", async () => {
    const dir = valueProject();
    const client = await connect(dir);
    const worktree = join(dir, ".autolab", "worktrees", "m");
    await call(client, "context"); // opens the run: its worktree, the baseline
    writeFileSync(join(worktree, "value.mjs"), "export const X = 7;\n");
    expect((await call(client, "run_experiment", { hypothesis: "X 5 → 7" })).text).toMatch(/#1: discard/);
    const brief = await call(client, "advise");
    expect(brief.text).toContain("You are asked because: asked through MCP.");
    expect(brief.text).toContain("- #1 X 5 → 7 (score=7) →");
    expect(brief.text).not.toMatch(/100[57]\.125/);
    const ideas = await call(client, "advise", { answer: "IDEA: try X = 1\nIDEA: revisit #1: no" });
    expect(ideas).toEqual({
      isError: false,
      text: "Recorded 2 ideas: the context lists them as the advisor's.",
    });
    expect((await call(client, "context")).text).toContain("- [advisor] try X = 1");
    const garbage = await call(client, "advise", { answer: "looks fine to me" });
    expect(garbage.isError).toBe(true);
    expect(garbage.text).toContain("recorded as garbage: no `IDEA:` or `STOP:` line");
    expect(garbage.text).toContain("fix: Answer with up to three lines");
    const stop = await call(client, "advise", { answer: "STOP: X is as low as it goes" });
    expect(stop.text).toContain("Recorded: STOP (X is as low as it goes)");
    const ledger = new SqliteLedger(join(dir, ".autolab", "lab.db"));
    const advice = ledger.listAdvice(ledger.getRun("m")?.id ?? -1);
    ledger.close();
    expect(advice.map((a) => [a.verdict, a.agent, a.afterN])).toEqual([
      ["ideas", "mcp:test-agent", 1],
      ["garbage", "mcp:test-agent", 1],
      ["stop", "mcp:test-agent", 1],
    ]);
  });

  it("reports a broken program as a tool error, not a crash", async () => {
    const dir = valueProject();
    writeFileSync(join(dir, "program.md"), "---\nname: x\n---\n");
    const client = await connect(dir);
    const res = await call(client, "context");
    expect(res.isError).toBe(true);
    expect(res.text).toMatch(/program\.md.*objective/s);
  });
});
