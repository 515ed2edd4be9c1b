import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCliAgent } from "../src/agents/cli/cli-agent.ts";
import { loadPreset } from "../src/agents/cli/register.ts";
import { createRun } from "../src/app/create-run.ts";
import type { LoopEvent } from "../src/core/events.ts";
import { parseProgram } from "../src/program/index.ts";
import { probeSandbox } from "../src/runner/sandbox.ts";
import { type FakeModel, type FakeScript, startFakeModel } from "./fake-model/server.ts";
import { createToyProject, TOY_HOLDOUT, type ToyProject } from "./helpers/toy-project.ts";

/**
 * One full iteration of `autolab run -n 1` with a real coding-agent CLI as the researcher,
 * driven by the fake model server: the CLI edits the worktree, the harness commits, runs the
 * trial, decides and records it in the notebook.
 */
/** With bubblewrap the researcher runs sandboxed: the protected evaluator is read-only to every CLI. */
const SANDBOXED = probeSandbox().ok;
const MINI_AGENT = join(dirname(fileURLToPath(import.meta.url)), "fake-model", "mini-agent.mjs");
const TAG = "t";
const SUMMARY = {
  hypothesis: "A learning rate ten times smaller stops the overshoot",
  mechanism: "the loss is minimal near LR = 0.01; 0.5 overshoots",
  expected: "score drops by about 2",
};

let fake: FakeModel;
const toys: ToyProject[] = [];
beforeAll(async () => {
  fake = await startFakeModel();
});
afterAll(async () => {
  await fake.close();
  for (const t of toys) t.cleanup();
});

function toy(agent: string): { toy: ToyProject; worktree: string } {
  const t = createToyProject({ evaluate: true, agent });
  toys.push(t);
  return { toy: t, worktree: join(t.dir, ".autolab", "worktrees", TAG) };
}

function script(worktree: string, over: Partial<FakeScript> = {}): FakeScript {
  return {
    file: join(worktree, "train.mjs"),
    oldText: "const LR = 0.5;",
    newText: "const LR = 0.05;",
    summary: SUMMARY,
    ...over,
  };
}

async function runOnce(dir: string) {
  const events: LoopEvent[] = [];
  const outcome = await createRun({
    program: dir,
    tag: TAG,
    maxExperiments: 1,
    onEvent: (e) => events.push(e),
  });
  outcome.lab.ledger.close();
  return { ...outcome, events };
}

describe.each([
  { backend: "pi", baseUrl: () => `${fake.url}/v1`, replies: ["read", "edit", "submit"] },
  { backend: "claude", baseUrl: () => fake.url, replies: ["read", "edit", "submit"] },
  // Codex gets its summary from --output-schema (the final message), not from a tool.
  { backend: "codex", baseUrl: () => `${fake.url}/v1`, replies: ["read", "edit", "final"] },
  // OpenCode asks for a session title too (a request without tools, left out below).
  { backend: "opencode", baseUrl: () => `${fake.url}/v1`, replies: ["read", "edit", "final"] },
])("autolab run -n 1 with agent $backend", ({ backend, baseUrl, replies }) => {
  it("edits, experiments, decides and records the proposal in the notebook", async () => {
    const { toy: t, worktree } = toy(`{ backend: ${backend}, base_url: "${baseUrl()}", model: fake-model }`);
    fake.script = script(worktree);
    fake.requests.length = 0;
    const { experiments, events } = await runOnce(t.dir);

    const exp = experiments[1];
    expect(exp?.agent).toBe(`${backend}:fake-model`);
    expect(exp?.decision?.action).toBe("keep");
    expect(exp).toMatchObject(SUMMARY);
    expect(exp?.usage?.inputTokens).toBeGreaterThan(0);
    // The candidate commit holds exactly the scripted edit.
    const diff = t.git(["diff", "--unified=0", exp?.parentCommit ?? "", exp?.commit ?? ""]);
    expect(t.git(["diff", "--name-only", exp?.parentCommit ?? "", exp?.commit ?? ""]).trim()).toBe(
      "train.mjs",
    );
    expect(diff).toContain("-const LR = 0.5;\n+const LR = 0.05;");
    expect(events.some((e) => e.type === "trial_finished" && e.n === 1 && e.status === "ok")).toBe(true);

    // The model saw the researcher prompt (notebook, absolute paths) and never the holdout.
    const calls = fake.modelRequests().filter((r) => r.tools.length > 0);
    expect(calls.map((r) => r.reply)).toEqual(replies);
    const first = JSON.stringify(calls[0]?.body);
    expect(first).toContain("Lab notebook: toy");
    expect(first).toContain(join(worktree, "train.mjs"));
    expect(first).not.toContain(String(TOY_HOLDOUT));
    expect(first).not.toContain("secret_holdout");

    const logs = join(t.dir, ".autolab", "logs", TAG, "1", "agent");
    expect(readFileSync(join(logs, "prompt.md"), "utf8")).toContain("ONE focused change");
    expect(existsSync(join(logs, "agent.stdout.log"))).toBe(true);
  });
});

