/**
 * The organization as viewers show it (src/app/org-view.ts), on hand-built notebook records:
 * credit per role from keeps in decision order, slot utilization of the latest session with
 * overlapping and live trials, the findings board. Clocks are fixed ISO times: nothing timed.
 */
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { findingsOf, orgView, roleCredit } from "../src/app/org-view.ts";
import { statusOf } from "../src/app/status.ts";
import { orgLines } from "../src/cli/views.ts";
import { formatClock } from "../src/core/format.ts";
import type { ExperimentRecord, RunRecord, SessionRecord, TrialRecord } from "../src/core/ledger.ts";
import type { DecisionAction } from "../src/core/types.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { cleanupTemp, tempDir } from "./helpers/git-project.ts";
import { buildNotebook, type FixtureExperiment } from "./helpers/notebook-fixture.ts";
import { createToyProject, runCli } from "./helpers/toy-project.ts";

afterAll(cleanupTemp);

const T0 = Date.parse("2026-11-22T10:00:00.000Z");
/** The ISO time `s` seconds after T0. */
const at = (s: number) => new Date(T0 + s * 1000).toISOString();

const RUN: RunRecord = {
  id: 1,
  tag: "nov22",
  branch: "autolab/nov22",
  programPath: "/nonexistent/program.md",
  programName: "org-lab",
  metric: "val_bpb",
  direction: "minimize",
  baseCommit: "0".repeat(40),
  protectedHashes: {},
  seed: 0,
  startedAt: at(0),
};

interface Spec {
  n: number;
  role?: string;
  rebaseOf?: number;
  hypothesis?: string;
  mechanism?: string;
  /** Trials: [slot, start s, end s | undefined (still open), wallS?]. */
  trials?: [number | undefined, number, number | undefined, number?][];
  decision?: { action: DecisionAction; at: number; metric?: number; confirmed?: boolean | null };
}

function exp(x: Spec): ExperimentRecord {
  const trials: TrialRecord[] = (x.trials ?? []).map(([slot, start, end, wall], i) => ({
    id: x.n * 10 + i,
    attempt: i + 1,
    seed: 0,
    command: "node train.ts",
    commit: "c".repeat(40),
    budgetMs: 600_000,
    env: {},
    ...(slot !== undefined ? { slot } : {}),
    startedAt: at(start),
    ...(end !== undefined
      ? {
          result: {
            status: "ok" as const,
            exitCode: 0,
            signal: null,
            wallS: wall ?? end - start,
            cpuS: 1,
            peakRssMb: 50,
            metrics: (x.decision?.metric !== undefined ? { val_bpb: x.decision.metric } : {}) as Record<
              string,
              number
            >,
            selfReported: false,
            seed: 0,
            command: "node train.ts",
            stdoutPath: "/dev/null",
            stderrPath: "/dev/null",
            logTail: "",
            finishedAt: at(end),
            logDir: "/nonexistent",
          },
        }
      : {}),
  }));
  const d = x.decision;
  return {
    id: x.n + 1,
    runId: 1,
    n: x.n,
    agent: "builtin",
    parentCommit: "p".repeat(40),
    commit: "c".repeat(40),
    ref: `refs/autolab/nov22/${x.n}`,
    hypothesis: x.hypothesis ?? (x.n === 0 ? "baseline" : `idea ${x.n}`),
    ...(x.mechanism ? { mechanism: x.mechanism } : {}),
    diff: { files: 1, insertions: 1, deletions: 1 },
    ...(x.role ? { role: x.role } : {}),
    ...(x.rebaseOf !== undefined ? { rebaseOf: x.rebaseOf } : {}),
    createdAt: at((x.trials?.[0]?.[1] ?? 0) - 1),
    trials,
    ...(d
      ? {
          decision: {
            action: d.action,
            reason: d.action,
            ...(d.metric !== undefined ? { metric: d.metric } : {}),
            mechanismConfirmed:
              d.confirmed !== undefined
                ? d.confirmed
                : d.action === "keep"
                  ? true
                  : d.action === "discard"
                    ? false
                    : null,
            decidedAt: at(d.at),
          },
        }
      : {}),
  };
}

const session = (id: number, slots: number, start: number): SessionRecord => ({
  id,
  runId: 1,
  slots,
  pid: 4242,
  startedAt: at(start),
});

