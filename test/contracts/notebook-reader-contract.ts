import { afterEach, describe, expect, it } from "vitest";
import type { NotebookEvent, ReadableNotebook } from "../../src/core/notebook-reader.ts";
import { newExperiment, newRun, newTrial, trialResult } from "./ledger-contract.ts";

/**
 * The promises every NotebookReader keeps (src/core/notebook-reader.ts): what the dashboard,
 * its SSE stream and `autolab watch` rely on when another process writes the notebook. Run
 * beside the Ledger contract against each notebook (test/ledger.contract.test.ts).
 */
export interface NotebookReaderContractOptions {
  /** Opens another notebook over the same store (another process). Absent for memory. */
  openAnother?: (notebook: ReadableNotebook) => ReadableNotebook;
}

function without<T extends object>(o: T, ...keys: string[]): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([k]) => !keys.includes(k))) as Partial<T>;
}

/** The fields a viewer reads of an event (the `at` timestamps are the store's clock). */
function shape(e: NotebookEvent): Record<string, unknown> {
  const { at, ...rest } = e;
  expect(Number.isNaN(Date.parse(at))).toBe(false);
  if (rest.type === "trial_started") {
    const { startedAt, ...other } = rest;
    expect(startedAt).toBe(Date.parse(at));
    return other;
  }
  return rest;
}

