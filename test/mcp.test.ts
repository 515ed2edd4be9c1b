import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterEach, describe, expect, it } from "vitest";
import { openKnowledgeStore } from "../src/ledger/knowledge-store.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { entry } from "./contracts/knowledge-contract.ts";
import { git, valueProject } from "./helpers/value-project.ts";

const CLI = resolve(dirname(fileURLToPath(import.meta.url)), "..", "src", "cli", "main.ts");
const clients: Client[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) await c.close();
});

async function connect(dir: string, knowledge = process.env.AUTOLAB_KNOWLEDGE as string): Promise<Client> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, "mcp", "-p", dir, "-t", "m"],
    stderr: "pipe",
    // The SDK passes only a few variables by default: the tests' knowledge store must reach it.
    env: { ...getDefaultEnvironment(), AUTOLAB_KNOWLEDGE: knowledge },
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
      "prior_work",
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
    // It read the notebook through its tools: no context is recorded as what it was shown.
    const shown = ledger.proposalContext(ledger.getRun("m")?.id ?? -1, 1);
    ledger.close();
    expect(shown).toBeUndefined();
    expect(exps[1]?.agent).toBe("mcp:test-agent");
    expect(exps[1]?.mechanism).toBe("smaller is better");
    expect(git(dir, "rev-parse", "autolab/m")).toBe(exps[1]?.commit);
  });

  it("runs the after hook of each step; context shows its output (the agent edits before a step: no before hook)", async () => {
    const dir = valueProject();
    const md = readFileSync(join(dir, "program.md"), "utf8");
    writeFileSync(
      join(dir, "program.md"),
      md.replace(
        "acceptance: greedy\n",
        'acceptance: greedy\nhooks: { before: "echo mcp-before", after: "echo mcp-after $AUTOLAB_N $AUTOLAB_DECISION" }\n',
      ),
    );
    git(dir, "commit", "-qam", "hooks");
    const client = await connect(dir);
    expect((await call(client, "context")).text).toContain("| mcp-after 0 keep");
    const worktree = join(dir, ".autolab", "worktrees", "m");
    writeFileSync(join(worktree, "value.mjs"), "export const X = 3;\n");
    expect((await call(client, "run_experiment", { hypothesis: "X 5 → 3" })).text).toMatch(/#1: keep/);
    const ctx = (await call(client, "context")).text;
    expect(ctx).toContain("| mcp-after 1 keep");
    expect(ctx).not.toContain("mcp-before");
  });

  it("prior_work: other runs' closest results, its own run left out; the context carries them too", async () => {
    const dir = valueProject();
    const knowledge = join(dir, "..", `${basename(dir)}-knowledge.db`);
    const store = openKnowledgeStore(knowledge);
    const program = join(dir, "program.md");
    store.record([
      // Another run of this project with the same objective (another project's is not shown by default).
      entry({
        project: program,
        projectName: "loop-test",
        run: "oct1",
        hypothesis: "lower X halves the score",
        action: "keep",
        value: 1,
        gain: 2,
        metric: "score",
      }),
      entry({
        project: "/elsewhere/program.md",
        projectName: "vision-net",
        run: "oct1",
        hypothesis: "lower X from elsewhere",
        metric: "score",
      }),
      entry({
        project: program,
        projectName: "loop-test",
        run: "m",
        hypothesis: "lower X, my own run",
        metric: "score",
      }),
    ]);
    store.close();
    try {
      const client = await connect(dir, knowledge);
      const res = await call(client, "prior_work");
      expect(res.isError).toBe(false);
      expect(res.text).toContain("## Prior work (other runs on this machine, not measured in this run)");
      expect(res.text).toContain("[loop-test/oct1#1, 2026-11-22] lower X halves the score → keep");
      expect(res.text).not.toContain("my own run");
      expect(res.text).not.toContain("from elsewhere");
      expect((await call(client, "prior_work", { query: "zebra" })).text).toBe(
        "No prior results from other runs match.",
      );
      const ctx = await call(client, "context");
      expect(ctx.text).toContain("lower X halves the score");
    } finally {
      rmSync(knowledge, { force: true });
      rmSync(`${knowledge}-wal`, { force: true });
      rmSync(`${knowledge}-shm`, { force: true });
    }
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
      // The notebook the agent reads next names the node its worktree is at, as runStep's does.
      const at = /The worktree is at kept node #(\d+) \(the frontier's choice\)/.exec(said.at(-1) ?? "")?.[1];
      if (at) expect((await call(client, "context")).text).toContain(`You build on kept node #${at} `);
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