/**
 * A lab of three roles on 2 slots. Keeps are decided out of n order: #3 (explorer, 2.7) before
 * #1 (tuner, 2.8): walked in decision order, #1 no longer beats the best and earns nothing.
 * #5 is a merge candidate (rebase of #4) of the critic. #6 runs on slot 1 at the end.
 */
const LAB: ExperimentRecord[] = [
  exp({ n: 0, trials: [[0, 10, 110]], decision: { action: "keep", at: 111, metric: 3.0 } }),
  exp({
    n: 1,
    role: "tuner",
    hypothesis: "LR up",
    mechanism: "faster steps",
    trials: [[0, 120, 420]],
    decision: { action: "keep", at: 430, metric: 2.8 },
  }),
  exp({
    n: 2,
    role: "explorer",
    hypothesis: "wider MLP",
    mechanism: "more capacity helps",
    trials: [[1, 130, 230]],
    decision: { action: "discard", at: 231, metric: 3.05 },
  }),
  exp({
    n: 3,
    role: "explorer",
    hypothesis: "rotary embeddings",
    mechanism: "position info",
    trials: [[1, 240, 390]],
    decision: { action: "keep", at: 400, metric: 2.7 },
  }),
  exp({
    n: 4,
    role: "tuner",
    hypothesis: "warmup",
    trials: [[0, 440, 540]],
    decision: { action: "keep", at: 545, metric: 2.6 },
  }),
  exp({
    n: 5,
    role: "critic",
    rebaseOf: 4,
    hypothesis: "warmup, rebased on #3",
    trials: [[1, 400, 560]],
    decision: { action: "keep", at: 561, metric: 2.5 },
  }),
  exp({ n: 6, role: "tuner", hypothesis: "batch 64", trials: [[1, 570, undefined]] }),
];

describe("credit per role", () => {
  const credit = roleCredit(RUN, LAB);

  it("lists roles in order of first appearance, the baseline aside", () => {
    expect(credit.map((c) => c.role)).toEqual(["tuner", "explorer", "critic"]);
  });

  it("counts proposals, decisions, keeps and merges, and shares of proposals", () => {
    const [tuner, explorer, critic] = credit;
    expect(tuner).toMatchObject({ proposals: 3, decided: 2, kept: 2, merges: 0 });
    expect(explorer).toMatchObject({ proposals: 2, decided: 2, kept: 1, merges: 0 });
    expect(critic).toMatchObject({ proposals: 1, decided: 1, kept: 1, merges: 1 });
    expect(tuner?.share).toBeCloseTo(3 / 6, 12);
    expect(explorer?.share).toBeCloseTo(2 / 6, 12);
    expect(critic?.share).toBeCloseTo(1 / 6, 12);
  });

  it("credits each keep, in decision order, with how far it moved the running best", () => {
    const [tuner, explorer, critic] = credit;
    // Decision order: #3 2.7 (explorer +0.3), #1 2.8 (no better: 0), #4 2.6 (tuner +0.1), #5 2.5 (critic +0.1).
    expect(explorer?.improvement).toBeCloseTo(0.3, 12);
    expect(tuner?.improvement).toBeCloseTo(0.1, 12);
    expect(critic?.improvement).toBeCloseTo(0.1, 12);
    const total = credit.reduce((s, c) => s + c.improvement, 0);
    expect(total).toBeCloseTo(3.0 - 2.5, 12);
  });

  it("compute is the role's trial seconds; value is improvement per compute second", () => {
    const [tuner, explorer, critic] = credit;
    expect(tuner?.computeS).toBe(300 + 100); // #6 has no result yet
    expect(explorer?.computeS).toBe(100 + 150);
    expect(critic?.computeS).toBe(160);
    expect(tuner?.value).toBeCloseTo(0.1 / 400, 12);
    expect(explorer?.value).toBeCloseTo(0.3 / 250, 12);
    expect(critic?.value).toBeCloseTo(0.1 / 160, 12);
  });

  it("maximize objectives count gains upward; roles without compute have value 0", () => {
    const run = { ...RUN, direction: "maximize" as const };
    const exps = [
      exp({ n: 0, trials: [[0, 0, 10]], decision: { action: "keep", at: 11, metric: 0.5 } }),
      exp({ n: 1, role: "a", trials: [[0, 12, 22]], decision: { action: "keep", at: 23, metric: 0.7 } }),
      exp({ n: 2, role: "b" }),
    ];
    const [a, b] = roleCredit(run, exps);
    expect(a?.improvement).toBeCloseTo(0.2, 12);
    expect(b).toMatchObject({ proposals: 1, decided: 0, improvement: 0, computeS: 0, value: 0 });
  });

  it("is empty when no experiment has a role", () => {
    const plain = LAB.map(({ role: _r, ...e }) => e as ExperimentRecord);
    expect(roleCredit(RUN, plain)).toEqual([]);
  });
});

