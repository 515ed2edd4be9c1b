import { afterEach, describe, expect, it } from "vitest";
import type {
  Ledger,
  NewAdvice,
  NewExperiment,
  NewHookRun,
  NewImportedResult,
  NewTrial,
  RunRecord,
} from "../../src/core/ledger.ts";
import type { TrialResult } from "../../src/core/types.ts";

/**
 * The promises every Ledger keeps, whatever stores it (SQLite file, SQLite in memory, later
 * PostgreSQL). Each test gets a fresh, empty ledger from `make` and closes it afterwards.
 */
export interface LedgerContractOptions {
  /**
   * Reads back the notes of a run, oldest first. The Ledger interface has no reader for notes
   * (nothing in the harness reads them yet), so each implementation says how to look.
   */
  readNotes?: (ledger: Ledger, runId: number) => { experimentId: number | null; text: string }[];
  /**
   * Opens another ledger over the same store as `ledger` (as another process would: `autolab
   * status`, the dashboard, a second harness). Absent when the store cannot be shared (memory).
   */
  openAnother?: (ledger: Ledger) => Ledger;
}

type NewRun = Omit<RunRecord, "id" | "startedAt">;

export function newRun(over: Partial<NewRun> = {}): NewRun {
  return {
    tag: "nov22",
    branch: "autolab/nov22",
    programPath: "/home/user/tiny-lm/program.md",
    programName: "tiny-lm",
    metric: "val_bpb",
    direction: "minimize",
    baseCommit: "0123456789abcdef0123456789abcdef01234567",
    protectedHashes: { "prepare.ts": "a".repeat(64), "evaluate.ts": "b".repeat(64) },
    seed: 42,
    ...over,
  };
}

export function newExperiment(runId: number, n: number, over: Partial<NewExperiment> = {}): NewExperiment {
  return {
    runId,
    n,
    agent: "builtin",
    parentCommit: `parent${n}`.padEnd(40, "0"),
    commit: `commit${n}`.padEnd(40, "0"),
    ref: `refs/autolab/nov22/${n}`,
    hypothesis: `hypothesis ${n}`,
    diff: { files: 1, insertions: 2, deletions: 3 },
    ...over,
  };
}

export function trialResult(over: Partial<TrialResult> = {}): TrialResult {
  return {
    status: "ok",
    exitCode: 0,
    signal: null,
    wallS: 12.5,
    cpuS: 11.25,
    peakRssMb: 345.5,
    metrics: { val_bpb: 0.9979, train_loss: 1.5 },
    selfReported: false,
    seed: 7,
    command: "node train.ts",
    stdoutPath: "/logs/1/1/stdout.log",
    stderrPath: "/logs/1/1/stderr.log",
    logTail: "step 10 loss 1.5\nval_bpb: 0.9979\n",
    ...over,
  };
}

export function newTrial(experimentId: number, attempt: number, over: Partial<NewTrial> = {}): NewTrial {
  return {
    experimentId,
    attempt,
    seed: 7,
    command: "node train.ts",
    commit: "commit1".padEnd(40, "0"),
    budgetMs: 30_000,
    env: { AUTOLAB_SEED: "7", AUTOLAB_BUDGET_S: "30" },
    ...over,
  };
}

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