describe("two pi agents at once (slots: 2)", () => {
  it("each edits its own proposer worktree; both changes end up in the best", async () => {
    const t = createToyProject({
      evaluate: true,
      slots: 2,
      score: "decreasing",
      agent: `{ backend: pi, base_url: "${fake.url}/v1", model: fake-model }`,
    });
    toys.push(t);
    // The prompt names the agent's worktree: proposer 0 lowers LR, proposer 1 widens the model.
    const worktrees = join(t.dir, ".autolab", "worktrees");
    fake.script = {
      ...script(join(worktrees, `${TAG}.p0`)),
      targetFor: (text) => {
        const p = /\.autolab\/worktrees\/t\.(p\d)\/train\.mjs/.exec(text)?.[1];
        if (p === "p0") return { file: join(worktrees, `${TAG}.p0`, "train.mjs") };
        if (p === "p1")
          return {
            file: join(worktrees, `${TAG}.p1`, "train.mjs"),
            oldText: "const WIDTH = 10;",
            newText: "const WIDTH = 32;",
          };
        return undefined;
      },
    };
    fake.requests.length = 0;
    const { experiments } = await createRun({ program: t.dir, tag: TAG, maxExperiments: 2 }).then((o) => {
      o.lab.ledger.close();
      return o;
    });
    const candidates = experiments.filter((e) => e.n > 0 && e.rebaseOf === undefined);
    expect(candidates).toHaveLength(2);
    for (const e of candidates) expect(e.agent).toBe("pi:fake-model");
    // Both proposals came from separate worktrees, at once, and both changes are in the best.
    const diffs = candidates.map((e) => t.git(["diff", "--unified=0", e.parentCommit, e.commit]));
    expect(diffs.some((d) => d.includes("+const LR = 0.05;"))).toBe(true);
    expect(diffs.some((d) => d.includes("+const WIDTH = 32;"))).toBe(true);
    const best = t.git(["show", `autolab/${TAG}:train.mjs`]);
    expect(best).toContain("const LR = 0.05;");
    expect(best).toContain("const WIDTH = 32;");
    expect(experiments.filter((e) => e.rebaseOf !== undefined)).toHaveLength(1);
  });
});