describe("slots and utilization of the latest session", () => {
  it("a live session: busy time clipped to [start, now], the open trial counts until now", () => {
    // Session 2 starts at 200 s (a resume) with 2 slots; now = 600 s.
    const view = orgView(RUN, LAB, [session(1, 2, 0), session(2, 2, 200)], at(600));
    expect(view.session).toMatchObject({ id: 2, slots: 2, live: true, startedAt: at(200), until: at(600) });
    expect(view.session?.windowS).toBe(400);
    // slot 0: #1 120–420 → 220 in window, #4 440–540 → 100: 320.
    // slot 1: #2 130–230 → 30, #3 240–390 → 150, #5 400–560 → 160, #6 570–now → 30: 370.
    const [s0, s1] = view.slots;
    expect(s0).toMatchObject({ slot: 0, busyS: 320, trials: 1, running: null });
    expect(s1).toMatchObject({ slot: 1, busyS: 370, trials: 3 });
    expect(s0?.utilization).toBeCloseTo(320 / 400, 12);
    expect(s1?.running).toEqual({
      n: 6,
      attempt: 1,
      hypothesis: "batch 64",
      role: "tuner",
      startedAt: at(570),
      state: "running",
    });
    expect(view.session?.busyS).toBe(690);
    expect(view.session?.utilization).toBeCloseTo(690 / (400 * 2), 12);
  });

  it("a session that is not live ends at its last activity; its open trial was cut short", () => {
    const view = orgView(RUN, LAB, [session(1, 2, 200)], at(99_999), { live: false });
    // Last activity: #5's decision at 561 (the open trial started at 570, later still).
    expect(view.session).toMatchObject({ live: false, until: at(570), windowS: 370 });
    expect(view.slots[1]?.running?.state).toBe("interrupted");
    // slot 1 in [200, 570]: 30 + 150 + 160 + 0.
    expect(view.slots[1]?.busyS).toBe(340);
  });

  it("liveness defaults to whether a trial of the session is open", () => {
    expect(orgView(RUN, LAB, [session(1, 2, 200)], at(600)).session?.live).toBe(true);
    const done = LAB.slice(0, 6);
    expect(orgView(RUN, done, [session(1, 2, 200)], at(99_999)).session).toMatchObject({
      live: false,
      until: at(561),
    });
  });

  it("a serial run (one slot, trials without a slot) reports busy / wall", () => {
    const exps = [
      exp({ n: 0, trials: [[undefined, 10, 40]], decision: { action: "keep", at: 41, metric: 3 } }),
      exp({ n: 1, trials: [[undefined, 50, 90]], decision: { action: "discard", at: 91, metric: 3.1 } }),
    ];
    const view = orgView(RUN, exps, [session(1, 1, 0)], at(500));
    expect(view.roles).toEqual([]);
    expect(view.session).toMatchObject({ slots: 1, live: false, windowS: 91, busyS: 70 });
    expect(view.session?.utilization).toBeCloseTo(70 / 91, 12);
    expect(view.slots).toHaveLength(1);
    expect(view.slots[0]).toMatchObject({ slot: 0, trials: 2, busyS: 70 });
  });

  it("no session, no slots (notebooks from before sessions)", () => {
    const view = orgView(RUN, LAB, [], at(600));
    expect(view.session).toBeNull();
    expect(view.slots).toEqual([]);
    expect(view.roles).toHaveLength(3);
  });
});

describe("findings", () => {
  it("kept changes and refuted mechanisms, newest first, capped", () => {
    const exps = [
      ...LAB,
      exp({
        n: 7,
        role: "explorer",
        hypothesis: "no mechanism given",
        trials: [[0, 600, 700]],
        decision: { action: "discard", at: 701, metric: 2.9 },
      }),
      exp({
        n: 8,
        role: "critic",
        hypothesis: "dropout 0.2",
        mechanism: "overfits",
        trials: [[0, 710, 800]],
        decision: { action: "discard", at: 801, metric: 2.55, confirmed: null },
      }),
    ];
    const f = findingsOf(exps);
    expect(f.map((x) => [x.kind, x.n])).toEqual([
      ["kept", 5],
      ["kept", 4],
      ["kept", 1],
      ["kept", 3],
      ["refuted", 2],
    ]);
    expect(f[0]).toEqual({
      kind: "kept",
      n: 5,
      role: "critic",
      hypothesis: "warmup, rebased on #3",
      mechanism: null,
      metric: 2.5,
      rebaseOf: 4,
      decidedAt: at(561),
    });
    expect(f[4]).toMatchObject({ role: "explorer", mechanism: "more capacity helps", metric: 3.05 });
    expect(findingsOf(exps, 2).map((x) => x.n)).toEqual([5, 4]);
    expect(orgView(RUN, exps, [], at(0)).findings).toEqual(f);
  });
});

