import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createBuiltinAgent, readKnobParams } from "../src/agents/builtin/builtin-agent.ts";
import { readKnobs } from "../src/agents/builtin/knobs.ts";
import { keyOf, makeDims } from "../src/agents/builtin/space.ts";
import { AutolabError } from "../src/core/errors.ts";
import type { ExperimentView, Knob, Params, Program, ProposalContext } from "../src/core/types.ts";

const TRAIN_PY = `"""A tiny training script."""
import math

# --- hyperparameters (the agent may change these) ---
LEARNING_RATE = 3e-3  # AdamW
HIDDEN: int = 64
DEPTH = 2
DROPOUT = 0.1  # unused by the search

def main():
    print(f"val_loss: {math.log(LEARNING_RATE) * HIDDEN}")
`;

const TRAIN_TS = `import { run } from "./lib.ts";\r
\r
export const WEIGHT_DECAY = 1e-4; // AdamW\r
const BATCH_SIZE = 1_024;\r
\r
run({ WEIGHT_DECAY, BATCH_SIZE });\r
`;

// Protected, and not editable: a knob name here must neither be read nor written.
const PREPARE_PY = "LEARNING_RATE = 1.0\nTIME_BUDGET = 300\n";

const SEARCH: Record<string, Knob> = {
  LEARNING_RATE: { low: 1e-4, high: 1e-1, log: true, int: false },
  HIDDEN: { low: 16, high: 512, log: true, int: true },
  WEIGHT_DECAY: { low: 1e-6, high: 1e-1, log: true, int: false },
  BATCH_SIZE: { low: 64, high: 4096, log: true, int: true },
};

function program(dir: string, search: Record<string, Knob> = SEARCH): Program {
  return {
    path: path.join(dir, "program.md"),
    name: "test",
    objective: { metric: "val_loss", direction: "minimize" },
    run: {
      command: "python train.py",
      budgetMs: 30_000,
      graceMs: 5_000,
      setupTimeoutMs: 60_000,
      evaluateTimeoutMs: 60_000,
    },
    files: { editable: ["train.py", "train.ts"], protected: ["prepare.py"], holdout: [] },
    outputs: [],
    sandbox: { enabled: false, required: false, network: false, caches: [], env: [], limits: {} },
    metrics: { holdout: [] },
    constraints: [],
    acceptance: "greedy",
    agent: { backend: "builtin", args: [], env: {} },
    search,
    directions: "",
  };
}

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function fixture(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), "autolab-builtin-"));
  dirs.push(dir);
  await writeFile(path.join(dir, "train.py"), TRAIN_PY);
  await writeFile(path.join(dir, "train.ts"), TRAIN_TS);
  await writeFile(path.join(dir, "prepare.py"), PREPARE_PY);
  return dir;
}

function context(dir: string, overrides: Partial<ProposalContext> = {}): ProposalContext {
  return {
    worktree: dir,
    program: program(dir),
    best: { n: 0, metric: 1.5 },
    history: [{ n: 0, hypothesis: "baseline", action: "keep", metric: 1.5 }],
    contextText: "",
    logDir: dir,
    ...overrides,
  };
}

async function readAll(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const f of ["train.py", "train.ts", "prepare.py"])
    out[f] = await readFile(path.join(dir, f), "latin1");
  return out;
}

/** Lines that differ between two versions of a file with the same number of lines. */
function changedLines(before: string, after: string): { before: string; after: string }[] {
  const a = before.split("\n");
  const b = after.split("\n");
  expect(b.length).toBe(a.length);
  return a.flatMap((line, i) => (line === b[i] ? [] : [{ before: line, after: b[i] as string }]));
}

function paramsInFiles(files: Record<string, string>, names: string[], search = SEARCH): Params {
  const knobs = readKnobs(
    [
      { path: "train.py", text: files["train.py"] as string },
      { path: "train.ts", text: files["train.ts"] as string },
    ],
    Object.fromEntries(names.map((n) => [n, search[n] as Knob])),
  );
  return Object.fromEntries([...knobs].map(([name, loc]) => [name, loc.value]));
}

