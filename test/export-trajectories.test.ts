/**
 * `autolab export --format trajectories | trajectories-sft | trajectories-dpo` (docs/learning.md):
 * a scripted researcher of known behaviour on the toy project with a holdout metric — a clear
 * keep, a clear loss, a crash, a better keep on the same parent — exported by the real CLI.
 * Records carry the context the researcher was given, its transcript, the diff, the outcome, a
 * reward of the right sign and the hindsight labels; DPO pairs a keep with a loss of the same
 * parent; and the holdout's value is nowhere in the bytes of any format, even where a researcher's
 * text and transcript try to carry it.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createScriptedAgent, type ScriptedStep } from "../src/agents/scripted-agent.ts";
import { createRun } from "../src/app/create-run.ts";
import type { TrajectoryRecord } from "../src/app/trajectories.ts";
import type { Agent } from "../src/core/types.ts";
import { dropSchemas, freshSchemaUrl, PG_SKIP, PG_SKIP_REASON } from "./helpers/pg.ts";
import { REPO_ROOT, runCli, TOY_HOLDOUT, toysOfFile } from "./helpers/toy-project.ts";

const { toy } = toysOfFile();

const setLR = (lr: number): ScriptedStep["edits"] => ({
  "train.mjs": (old: string) => old.replace(/const LR = [^;]+;/, `const LR = ${lr};`),
});
const setWidth = (w: number): ScriptedStep["edits"] => ({
  "train.mjs": (old: string) => old.replace(/const WIDTH = [^;]+;/, `const WIDTH = ${w};`),
});

const LEAK = String(TOY_HOLDOUT);

/**
 * Loss = (log10 LR + 2)² + (log2 WIDTH − 5)²/10; baseline LR 0.5, WIDTH 10 (3.17).
 * #1 LR 0.05 → 0.77 keep; #2 LR 0.9 → 4.10 discard (a clear loss); #3 crashes (the plan);
 * #4 LR 0.01 → 0.28 keep. #2, #3 and #4 all build on #1.
 */
const STEPS: ScriptedStep[] = [
  { hypothesis: "LR 0.5 → 0.05", mechanism: "a smaller step stops overshooting", edits: setLR(0.05) },
  {
    // The researcher's own text tries to carry the holdout's value out.
    hypothesis: `LR 0.05 → 0.9 (secret_holdout: ${LEAK})`,
    mechanism: `larger steps; last secret_holdout was ${LEAK}`,
    edits: setLR(0.9),
  },
  { hypothesis: "WIDTH 10 → 16", mechanism: "more capacity", edits: setWidth(16) },
  { hypothesis: "LR 0.05 → 0.01", mechanism: "the optimum is near 0.01", edits: setLR(0.01) },
];

/** The scripted researcher, writing an llm-style transcript and keeping the contexts it was given. */
function recordingAgent(contexts: Map<number, string>): Agent {
  const inner = createScriptedAgent(STEPS);
  let n = 0;
  return {
    name: "scripted",
    async propose(ctx) {
      n++;
      contexts.set(n, ctx.contextText ?? "");
      mkdirSync(ctx.logDir, { recursive: true });
      writeFileSync(
        join(ctx.logDir, "llm-transcript.jsonl"),
        `${JSON.stringify({ type: "text", text: `thinking about #${n}` })}\n` +
          `${JSON.stringify({ type: "text", text: `secret_holdout: ${LEAK}` })}\n`,
      );
      return inner.propose(ctx);
    },
  };
}

function lines<T>(stdout: string): T[] {
  return stdout
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as T);
}

/** Key structure of a JSON value: objects become sorted key → shape, everything else its kind. */
function shapeOf(v: unknown): unknown {
  if (v === null || typeof v !== "object") return "value";
  if (Array.isArray(v)) return v.length ? ["array of", shapeOf(v[0])] : "array";
  return Object.fromEntries(
    Object.keys(v)
      .sort()
      .map((k) => [k, shapeOf((v as Record<string, unknown>)[k])]),
  );
}

function expectNoHoldoutValue(bytes: string): void {
  expect(bytes).not.toContain("4242");
  expect(bytes).not.toMatch(/secret_holdout\W{0,4}[-+]?\d/);
}

/** The SQLite run's researcher contexts, project and exports (the PostgreSQL tests compare with them). */
const contexts = new Map<number, string>();
let dir = "";
const out: Record<string, string> = {};