describe("findings of the built-in optimizer", () => {
  const TPE = (good: number, of: number) =>
    `TPE: sampled from the density of the best ${good} of ${of} observed configurations`;
  /** A notebook as the built-in optimizer writes it: knob values in params, sampler state as mechanism. */
  function builtinLab(): ReturnType<SqliteLedger["listExperiments"]> {
    const x = (
      action: FixtureExperiment["action"],
      LR: number,
      OPT: string,
      metric?: number,
      mechanism = TPE(2, 5),
    ): FixtureExperiment => ({
      action,
      params: { LR, OPT },
      hypothesis: `LR → ${LR}, OPT → ${OPT}`,
      mechanism,
      ...(metric !== undefined ? { metric } : {}),
      ...(action === "crash" ? { reason: "crash: diverged" } : {}),
    });
    const dir = tempDir();
    const path = buildNotebook(dir, [
      {
        experiments: [
          { action: "keep", metric: 3.0, params: { LR: 0.01, OPT: "adam" } },
          x("discard", 0.3, "adam", 3.4, "random exploration (startup 2 of 4)"),
          x("keep", 0.02, "adam", 2.8),
          x("discard", 0.5, "adam", 3.6),
          x("crash", 0.9, "sgd"),
          x("discard", 0.003, "sgd", 3.1),
          x("discard", 0.02, "sgd", 2.95),
          x("discard", 0.001, "adam", 3.3),
          x("discard", 0.3, "adam", 3.35),
          x("discard", 0.015, "sgd", 2.99),
        ],
      },
    ]);
    const ledger = new SqliteLedger(path);
    const run = ledger.latestRun();
    if (!run) throw new Error("no run");
    const exps = ledger.listExperiments(run.id);
    ledger.close();
    return exps;
  }

  it("shows which knob ranges and choices were not better, never the sampler's state", () => {
    const f = findingsOf(builtinLab());
    const text = f.map((x) => `${x.kind} ${x.hypothesis} ${x.mechanism ?? ""}`).join("\n");
    expect(text).not.toMatch(/TPE|density|random exploration/);
    expect(f.filter((x) => x.kind === "refuted")).toEqual([]);
    expect(f.filter((x) => x.kind === "kept").map((x) => [x.n, x.hypothesis, x.mechanism])).toEqual([
      [2, "LR → 0.02, OPT → adam", null],
    ]);
    // The best is #2 (LR 0.02, adam): above it 0.3 (twice), 0.5 and 0.9 (crashed) were not
    // better; below it 0.01 is the baseline (not counted), 0.003, 0.001 and 0.015 were not
    // better; sgd never was. Strongest (then newest) first, after the kept changes.
    expect(f.map((x) => [x.kind, x.n, x.hypothesis])).toEqual([
      ["kept", 2, "LR → 0.02, OPT → adam"],
      ["ruled-out", 9, "OPT = sgd: 4 of 4 not better (1 crashed or rejected)"],
      [
        "ruled-out",
        8,
        "LR above 0.02 (the best's; tried 0.3–0.9): 4 of 4 not better (1 crashed or rejected)",
      ],
      ["ruled-out", 9, "LR below 0.02 (the best's; tried 0.001–0.015): 3 of 3 not better"],
    ]);
    expect(f.find((x) => x.kind === "ruled-out" && x.region?.knob === "OPT")?.region).toEqual({
      knob: "OPT",
      side: "is",
      value: "sgd",
      tried: ["sgd"],
      notBetter: 4,
      of: 4,
      failed: 1,
      ns: [4, 5, 6, 9],
    });
    // Two not better of two is no finding yet; the regions never push out what was kept.
    const early = findingsOf(builtinLab().slice(0, 8)); // LR below the best: 0.003 and 0.001 only
    expect(early.map((x) => x.region?.side)).toEqual([undefined, "is", "above"]);
    expect(findingsOf(builtinLab(), 1).map((x) => x.kind)).toEqual(["kept", "ruled-out"]);
  });

  it("a real run of the built-in optimizer: its findings are knob values, not sampler internals", async () => {
    const toy = createToyProject();
    try {
      const r = await runCli(["run", "-n", "10"], { cwd: toy.dir });
      expect(r.code).toBe(0);
      const ledger = new SqliteLedger(join(toy.dir, ".autolab", "lab.db"));
      const run = ledger.latestRun();
      if (!run) throw new Error("no run");
      const exps = ledger.listExperiments(run.id);
      ledger.close();
      // What the sampler wrote as mechanisms is what the board must not show.
      expect(
        exps.filter((e) => e.n > 0).every((e) => /^(GP|TPE|random exploration)/.test(e.mechanism ?? "")),
      ).toBe(true);
      const f = findingsOf(exps);
      expect(f.length).toBeGreaterThan(0);
      for (const x of f) {
        expect(x.kind).not.toBe("refuted");
        expect(x.mechanism).toBeNull();
        expect(x.hypothesis).not.toMatch(/^(GP|TPE|random exploration)/);
      }
      // Each region counts what the notebook says about its experiments.
      const byN = new Map(exps.map((e) => [e.n, e]));
      for (const x of f.filter((y) => y.kind === "ruled-out")) {
        const g = x.region;
        if (!g) throw new Error("a ruled-out finding without its region");
        const members = g.ns.map((n) => byN.get(n));
        expect(members.filter((e) => e?.decision?.action !== "keep")).toHaveLength(g.notBetter);
        for (const e of members) {
          const v = e?.params?.[g.knob] as number;
          expect(g.side === "above" ? v > (g.value as number) : v < (g.value as number)).toBe(true);
        }
      }
    } finally {
      toy.cleanup();
    }
  }, 120_000);
});

