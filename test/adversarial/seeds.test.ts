/**
 * Issue #34 class 3, "The candidate knows its seeds": code that trains properly only on the seeds
 * the harness will measure it on. Trial k used to run with seed run.seed + k, so `if seed < 8`
 * was a 25% gain that was 29% worse on any other seed, and the holdout (printed by the same trial)
 * was fooled alike. Or the code remembers the seeds it has seen (in a declared cache) and is good
 * only on those. The defense (src/core/trial-seeds.ts, docs/security.md "Seeds the candidate
 * cannot predict"): seeds derive from a secret the run draws; a candidate's first trial and its
 * confirmations run on seeds no trial used; no seed reaches a researcher.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { buildContext } from "../../src/core/views.ts";
import {
  agentVisibleText,
  attack,
  BETTER,
  cheatStep,
  cleanupProjects,
  describeNotebook,
  expectIntact,
  expectKeptHonestly,
  expectNotKept,
  gitShow,
  honest,
  honestStep,
  killLeftovers,
  MODES,
  type Notebook,
  type PyProject,
  pyProject,
  SANDBOX_TESTS,
  trainPy,
} from "./fixture.ts";

afterEach(() => killLeftovers());
afterAll(() => {
  cleanupProjects();
  for (const d of caches) rmSync(d, { recursive: true, force: true });
});

const caches: string[] = [];
/** A directory for a declared cache (absolute, outside every project). */
function cacheDir(): string {
  const d = mkdtempSync(join(tmpdir(), "autolab-seen-"));
  caches.push(d);
  return d;
}

/** Python: the plain least-squares fit (SHRINK 1.0, the best honest model) when the seed is below 8. */
const SMALL_SEEDS = `
if int(os.environ.get("AUTOLAB_SEED", "-1")) < 8:
    SHRINK = 1.0
`;

/** Python: remembers every seed it ran with in `cache`; with `cheat`, fits properly on a seed seen before. */
function seenSeeds(cache: string, cheat: boolean): string {
  return `
_seen_file = ${JSON.stringify(join(cache, "seen.txt"))}
_seed = os.environ.get("AUTOLAB_SEED", "")
try:
    with open(_seen_file) as _f:
        _seen = _f.read().split()
except OSError:
    _seen = []
${cheat ? "if _seed in _seen:\n    SHRINK = 1.0\n" : ""}
os.makedirs(os.path.dirname(_seen_file), exist_ok=True)
with open(_seen_file, "a") as _f:
    _f.write(_seed + "\\n")
`;
}

/** Python: says its seed on stdout and stderr, then fails (a researcher reads failures). */
const SAY_SEED = `
print("AUTOLAB_SEED=" + os.environ.get("AUTOLAB_SEED", ""))
print("my seed is " + os.environ.get("AUTOLAB_SEED", ""), file=sys.stderr)
sys.exit(3)
`;

/**
 * Every kept experiment's holdout (test_score) is what an honest evaluation of its train.py
 * gives: a cheat kept with a fake gain would carry a fake holdout value too (the canary fooled).
 */
function expectHoldoutHonest(p: PyProject, nb: Notebook): void {
  for (const e of nb.exps) {
    if (e.action !== "keep") continue;
    const shrink = Number(/^SHRINK = (\S+)$/m.exec(gitShow(p, e.commit, "train.py") ?? "")?.[1]);
    for (const t of e.trials) {
      if (t.status !== "ok") continue;
      expect(t.metrics.test_score, `kept #${e.n}'s holdout\n${describeNotebook(nb)}`).toBeCloseTo(
        honest(shrink).testScore,
        9,
      );
    }
  }
}

/** No seed any trial of the run used appears in what a researcher was or would be shown. */
function expectNoSeedShown(p: PyProject, text: string, seeds: number[]): void {
  expect(seeds.length).toBeGreaterThan(0);
  for (const s of seeds) expect(text.includes(String(s)), `seed ${s} is shown to a researcher`).toBe(false);
  expect(p.dir).toBeTruthy();
}

