import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type AgentFailureKind, isAgentFailure } from "../../src/core/agent-failure.ts";
import type { Agent, Program, ProposalContext } from "../../src/core/types.ts";
import { parseProgram } from "../../src/program/index.ts";
import { type FakeModel, type FakeScript, startFakeModel } from "../fake-model/server.ts";

/**
 * The promises every researcher backend keeps (drizzle-style: one suite, run against every
 * implementation). Each backend gets a worktree with an editable `train.py`, a protected
 * `evaluate.py` and a fake model server scripted to change one constant:
 *
 *  - propose() edits exactly that file as scripted and returns the scripted summary, keeping
 *    the CLI's raw output in the proposal's log directory;
 *  - a final answer without the summary → AgentFailure (no_summary or garbage);
 *  - a model API that fails (HTTP 500) → AgentFailure("crashed"), nothing edited;
 *  - a model that never answers → AgentFailure("timeout") soon after the timeout, and no
 *    process of the agent is left;
 *  - a read outside the worktree is refused where the backend can (declared per backend);
 *  - an attempt to edit the protected file is either blocked by the backend itself (the file is
 *    unchanged) or left to the loop's scope check (the file is changed here, and the loop
 *    rejects the candidate: test/agents-cli.e2e.test.ts). Each backend declares which.
 */
export interface AgentSetup {
  fake: FakeModel;
  program: Program;
  /** The proposal's wall-clock limit the agent must honour. */
  timeoutMs: number;
  /** Extra environment for the agent's processes (marks them, so the test can find leftovers). */
  env: Record<string, string>;
}

export interface AgentContractOptions {
  /** Who keeps a proposal out of the protected file: the backend itself, or the loop's scope check. */
  protectedEdit: "blocked" | "scope-check";
  /**
   * Whether the backend refuses to read files outside the worktree (next to it lie the notebook
   * and trial logs, with holdout metrics): "blocked" by the CLI, or "allowed" (then only the
   * loop's views keep holdouts from the agent, and a program must not rely on more).
   */
  readsOutside?: "blocked" | "allowed";
  /**
   * Tests that do not apply, with the reason. `hang` skips both the timeout and the abort case;
   * `timeout` only the first (for a slow-starting CLI the abort case, which waits for its model
   * request, is the one that kills it mid-request; the clock itself is the harness's).
   */
  skip?: Partial<Record<"garbage" | "hang" | "timeout" | "error", string>>;
  /** The backend reports token usage (from the fake server's usage fields). */
  reportsUsage?: boolean;
  /** The backend talks to the fake model (scripted agents read its script directly). */
  usesModel?: boolean;
  /** Timeout for the hang case (ms). Default 3000. */
  hangTimeoutMs?: number;
}

export const EDITABLE = "train.py";
export const PROTECTED = "evaluate.py";
const TRAIN = "LEARNING_RATE = 0.01\nEPOCHS = 3\n\nprint(f'val_loss: {1 / (LEARNING_RATE * EPOCHS)}')\n";
const EVALUATE = "print('score: 1.0')\n";

const PROGRAM_MD = `---
name: contract
objective: { metric: val_loss, direction: minimize }
run:
  command: python3 train.py
  evaluate: python3 evaluate.py
  budget: 5s
files:
  editable: [${EDITABLE}]
  protected: [${PROTECTED}]
---
# Research directions

Lower val_loss by tuning LEARNING_RATE and EPOCHS.
`;

export const SUMMARY = {
  hypothesis: "A larger learning rate converges within the budget",
  mechanism: "the loss falls faster per step when steps are larger",
  expected: "val_loss drops below 30",
};