export function notebookReaderContract(
  name: string,
  make: () => ReadableNotebook,
  opts: NotebookReaderContractOptions = {},
): void {
  describe(`NotebookReader contract: ${name}`, () => {
    const open: ReadableNotebook[] = [];
    const fresh = (): ReadableNotebook => {
      const l = make();
      open.push(l);
      return l;
    };
    afterEach(() => {
      for (const l of open.splice(0)) l.close();
    });

    it("changes its version with every write of its own, and only then", () => {
      const l = fresh();
      const seen = new Set([l.version()]);
      expect(l.version()).toBe(l.version());
      const step = (write: () => void) => {
        write();
        const v = l.version();
        expect(seen.has(v)).toBe(false);
        seen.add(v);
        l.listRuns(); // reads change nothing
        expect(l.version()).toBe(v);
      };
      let runId = 0;
      let expId = 0;
      let trialId = 0;
      step(() => {
        runId = l.createRun(newRun()).id;
      });
      step(() => {
        expId = l.addExperiment(newExperiment(runId, 0)).id;
      });
      step(() => {
        trialId = l.startTrial(newTrial(expId, 1));
      });
      step(() => l.finishTrial(trialId, trialResult(), "/logs/0/1"));
      step(() => l.decide(expId, { action: "keep", reason: "baseline", metric: 1 }));
      step(() => l.addNote(runId, null, "a note"));
      step(() => l.startSession(runId, 2));
    });

    it("changes its version when another notebook on the same store writes", () => {
      if (!opts.openAnother) return;
      const l = fresh();
      const run = l.createRun(newRun());
      const other = opts.openAnother(l);
      open.push(other);
      const before = l.version();
      other.addExperiment(newExperiment(run.id, 0));
      const after = l.version();
      expect(after).not.toBe(before);
      expect(l.version()).toBe(after);
      other.addNote(run.id, null, "from elsewhere");
      expect(l.version()).not.toBe(after);
    });

    it("counts each run's experiments", () => {
      const l = fresh();
      expect(l.experimentCounts()).toEqual(new Map());
      const a = l.createRun(newRun({ tag: "a", branch: "autolab/a" }));
      const b = l.createRun(newRun({ tag: "b", branch: "autolab/b" }));
      l.createRun(newRun({ tag: "c", branch: "autolab/c" }));
      for (const n of [0, 1, 2]) l.addExperiment(newExperiment(a.id, n));
      l.addExperiment(newExperiment(b.id, 0));
      expect(l.experimentCounts()).toEqual(
        new Map([
          [a.id, 3],
          [b.id, 1],
        ]),
      );
    });

    it("feeds the rows written after prime as loop events, in write order, each once", () => {
      const l = fresh();
      const old = l.createRun(newRun({ tag: "old", branch: "autolab/old" }));
      const o0 = l.addExperiment(newExperiment(old.id, 0));
      const ot = l.startTrial(newTrial(o0.id, 1));
      const feed = l.eventFeed();
      feed.prime();
      expect(feed.poll()).toEqual([]);

      // The open trial of the primed notebook finishes; its experiment is decided (the best).
      l.finishTrial(ot, trialResult({ metrics: { val_bpb: 1.5 } }), "/logs/0/1");
      l.decide(o0.id, { action: "keep", reason: "baseline", metric: 1.5 });
      expect(feed.poll().map(shape)).toEqual([
        { type: "trial_finished", run: "old", n: 0, attempt: 1, status: "ok", metric: 1.5, wallS: 12.5 },
        {
          type: "decision",
          run: "old",
          n: 0,
          action: "keep",
          reason: "baseline",
          metric: 1.5,
          best: { n: 0, metric: 1.5 },
        },
      ]);
      expect(feed.poll()).toEqual([]);

      // A new run, row by row.
      const run = l.createRun(newRun({ tag: "new", branch: "autolab/new" }));
      const e = l.addExperiment(newExperiment(run.id, 0, { hypothesis: "baseline" }));
      const t = l.startTrial(newTrial(e.id, 1, { slot: 1, budgetMs: 5000, seed: 3 }));
      l.finishTrial(t, trialResult({ status: "crash", reason: "exit 1", metrics: {}, wallS: 2 }), "/logs/1");
      l.decide(e.id, { action: "crash", reason: "exit 1" });
      const events = feed.poll();
      expect(events.map(shape)).toEqual([
        {
          type: "run_started",
          run: "new",
          tag: "new",
          branch: "autolab/new",
          metric: "val_bpb",
          resumed: false,
          experiments: 0,
        },
        { type: "experiment_created", run: "new", n: 0, hypothesis: "baseline", commit: e.commit },
        {
          type: "trial_started",
          run: "new",
          n: 0,
          attempt: 1,
          seed: 3,
          budgetMs: 5000,
          hypothesis: "baseline",
          slot: 1,
        },
        { type: "trial_finished", run: "new", n: 0, attempt: 1, status: "crash", wallS: 2, reason: "exit 1" },
        {
          type: "decision",
          run: "new",
          n: 0,
          action: "crash",
          reason: "exit 1",
          best: { n: -1, metric: Number.NaN },
        },
      ]);
      expect(feed.poll()).toEqual([]);
    });

    it("feeds the advisor's answers as advice events, each once, those before prime not at all", () => {
      const l = fresh();
      const run = l.createRun(newRun({ tag: "adv", branch: "autolab/adv" }));
      const base = { runId: run.id, trigger: "3 discards in a row", decided: 3, afterN: 3, agent: "claude" };
      l.addAdvice({ ...base, verdict: "garbage", ideas: [], reason: "before prime" });
      const feed = l.eventFeed();
      feed.prime();
      l.addAdvice({ ...base, verdict: "ideas", ideas: ["wider", "revisit #2: again"], reason: "" });
      l.addAdvice({ ...base, verdict: "stop", ideas: [], reason: "flat" });
      expect(feed.poll().map(shape)).toEqual([
        {
          type: "advice",
          run: "adv",
          ...without(base, "runId", "decided"),
          verdict: "ideas",
          ideas: ["wider", "revisit #2: again"],
          reason: "",
        },
        {
          type: "advice",
          run: "adv",
          ...without(base, "runId", "decided"),
          verdict: "stop",
          ideas: [],
          reason: "flat",
        },
      ]);
      expect(feed.poll()).toEqual([]);
    });

    it("carries the best as it was right after each decision, trials finishing out of order", () => {
      const l = fresh();
      const run = l.createRun(newRun());
      const feed = l.eventFeed();
      feed.prime();
      const e0 = l.addExperiment(newExperiment(run.id, 0));
      const e1 = l.addExperiment(newExperiment(run.id, 1));
      const t0 = l.startTrial(newTrial(e0.id, 1));
      const t1 = l.startTrial(newTrial(e1.id, 1));
      feed.poll();
      // Parallel slots: the later trial finishes and is decided first. (Polled after each
      // decision: rows of one poll written in the same millisecond keep loop order, not id order.)
      l.finishTrial(t1, trialResult({ metrics: { val_bpb: 2 } }), "/logs/1/1");
      l.decide(e1.id, { action: "keep", reason: "better", metric: 2 });
      const decisions = feed.poll();
      l.finishTrial(t0, trialResult({ metrics: { val_bpb: 3 } }), "/logs/0/1");
      l.decide(e0.id, { action: "discard", reason: "worse", metric: 3 });
      decisions.push(...feed.poll());
      expect(decisions.filter((e) => e.type === "decision").map((d) => [d.n, d.action, d.best])).toEqual([
        [1, "keep", { n: 1, metric: 2 }],
        [0, "discard", { n: 1, metric: 2 }],
      ]);
    });

    it("keeps separate feeds separate, and sees another notebook's writes", () => {
      const l = fresh();
      const run = l.createRun(newRun());
      const a = l.eventFeed();
      const b = l.eventFeed();
      a.prime();
      b.prime();
      l.addExperiment(newExperiment(run.id, 0));
      expect(a.poll().map((e) => e.type)).toEqual(["experiment_created"]);
      expect(a.poll()).toEqual([]);
      expect(b.poll().map((e) => e.type)).toEqual(["experiment_created"]);
      if (!opts.openAnother) return;
      const other = opts.openAnother(l);
      open.push(other);
      other.addExperiment(newExperiment(run.id, 1));
      expect(a.poll().map((e) => [e.type, e.type === "experiment_created" ? e.n : -1])).toEqual([
        ["experiment_created", 1],
      ]);
    });
  });
}
