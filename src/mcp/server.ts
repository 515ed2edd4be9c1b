import { dirname } from "node:path";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { z } from "zod";
import { openRunSession, type RunSession } from "../app/create-run.ts";
import { planFinalize, renderPlan } from "../app/finalize.ts";
import { AUTOLAB_VERSION } from "../app/init.ts";
import { searchPriorWork } from "../app/prior-work.ts";
import { statusOf } from "../app/status.ts";
import { treeOf } from "../app/tree.ts";
import { adviceDue, parseAdvice } from "../core/advisor.ts";
import { AutolabError, isAutolabError } from "../core/errors.ts";
import { bestOf } from "../core/experiments.ts";
import { formatMetric, shortLine } from "../core/format.ts";
import { knowledgeScope, priorWorkQuery } from "../core/knowledge.ts";
import { runLoop } from "../core/loop.ts";
import { frontierNode } from "../core/loop-deps.ts";
import { runStep } from "../core/propose.ts";
import { redactSecrets } from "../core/secrets.ts";
import type { Agent } from "../core/types.ts";
import {
  agentAlarms,
  buildAdvisorContext,
  buildContext,
  failuresText,
  holdoutNames,
  notebookExtras,
  priorWorkLines,
  redactHoldouts,
  redactHoldoutsDeep,
} from "../core/views.ts";
import type { Snapshot } from "../core/workspace.ts";
import { findRepo } from "../workspace/git-workspace.ts";

export interface LabMcpOptions {
  program?: string;
  tag?: string;
  /** Progress and errors for the person running the server (stderr; stdout is the protocol). */
  log?: (line: string) => void;
}

type ToolResult = { content: { type: "text"; text: string }[]; isError?: boolean };
// Every tool's answer passes the secret redactor (src/core/secrets.ts): the second line of
// defense after the notebook's write boundary (a notebook written before it, a diff, a log).
const text = (t: string, isError = false): ToolResult => ({
  content: [{ type: "text", text: redactSecrets(t) }],
  ...(isError ? { isError } : {}),
});

/**
 * The lab as MCP tools for an interactive agent (Claude Code, Codex, Gemini CLI, OpenCode…):
 * it reads the notebook, edits files in the run's worktree, and asks the harness to run its
 * change as an experiment — under the harness's budget, evaluator, scope checks and ratchet.
 * The agent never decides keep or revert, and never sees holdout metrics.
 */