export function agentContract(
  name: string,
  makeAgent: (setup: AgentSetup) => Agent | Promise<Agent>,
  opts: AgentContractOptions,
): void {
  describe(`agent contract: ${name}`, () => {
    let fake: FakeModel;
    let root: string;
    let worktree: string;
    let logDir: string;
    let program: Program;
    let mark: string;
    let n = 0;

    beforeAll(async () => {
      fake = await startFakeModel();
      root = join(tmpdir(), `autolab-agent-contract-${randomBytes(4).toString("hex")}`);
    });
    afterAll(async () => {
      await fake.close();
      rmSync(root, { recursive: true, force: true });
    });
    beforeEach(() => {
      n++;
      worktree = join(root, `wt-${n}`);
      logDir = join(root, `logs-${n}`, "agent");
      mkdirSync(worktree, { recursive: true });
      mkdirSync(logDir, { recursive: true });
      writeFileSync(join(worktree, "program.md"), PROGRAM_MD);
      writeFileSync(join(worktree, EDITABLE), TRAIN);
      writeFileSync(join(worktree, PROTECTED), EVALUATE);
      program = parseProgram(PROGRAM_MD, join(worktree, "program.md"));
      mark = randomBytes(8).toString("hex");
      fake.requests.length = 0;
    });

    const script = (over: Partial<FakeScript> = {}): FakeScript => ({
      file: join(worktree, EDITABLE),
      oldText: "LEARNING_RATE = 0.01",
      newText: "LEARNING_RATE = 0.1",
      summary: SUMMARY,
      ...over,
    });
    const context = (): ProposalContext => ({
      worktree,
      program,
      best: { n: 0, metric: 33.3 },
      history: [{ n: 0, hypothesis: "baseline", action: "keep", metric: 33.3 }],
      contextText: "# Lab notebook: contract\nBest: #0 val_loss = 33.3 (baseline)",
      logDir,
    });
    const agent = (timeoutMs = 60_000) =>
      makeAgent({ fake, program, timeoutMs, env: { AUTOLAB_CONTRACT_MARK: mark } });
    const files = () =>
      Object.fromEntries(readdirSync(worktree).map((f) => [f, readFileSync(join(worktree, f), "utf8")]));
    const failureOf = async (
      p: Promise<unknown>,
    ): Promise<{ kind: AgentFailureKind; message: string; detail: string }> => {
      try {
        await p;
      } catch (err) {
        if (isAgentFailure(err)) return { kind: err.kind, message: err.message, detail: err.detail };
        throw err;
      }
      throw new Error("propose() succeeded but a failure was expected");
    };

    it("edits exactly the editable file as scripted and returns the scripted summary", async () => {
      fake.script = script();
      const before = files();
      const proposal = await (await agent()).propose(context());
      expect(proposal).toMatchObject(SUMMARY);
      expect(files()).toEqual({
        ...before,
        [EDITABLE]: TRAIN.replace("LEARNING_RATE = 0.01", "LEARNING_RATE = 0.1"),
      });
      if (opts.reportsUsage) {
        expect(proposal.usage?.inputTokens).toBeGreaterThan(0);
        expect(proposal.usage?.outputTokens).toBeGreaterThan(0);
        expect(proposal.usage?.wallS).toBeGreaterThan(0);
      }
      if (opts.usesModel) {
        const calls = fake.modelRequests().map((r) => r.reply);
        expect(calls).toContain("edit");
        expect(fake.modelRequests().every((r) => r.model === "fake-model")).toBe(true);
        // Its raw output is kept in the proposal's log directory.
        expect(existsSync(join(logDir, "agent.stdout.log"))).toBe(true);
        expect(existsSync(join(logDir, "agent.stderr.log"))).toBe(true);
      }
    });

    it.skipIf(opts.skip?.garbage)(
      "fails with no_summary or garbage when the final answer has no summary",
      async () => {
        fake.script = script({ garbage: true });
        const f = await failureOf((await agent()).propose(context()));
        expect(["no_summary", "garbage"]).toContain(f.kind);
      },
    );

    it.skipIf(opts.skip?.error)("fails with crashed when the model API fails", async () => {
      fake.script = script({ error: true });
      const before = files();
      const f = await failureOf((await agent()).propose(context()));
      expect(f.kind).toBe("crashed");
      expect(`${f.message}\n${f.detail}`).toMatch(/500/);
      expect(files()).toEqual(before);
    });

    it.skipIf(opts.skip?.hang || opts.skip?.timeout)(
      "times out on a model that never answers, leaving no process behind",
      async () => {
        fake.script = script({ hang: true });
        const timeoutMs = opts.hangTimeoutMs ?? 3000;
        // The harness owns the clock: a model that never answers ends as a timeout (not at the
        // test's own limit), and nothing is left running.
        const f = await failureOf((await agent(timeoutMs)).propose(context()));
        expect(f.kind).toBe("timeout");
        expect(processesMarked(mark)).toEqual([]);
      },
    );

    it.skipIf(opts.skip?.hang)("stops at once when the proposal's signal aborts (Ctrl-C)", async () => {
      fake.script = script({ hang: true });
      const ac = new AbortController();
      const ctx = { ...context(), signal: ac.signal };
      let settled = false;
      const pending = failureOf((await agent()).propose(ctx)).finally(() => {
        settled = true;
      });
      // Abort once the agent is waiting on the model.
      while (!settled && !fake.requests.some((r) => r.reply === "hang")) {
        await new Promise((r) => setTimeout(r, 25));
      }
      ac.abort();
      // Any AgentFailure will do (the loop sees the signal and stops); the proposal's own
      // timeout is a minute, so getting here at all means the abort was honoured.
      await pending;
      expect(processesMarked(mark)).toEqual([]);
    });

    it(`an edit of the protected file is ${opts.protectedEdit === "blocked" ? "blocked by the backend" : "left to the loop's scope check"}`, async () => {
      fake.script = script({
        editFile: { file: join(worktree, PROTECTED), oldText: "score: 1.0", newText: "score: 0.0" },
      });
      await (await agent()).propose(context()).catch((err) => {
        if (!isAgentFailure(err)) throw err;
      });
      const now = readFileSync(join(worktree, PROTECTED), "utf8");
      if (opts.protectedEdit === "blocked") expect(now).toBe(EVALUATE);
      else expect(now).toBe(EVALUATE.replace("score: 1.0", "score: 0.0"));
      expect(readFileSync(join(worktree, EDITABLE), "utf8")).toBe(TRAIN);
    });

    it.skipIf(!opts.readsOutside)(
      `a read outside the worktree is ${opts.readsOutside === "blocked" ? "refused by the backend" : "not refused"}`,
      async () => {
        const secret = join(root, `secret-${n}.txt`);
        writeFileSync(secret, `holdout_score: ${mark}\n`);
        fake.script = script({ file: secret, oldText: "no such text", newText: "x" });
        await (await agent()).propose(context()).catch((err) => {
          if (!isAgentFailure(err)) throw err;
        });
        const seen = fake.requests.some((r) => JSON.stringify(r.body).includes(`holdout_score: ${mark}`));
        expect(seen).toBe(opts.readsOutside === "allowed");
      },
    );
  });
}

/** Live processes whose environment carries AUTOLAB_CONTRACT_MARK=<mark>. */
export function processesMarked(mark: string): number[] {
  const needle = Buffer.from(`AUTOLAB_CONTRACT_MARK=${mark}\0`);
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "latin1");
      if (/\) [ZX] /.test(stat)) continue;
      if (readFileSync(`/proc/${name}/environ`).includes(needle)) out.push(Number(name));
    } catch {}
  }
  return out;
}