describe("in autolab status", () => {
  it("statusOf adds roles and slots; the CLI prints a credit table and the slots", () => {
    const s = statusOf(RUN, LAB, undefined, { sessions: [session(2, 2, 200)], now: at(600), live: true });
    expect(s.roles.map((r) => r.role)).toEqual(["tuner", "explorer", "critic"]);
    expect(s.slots).toMatchObject({
      count: 2,
      since: at(200),
      until: at(600),
      live: true,
      windowS: 400,
      busyS: 690,
    });
    expect(s.slots.utilization).toBeCloseTo(690 / 800, 12);
    const lines = orgLines(s);
    expect(lines[0]).toBe("Roles:");
    expect(lines[1]).toMatch(/^ {2}role +proposals +kept +improvement +compute +value\/h +share$/);
    expect(lines[2]).toMatch(/^ {2}tuner +3 +2 +0\.1 +6m40s +0\.9 +50%$/);
    expect(lines[3]).toMatch(/^ {2}explorer +2 +1 +0\.3 +4m10s +4\.32 +33%$/);
    expect(lines).toContain("slots: 2 · utilization 86.3% (busy 11m30s of 2 × 6m40s this session)");
    expect(lines).toContain("  slot 0: idle  (1 trial, 80% busy)");
    expect(lines).toContain("  slot 1: running #6 [tuner] batch 64  (3 trials, 93% busy)");
  });

  it("without sessions: no slots line, slots.count 0 (same JSON shape)", () => {
    const s = statusOf(RUN, LAB);
    expect(s.slots).toEqual({
      count: 0,
      since: null,
      until: null,
      live: false,
      windowS: 0,
      busyS: 0,
      utilization: null,
      perSlot: [],
    });
    expect(orgLines(s).some((l) => l.startsWith("slots:"))).toBe(false);
  });

  it("a serial lab without roles prints one slots line", () => {
    const exps = [
      exp({ n: 0, trials: [[undefined, 0, 50]], decision: { action: "keep", at: 100, metric: 3 } }),
    ];
    const s = statusOf(RUN, exps, undefined, { sessions: [session(1, 1, 0)], now: at(100) });
    expect(orgLines(s)).toEqual(["slots: 1 · utilization 50.0% (busy 50s of 1 × 1m40s last session)"]);
  });

  it("formatClock() reads like a wall clock", () => {
    expect(formatClock(45.4)).toBe("45s");
    expect(formatClock(965)).toBe("16m05s");
    expect(formatClock(3720)).toBe("1h02m");
  });
});
