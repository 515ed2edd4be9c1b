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
      "context",
      "failures",
      "finalize_plan",
      "note",
      "run_experiment",
      "status",
      "tree",
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

  it("with a branching frontier, puts the worktree at the kept node the next experiment builds on", async () => {
    const dir = valueProject();
    const p = join(dir, "program.md");
    writeFileSync(
      p,
      readFileSync(p, "utf8").replace(
        "acceptance: greedy\n",
        "acceptance: greedy\nfrontier: { strategy: top_k, k: 5 }\n",
      ),
    );
    git(dir, "commit", "-qam", "frontier");
    const client = await connect(dir);
    const worktree = join(dir, ".autolab", "worktrees", "m");
    await call(client, "context");
    // Each edit lowers X by one from wherever the worktree is (the node the harness chose).
    const said: string[] = [];
    for (let i = 0; i < 6; i++) {
      const x = Number(/X = (-?\d+)/.exec(readFileSync(join(worktree, "value.mjs"), "utf8"))?.[1]);
      writeFileSync(join(worktree, "value.mjs"), `export const X = ${x - 1};\n`);
      said.push((await call(client, "run_experiment", { hypothesis: `X ${x} → ${x - 1}` })).text);
    }
    const ledger = new SqliteLedger(join(dir, ".autolab", "lab.db"));
    const exps = ledger.listExperiments(ledger.getRun("m")?.id ?? -1);
    ledger.close();
    const xOf = (commit: string) => Number(/X = (-?\d+)/.exec(git(dir, "show", `${commit}:value.mjs`))?.[1]);
    for (const e of exps.slice(1)) {
      // The recorded parent is the commit the edit was made on: one less than it, every time.
      expect(xOf(e.commit)).toBe(xOf(e.parentCommit) - 1);
      expect(exps.some((x) => x.commit === e.parentCommit)).toBe(true);
    }
    // It branched (a tree node exists), and said so when the worktree moved off the best.
    expect(exps.some((e) => e.decision?.treeNode)).toBe(true);
    expect(said.some((t) => /The worktree is at kept node #\d+ \(the frontier's choice\)/.test(t))).toBe(
      true,
    );
    const tree = JSON.parse((await call(client, "tree")).text) as {
      branched: boolean;
      nodes: { n: number }[];
    };
    expect(tree.branched).toBe(true);
    expect(tree.nodes.length).toBe(
      exps.filter((e) => e.decision?.action === "keep" || e.decision?.treeNode).length,
    );
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
