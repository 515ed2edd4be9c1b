import { afterEach, describe, expect, it } from "vitest";
import type { KnowledgeEntry, KnowledgeStore } from "../../src/core/knowledge.ts";

/**
 * The promises every KnowledgeStore keeps (SQLite with FTS5, SQLite's word scan without it).
 * `make` gives a fresh, empty store; `reopen` a second handle on the same store (another run).
 */
export interface KnowledgeContractOptions {
  make: () => KnowledgeStore;
  reopen?: (store: KnowledgeStore) => KnowledgeStore;
}

export function entry(over: Partial<KnowledgeEntry> = {}): KnowledgeEntry {
  return {
    project: "/home/user/tiny-lm/program.md",
    projectName: "tiny-lm",
    run: "nov22",
    n: 1,
    date: "2026-11-22T10:00:00.000Z",
    hypothesis: "raise the learning rate",
    action: "discard",
    reason: "not better than the best",
    metric: "val_bpb",
    direction: "minimize",
    ...over,
  };
}

export function knowledgeContract(name: string, opts: KnowledgeContractOptions): void {
  describe(`KnowledgeStore contract: ${name}`, () => {
    const open: KnowledgeStore[] = [];
    const make = () => {
      const s = opts.make();
      open.push(s);
      return s;
    };
    afterEach(() => {
      for (const s of open.splice(0)) s.close();
    });

    it("finds a recorded entry by a word of its hypothesis, mechanism or reason, with every field back", () => {
      const s = make();
      const e = entry({
        hypothesis: "cosine warmup schedule",
        mechanism: "smaller early updates avoid divergence",
        action: "keep",
        reason: "credibly better",
        value: 1.9,
        parentValue: 2.1,
        gain: 0.2,
      });
      expect(s.record([e])).toBe(1);
      for (const q of ["warmup", "divergence", "credibly"]) {
        const hits = s.search(q, 5);
        expect(
          hits.map((h) => h.hypothesis),
          q,
        ).toEqual(["cosine warmup schedule"]);
      }
      const [hit] = s.search("warmup", 5);
      const { score, ...back } = hit as NonNullable<typeof hit>;
      expect(back).toEqual(e);
      expect(typeof score).toBe("number");
    });

    it("is idempotent by (project, run, n): recording again adds nothing and keeps the first", () => {
      const s = make();
      expect(s.record([entry({ n: 1 }), entry({ n: 2, hypothesis: "dropout" })])).toBe(2);
      expect(
        s.record([entry({ n: 1, hypothesis: "changed" }), entry({ n: 3, hypothesis: "dropout more" })]),
      ).toBe(1);
      expect(s.stats().entries).toBe(3);
      expect(s.search("changed", 5)).toEqual([]);
      // The same n in another run or another project is another entry.
      expect(s.record([entry({ run: "nov23" }), entry({ project: "/other/program.md" })])).toBe(2);
      expect(s.stats()).toMatchObject({ entries: 5, runs: 3, projects: 2 });
    });

    it("ranks the closer entry first and returns at most k", () => {
      const s = make();
      s.record([
        entry({ n: 1, hypothesis: "learning rate warmup with cosine decay" }),
        entry({ n: 2, hypothesis: "bigger embedding" }),
        entry({ n: 3, hypothesis: "warmup", mechanism: "nothing else" }),
        entry({ n: 4, hypothesis: "attention heads" }),
      ]);
      const hits = s.search("learning rate warmup cosine", 2);
      expect(hits).toHaveLength(2);
      expect(hits[0]?.n).toBe(1);
      expect(hits[1]?.n).toBe(3);
      expect((hits[0]?.score ?? 0) >= (hits[1]?.score ?? 0)).toBe(true);
    });

    it("leaves out the excluded run of the excluded project, and only it", () => {
      const s = make();
      s.record([
        entry({ run: "mine", hypothesis: "warmup mine" }),
        entry({ run: "theirs", hypothesis: "warmup theirs" }),
        entry({ project: "/elsewhere/program.md", run: "mine", hypothesis: "warmup elsewhere" }),
      ]);
      const hits = s.search("warmup", 10, { exclude: { project: entry().project, run: "mine" } });
      expect(hits.map((h) => h.hypothesis).sort()).toEqual(["warmup elsewhere", "warmup theirs"]);
    });

    it("takes any text as a query: quotes, operators and punctuation are words, never syntax", () => {
      const s = make();
      s.record([entry({ hypothesis: 'try "AND" OR NOT near(x) * ^ val_bpb' })]);
      for (const q of ['"', "AND OR NOT", "near(", "*", "^", "-x", "x:y", "'; DROP TABLE entries; --"]) {
        expect(() => s.search(q, 5), q).not.toThrow();
      }
      expect(s.search("", 5)).toEqual([]);
      expect(s.search("   !!! ", 5)).toEqual([]);
      expect(s.search("near", 5)).toHaveLength(1);
      expect(s.stats().entries).toBe(1);
    });

    it("keeps untrusted text byte for byte (escaping is the reader's job)", () => {
      const s = make();
      const hostile = "warmup \u001b]0;pwned\u0007 <script>alert(1)</script>\nsecond line";
      s.record([entry({ hypothesis: hostile, mechanism: "\u009b2J" })]);
      const [hit] = s.search("warmup", 1);
      expect(hit?.hypothesis).toBe(hostile);
      expect(hit?.mechanism).toBe("\u009b2J");
    });

    it("leaves optional numbers out when absent (a crash has no value)", () => {
      const s = make();
      s.record([entry({ action: "crash", reason: "exit 1 segfault" })]);
      const [hit] = s.search("segfault", 1);
      expect(hit).toBeDefined();
      expect("value" in (hit as object)).toBe(false);
      expect("gain" in (hit as object)).toBe(false);
      expect(hit?.action).toBe("crash");
    });

    if (opts.reopen) {
      const reopen = opts.reopen;
      it("is shared: what one handle records another finds", () => {
        const a = make();
        const b = reopen(a);
        open.push(b);
        a.record([entry({ hypothesis: "shared warmup" })]);
        expect(b.search("warmup", 5).map((h) => h.hypothesis)).toEqual(["shared warmup"]);
        b.record([entry({ n: 2, hypothesis: "second warmup" })]);
        expect(a.stats().entries).toBe(2);
      });
    }
  });
}