describe("builtin agent", () => {
  it("edits exactly the knob lines, and params match the files", async () => {
    const dir = await fixture();
    const before = await readAll(dir);
    const agent = createBuiltinAgent({ seed: 1 });
    expect(agent.name).toBe("builtin");
    const proposal = await agent.propose(context(dir));
    const after = await readAll(dir);

    expect(after["prepare.py"]).toBe(before["prepare.py"]);
    const names = Object.keys(SEARCH);
    // The full configuration, as written.
    expect(Object.keys(proposal.params ?? {}).sort()).toEqual([...names].sort());
    expect(paramsInFiles(after, names)).toEqual(proposal.params);

    const changes = [
      ...changedLines(before["train.py"] as string, after["train.py"] as string),
      ...changedLines(before["train.ts"] as string, after["train.ts"] as string),
    ];
    expect(changes.length).toBeGreaterThan(0);
    for (const { before: b, after: a } of changes) {
      // Same line apart from the number: prefix, comment and CRLF kept.
      const shape = (line: string) => line.replace(/=([ \t]*)[-+]?[\d_.]+(?:e[-+]?\d+)?/, "=$1#");
      expect(shape(a)).toBe(shape(b));
      expect(names.some((n) => b.includes(n))).toBe(true);
    }
    expect(
      after["train.ts"]?.split("\n").every((l, i, all) => i === all.length - 1 || l.endsWith("\r")),
    ).toBe(true);

    // "LEARNING_RATE 0.003 → 0.012, HIDDEN 64 → 128": changed knobs only, formatted values.
    const parts = proposal.hypothesis.split(", ");
    expect(parts.length).toBe(changes.length);
    const initial = { LEARNING_RATE: "0.003", HIDDEN: "64", WEIGHT_DECAY: "1e-4", BATCH_SIZE: "1024" };
    for (const part of parts) {
      const m = /^([A-Z_]+) (\S+) → (\S+)$/.exec(part);
      expect(m, part).not.toBeNull();
      const [, name, from, to] = m as unknown as [string, keyof typeof initial, string, string];
      expect(from).toBe(initial[name]);
      expect(Number(to)).toBe(proposal.params?.[name]);
    }
    expect(proposal.mechanism).toBe("random exploration (startup 2 of 5)");
  });

  it("is deterministic for a seed and history, and varies with the history length", async () => {
    const [a, b, c] = [await fixture(), await fixture(), await fixture()];
    const pa = await createBuiltinAgent({ seed: 7 }).propose(context(a));
    const pb = await createBuiltinAgent({ seed: 7 }).propose(context(b));
    expect(pb).toEqual(pa);
    expect(await readAll(b)).toEqual(await readAll(a));
    const longer: ExperimentView[] = [
      { n: 0, hypothesis: "baseline", action: "keep", metric: 1.5 },
      { n: 1, hypothesis: "x", action: "crash", params: { LEARNING_RATE: 0.05, HIDDEN: 300 } },
    ];
    const pc = await createBuiltinAgent({ seed: 7 }).propose(context(c, { history: longer }));
    expect(pc.params).not.toEqual(pa.params);
  });

  it("runs a search loop: TPE after startup, no repeats, always a change, improves", async () => {
    const dir = await fixture();
    // Optimum: LEARNING_RATE 0.01, HIDDEN 256, WEIGHT_DECAY 1e-3, BATCH_SIZE 512.
    const loss = (p: Params) =>
      (Math.log10(p.LEARNING_RATE as number) + 2) ** 2 +
      (Math.log2(p.HIDDEN as number) - 8) ** 2 / 4 +
      (Math.log10(p.WEIGHT_DECAY as number) + 3) ** 2 / 4 +
      (Math.log2(p.BATCH_SIZE as number) - 9) ** 2 / 4;
    const agent = createBuiltinAgent({ seed: 3 });
    const names = Object.keys(SEARCH);
    let bestFiles = await readAll(dir);
    const baseline = paramsInFiles(bestFiles, names);
    let best = { n: 0, metric: loss(baseline), params: baseline };
    // The harness records the baseline's params (readKnobParams), so it stays an observation
    // after the best moves on.
    const history: ExperimentView[] = [
      {
        n: 0,
        hypothesis: "baseline",
        action: "keep",
        metric: best.metric,
        params: await readKnobParams(dir, program(dir)),
      },
    ];
    expect(history[0]?.params).toEqual(baseline);
    const seen = new Set([JSON.stringify(baseline)]);
    const mechanisms: string[] = [];
    for (let n = 1; n <= 20; n++) {
      const p = await agent.propose(context(dir, { best, history: [...history] }));
      const params = p.params as Params;
      expect(paramsInFiles(await readAll(dir), names)).toEqual(params);
      expect(params).not.toEqual(best.params);
      expect(seen.has(JSON.stringify(params))).toBe(false);
      seen.add(JSON.stringify(params));
      mechanisms.push(p.mechanism ?? "");
      // A crash now and then: it must count as worst, not break anything.
      const crashed = n % 7 === 0;
      const metric = loss(params);
      const keep = !crashed && metric < best.metric;
      history.push({
        n,
        hypothesis: p.hypothesis,
        params,
        action: crashed ? "crash" : keep ? "keep" : "discard",
        ...(crashed ? {} : { metric }),
      });
      if (keep) {
        best = { n, metric, params };
        bestFiles = await readAll(dir);
      } else {
        for (const [f, text] of Object.entries(bestFiles)) await writeFile(path.join(dir, f), text, "latin1");
      }
    }
    expect(mechanisms.slice(0, 4)).toEqual([2, 3, 4, 5].map((k) => `random exploration (startup ${k} of 5)`));
    expect(mechanisms[4]).toMatch(
      /^GP: expected improvement \S+ over the best predicted value \S+; this one is predicted \S+ \(model of 5 configurations, trial noise σ ≈ \S+\)$/,
    );
    expect(mechanisms[19]).toMatch(
      /^GP: .*\(model of 20 configurations, .*\) \(2 failed counted as worst\)$/,
    );
    expect(best.metric).toBeLessThan(loss(baseline) / 2);
  });

  it("uses the best's recorded params and takes pending experiments as constant liars, not failures", async () => {
    const dir = await fixture();
    const history: ExperimentView[] = [
      { n: 0, hypothesis: "baseline", action: "keep", metric: 1.5 },
      ...[1, 2, 3, 4, 5].map((n) => ({
        n,
        hypothesis: `h${n}`,
        params: { LEARNING_RATE: 0.001 * n, HIDDEN: 32 * n, WEIGHT_DECAY: 1e-4, BATCH_SIZE: 1024 },
        action: "discard" as const,
        metric: 2 + n,
      })),
      {
        n: 6,
        hypothesis: "queued",
        params: { LEARNING_RATE: 0.02, HIDDEN: 100, WEIGHT_DECAY: 1e-4, BATCH_SIZE: 1024 },
      },
    ];
    const p = await createBuiltinAgent({ sampler: "tpe" }).propose(context(dir, { history }));
    expect(p.mechanism).toBe(
      "TPE: sampled from the density of the best 2 of 7 observed configurations; 1 pending configuration counted with the worse group (constant liar)",
    );
    const g = await createBuiltinAgent().propose(context(dir, { history }));
    expect(g.mechanism).toMatch(
      /^GP: .* over the best predicted value (\S+); .*\(model of 7 configurations, .*\); 1 pending configuration fantasized at the best predicted value \1 \(constant liar\)$/,
    );
    // A pending experiment whose first trial finished is a measurement, as far as it goes; a
    // crash is a failure.
    const later: ExperimentView[] = [
      ...history.slice(0, -1),
      { ...(history.at(-1) as ExperimentView), metric: 2.5, values: [2.5] },
      {
        n: 7,
        hypothesis: "crashed",
        params: { ...(history[1]?.params as Record<string, number>), HIDDEN: 40 },
        action: "crash",
      },
      ...[8, 9].map((n) => ({
        n,
        hypothesis: "queued",
        params: { LEARNING_RATE: 0.05, HIDDEN: 20 * n, WEIGHT_DECAY: 1e-3, BATCH_SIZE: 512 },
      })),
    ];
    const g2 = await createBuiltinAgent().propose(context(dir, { history: later }));
    expect(g2.mechanism).toMatch(
      /\(model of 10 configurations, .*\) \(1 failed counted as worst\); 2 pending configurations fantasized at the best predicted value \S+ \(constant liar\)$/,
    );
    expect([8, 9].map((n) => later[n]?.params)).not.toContainEqual(g2.params);
  });

  it("says when a Thompson draw chose the proposal (the GP's escape from a measured-out basin)", async () => {
    const dir = await fixture();
    const history: ExperimentView[] = [
      { n: 0, hypothesis: "baseline", action: "keep", metric: 1.5 },
      ...[1, 2, 3, 4, 5, 6].map((n) => ({
        n,
        hypothesis: `h${n}`,
        params: { LEARNING_RATE: 0.001 * n, HIDDEN: 32 * n, WEIGHT_DECAY: 1e-4, BATCH_SIZE: 1024 },
        action: "discard" as const,
        metric: 2 + n,
      })),
    ];
    const drawn = await createBuiltinAgent({ escape: { below: 1e9, to: "thompson" } }).propose(
      context(dir, { history }),
    );
    expect(drawn.mechanism).toMatch(
      /^GP: the best of one draw from the posterior \(Thompson sampling\); expected improvement \S+ over the best predicted value/,
    );
    const plain = await createBuiltinAgent({ escape: false }).propose(context(dir, { history }));
    expect(plain.mechanism).toMatch(/^GP: expected improvement \S+ over the best predicted value/);
  });

  it("asks for search: knobs when there are none", async () => {
    const dir = await fixture();
    const ctx = context(dir, { program: program(dir, {}) });
    const err = await createBuiltinAgent()
      .propose(ctx)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AutolabError);
    expect((err as AutolabError).code).toBe("NO_SEARCH_SPACE");
    expect((err as AutolabError).hint).toContain("LEARNING_RATE: { low: 1e-4, high: 1e-1, log: true }");
    expect((err as AutolabError).hint).toContain("choose an agent that edits code");
  });

  it("names the knob and the editable files when a knob is missing", async () => {
    const dir = await fixture();
    const search = { ...SEARCH, MOMENTUM: { low: 0.5, high: 0.99, log: false, int: false } };
    const err = await createBuiltinAgent()
      .propose(context(dir, { program: program(dir, search) }))
      .catch((e: unknown) => e);
    expect((err as AutolabError).code).toBe("KNOB_NOT_FOUND");
    expect((err as AutolabError).message).toContain("MOMENTUM");
    expect((err as AutolabError).message).toContain("train.py, train.ts");
    // Nothing was written.
    expect(await readFile(path.join(dir, "train.py"), "utf8")).toBe(TRAIN_PY);
  });
});