export function createLabMcpServer(opts: LabMcpOptions = {}): {
  server: McpServer;
  close: () => Promise<void>;
} {
  const log = opts.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  const server = new McpServer({ name: "autolab", version: AUTOLAB_VERSION });
  let session: RunSession | undefined;
  let snapshot: Snapshot | undefined;
  let busy = false;

  const clientName = () => server.server.getClientVersion()?.name ?? "client";
  // The interactive agent proposes by editing files itself; its MCP call carries the summary.
  const agent: Agent = {
    get name() {
      return `mcp:${clientName()}`;
    },
    propose: () => Promise.reject(new Error("an MCP agent proposes through run_experiment")),
  };

  /** Opens the run on first use: resolve or create it, set up, measure the baseline. */
  const open = async (): Promise<RunSession> => {
    if (session) return session;
    const s = await openRunSession({
      ...(opts.program ? { program: opts.program } : {}),
      ...(opts.tag ? { tag: opts.tag } : {}),
      agent,
      // The client is the advisor here, through the advise tool.
      advisor: false,
    });
    try {
      // Catch up: setup, baseline, experiments cut short; leaves the worktree at the best.
      await runLoop(s.deps, {
        maxExperiments: 0,
        onEvent: (e) => e.type === "decision" && log(`#${e.n} ${e.action}: ${e.reason}`),
      });
    } catch (err) {
      s.release();
      s.lab.ledger.close();
      throw err;
    }
    await atNode(s);
    session = s;
    log(`autolab mcp: run ${s.run.tag}, worktree ${s.workspace.projectDir}`);
    return s;
  };

  /**
   * Puts the worktree at the node the next experiment builds on — the best, or with a branching
   * `frontier:` the kept node it draws (deterministic for the notebook: runStep draws the same)
   * — and snapshots it. Returns that node's number.
   */
  const atNode = async (s: RunSession): Promise<number | undefined> => {
    const node = frontierNode(s.deps, s.lab.ledger.listExperiments(s.run.id));
    await s.workspace.resetTo(node?.exp.commit ?? (await s.workspace.bestCommit()));
    snapshot = await s.workspace.snapshot();
    return node?.exp.n;
  };

  const guarded = async (fn: () => Promise<string>): Promise<ToolResult> => {
    try {
      return text(await fn());
    } catch (err) {
      if (isAutolabError(err)) return text(`${err.message}${err.hint ? `\nfix: ${err.hint}` : ""}`, true);
      log(`autolab mcp: internal error: ${(err as Error).stack ?? err}`);
      return text(`internal error: ${(err as Error).message}`, true);
    }
  };

  server.registerTool(
    "context",
    {
      description:
        "The lab notebook: objective, best result, kept changes, what was tried and failed, research directions — and where to edit. Read it before proposing a change.",
    },
    () =>
      guarded(async () => {
        const s = await open();
        const exps = s.lab.ledger.listExperiments(s.run.id);
        const where = [
          "",
          "## How to propose",
          `Edit only these files, in the run's worktree ${s.workspace.projectDir}: ${s.lab.program.files.editable.join(", ")}.`,
          "Make one focused change that tests one hypothesis, then call run_experiment with the hypothesis and the mechanism (why it should work).",
          "The harness runs it under the budget, scores it with the protected evaluator, and keeps it only if it beats the node it builds on (see the notebook); afterwards the worktree is put at the node the next experiment builds on.",
        ];
        const priorWork = s.deps.priorWork?.for(exps);
        // The worktree is at this node (atNode); said in the notebook when it is not the best.
        const node = frontierNode(s.deps, exps);
        const buildsOn = node && node.exp.n !== bestOf(exps)?.n ? node.exp : undefined;
        return `${buildContext(s.lab.program, s.run, exps, {
          ...notebookExtras(s.lab.ledger, s.lab.program, s.run.id),
          ...(priorWork ? { priorWork } : {}),
          ...(buildsOn ? { buildsOn } : {}),
        })}\n${where.join("\n")}`;
      }),
  );

  server.registerTool(
    "prior_work",
    {
      description:
        "Prior work: the closest results other runs on this machine recorded (other projects included), found by full-text search over their hypotheses, mechanisms and outcomes. Ideas and what did not work elsewhere, not measurements of this run. Without a query, the query is this program's name, objective metric and research directions.",
      inputSchema: {
        query: z
          .string()
          .optional()
          .describe("Words to look for (default: this program's name, metric and directions)"),
        k: z.number().int().min(1).max(50).optional().describe("Results listed (default 5)"),
      },
    },
    ({ query, k }) =>
      guarded(async () => {
        const s = await open();
        if (!s.deps.priorWork)
          return "Prior work is off for this run (program.md's prior_work: false, or AUTOLAB_KNOWLEDGE=off).";
        const hits = searchPriorWork(query?.trim() ? query : priorWorkQuery(s.lab.program), k ?? 5, {
          exclude: { project: s.run.programPath, run: s.run.tag },
          scope: knowledgeScope(s.lab.program, s.run.programPath, s.run),
        });
        if (!hits.length) return "No prior results from other runs match.";
        const names = holdoutNames(s.lab.program, s.run);
        return redactHoldouts(
          priorWorkLines(hits, (t) => shortLine(redactHoldouts(t, names))).join("\n"),
          names,
        );
      }),
  );

  server.registerTool(
    "failures",
    { description: "Crashed and rejected experiments with their reasons and the end of their logs." },
    () =>
      guarded(async () => {
        const s = await open();
        return failuresText(s.lab.ledger.listExperiments(s.run.id), holdoutNames(s.lab.program, s.run));
      }),
  );

  server.registerTool(
    "status",
    {
      description: "The run at a glance as JSON: baseline, best, counts; with several objectives, the front.",
    },
    () =>
      guarded(async () => {
        const s = await open();
        // `autolab status --json` for an agent: the holdout canary's alarms left out, holdout
        // values taken out of every other text (src/core/views.ts).
        const holdout = holdoutNames(s.lab.program, s.run);
        const status = statusOf(s.run, s.lab.ledger.listExperiments(s.run.id), s.lab.program);
        const shown = redactHoldoutsDeep({ ...status, alarms: agentAlarms(status.alarms, holdout) }, holdout);
        return JSON.stringify(shown, null, 2);
      }),
  );

  server.registerTool(
    "run_experiment",
    {
      description:
        "Run the current state of the worktree as an experiment: scope check, commit, trial under the harness's budget, protected evaluation, keep-or-discard decision. Returns the decision and the metric. Takes as long as the trial (the program's budget).",
      inputSchema: {
        hypothesis: z.string().min(1).describe("What you changed and what you expect, in one line"),
        mechanism: z.string().optional().describe("Why it should work"),
        expected: z.string().optional().describe("Expected effect on the objective metric"),
      },
    },
    ({ hypothesis, mechanism, expected }) =>
      guarded(async () => {
        if (busy) throw new AutolabError("BUSY", "an experiment is already running; wait for its result.");
        busy = true;
        try {
          const s = await open();
          const step = await runStep(s.deps, {
            ...(snapshot ? { prepared: snapshot } : {}),
            propose: async () => ({
              hypothesis,
              ...(mechanism ? { mechanism } : {}),
              ...(expected ? { expected } : {}),
            }),
          });
          // Back to the best (or the frontier's next node), ready for the next edit.
          const next = await atNode(s);
          if (!step) return "stopped before the experiment was recorded.";
          const metric = s.lab.program.objective.metric;
          const value = step.metric !== undefined ? ` ${metric} = ${formatMetric(step.metric)}.` : "";
          // A crash reason can quote what the trial printed, holdout lines included.
          const reason = redactHoldouts(step.reason, holdoutNames(s.lab.program, s.run));
          const at =
            next === undefined || next === step.best.n
              ? "The worktree is at the best again."
              : `The worktree is at kept node #${next} (the frontier's choice): build on it.`;
          return `Experiment #${step.n}: ${step.action}.${value} ${reason}\nBest: #${step.best.n} ${metric} = ${formatMetric(step.best.metric)}. ${at}`;
        } finally {
          busy = false;
        }
      }),
  );

  server.registerTool(
    "tree",
    {
      description:
        "The run's tree as JSON: every kept node with the node it grew from, its objective value, and whether it is the best (a chain unless program.md's frontier: branches).",
    },
    () =>
      guarded(async () => {
        const s = await open();
        const tree = treeOf(s.run, s.lab.ledger.listExperiments(s.run.id));
        return JSON.stringify(redactHoldoutsDeep(tree, holdoutNames(s.lab.program, s.run)), null, 2);
      }),
  );

  server.registerTool(
    "note",
    {
      description: "Write a note into the lab notebook (an observation, an idea for later, a caveat).",
      inputSchema: {
        text: z.string().min(1),
        experiment: z.number().int().nonnegative().optional().describe("Experiment number the note is about"),
      },
    },
    ({ text: note, experiment }) =>
      guarded(async () => {
        const s = await open();
        const exp = experiment !== undefined ? s.lab.ledger.getExperiment(s.run.id, experiment) : undefined;
        if (experiment !== undefined && !exp)
          throw new AutolabError("EXPERIMENT_NOT_FOUND", `no experiment #${experiment}.`);
        s.lab.ledger.addNote(s.run.id, exp?.id ?? null, note);
        return "Noted.";
      }),
  );

  server.registerTool(
    "advise",
    {
      description:
        "Act as the run's advisor (docs/advisor.md). Without `answer`: the advisor's brief (the notebook's summary and the question). With `answer`: your answer as tagged lines — up to three `IDEA: …` (`IDEA: revisit #<n>: …` to retry a discarded experiment on the new best) or one `STOP: <reason>` — recorded in the notebook; ideas appear in the context researchers read.",
      inputSchema: {
        answer: z.string().optional().describe("IDEA: lines (at most three) or one STOP: line"),
      },
    },
    ({ answer }) =>
      guarded(async () => {
        const s = await open();
        const exps = s.lab.ledger.listExperiments(s.run.id);
        const previous = s.lab.ledger.listAdvice(s.run.id);
        const trigger =
          (s.lab.program.advisor ? adviceDue(s.lab.program.advisor, exps, previous) : undefined) ??
          "asked through MCP";
        if (answer === undefined)
          return buildAdvisorContext(s.lab.program, s.run, exps, { trigger, advice: previous });
        const parsed = parseAdvice(answer);
        const decided = exps.filter((e) => e.n > 0 && e.decision);
        s.lab.ledger.addAdvice({
          runId: s.run.id,
          trigger,
          decided: decided.length,
          afterN: Math.max(0, ...decided.map((e) => e.n)),
          agent: agent.name,
          verdict: parsed.verdict,
          ideas: parsed.verdict === "ideas" ? parsed.ideas : [],
          reason: parsed.verdict === "ideas" ? "" : parsed.reason,
        });
        if (parsed.verdict === "ideas")
          return `Recorded ${parsed.ideas.length} idea${parsed.ideas.length === 1 ? "" : "s"}: the context lists them as the advisor's.`;
        if (parsed.verdict === "stop")
          return `Recorded: STOP (${parsed.reason}). \`autolab status\` shows it; run no more experiments.`;
        throw new AutolabError(
          "ADVICE_INVALID",
          `the answer was recorded as garbage: ${parsed.reason}.`,
          "Answer with up to three lines `IDEA: <idea>`, or one line `STOP: <reason>`.",
        );
      }),
  );

  server.registerTool(
    "finalize_plan",
    {
      description:
        "The run's kept changes as reviewable branches, planned (a dry run of `autolab finalize`: nothing is written): one branch per change from the base, with the changes it depends on (overlapping lines) first, and each change's measured gain. A person creates the branches with `autolab finalize --apply`.",
    },
    () =>
      guarded(async () => {
        const s = await open();
        const repo = await findRepo(dirname(s.lab.program.path));
        // Scratch objects: the plan writes nothing into the repository (docs/finalize.md).
        const plan = await planFinalize(repo, s.run, s.lab.ledger.listExperiments(s.run.id), s.lab.program, {
          scratchObjects: true,
        });
        // Researchers' text and objective values only, but holdout names are taken out all the same.
        return redactHoldouts(renderPlan(plan), holdoutNames(s.lab.program, s.run));
      }),
  );

  const close = async () => {
    await server.close();
    if (session) {
      const s = session;
      let exps: ReturnType<typeof s.lab.ledger.listExperiments> | undefined;
      try {
        exps = s.lab.ledger.listExperiments(s.run.id);
      } catch {}
      s.deps.priorWork?.close(exps);
      session.release();
      session.lab.ledger.close();
      session = undefined;
    }
  };
  return { server, close };
}