describe("an agent that edits the protected evaluator", () => {
  it("with a CLI that cannot be limited (command): the sandbox blocks the edit (unsandboxed: rejected by scope, file restored)", async () => {
    const { toy: t, worktree } = toy(
      `{ backend: command, command: "node ${MINI_AGENT} --prompt-file {prompt_file} --workdir {workdir}", base_url: "${fake.url}/v1", model: fake-model }`,
    );
    fake.script = script(worktree, {
      editFile: {
        file: join(worktree, "evaluate.mjs"),
        oldText: "console.log(`score: ${loss}`);",
        newText: 'console.log("score: 0");',
      },
    });
    const { experiments } = await runOnce(t.dir);
    const exp = experiments[1];
    expect(exp?.decision?.action).toBe("reject");
    expect(exp?.trials).toHaveLength(0);
    if (SANDBOXED) {
      // The sandbox keeps the evaluator read-only: the edit fails, nothing changed.
      expect(exp?.decision?.reason).toMatch(/^no change/);
    } else {
      expect(exp?.decision?.reason).toMatch(/scope: changed protected file evaluate\.mjs/);
      // The attempt is on record; the worktree is back at the best.
      expect(t.git(["show", `${exp?.commit}:evaluate.mjs`])).toContain('"score: 0"');
    }
    expect(readFileSync(join(worktree, "evaluate.mjs"), "utf8")).toContain("score: ${loss}");
  });

  it("with codex (its own sandbox allows the whole worktree): autolab's sandbox blocks the edit (unsandboxed: rejected by scope)", async () => {
    const { toy: t, worktree } = toy(`{ backend: codex, base_url: "${fake.url}/v1", model: fake-model }`);
    fake.script = script(worktree, {
      editFile: {
        file: join(worktree, "evaluate.mjs"),
        oldText: "console.log(`score: ${loss}`);",
        newText: 'console.log("score: 0");',
      },
    });
    const { experiments } = await runOnce(t.dir);
    const exp = experiments[1];
    expect(exp?.decision?.action).toBe("reject");
    expect(exp?.decision?.reason).toMatch(
      SANDBOXED ? /^no change/ : /scope: changed protected file evaluate\.mjs/,
    );
    expect(readFileSync(join(worktree, "evaluate.mjs"), "utf8")).toContain("score: ${loss}");
  });

  it("with pi: the CLI blocks the edit, so the candidate changes nothing and is rejected as such", async () => {
    const { toy: t, worktree } = toy(`{ backend: pi, base_url: "${fake.url}/v1", model: fake-model }`);
    fake.script = script(worktree, {
      editFile: {
        file: join(worktree, "evaluate.mjs"),
        oldText: "console.log(`score: ${loss}`);",
        newText: 'console.log("score: 0");',
      },
    });
    const { experiments } = await runOnce(t.dir);
    expect(experiments[1]?.decision?.reason).toMatch(/^no change/);
    expect(readFileSync(join(worktree, "evaluate.mjs"), "utf8")).toContain("score: ${loss}");
  });
});

/** Against the real hosted model: only with a key (never in CI). One small proposal. */
describe("claude against the Anthropic API", () => {
  it.skipIf(!process.env.ANTHROPIC_API_KEY)(
    "proposes one change to a small file and summarizes it",
    async () => {
      const wt = mkdtempSync(join(tmpdir(), "autolab-live-claude-"));
      try {
        const { writeFileSync } = await import("node:fs");
        const md = `---
name: live
objective: { metric: loss, direction: minimize }
run:
  command: node train.mjs
  budget: 5s
files:
  editable: [train.mjs]
---
Lower the loss.
`;
        writeFileSync(join(wt, "program.md"), md);
        writeFileSync(
          join(wt, "train.mjs"),
          "const LR = 0.5;\nconsole.log(`loss: ${(Math.log10(LR) + 2) ** 2}`);\n",
        );
        const program = parseProgram(md, join(wt, "program.md"));
        const agent = createCliAgent(
          await loadPreset("claude"),
          {
            backend: "claude",
            model: "haiku",
            maxTurns: 8,
            timeoutMs: 180_000,
            args: [],
            env: {},
          },
          program,
        );
        const p = await agent.propose({
          worktree: wt,
          program,
          best: { n: 0, metric: 2.9 },
          history: [],
          contextText:
            "# Lab notebook: live\nBest: #0 loss = 2.9 (baseline). The loss is minimal at LR = 0.01.",
          logDir: join(wt, ".logs"),
        });
        expect(p.hypothesis.length).toBeGreaterThan(0);
        expect(readFileSync(join(wt, "train.mjs"), "utf8")).not.toContain("const LR = 0.5;");
      } finally {
        rmSync(wt, { recursive: true, force: true });
      }
    },
    240_000,
  );
});
