import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { ExperimentRecord } from "../src/core/ledger.ts";
import {
  freshSeed,
  newSeedKey,
  nextSlot,
  outsideSeeds,
  slotSeed,
  usedSeeds,
} from "../src/core/trial-seeds.ts";
import { failuresText, redactSeeds, SEED_REDACTED } from "../src/core/views.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";

describe("trial seeds (docs/security.md 'Seeds the candidate cannot predict')", () => {
  const run = { seed: 0, seedKey: "k".repeat(64) };

  it("slot k is the key's k-th seed: the same for the same key, unrelated to k, another for another key", () => {
    const slots = [0, 1, 2, 3].map((k) => slotSeed(run, k));
    expect(slots).toEqual([0, 1, 2, 3].map((k) => slotSeed({ ...run }, k)));
    expect(new Set(slots).size).toBe(4);
    for (const s of slots) {
      expect(Number.isInteger(s) && s >= 0 && s < 2 ** 31).toBe(true);
      expect(s).toBeGreaterThan(3);
    }
    expect(slotSeed({ seed: 0, seedKey: newSeedKey() }, 0)).not.toBe(slots[0]);
    expect(newSeedKey()).toMatch(/^[0-9a-f]{64}$/);
    expect(newSeedKey()).not.toBe(newSeedKey());
  });

  it("a run without a key (recorded before it) keeps seed + k", () => {
    expect([0, 1, 2].map((k) => slotSeed({ seed: 5 }, k))).toEqual([5, 6, 7]);
    expect(nextSlot({ seed: 5 }, new Set([5, 6, 8]))).toBe(2);
  });

  it("a fresh seed is none the run used nor an early slot, reproducible from the key", () => {
    const used = new Set([0, 1, 2].map((k) => slotSeed(run, k)));
    const a = freshSeed(run, used);
    expect(used.has(a)).toBe(false);
    expect(freshSeed(run, used)).toBe(a);
    used.add(a);
    const b = freshSeed(run, used);
    expect(b).not.toBe(a);
    for (let k = 0; k < 64; k++) expect(slotSeed(run, k)).not.toBe(b);
    // Without a key: a crypto draw, still never a used seed.
    const legacy = { seed: 0 };
    const u = new Set([0, 1, 2]);
    expect(u.has(freshSeed(legacy, u))).toBe(false);
  });

  it("re-measurement seeds outside the run: distinct, none used", () => {
    const used = new Set([slotSeed(run, 0), slotSeed(run, 1)]);
    const out = outsideSeeds(run, used, 5);
    expect(new Set(out).size).toBe(5);
    for (const s of out) expect(used.has(s)).toBe(false);
    expect(usedSeeds([{ trials: [{ seed: 4 }, { seed: 9 }] }, { trials: [{ seed: 4 }] }])).toEqual(
      new Set([4, 9]),
    );
  });

  it("researchers never see a seed: whole numbers of the run's seeds become [seed]", () => {
    const s = slotSeed(run, 0);
    const text = `exited with code 3: my seed is ${s}; AUTOLAB_SEED=${s}; ${s}1 and 2.5 stay`;
    const out = redactSeeds(text, new Set([s, 2]));
    expect(out).not.toContain(`is ${s};`);
    expect(out).toBe(
      `exited with code 3: my seed is ${SEED_REDACTED}; AUTOLAB_SEED=${SEED_REDACTED}; ${s}1 and 2.5 stay`,
    );
    // `autolab failures` (and the MCP tool of that name) show log tails: redacted too.
    const crashed = {
      n: 1,
      hypothesis: "h",
      trials: [{ seed: s, result: { status: "crash", logTail: `seed ${s}\nTraceback` } }],
      decision: { action: "crash", reason: `exited: seed ${s}` },
    } as unknown as ExperimentRecord;
    const shown = failuresText([crashed], []);
    expect(shown).not.toContain(String(s));
    expect(shown).toContain(SEED_REDACTED);
  });

  it("the notebook keeps the key (runs.seed_key)", () => {
    const dir = mkdtempSync(join(tmpdir(), "autolab-seeds-"));
    try {
      const ledger = new SqliteLedger(join(dir, "lab.db"));
      const made = ledger.createRun({
        tag: "t",
        branch: "autolab/t",
        programPath: "program.md",
        programName: "p",
        metric: "score",
        direction: "minimize",
        baseCommit: "0".repeat(40),
        protectedHashes: {},
        seed: 0,
        seedKey: run.seedKey,
      });
      expect(made.seedKey).toBe(run.seedKey);
      expect(ledger.getRun("t")?.seedKey).toBe(run.seedKey);
      ledger.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