describe("autolab export --format trajectories", () => {
  beforeAll(async () => {
    const t = toy({ evaluate: true, plan: ["ok", "ok", "ok", "crash"] });
    dir = t.dir;
    // No prior work: other test files fill the shared knowledge store, and a rebuilt context cannot have it.
    const outcome = await createRun({
      program: dir,
      tag: "t",
      maxExperiments: 4,
      agent: recordingAgent(contexts),
      priorWork: false,
    });
    expect(outcome.experiments.map((e) => [e.n, e.decision?.action])).toEqual([
      [0, "keep"],
      [1, "keep"],
      [2, "discard"],
      [3, "crash"],
      [4, "keep"],
    ]);
    // The trial logs do carry the holdout (the evaluator prints it): the export must not.
    expect(outcome.experiments[1]?.trials[0]?.result?.metrics.secret_holdout).toBe(TOY_HOLDOUT);
    outcome.lab.ledger.close();
    for (const f of ["trajectories", "trajectories-sft", "trajectories-dpo"]) {
      const r = await runCli(["export", "--format", f], { cwd: dir });
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
      out[f] = r.stdout;
    }
  });

  it("writes one record per decided proposal with every field, the context the researcher was given", () => {
    const recs = lines<TrajectoryRecord>(out.trajectories as string);
    expect(recs.map((r) => r.n)).toEqual([1, 2, 3, 4]);
    for (const r of recs) {
      expect(Object.keys(r).sort()).toEqual(
        [
          "agent",
          "context",
          "diff",
          "labels",
          "n",
          "outcome",
          "output",
          "parent",
          "proposal",
          "reward",
          "role",
          "run",
          "schema",
          "usage",
        ].sort(),
      );
      expect(r.schema).toBe("autolab.trajectory/1");
      expect(r.context.source).toBe("recorded");
      expect(r.context.text).toBe(contexts.get(r.n));
      expect(r.output?.file).toBe("llm-transcript.jsonl");
      expect(r.output?.text).toContain(`thinking about #${r.n}`);
    }
    const [k1, d2, c3, k4] = recs as [TrajectoryRecord, TrajectoryRecord, TrajectoryRecord, TrajectoryRecord];
    // The later researcher saw the earlier outcomes.
    expect(k4.context.text).toContain("LR 0.5 → 0.05");
    expect(k1.parent).toBe(0);
    expect([d2.parent, c3.parent, k4.parent]).toEqual([1, 1, 1]);
    expect(k1.diff.text).toContain("-const LR = 0.5;");
    expect(k1.diff.text).toContain("+const LR = 0.05;");
    expect(k1.diff).toMatchObject({ files: 1, insertions: 1, deletions: 1, truncated: false });
    expect(k1.outcome).toMatchObject({ decision: "keep", mechanismConfirmed: true, treeNode: false });
    expect(k1.outcome.metric).toBeCloseTo(0.771, 2);
    expect(k1.outcome.parentMetric).toBeCloseTo(3.168, 2);
    expect(k1.outcome.trials).toHaveLength(1);
    expect(Object.keys(k1.outcome.trials[0]?.metrics ?? {})).toContain("score");
    expect(Object.keys(k1.outcome.trials[0]?.metrics ?? {})).not.toContain("secret_holdout");
  });

  it("has exactly the shape docs/learning.md documents", () => {
    const doc = readFileSync(join(REPO_ROOT, "docs", "learning.md"), "utf8");
    const m = /### `trajectories`: one record per proposal\s+```jsonc\n([\s\S]*?)```/.exec(doc);
    if (!m?.[1]) throw new Error("docs/learning.md has no trajectory record example");
    const documented = JSON.parse(m[1].replace(/\s+\/\/ .*$/gm, ""));
    const [first] = lines<TrajectoryRecord>(out.trajectories as string);
    expect(shapeOf(first)).toEqual(shapeOf(documented));
  });

  it("rewards a kept improvement, punishes a clear loss and a crash, net of the trials' cost", () => {
    const [k1, d2, c3, k4] = lines<TrajectoryRecord>(out.trajectories as string) as TrajectoryRecord[] as [
      TrajectoryRecord,
      TrajectoryRecord,
      TrajectoryRecord,
      TrajectoryRecord,
    ];
    // Greedy acceptance repeats nothing: σ is the spread of the run's values.
    expect(k1.reward.sigmaSource).toBe("run-spread");
    expect(k1.reward.improvement).toBeGreaterThan(2);
    expect(k1.reward.noiseUnits).toBeGreaterThan(0.5);
    expect(k1.reward.value).toBeGreaterThan(0);
    expect(k1.reward.value).toBeCloseTo(k1.reward.noiseUnits - k1.reward.cost, 6);
    expect(d2.reward.improvement).toBeLessThan(-2);
    expect(d2.reward.value).toBeLessThan(-0.5);
    expect(c3.reward).toMatchObject({ improvement: null, noiseUnits: -3 });
    expect(c3.reward.value).toBeLessThan(-3);
    expect(k4.reward.value).toBeGreaterThan(0);
    for (const r of [k1, d2, k4]) expect(r.reward.cost).toBeCloseTo(0.1 * r.reward.trials, 6);
  });

  it("labels the crash as not clean and keeps the mechanism verdicts", () => {
    const [k1, d2, c3] = lines<TrajectoryRecord>(out.trajectories as string);
    expect(c3?.outcome.decision).toBe("crash");
    expect(c3?.outcome.trials.map((t) => t.status)).toEqual(["crash"]);
    expect(c3?.labels.ranClean).toBe(false);
    expect(k1?.labels.ranClean).toBe(true);
    expect(d2?.labels.ranClean).toBe(true);
    expect(k1?.labels.mechanismConfirmed).toBe(true);
    expect(d2?.labels.mechanismConfirmed).toBe(false);
    for (const r of [k1, d2]) {
      expect(typeof r?.labels.faster).toBe("boolean");
      expect(typeof r?.labels.lessMemory).toBe("boolean");
      expect(r?.labels.wallS).toBeGreaterThan(0);
      expect(r?.labels.parentWallS).toBeGreaterThan(0);
    }
  });

  it("SFT: the kept proposals as system/user/assistant chats", () => {
    const recs = lines<{ messages: { role: string; content: string }[] }>(out["trajectories-sft"] as string);
    expect(recs).toHaveLength(2);
    for (const r of recs) {
      expect(Object.keys(r)).toEqual(["messages"]);
      expect(r.messages.map((m) => m.role)).toEqual(["system", "user", "assistant"]);
    }
    expect(recs[0]?.messages[1]?.content).toBe(contexts.get(1));
    expect(recs[0]?.messages[2]?.content).toContain("Hypothesis: LR 0.5 → 0.05");
    expect(recs[0]?.messages[2]?.content).toContain("+const LR = 0.05;");
    expect(recs[1]?.messages[2]?.content).toContain("Hypothesis: LR 0.05 → 0.01");
  });

  it("DPO: each loss paired with the keep built on the same parent", () => {
    const recs = lines<{
      prompt: { role: string; content: string }[];
      chosen: { role: string; content: string }[];
      rejected: { role: string; content: string }[];
    }>(out["trajectories-dpo"] as string);
    expect(recs).toHaveLength(2);
    for (const r of recs) {
      expect(Object.keys(r)).toEqual(["prompt", "chosen", "rejected"]);
      expect(r.prompt.map((m) => m.role)).toEqual(["system", "user"]);
      expect(r.prompt[1]?.content).toBe(contexts.get(4));
      expect(r.chosen[0]?.role).toBe("assistant");
      expect(r.chosen[0]?.content).toContain("Hypothesis: LR 0.05 → 0.01");
    }
    expect(recs.map((r) => r.rejected[0]?.content.split("\n")[0])).toEqual([
      `Hypothesis: LR 0.05 → 0.9 ([holdout redacted]`,
      "Hypothesis: WIDTH 10 → 16",
    ]);
  });

  it("never carries the holdout's value, in any format", () => {
    for (const f of ["trajectories", "trajectories-sft", "trajectories-dpo"]) {
      const text = out[f] as string;
      expect(text.length, f).toBeGreaterThan(100);
      expectNoHoldoutValue(text);
    }
  });

  it("rebuilds the context from the notebook when it was not recorded (older notebooks), saying what is missing", async () => {
    const db = new DatabaseSync(join(dir, ".autolab", "lab.db"));
    db.exec("DELETE FROM proposal_contexts");
    db.close();
    const r = await runCli(["export", "--format", "trajectories", "--out", join(dir, "..", "t.jsonl")], {
      cwd: dir,
    });
    expect(r.code).toBe(0);
    const bytes = readFileSync(join(dir, "..", "t.jsonl"), "utf8");
    expectNoHoldoutValue(bytes);
    const recs = lines<TrajectoryRecord>(bytes);
    expect(recs.map((x) => x.context.source)).toEqual(["rebuilt", "rebuilt", "rebuilt", "rebuilt"]);
    expect(recs[0]?.context.missing).toContain("prior work");
    // A serial run without prior work, roles or a tree: the rebuilt text is the one it was shown.
    for (const x of recs) expect(x.context.text, `#${x.n}`).toBe(contexts.get(x.n));
    // What #4's researcher saw: the outcomes before it, not its own.
    expect(recs[3]?.context.text).toContain("LR 0.05 → 0.9");
    expect(recs[3]?.context.text).not.toContain("LR 0.05 → 0.01");
    expect(recs[0]?.context.text).not.toContain("LR 0.5 → 0.05");
  });

  it("refuses a format it does not know, naming the ones it does", async () => {
    const r = await runCli(["export", "--format", "trajectory"], { cwd: dir });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('unknown export format "trajectory"');
    expect(r.stderr).toContain("--format trajectories-dpo");
    expect(r.stderr).not.toMatch(/^\s{4}at /m);
  });
});