export function ledgerContract(name: string, make: () => Ledger, opts: LedgerContractOptions = {}): void {
  describe(`Ledger contract: ${name}`, () => {
    const open: Ledger[] = [];
    const fresh = (): Ledger => {
      const l = make();
      open.push(l);
      return l;
    };
    afterEach(() => {
      for (const l of open.splice(0)) l.close();
    });

    describe("runs", () => {
      it("round-trips a run through createRun, getRun, latestRun and listRuns", () => {
        const l = fresh();
        const input = newRun({ direction: "maximize", seed: 2 ** 31 + 5 });
        const run = l.createRun(input);
        expect(run).toEqual({ ...input, id: expect.any(Number), startedAt: expect.stringMatching(ISO) });
        expect(l.getRun("nov22")).toEqual(run);
        expect(l.latestRun()).toEqual(run);
        expect(l.listRuns()).toEqual([run]);
      });

      it("keeps protectedHashes (including none), seed 0 and both directions", () => {
        const l = fresh();
        const a = l.createRun(newRun({ tag: "a", protectedHashes: {}, seed: 0, direction: "minimize" }));
        const b = l.createRun(newRun({ tag: "b", direction: "maximize" }));
        expect(l.getRun("a")?.protectedHashes).toEqual({});
        expect(l.getRun("a")?.seed).toBe(0);
        expect(l.getRun("a")?.direction).toBe("minimize");
        expect(l.getRun("b")?.protectedHashes).toEqual(newRun().protectedHashes);
        expect(l.getRun("b")?.direction).toBe("maximize");
        expect(a.id).not.toBe(b.id);
      });

      it("is empty at first and lists runs oldest first; latestRun is the newest", () => {
        const l = fresh();
        expect(l.latestRun()).toBeUndefined();
        expect(l.listRuns()).toEqual([]);
        expect(l.getRun("nope")).toBeUndefined();
        const tags = ["nov22", "nov22-2", "nov23"];
        for (const tag of tags) l.createRun(newRun({ tag, branch: `autolab/${tag}` }));
        expect(l.listRuns().map((r) => r.tag)).toEqual(tags);
        expect(l.latestRun()?.tag).toBe("nov23");
      });

      it("refuses a second run with the same tag", () => {
        const l = fresh();
        l.createRun(newRun());
        expect(() => l.createRun(newRun())).toThrow();
        expect(l.listRuns()).toHaveLength(1);
      });
    });

    describe("experiments", () => {
      it("round-trips every field, with params, usage and diff stats", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        const input = newExperiment(run.id, 1, {
          agent: "claude",
          mechanism: "a larger learning rate escapes the plateau",
          expected: "val_bpb down by 0.01",
          params: { LEARNING_RATE: 0.003, HIDDEN: 128, TINY: 1e-300, NEG: -2.5 },
          usage: { inputTokens: 1200, outputTokens: 340, costUsd: 0.0123, wallS: 4.5 },
          diff: { files: 2, insertions: 10, deletions: 0 },
        });
        const added = l.addExperiment(input);
        expect(added).toEqual({
          ...input,
          id: expect.any(Number),
          createdAt: expect.stringMatching(ISO),
          trials: [],
        });
        const got = l.getExperiment(run.id, 1);
        expect(got).toEqual(added);
        expect(got?.decision).toBeUndefined();
        expect(l.listExperiments(run.id)).toEqual([added]);
      });

      it("leaves optional fields absent when they were not given", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        l.addExperiment(newExperiment(run.id, 0));
        const got = l.getExperiment(run.id, 0);
        expect(got).toBeDefined();
        for (const key of ["mechanism", "expected", "params", "usage", "decision", "role", "rebaseOf"]) {
          expect(got, key).not.toHaveProperty(key);
        }
        expect(got?.diff).toEqual({ files: 1, insertions: 2, deletions: 3 });
        expect(got?.trials).toEqual([]);
      });

      it("round-trips the role that proposed an experiment and the experiment a merge rebased", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        l.addExperiment(newExperiment(run.id, 4, { role: "explorer" }));
        l.addExperiment(newExperiment(run.id, 7, { role: "explorer", rebaseOf: 4 }));
        expect(l.getExperiment(run.id, 4)?.role).toBe("explorer");
        expect(l.getExperiment(run.id, 4)).not.toHaveProperty("rebaseOf");
        expect(l.getExperiment(run.id, 7)?.rebaseOf).toBe(4);
      });

      it("keeps the context a researcher was shown with its row, out of the records (migration 11)", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        const other = l.createRun(newRun({ tag: "other", branch: "autolab/other" }));
        const context = "# Program\n\nTune it.\n\n## Results so far\n#0 keep 1.5 \u001b[2J\n";
        const added = l.addExperiment(newExperiment(run.id, 1), context);
        l.addExperiment(newExperiment(run.id, 2));
        l.addExperiment(newExperiment(other.id, 1), "other run's");
        expect(added).not.toHaveProperty("context");
        expect(l.getExperiment(run.id, 1)).toEqual(added);
        expect(l.proposalContext?.(run.id, 1)).toBe(context);
        expect(l.proposalContext?.(run.id, 2)).toBeUndefined();
        expect(l.proposalContext?.(other.id, 1)).toBe("other run's");
        expect(l.proposalContext?.(run.id, 9)).toBeUndefined();
        if (opts.openAnother) {
          const again = opts.openAnother(l);
          open.push(again);
          expect(again.proposalContext?.(run.id, 1)).toBe(context);
        }
      });

      it("records harness sessions per run, oldest first", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        const other = l.createRun(newRun({ tag: "other", branch: "autolab/other" }));
        const a = l.startSession(run.id, 4);
        l.startSession(other.id, 1);
        const b = l.startSession(run.id, 2);
        expect(a).toEqual({
          id: expect.any(Number),
          runId: run.id,
          slots: 4,
          pid: process.pid,
          startedAt: expect.stringMatching(ISO),
        });
        expect(l.listSessions(run.id)).toEqual([a, b]);
        expect(l.listSessions(run.id + other.id + 100)).toEqual([]);
      });

      it("records how each session was sandboxed, and a run's notes in order", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        l.startSession(run.id, 1, "bubblewrap 0.8.0");
        l.startSession(run.id, 1, "unsandboxed: sandbox: off in program.md");
        l.startSession(run.id, 1);
        expect(l.listSessions(run.id).map((s) => s.sandbox)).toEqual([
          "bubblewrap 0.8.0",
          "unsandboxed: sandbox: off in program.md",
          undefined,
        ]);
        l.addNote(run.id, null, "ALARM tamper:ratchet: moved");
        l.addNote(run.id, null, "second");
        expect(l.listNotes(run.id).map((n) => n.text)).toEqual(["ALARM tamper:ratchet: moved", "second"]);
        expect(l.listNotes(run.id + 100)).toEqual([]);
      });

      it("lists a run's experiments ordered by n, whatever the insertion order", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        const other = l.createRun(newRun({ tag: "other", branch: "autolab/other" }));
        for (const n of [2, 0, 10, 1]) l.addExperiment(newExperiment(run.id, n));
        l.addExperiment(newExperiment(other.id, 5));
        expect(l.listExperiments(run.id).map((e) => e.n)).toEqual([0, 1, 2, 10]);
        expect(l.listExperiments(other.id).map((e) => e.n)).toEqual([5]);
        expect(l.getExperiment(run.id, 5)).toBeUndefined();
        expect(l.getExperiment(other.id, 5)?.runId).toBe(other.id);
        expect(l.listExperiments(other.id + run.id + 100)).toEqual([]);
      });

      it("enforces one experiment per (run, n)", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        const other = l.createRun(newRun({ tag: "other", branch: "autolab/other" }));
        l.addExperiment(newExperiment(run.id, 3, { hypothesis: "first" }));
        expect(() => l.addExperiment(newExperiment(run.id, 3, { hypothesis: "second" }))).toThrow();
        expect(l.listExperiments(run.id)).toHaveLength(1);
        expect(l.getExperiment(run.id, 3)?.hypothesis).toBe("first");
        // The same n in another run is a different experiment.
        expect(() => l.addExperiment(newExperiment(other.id, 3))).not.toThrow();
      });
    });

    describe("trials", () => {
      it("shows a started trial without a result (that is how an interrupted trial is found)", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        const exp = l.addExperiment(newExperiment(run.id, 1));
        const id = l.startTrial(
          newTrial(exp.id, 1, { seed: 99, budgetMs: 1500, command: "python train.py" }),
        );
        const trials = l.getExperiment(run.id, 1)?.trials;
        expect(trials).toEqual([
          {
            id,
            attempt: 1,
            seed: 99,
            command: "python train.py",
            commit: "commit1".padEnd(40, "0"),
            budgetMs: 1500,
            env: { AUTOLAB_SEED: "7", AUTOLAB_BUDGET_S: "30" },
            startedAt: expect.stringMatching(ISO),
          },
        ]);
        expect(trials?.[0]?.result).toBeUndefined();
      });

      it("records the slot a trial ran on, and leaves it absent when none was given", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        const exp = l.addExperiment(newExperiment(run.id, 1));
        l.startTrial(newTrial(exp.id, 1, { slot: 3 }));
        l.startTrial(newTrial(exp.id, 2));
        const trials = l.getExperiment(run.id, 1)?.trials ?? [];
        expect(trials[0]?.slot).toBe(3);
        expect(trials[1]).not.toHaveProperty("slot");
      });

      it("round-trips every TrialResult field", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        const exp = l.addExperiment(newExperiment(run.id, 1));
        const id = l.startTrial(newTrial(exp.id, 1));
        const result = trialResult({ selfReported: true, metrics: { val_bpb: 0.5, peak_vram_mb: 45060.2 } });
        l.finishTrial(id, result, "/logs/1/1");
        const got = l.getExperiment(run.id, 1)?.trials[0]?.result;
        expect(got).toEqual({ ...result, logDir: "/logs/1/1", finishedAt: expect.stringMatching(ISO) });
        expect(got).not.toHaveProperty("reason");
      });

      it("round-trips a failed trial: reason, null exit code, a signal, no metrics", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        const exp = l.addExperiment(newExperiment(run.id, 1));
        const id = l.startTrial(newTrial(exp.id, 1));
        const result = trialResult({
          status: "timeout",
          reason: "killed at budget 30s + grace 5s",
          exitCode: null,
          signal: "SIGKILL",
          metrics: {},
          logTail: "",
        });
        l.finishTrial(id, result, "");
        const got = l.getExperiment(run.id, 1)?.trials[0]?.result;
        expect(got).toEqual({ ...result, logDir: "", finishedAt: expect.stringMatching(ISO) });
      });

      it("keeps non-finite metric values as NaN and ±Infinity", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        const exp = l.addExperiment(newExperiment(run.id, 1));
        const id = l.startTrial(newTrial(exp.id, 1));
        const metrics = {
          val_bpb: Number.NaN,
          loss: Number.POSITIVE_INFINITY,
          neg: Number.NEGATIVE_INFINITY,
          z: 0,
        };
        l.finishTrial(
          id,
          trialResult({ status: "nonfinite_metric", reason: "val_bpb is NaN", metrics }),
          "/l",
        );
        const got = l.getExperiment(run.id, 1)?.trials[0]?.result?.metrics;
        expect(got).toBeDefined();
        expect(Object.keys(got ?? {}).sort()).toEqual(["loss", "neg", "val_bpb", "z"]);
        expect(Number.isNaN(got?.val_bpb)).toBe(true);
        expect(got?.loss).toBe(Number.POSITIVE_INFINITY);
        expect(got?.neg).toBe(Number.NEGATIVE_INFINITY);
        expect(Object.is(got?.z, 0)).toBe(true);
      });

      it("orders trials by attempt and keeps them with their experiment", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        const a = l.addExperiment(newExperiment(run.id, 1));
        const b = l.addExperiment(newExperiment(run.id, 2));
        const a2 = l.startTrial(newTrial(a.id, 2));
        const b1 = l.startTrial(newTrial(b.id, 1));
        const a1 = l.startTrial(newTrial(a.id, 1));
        l.finishTrial(a1, trialResult({ status: "interrupted", reason: "harness stopped" }), "");
        expect(l.getExperiment(run.id, 1)?.trials.map((t) => [t.id, t.attempt])).toEqual([
          [a1, 1],
          [a2, 2],
        ]);
        const [t1, t2] = l.getExperiment(run.id, 1)?.trials ?? [];
        expect(t1?.result?.status).toBe("interrupted");
        expect(t2?.result).toBeUndefined();
        expect(l.getExperiment(run.id, 2)?.trials.map((t) => t.id)).toEqual([b1]);
        expect(l.listExperiments(run.id).map((e) => e.trials.length)).toEqual([2, 1]);
      });

      it("is append-only: an attempt starts once and a trial finishes once", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        const exp = l.addExperiment(newExperiment(run.id, 1));
        const id = l.startTrial(newTrial(exp.id, 1));
        expect(() => l.startTrial(newTrial(exp.id, 1))).toThrow();
        l.finishTrial(id, trialResult(), "/first");
        expect(() => l.finishTrial(id, trialResult({ status: "crash" }), "/second")).toThrow();
        const trials = l.getExperiment(run.id, 1)?.trials ?? [];
        expect(trials).toHaveLength(1);
        expect(trials[0]?.result?.status).toBe("ok");
        expect(trials[0]?.result?.logDir).toBe("/first");
      });
    });

    describe("decisions", () => {
      it("records action, reason, metric and mechanismConfirmed true/false/null", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        const ids = [0, 1, 2, 3, 4].map((n) => l.addExperiment(newExperiment(run.id, n)).id);
        l.decide(ids[0] as number, {
          action: "keep",
          reason: "baseline",
          metric: 1.25,
          mechanismConfirmed: true,
        });
        l.decide(ids[1] as number, {
          action: "discard",
          reason: "worse",
          metric: 0,
          mechanismConfirmed: false,
        });
        l.decide(ids[2] as number, { action: "crash", reason: "exit 1", mechanismConfirmed: null });
        l.decide(ids[3] as number, { action: "reject", reason: "scope: changed prepare.ts" });
        const [d0, d1, d2, d3, d4] = l.listExperiments(run.id).map((e) => e.decision);
        expect(d0).toEqual({
          action: "keep",
          reason: "baseline",
          metric: 1.25,
          mechanismConfirmed: true,
          decidedAt: expect.stringMatching(ISO),
        });
        expect(d1).toMatchObject({
          action: "discard",
          reason: "worse",
          metric: 0,
          mechanismConfirmed: false,
        });
        expect(d2).toMatchObject({ action: "crash", reason: "exit 1", mechanismConfirmed: null });
        expect(d2).not.toHaveProperty("metric");
        // Unknown whether the mechanism held: null, never undefined-vs-null ambiguity on read.
        expect(d3).toMatchObject({
          action: "reject",
          reason: "scope: changed prepare.ts",
          mechanismConfirmed: null,
        });
        expect(d3).not.toHaveProperty("metric");
        expect(d4).toBeUndefined();
        expect(l.getExperiment(run.id, 0)?.decision).toEqual(d0);
      });

      it("records a tree node (the tree frontier): treeNode true, absent on every other decision", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        const [a, b] = [1, 2].map((n) => l.addExperiment(newExperiment(run.id, n)).id);
        l.decide(a as number, { action: "discard", reason: "kept in the tree", metric: 2, treeNode: true });
        l.decide(b as number, { action: "keep", reason: "better", metric: 1 });
        const [da, db] = l.listExperiments(run.id).map((e) => e.decision);
        expect(da).toMatchObject({ action: "discard", metric: 2, treeNode: true });
        expect(db).not.toHaveProperty("treeNode");
        expect(l.getExperiment(run.id, 1)?.decision).toEqual(da);
      });

      it("takes one decision per experiment: a second one throws and the first stands", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        const exp = l.addExperiment(newExperiment(run.id, 1));
        l.decide(exp.id, { action: "discard", reason: "worse", metric: 2 });
        expect(() => l.decide(exp.id, { action: "keep", reason: "changed my mind", metric: 1 })).toThrow();
        expect(l.getExperiment(run.id, 1)?.decision).toMatchObject({
          action: "discard",
          reason: "worse",
          metric: 2,
        });
      });
    });

    describe("notes", () => {
      it("records notes on a run and on an experiment without touching the experiment", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        const exp = l.addExperiment(newExperiment(run.id, 1));
        const before = l.getExperiment(run.id, 1);
        l.addNote(run.id, null, "the baseline is noisy: ±0.002");
        l.addNote(run.id, exp.id, "refuted: a larger batch does not help at this budget");
        l.addNote(run.id, exp.id, "");
        expect(l.getExperiment(run.id, 1)).toEqual(before);
        if (opts.readNotes) {
          expect(opts.readNotes(l, run.id)).toEqual([
            { experimentId: null, text: "the baseline is noisy: ±0.002" },
            { experimentId: exp.id, text: "refuted: a larger batch does not help at this budget" },
            { experimentId: exp.id, text: "" },
          ]);
        }
      });
    });

    describe("imported results", () => {
      const rows = (source: string, n: number): NewImportedResult[] =>
        Array.from({ length: n }, (_, i) => ({
          source,
          seq: i + 1,
          commit: `abc${i}def`,
          metrics: i === 2 ? ({} as Record<string, number>) : { val_bpb: 1 - i / 100, memory_gb: 44.5 },
          status: ["keep", "discard", "crash"][i % 3] as string,
          description: i === 1 ? "tab\there, \u001b[31mred\u001b[0m, <b>html</b>" : `change ${i}`,
        }));

      it("round-trips imported rows in order, belonging to no run and touching no run", () => {
        const l = fresh();
        expect(l.listImportedResults()).toEqual([]);
        const run = l.createRun(newRun());
        l.addImportedResults(rows("autoresearch:results.tsv", 3));
        l.addImportedResults([
          {
            source: "pi-autoresearch:.auto/log.jsonl",
            seq: 1,
            commit: "",
            metrics: { total_ms: 40.5 },
            status: "checks_failed",
            description: "",
            segment: 2,
          },
        ]);
        const got = l.listImportedResults();
        expect(got.map((r) => [r.source, r.seq])).toEqual([
          ["autoresearch:results.tsv", 1],
          ["autoresearch:results.tsv", 2],
          ["autoresearch:results.tsv", 3],
          ["pi-autoresearch:.auto/log.jsonl", 1],
        ]);
        expect(got[0]).toMatchObject({
          commit: "abc0def",
          metrics: { val_bpb: 1, memory_gb: 44.5 },
          status: "keep",
        });
        expect(got[1]?.description).toBe("tab\there, \u001b[31mred\u001b[0m, <b>html</b>");
        expect(got[2]?.metrics).toEqual({});
        expect(got[2]?.segment).toBeUndefined();
        expect(got[3]).toMatchObject({ status: "checks_failed", segment: 2, commit: "" });
        for (const r of got) {
          expect(r.importedAt).toMatch(ISO);
          expect(Object.isFrozen(r)).toBe(true);
        }
        // Prior history is no experiment of any run.
        expect(l.listExperiments(run.id)).toEqual([]);
        expect(l.listRuns()).toHaveLength(1);
      });

      it("refuses a source imported before, writing nothing of the second batch", () => {
        const l = fresh();
        l.addImportedResults(rows("autoresearch:results.tsv", 2));
        expect(() =>
          l.addImportedResults([
            ...rows("pi-autoresearch:.auto/log.jsonl", 1),
            ...rows("autoresearch:results.tsv", 1),
          ]),
        ).toThrow(expect.objectContaining({ code: "IMPORT_EXISTS" }));
        expect(l.listImportedResults().map((r) => r.source)).toEqual([
          "autoresearch:results.tsv",
          "autoresearch:results.tsv",
        ]);
        l.addImportedResults([]);
        expect(l.listImportedResults()).toHaveLength(2);
      });

      if (opts.openAnother) {
        it("another connection reads what was imported", () => {
          const l = fresh();
          l.addImportedResults(rows("autoresearch:results.tsv", 3));
          const other = opts.openAnother?.(l) as Ledger;
          open.push(other);
          expect(other.listImportedResults()).toEqual(l.listImportedResults());
        });
      }
    });

    describe("hook runs", () => {
      const hook = (runId: number, n: number, phase: "before" | "after", over: Partial<NewHookRun> = {}) =>
        ({
          runId,
          n,
          phase,
          command: "node hook.mjs",
          status: "ok",
          exitCode: 0,
          wallS: 0.25,
          output: `${phase} ${n}\n\u001b[31mred\u001b[0m <b>html</b>`,
          logDir: `/logs/${n}/hook-${phase}`,
          ...over,
        }) satisfies NewHookRun;

      it("round-trips hook runs per run and per experiment, oldest first, touching no experiment", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        const other = l.createRun(newRun({ tag: "other", branch: "autolab/other" }));
        expect(l.listHookRuns(run.id)).toEqual([]);
        expect(l.latestHookRuns(run.id)).toEqual([]);
        l.addExperiment(newExperiment(run.id, 1));
        const before = l.getExperiment(run.id, 1);
        const a = l.addHookRun(hook(run.id, 1, "before"));
        const b = l.addHookRun(
          hook(run.id, 1, "after", { status: "failed", reason: "exited with code 3: boom", exitCode: 3 }),
        );
        // A before hook precedes its experiment's row: n need not exist yet.
        const c = l.addHookRun(
          hook(run.id, 2, "before", { status: "timeout", reason: "killed", exitCode: null }),
        );
        l.addHookRun(hook(other.id, 1, "after"));
        expect(a).toEqual({
          ...hook(run.id, 1, "before"),
          id: expect.any(Number),
          finishedAt: expect.stringMatching(ISO),
        });
        expect(Object.isFrozen(a)).toBe(true);
        expect(l.listHookRuns(run.id)).toEqual([a, b, c]);
        expect(l.listHookRuns(run.id, 1)).toEqual([a, b]);
        expect(l.listHookRuns(run.id, 3)).toEqual([]);
        expect(l.listHookRuns(run.id)[1]).toMatchObject({
          status: "failed",
          reason: "exited with code 3: boom",
          exitCode: 3,
        });
        expect(l.listHookRuns(run.id)[2]?.exitCode).toBeNull();
        expect(l.listHookRuns(run.id)[0]?.reason).toBeUndefined();
        // The latest of each phase: #1's after hook, #2's before hook.
        expect(l.latestHookRuns(run.id)).toEqual([b, c]);
        expect(l.getExperiment(run.id, 1)).toEqual(before);
      });

      if (opts.openAnother) {
        it("another connection reads the hook runs", () => {
          const l = fresh();
          const run = l.createRun(newRun());
          l.addHookRun(hook(run.id, 1, "before"));
          const other = opts.openAnother?.(l) as Ledger;
          open.push(other);
          expect(other.listHookRuns(run.id)).toEqual(l.listHookRuns(run.id));
        });
      }
    });

    describe("advice", () => {
      const advice = (runId: number, over: Partial<NewAdvice> = {}): NewAdvice => ({
        runId,
        trigger: "8 discards in a row",
        decided: 8,
        afterN: 8,
        agent: "claude",
        verdict: "ideas",
        ideas: ["halve the learning rate", "revisit #3: it lost to #2 only"],
        reason: "",
        ...over,
      });

      it("round-trips every verdict per run, oldest first, and is empty for a run never advised", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        const other = l.createRun(newRun({ tag: "other" }));
        expect(l.listAdvice(run.id)).toEqual([]);
        const a = l.addAdvice(advice(run.id));
        l.addAdvice(advice(other.id, { verdict: "garbage", ideas: [], reason: "no IDEA: line" }));
        const b = l.addAdvice(
          advice(run.id, {
            verdict: "stop",
            ideas: [],
            reason: "flat for 20 experiments",
            decided: 16,
            afterN: 17,
          }),
        );
        expect(a).toMatchObject({ ...advice(run.id), id: expect.any(Number), createdAt: expect.any(String) });
        expect(l.listAdvice(run.id)).toEqual([a, b]);
        expect(l.listAdvice(other.id).map((x) => [x.verdict, x.reason, x.ideas])).toEqual([
          ["garbage", "no IDEA: line", []],
        ]);
        // Untrusted text is stored as given: quotes, newlines, unicode.
        const odd = l.addAdvice(advice(run.id, { ideas: ['say "hi"\nand \u2014 bye'], reason: "" }));
        expect(l.listAdvice(run.id).at(-1)).toEqual(odd);
      });

      it("cannot be changed through what it returned or through the input", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        const input = advice(run.id);
        const got = l.addAdvice(input);
        input.ideas.push("later");
        expect(() => (got.ideas as string[]).push("x")).toThrow();
        expect(l.listAdvice(run.id)[0]?.ideas).toEqual([
          "halve the learning rate",
          "revisit #3: it lost to #2 only",
        ]);
      });

      if (opts.openAnother) {
        it("another connection reads the advice", () => {
          const l = fresh();
          const run = l.createRun(newRun());
          l.addAdvice(advice(run.id));
          const other = opts.openAnother?.(l) as Ledger;
          open.push(other);
          expect(other.listAdvice(run.id)).toEqual(l.listAdvice(run.id));
        });
      }
    });

    describe("reads after writes", () => {
      const trialOf = (experimentId: number, attempt: number): NewTrial => newTrial(experimentId, attempt);

      it("keeps ordering by n when experiments arrive out of order after a read", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        expect(l.listExperiments(run.id)).toEqual([]);
        const five = l.addExperiment(newExperiment(run.id, 5));
        expect(l.listExperiments(run.id).map((e) => e.n)).toEqual([5]);
        for (const n of [2, 9, 0]) l.addExperiment(newExperiment(run.id, n));
        l.startTrial(trialOf(five.id, 1));
        expect(l.getExperiment(run.id, 2)?.n).toBe(2);
        l.addExperiment(newExperiment(run.id, 7));
        expect(l.listExperiments(run.id).map((e) => e.n)).toEqual([0, 2, 5, 7, 9]);
        expect(l.listExperiments(run.id).map((e) => e.trials.length)).toEqual([0, 0, 1, 0, 0]);
        expect(l.getExperiment(run.id, 7)?.hypothesis).toBe("hypothesis 7");
        expect(l.getExperiment(run.id, 3)).toBeUndefined();
      });

      it("shows each write at the next read: trial start, result, decision, new experiment", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        const a = l.addExperiment(newExperiment(run.id, 0));
        expect(l.listExperiments(run.id)).toHaveLength(1);
        const id = l.startTrial(trialOf(a.id, 1));
        expect(l.getExperiment(run.id, 0)?.trials.map((t) => t.id)).toEqual([id]);
        expect(l.listExperiments(run.id)[0]?.trials[0]?.result).toBeUndefined();
        l.finishTrial(id, trialResult(), "/logs/0/1");
        expect(l.listExperiments(run.id)[0]?.trials[0]?.result?.status).toBe("ok");
        expect(l.getExperiment(run.id, 0)?.decision).toBeUndefined();
        l.decide(a.id, { action: "keep", reason: "baseline", metric: 0.9979 });
        expect(l.getExperiment(run.id, 0)?.decision?.action).toBe("keep");
        expect(l.listExperiments(run.id)[0]?.decision?.metric).toBe(0.9979);
        l.addExperiment(newExperiment(run.id, 1));
        expect(l.listExperiments(run.id).map((e) => [e.n, e.decision?.action ?? "pending"])).toEqual([
          [0, "keep"],
          [1, "pending"],
        ]);
      });

      it("does not change objects it returned earlier when later rows are written", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        const a = l.addExperiment(newExperiment(run.id, 0, { params: { LR: 0.1 } }));
        const t1 = l.startTrial(trialOf(a.id, 1));
        const list = l.listExperiments(run.id);
        const got = l.getExperiment(run.id, 0);
        const snapshot = structuredClone(got);
        const trials = got?.trials;
        l.finishTrial(t1, trialResult(), "/logs");
        l.startTrial(trialOf(a.id, 2));
        l.decide(a.id, { action: "keep", reason: "baseline", metric: 1 });
        l.addExperiment(newExperiment(run.id, 1));
        expect(got).toEqual(snapshot);
        expect(trials).toHaveLength(1);
        expect(trials?.[0]?.result).toBeUndefined();
        expect(got?.decision).toBeUndefined();
        expect(list).toHaveLength(1);
        expect(list[0]).toEqual(snapshot);
        // ...while the ledger itself has moved on.
        expect(l.getExperiment(run.id, 0)?.trials).toHaveLength(2);
        expect(l.listExperiments(run.id)).toHaveLength(2);
      });

      it("cannot be corrupted through returned objects, returned lists or the inputs given to it", () => {
        const l = fresh();
        const run = l.createRun(newRun());
        const params = { LR: 0.1 };
        const env = { AUTOLAB_SEED: "7" };
        const a = l.addExperiment(newExperiment(run.id, 0, { params }));
        l.addExperiment(newExperiment(run.id, 1));
        const id = l.startTrial({ ...trialOf(a.id, 1), env });
        const result = trialResult({ metrics: { val_bpb: 1.5 }, progress: [[0.5, 2]] });
        l.finishTrial(id, result, "/logs");
        const before = structuredClone(l.listExperiments(run.id));
        params.LR = 99;
        env.AUTOLAB_SEED = "99";
        result.metrics.val_bpb = 99;
        (result.progress as Array<[number, number]>).push([1, 1]);
        const list = l.listExperiments(run.id);
        list.reverse();
        list.push(list[0] as (typeof list)[0]);
        const got = l.getExperiment(run.id, 0);
        // Writing to a returned record either throws (frozen) or changes only the caller's copy.
        const attempts: Array<() => void> = [
          () => Object.assign(got as object, { hypothesis: "rewritten" }),
          () => got?.trials.push(got.trials[0] as (typeof got.trials)[0]),
          () => Object.assign(got?.params ?? {}, { LR: 42 }),
          () => Object.assign(got?.trials[0]?.result?.metrics ?? {}, { val_bpb: 42 }),
          () => Object.assign(got?.trials[0]?.env ?? {}, { AUTOLAB_SEED: "42" }),
        ];
        for (const attempt of attempts) {
          try {
            attempt();
          } catch {
            // frozen: fine
          }
        }
        expect(l.listExperiments(run.id)).toEqual(before);
        expect(l.getExperiment(run.id, 0)).toEqual(before[0]);
        expect(l.getExperiment(run.id, 0)?.params).toEqual({ LR: 0.1 });
      });

      it("sees experiments, trials, results and decisions written by another ledger on the same store", () => {
        if (!opts.openAnother) return;
        const l = fresh();
        const run = l.createRun(newRun());
        const e0 = l.addExperiment(newExperiment(run.id, 0));
        const t0 = l.startTrial(trialOf(e0.id, 1));
        expect(l.listExperiments(run.id)).toHaveLength(1);
        expect(l.getExperiment(run.id, 0)?.trials).toHaveLength(1);

        const other = opts.openAnother(l);
        open.push(other);
        const check = () => {
          const fresh = opts.openAnother?.(l) as Ledger;
          open.push(fresh);
          const truth = fresh.listExperiments(run.id);
          expect(l.listExperiments(run.id)).toEqual(truth);
          for (const e of truth) expect(l.getExperiment(run.id, e.n)).toEqual(e);
          fresh.close();
        };

        // The other finishes our trial, decides our experiment, adds one below and one above.
        other.finishTrial(t0, trialResult(), "/logs/0/1");
        expect(l.getExperiment(run.id, 0)?.trials[0]?.result?.status).toBe("ok");
        other.decide(e0.id, { action: "keep", reason: "baseline", metric: 1 });
        expect(l.getExperiment(run.id, 0)?.decision?.action).toBe("keep");
        const e5 = other.addExperiment(newExperiment(run.id, 5));
        const e3 = other.addExperiment(newExperiment(run.id, 3));
        expect(l.listExperiments(run.id).map((e) => e.n)).toEqual([0, 3, 5]);
        check();

        // Interleaved without reads in between: each side's rows all show.
        const t5 = other.startTrial(trialOf(e5.id, 1));
        other.addExperiment(newExperiment(run.id, 2));
        const e4 = l.addExperiment(newExperiment(run.id, 4));
        const t4 = l.startTrial(trialOf(e4.id, 1));
        other.finishTrial(t5, trialResult({ status: "crash", reason: "exit 1" }), "/logs/5/1");
        l.finishTrial(t4, trialResult(), "/logs/4/1");
        other.decide(e4.id, { action: "discard", reason: "worse", metric: 2 });
        l.decide(e5.id, { action: "crash", reason: "exit 1" });
        expect(l.listExperiments(run.id).map((e) => e.n)).toEqual([0, 2, 3, 4, 5]);
        expect(l.getExperiment(run.id, 4)?.decision?.action).toBe("discard");
        expect(l.getExperiment(run.id, 5)?.trials[0]?.result?.status).toBe("crash");
        check();

        // A note from another process changes no experiment; a new trial of a decided one shows.
        other.addNote(run.id, e0.id, "noted elsewhere");
        check();
        other.startTrial(trialOf(e0.id, 2));
        l.startTrial(trialOf(e3.id, 1));
        expect(l.getExperiment(run.id, 0)?.trials.map((t) => t.attempt)).toEqual([1, 2]);
        expect(l.getExperiment(run.id, 3)?.trials.map((t) => t.attempt)).toEqual([1]);
        check();

        // And the other sees ours.
        l.addExperiment(newExperiment(run.id, 6));
        expect(other.getExperiment(run.id, 6)?.n).toBe(6);
        expect(other.listExperiments(run.id)).toEqual(l.listExperiments(run.id));
      });
    });

    it("can be closed twice", () => {
      const l = fresh();
      l.close();
      expect(() => l.close()).not.toThrow();
    });
  });
}