describe("builtin agent: categorical and conditional knobs", () => {
  const MIXED_PY = `# hyperparameters
OPTIMIZER = 'adam'  # adam, sgd or lion
MOMENTUM = 0.6  # sgd only
USE_BN: bool = True
LEARNING_RATE = 3e-3
HIDDEN: int = 64
`;
  const MIXED: Record<string, Knob> = {
    OPTIMIZER: { choices: ["adam", "sgd", "lion"] },
    MOMENTUM: { low: 0.5, high: 0.99, log: false, int: false, when: { OPTIMIZER: ["sgd"] } },
    USE_BN: { choices: [true, false] },
    LEARNING_RATE: { low: 1e-4, high: 1e-1, log: true, int: false },
    HIDDEN: { low: 16, high: 512, log: true, int: true },
  };
  // Best: sgd with momentum 0.9, batch norm on, LEARNING_RATE 0.01, HIDDEN 128.
  const loss = (p: Params) =>
    ({ adam: 0.5, sgd: 0, lion: 0.8 })[p.OPTIMIZER as "adam"] +
    (p.OPTIMIZER === "sgd" ? 4 * ((p.MOMENTUM as number) - 0.9) ** 2 : 0) +
    (p.USE_BN ? 0 : 0.3) +
    (Math.log10(p.LEARNING_RATE as number) + 2) ** 2 +
    (Math.log2(p.HIDDEN as number) - 7) ** 2 / 8;

  async function mixedFixture(): Promise<string> {
    const dir = await mkdtemp(path.join(tmpdir(), "autolab-builtin-mixed-"));
    dirs.push(dir);
    await writeFile(path.join(dir, "train.py"), MIXED_PY);
    return dir;
  }

  function mixedProgram(dir: string): Program {
    return { ...program(dir, MIXED), files: { editable: ["train.py"], protected: [], holdout: [] } };
  }

  const inFiles = async (dir: string) => readKnobParams(dir, mixedProgram(dir)).then((p) => p as Params);
  const lineOf = (text: string, name: string) => text.split("\n").find((l) => l.startsWith(name)) as string;

  for (const sampler of ["gp", "tpe"] as const) {
    it(`${sampler}: writes choices in the file's style, leaves inactive knobs alone, never repeats, improves`, async () => {
      const dir = await mixedFixture();
      const dims = makeDims(MIXED);
      const baseline = await inFiles(dir);
      expect(baseline).toEqual({
        OPTIMIZER: "adam",
        MOMENTUM: 0.6,
        USE_BN: true,
        LEARNING_RATE: 3e-3,
        HIDDEN: 64,
      });
      let best = { n: 0, metric: loss(baseline), params: baseline };
      let bestText = MIXED_PY;
      const history: ExperimentView[] = [
        { n: 0, hypothesis: "baseline", action: "keep", metric: best.metric, params: baseline },
      ];
      const seen = new Set([keyOf(dims, baseline)]);
      const optimizers = new Set<unknown>();
      for (let n = 1; n <= 24; n++) {
        const ctx = context(dir, { program: mixedProgram(dir), best, history: [...history] });
        const p = await createBuiltinAgent({ seed: 5, sampler }).propose(ctx);
        const params = p.params as Params;
        const text = await readFile(path.join(dir, "train.py"), "latin1");
        // The full configuration as the files say it.
        expect(await inFiles(dir)).toEqual(params);
        expect(seen.has(keyOf(dims, params)), `repeat at ${n}: ${p.hypothesis}`).toBe(false);
        seen.add(keyOf(dims, params));
        optimizers.add(params.OPTIMIZER);
        // The file's own styles: single quotes, Python booleans, and nothing else changed.
        expect(lineOf(text, "OPTIMIZER")).toBe(`OPTIMIZER = '${params.OPTIMIZER}'  # adam, sgd or lion`);
        expect(lineOf(text, "USE_BN")).toBe(`USE_BN: bool = ${params.USE_BN ? "True" : "False"}`);
        expect(text.split("\n").length).toBe(MIXED_PY.split("\n").length);
        if (params.OPTIMIZER !== "sgd") {
          // Inactive: its line is exactly the best's, and the hypothesis does not mention it.
          expect(lineOf(text, "MOMENTUM")).toBe(lineOf(bestText, "MOMENTUM"));
          expect(p.hypothesis).not.toContain("MOMENTUM");
        }
        if (params.OPTIMIZER !== best.params.OPTIMIZER) {
          expect(p.hypothesis).toContain(`OPTIMIZER ${best.params.OPTIMIZER} → ${params.OPTIMIZER}`);
        }
        const metric = loss(params);
        const keep = metric < best.metric;
        history.push({ n, hypothesis: p.hypothesis, params, action: keep ? "keep" : "discard", metric });
        if (keep) {
          best = { n, metric, params };
          bestText = text;
        } else {
          await writeFile(path.join(dir, "train.py"), bestText, "latin1");
        }
      }
      expect(optimizers.size).toBe(3);
      expect(best.metric).toBeLessThan(loss(baseline) / 2);
    });
  }

  it("refuses a file whose categorical knob holds something else, naming line, value and choices", async () => {
    const dir = await mixedFixture();
    await writeFile(path.join(dir, "train.py"), MIXED_PY.replace("'adam'", "'adamw'"));
    const err = await createBuiltinAgent()
      .propose(context(dir, { program: mixedProgram(dir) }))
      .catch((e: unknown) => e);
    expect((err as AutolabError).code).toBe("KNOB_NOT_A_CHOICE");
    expect((err as AutolabError).message).toContain('train.py:2 sets it to "adamw"');
    expect((err as AutolabError).message).toContain('("adam", "sgd", "lion")');
  });
});