describe.skipIf(PG_SKIP)(
  `autolab export --format trajectories from a PostgreSQL notebook (${PG_SKIP ? PG_SKIP_REASON : "PostgreSQL"})`,
  () => {
    // The same researcher on the same project, its notebook on PostgreSQL (AUTOLAB_DB, as
    // `autolab run --db` sets it): the export reads the same records through the same ledger seam.
    const pgContexts = new Map<number, string>();
    const pgOut: Record<string, string> = {};
    let pgDir = "";

    beforeAll(async () => {
      const url = freshSchemaUrl("traj");
      const t = toy({ evaluate: true, plan: ["ok", "ok", "ok", "crash"] });
      pgDir = t.dir;
      const before = process.env.AUTOLAB_DB;
      process.env.AUTOLAB_DB = url;
      try {
        const outcome = await createRun({
          program: pgDir,
          tag: "t",
          maxExperiments: 4,
          agent: recordingAgent(pgContexts),
          priorWork: false,
        });
        outcome.lab.ledger.close();
      } finally {
        if (before === undefined) delete process.env.AUTOLAB_DB;
        else process.env.AUTOLAB_DB = before;
      }
      expect(existsSync(join(pgDir, ".autolab", "lab.db"))).toBe(false);
      for (const f of ["trajectories", "trajectories-sft", "trajectories-dpo"]) {
        const r = await runCli(["export", "--format", f], { cwd: pgDir, env: { AUTOLAB_DB: url } });
        expect(r.stderr).toBe("");
        expect(r.code).toBe(0);
        pgOut[f] = r.stdout;
      }
    }, 120_000);
    afterAll(dropSchemas);

    /** What may differ between two runs of the same steps: commit ids, paths, clocks, timings. */
    const stable = (text: string, dir: string) =>
      text
        .replaceAll(dir, "<project>")
        .replace(/\b[0-9a-f]{40}\b/g, "<sha>")
        .replace(/\b[0-9a-f]{7,12}\b/g, "<short>");

    it("gives the records SQLite gives: same shape, same proposals, outcomes, rewards and contexts", () => {
      const pg = lines<TrajectoryRecord>(pgOut.trajectories as string);
      const lite = lines<TrajectoryRecord>(out.trajectories as string);
      expect(pg.map((r) => r.n)).toEqual([1, 2, 3, 4]);
      expect(pg.map(shapeOf)).toEqual(lite.map(shapeOf));
      const gist = (r: TrajectoryRecord, d: string) => ({
        n: r.n,
        parent: r.parent,
        agent: r.agent,
        context: { source: r.context.source, text: stable(r.context.text ?? "", d) },
        proposal: r.proposal,
        output: r.output?.text,
        diff: { ...r.diff, text: stable(r.diff.text ?? "", d) },
        decision: r.outcome.decision,
        metric: r.outcome.metric,
        parentMetric: r.outcome.parentMetric,
        statuses: r.outcome.trials.map((t) => t.status),
        reward: r.reward,
        ranClean: r.labels.ranClean,
        mechanismConfirmed: r.labels.mechanismConfirmed,
      });
      expect(pg.map((r) => gist(r, pgDir))).toEqual(lite.map((r) => gist(r, dir)));
      // The recorded context is the text that run's researcher was given.
      for (const r of pg) expect(r.context.text).toBe(pgContexts.get(r.n));
    });

    it("SFT and DPO: the same chats and pairs", () => {
      for (const f of ["trajectories-sft", "trajectories-dpo"]) {
        const pg = stable(pgOut[f] as string, pgDir);
        expect(pg.split("\n").filter(Boolean).length, f).toBe(2);
        expect(pg, f).toBe(stable(out[f] as string, dir));
      }
    });

    it("never carries the holdout's value, in any format", () => {
      for (const f of ["trajectories", "trajectories-sft", "trajectories-dpo"]) {
        expect((pgOut[f] as string).length, f).toBeGreaterThan(100);
        expectNoHoldoutValue(pgOut[f] as string);
      }
    });
  },
);
