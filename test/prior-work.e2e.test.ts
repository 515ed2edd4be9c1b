import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createRun, type RunOptions } from "../src/app/create-run.ts";
import type { LoopEvent } from "../src/core/events.ts";
import type { Agent } from "../src/core/types.ts";
import { PRIOR_WORK_HEADING } from "../src/core/views.ts";
import { openKnowledgeStore } from "../src/ledger/knowledge-store.ts";
import { knobProject } from "./helpers/knob-project.ts";
import { runCli, stackLines } from "./helpers/toy-project.ts";
import { git, valueProject } from "./helpers/value-project.ts";

/**
 * Prior work end to end: real projects, git and runs. Each test has its own knowledge store
 * (AUTOLAB_KNOWLEDGE), so other tests' runs never show up here.
 */
let store: string;
let previous: string | undefined;
const dirs: string[] = [];
beforeEach(() => {
  previous = process.env.AUTOLAB_KNOWLEDGE;
  const d = mkdtempSync(join(tmpdir(), "autolab-prior-"));
  dirs.push(d);
  store = join(d, "store", "knowledge.db");
  process.env.AUTOLAB_KNOWLEDGE = store;
});
afterEach(() => {
  if (previous === undefined) delete process.env.AUTOLAB_KNOWLEDGE;
  else process.env.AUTOLAB_KNOWLEDGE = previous;
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A value project (holdout_score = X + 1000.125) under another name and directions. */
function project(name: string, directions: string, extra = ""): string {
  const dir = valueProject();
  dirs.push(dir);
  const p = join(dir, "program.md");
  writeFileSync(
    p,
    readFileSync(p, "utf8")
      .replace("name: loop-test", `name: ${name}`)
      .replace("Lower X.", directions)
      .replace("---\n", `---\n${extra}`.replace(/^---\n$/, "---\n")),
  );
  git(dir, "commit", "-qam", "rename");
  return dir;
}

/** A researcher that records every context it is given and sets X to the next value. */
function recorder(values: number[], say: (x: number) => { hypothesis: string; mechanism?: string }) {
  const contexts: string[] = [];
  let i = 0;
  const agent: Agent = {
    name: "recorder",
    async propose(ctx) {
      contexts.push(ctx.contextText);
      const x = values[Math.min(i++, values.length - 1)];
      writeFileSync(join(ctx.worktree, "value.mjs"), `export const X = ${x};\n`);
      return say(x as number);
    },
  };
  return { agent, contexts };
}

async function run(dir: string, agent: Agent, max: number, extra: Partial<RunOptions> = {}) {
  const events: LoopEvent[] = [];
  const outcome = await createRun({
    program: dir,
    tag: "t",
    maxExperiments: max,
    agent,
    onEvent: (e) => events.push(e),
    ...extra,
  });
  outcome.lab.ledger.close();
  return { outcome, events };
}

/** Every byte of the store's files (database, WAL, shared memory) as latin1 text. */
function storeBytes(): string {
  return ["", "-wal", "-shm"]
    .map((s) => `${store}${s}`)
    .filter((f) => existsSync(f))
    .map((f) => readFileSync(f).toString("latin1"))
    .join("\n");
}

describe("prior work across runs and projects", () => {
  it("run B's researcher is shown run A's closest result as prior work; holdout values never enter the store", async () => {
    // Two projects: both opt in to sharing (by default a project sees only its own runs).
    const a = project("warmup-lab", "Lower X with smaller values.", "prior_work: machine\n");
    const ra = recorder([3, 4], (x) => ({
      hypothesis: `smaller values: X=${x} (holdout_score ${x + 1000.125} expected)`,
      mechanism: `smaller values lower the score; holdout_score: ${x + 1000.125}`,
    }));
    const { outcome: oa } = await run(a, ra.agent, 2);
    expect(oa.experiments.filter((e) => e.decision).length).toBe(3);
    // A's notebook holds the holdout values (so the grep below could fail)…
    const notebook = readFileSync(join(a, ".autolab", "lab.db")).toString("latin1");
    expect(notebook).toContain("1003.125");
    // …the store does not, in any of its files, as text or as a number.
    const bytes = storeBytes();
    expect(bytes.length).toBeGreaterThan(0);
    for (const v of ["1003.125", "1004.125", "1005.125"]) expect(bytes).not.toContain(v);
    const all = openKnowledgeStore(store);
    const entries = all.search("smaller values score", 10);
    all.close();
    expect(entries.map((e) => e.n).sort()).toEqual([1, 2]);
    for (const e of entries) {
      for (const n of [e.value, e.parentValue, e.gain])
        expect([1003.125, 1004.125, 1005.125]).not.toContain(n);
      expect(JSON.stringify(e)).not.toMatch(/100[345]\.125/);
    }
    expect(entries.find((e) => e.n === 1)).toMatchObject({
      action: "keep",
      value: 3,
      parentValue: 5,
      gain: 2,
    });

    // A's own researcher never saw its own results as prior work (its run is left out).
    expect(ra.contexts.join("\n")).not.toContain(PRIOR_WORK_HEADING);

    const b = project("second-lab", "Try smaller values of X.", "prior_work: machine\n");
    const rb = recorder([2], () => ({ hypothesis: "go to two", mechanism: "less is more" }));
    await run(b, rb.agent, 1);
    const ctx = rb.contexts[0] as string;
    expect(ctx).toContain(PRIOR_WORK_HEADING);
    const section = ctx.slice(ctx.indexOf(PRIOR_WORK_HEADING));
    expect(section).toMatch(
      /\[warmup-lab\/t#1, \d{4}-\d\d-\d\d\] smaller values: X=3 \(\[holdout redacted\]/,
    );
    expect(section).toContain("→ keep score=3 (+2 vs its parent, lower is better)");
    expect(section).not.toMatch(/100[345]\.125/);
  });

  it("is off with --no-prior-work and with prior_work: false: nothing shown, nothing recorded", async () => {
    const a = project("warmup-lab", "Lower X with smaller values.", "prior_work: machine\n");
    await run(a, recorder([3], () => ({ hypothesis: "smaller values first" })).agent, 1);
    const before = openKnowledgeStore(store);
    expect(before.stats().entries).toBe(1);
    before.close();

    const b = project("second-lab", "Try smaller values of X.", "prior_work: machine\n");
    const off = recorder([2], () => ({ hypothesis: "smaller values again" }));
    await run(b, off.agent, 1, { priorWork: false });
    expect(off.contexts[0]).not.toContain("Prior work");

    const c = project("third-lab", "Try smaller values of X.", "prior_work: false\n");
    const off2 = recorder([2], () => ({ hypothesis: "smaller values third" }));
    await run(c, off2.agent, 1);
    expect(off2.contexts[0]).not.toContain("Prior work");

    const after = openKnowledgeStore(store);
    expect(after.stats().entries).toBe(1);
    after.close();

    // The same project with prior work on sees A's result: the switch, not the query, made the difference.
    const on = recorder([2], () => ({ hypothesis: "smaller values on" }));
    await run(b, on.agent, 1, { tag: "again" });
    expect(on.contexts[0]).toContain("smaller values first");
  });

  it("a resumed run records what was decided before (idempotently): a store that was off or lost catches up", async () => {
    const a = project("warmup-lab", "Lower X with smaller values.");
    const r = recorder([4, 3, 2], (x) => ({ hypothesis: `smaller values X=${x}` }));
    process.env.AUTOLAB_KNOWLEDGE = "off";
    await run(a, r.agent, 2);
    expect(existsSync(store)).toBe(false);
    process.env.AUTOLAB_KNOWLEDGE = store;
    await run(a, r.agent, 3);
    const s = openKnowledgeStore(store);
    const hits = s.search("smaller values", 10);
    s.close();
    expect(hits.map((h) => h.n).sort()).toEqual([1, 2, 3]);
    // Once more with nothing new: still one entry per experiment.
    await run(a, r.agent, 3);
    const again = openKnowledgeStore(store);
    expect(again.stats().entries).toBe(3);
    again.close();
  });

  it("a damaged store does not stop a run: a warning, and the run decides its experiments", async () => {
    const a = project("warmup-lab", "Lower X with smaller values.");
    const garbage = "this is not a database ".repeat(400);
    writeFileSync(store.replace("store/knowledge.db", "knowledge.db"), garbage);
    process.env.AUTOLAB_KNOWLEDGE = store.replace("store/knowledge.db", "knowledge.db");
    const r = recorder([3, 2], () => ({ hypothesis: "smaller values" }));
    const { outcome, events } = await run(a, r.agent, 2);
    expect(outcome.experiments.filter((e) => e.decision).length).toBe(3);
    const warnings = events.filter((e) => e.type === "warning");
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ message: expect.stringMatching(/prior work is off for this run/) });
    expect(r.contexts.join("\n")).not.toContain("Prior work");
    // The damaged file is left as it was (it is not ours to repair).
    expect(readFileSync(process.env.AUTOLAB_KNOWLEDGE as string, "utf8")).toBe(garbage);
  });

  it("a store locked by another process does not stop a run either", async () => {
    openKnowledgeStore(store).close();
    const holder = new DatabaseSync(store);
    holder.exec("BEGIN EXCLUSIVE");
    try {
      const a = project("warmup-lab", "Lower X with smaller values.");
      const r = recorder([3, 2], () => ({ hypothesis: "smaller values" }));
      const { outcome, events } = await run(a, r.agent, 2);
      expect(outcome.experiments.filter((e) => e.decision).length).toBe(3);
      const warnings = events.filter((e) => e.type === "warning");
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({ message: expect.stringMatching(/locked/) });
    } finally {
      holder.exec("ROLLBACK");
      holder.close();
    }
  });

  it("the CLI: run --no-prior-work records nothing, a run records its results, knowledge stats and search show them", async () => {
    const env = { AUTOLAB_KNOWLEDGE: store };
    const dir = knobProject({ score: "(X - 2) ** 2", knob: "{ low: 0, high: 10 }" });
    dirs.push(dir);
    const none = await runCli(["knowledge", "stats"], { cwd: dir, env });
    expect(none.code).toBe(0);
    expect(none.stdout).toContain(`no knowledge store yet at ${store}`);
    expect(existsSync(store)).toBe(false);

    const off = await runCli(["run", "-n", "2", "--tag", "off", "--no-prior-work"], { cwd: dir, env });
    expect(off.code, off.stderr).toBe(0);
    expect(existsSync(store)).toBe(false);

    const on = await runCli(["run", "-n", "2", "--tag", "on"], { cwd: dir, env });
    expect(on.code, on.stderr).toBe(0);
    const stats = await runCli(["knowledge", "stats", "--json"], { cwd: dir, env });
    expect(JSON.parse(stats.stdout)).toMatchObject({
      exists: true,
      entries: 2,
      runs: 1,
      projects: 1,
      search: "fts5",
    });

    const found = await runCli(["knowledge", "search", "search-faults", "score"], { cwd: dir, env });
    expect(found.code).toBe(0);
    expect(found.stdout).toContain(PRIOR_WORK_HEADING);
    expect(found.stdout).toMatch(/\[search-faults\/on#[12], /);
    const json = await runCli(["knowledge", "search", "score", "--json", "-k", "1"], { cwd: dir, env });
    expect(JSON.parse(json.stdout)).toHaveLength(1);

    const nothing = await runCli(["knowledge", "search", "zebra"], { cwd: dir, env });
    expect(nothing.stdout).toContain('No prior results match "zebra"');

    // `autolab context` is what run "off"'s researcher would read now: run "on"'s results as prior work.
    const ctx = await runCli(["context", "-t", "off"], { cwd: dir, env });
    expect(ctx.stdout).toContain(PRIOR_WORK_HEADING);
    expect(ctx.stdout).toMatch(/\[search-faults\/on#[12], /);
    const ctxOwn = await runCli(["context", "-t", "on"], { cwd: dir, env });
    expect(ctxOwn.stdout).not.toContain(PRIOR_WORK_HEADING);
    const ctxOff = await runCli(["context", "-t", "off", "--no-prior-work"], { cwd: dir, env });
    expect(ctxOff.stdout).not.toContain(PRIOR_WORK_HEADING);

    writeFileSync(store, "garbage ".repeat(1000));
    for (const f of [`${store}-wal`, `${store}-shm`]) rmSync(f, { force: true });
    const damaged = await runCli(["knowledge", "stats"], { cwd: dir, env });
    expect(damaged.code).toBe(1);
    expect(damaged.stderr).toMatch(/the knowledge store .* cannot be read: file is not a database/);
    expect(stackLines(damaged.stderr)).toEqual([]);
    // The context is printed all the same, with a warning.
    const ctxDamaged = await runCli(["context", "-t", "off"], { cwd: dir, env });
    expect(ctxDamaged.code).toBe(0);
    expect(ctxDamaged.stdout).toContain("# Lab notebook: search-faults");
    expect(ctxDamaged.stderr).toContain("prior work left out");
  });
});