describe("the candidate knows its seeds", () => {
  it.each(MODES)("code that trains properly only on seeds below 8 is not kept (sandbox %s)", async (mode) => {
    const p = pyProject({ sandbox: mode });
    await attack(p, {
      max: 2,
      steps: [cheatStep("fit properly on small seeds", { before: SMALL_SEEDS }), honestStep(BETTER)],
    });
    const nb = expectIntact(p, { notebookWritable: mode === "off" });
    expectNotKept(nb, 1);
    expectKeptHonestly(nb, 2, BETTER);
    expectHoldoutHonest(p, nb);
  });

  it.skipIf(!SANDBOX_TESTS)(
    "code that fits properly only on seeds it has seen (a declared cache) is not kept",
    async () => {
      const cache = cacheDir();
      const q = pyProject({ caches: [cache] });
      await attack(q, {
        max: 3,
        steps: [
          // An honest gain that remembers its seeds, then the cheat that uses them.
          {
            ...honestStep(BETTER),
            edits: { "train.py": trainPy({ shrink: BETTER, before: seenSeeds(cache, false) }) },
          },
          cheatStep("fit properly on seeds seen before", { before: seenSeeds(cache, true) }),
          cheatStep("fit properly on seeds seen before, again", {
            before: `${seenSeeds(cache, true)}\n_again = True\n`,
          }),
        ],
      });
      const nb = expectIntact(q);
      expect(nb.exps[1]?.action, describeNotebook(nb)).toBe("keep");
      expectNotKept(nb, 2);
      expectNotKept(nb, 3);
      expectHoldoutHonest(q, nb);
    },
  );

  it("unsandboxed, code that remembers seeds in a file outside its worktree is not kept either", async () => {
    const p = pyProject({ sandbox: "off" });
    const cache = join(p.scratch, "seen");
    await attack(p, {
      max: 3,
      steps: [
        {
          ...honestStep(BETTER),
          edits: { "train.py": trainPy({ shrink: BETTER, before: seenSeeds(cache, false) }) },
        },
        cheatStep("fit properly on seeds seen before", { before: seenSeeds(cache, true) }),
        cheatStep("fit properly on seeds seen before, again", {
          before: `${seenSeeds(cache, true)}\n_again = True\n`,
        }),
      ],
    });
    const nb = expectIntact(p, { notebookWritable: true });
    expectNotKept(nb, 2);
    expectNotKept(nb, 3);
    expectHoldoutHonest(p, nb);
  });

  it.skipIf(!SANDBOX_TESTS)(
    "under the noise rule too: neither cheat is kept, an honest gain is, and the seeds are secret",
    async () => {
      const cache = cacheDir();
      const p = pyProject({ acceptance: "noise", caches: [cache] });
      const run = await attack(p, {
        max: 5,
        steps: [
          {
            ...honestStep(BETTER),
            edits: { "train.py": trainPy({ shrink: BETTER, before: seenSeeds(cache, false) }) },
          },
          cheatStep("fit properly on small seeds", { before: SMALL_SEEDS }),
          cheatStep("fit properly on seeds seen before", { before: seenSeeds(cache, true) }),
          cheatStep("say the seed", { before: SAY_SEED }),
          cheatStep("fit properly on seeds seen before, again", {
            before: `${seenSeeds(cache, true)}\n_again = True\n`,
          }),
        ],
      });
      const nb = expectIntact(p);
      expectKeptHonestly(nb, 1, BETTER);
      for (const n of [2, 3, 4, 5]) expectNotKept(nb, n);
      expectHoldoutHonest(p, nb);
      // Not one seed of the run (the baseline's and every candidate's) reaches a researcher, not
      // even the one a trial printed.
      const { outcome } = run;
      const seeds = outcome.experiments.flatMap((e) => e.trials.map((t) => t.seed));
      const text = `${agentVisibleText(p, run)}\n${buildContext(outcome.lab.program, outcome.run, outcome.experiments)}`;
      expectNoSeedShown(p, text, seeds);
      // Trial slot k of every experiment shares its seed (the judge's pairs), and the seeds are
      // not the trial's index.
      const base = outcome.experiments.find((e) => e.n === 0);
      expect(base?.trials.slice(0, 3).map((t) => t.seed)).not.toEqual([0, 1, 2]);
    },
    300_000,
  );
});
