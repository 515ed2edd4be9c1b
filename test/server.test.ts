/**
 * The HTTP API and the event stream, without a port (hono's app.request), against fixture
 * notebooks written through SqliteLedger: an empty lab, a lab with every kind of outcome, a
 * lab full of crashes, a running lab with an open trial. One real-port smoke test at the end.
 */
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { planFinalize } from "../src/app/finalize.ts";
import { LabReader } from "../src/app/lab-reader.ts";
import { openKnowledgeStore } from "../src/ledger/knowledge-store.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { createApp, type LabApp } from "../src/server/app.ts";
import { startServer } from "../src/server/serve.ts";
import { findRepo } from "../src/workspace/git-workspace.ts";
import { entry } from "./contracts/knowledge-contract.ts";
import { finalizeLab, HOSTILE } from "./helpers/finalize-fixture.ts";
import { cleanupTemp, createGitProject, tempDir } from "./helpers/git-project.ts";
import {
  appendExperiment,
  buildNotebook,
  type FixtureExperiment,
  TREE_LAB,
  writeRun,
} from "./helpers/notebook-fixture.ts";
import { runCli, spawnCli } from "./helpers/toy-project.ts";

// biome-ignore lint/suspicious/noExplicitAny: JSON answers, checked field by field by the assertions
type Json = any;

const apps: LabApp[] = [];
afterEach(() => {
  for (const a of apps.splice(0)) a.close();
});
afterAll(cleanupTemp);

function appFor(ledgerPath: string, extra: Partial<Parameters<typeof createApp>[0]> = {}): LabApp {
  const app = createApp({ ledgerPath, ...extra });
  apps.push(app);
  return app;
}

async function get<T = unknown>(
  app: LabApp,
  path: string,
  init?: RequestInit,
): Promise<{ status: number; body: T }> {
  const res = await app.request(path, init);
  const text = await res.text();
  return {
    status: res.status,
    body: (text.startsWith("{") || text.startsWith("[") ? JSON.parse(text) : text) as T,
  };
}

const MIXED: FixtureExperiment[] = [
  { action: "keep", metric: 3.0, hypothesis: "baseline" },
  { action: "discard", metric: 3.1, hypothesis: "HIDDEN 32 → 64", metrics: { secret_holdout: 42 } },
  {
    action: "keep",
    metric: 2.8,
    hypothesis: "LEARNING_RATE 3e-4 → 0.02",
    mechanism: "faster steps",
    metrics: { secret_holdout: 41 },
    logTail: "loss 2.8\nsecret_holdout: 41\nval_bpb: 2.8\n",
  },
  { action: "crash", hypothesis: "BATCH_SIZE 32 → 4096", reason: "crash: exit code 137 (out of memory)" },
  {
    action: "reject",
    metric: 2.5,
    hypothesis: "HIDDEN 64 → 4096",
    reason: "constraint violated: peak_rss_mb <= 4096",
  },
  { action: "discard", metric: 2.9, hypothesis: "dropout 0.1" },
];

describe("API on a notebook with advice (docs/advisor.md)", () => {
  it("status: `advisor` with its stop while it is the run's last word; experiments: revisitOf", async () => {
    const ledgerPath = buildNotebook(tempDir(), [
      {
        tag: "t",
        experiments: [
          ...MIXED.slice(0, 2),
          { action: "discard", metric: 3.2, hypothesis: "revisit #1: again" },
        ],
      },
    ]);
    expect((await get<Json>(appFor(ledgerPath), "/api/status")).body.advisor).toBeNull();
    const l = new SqliteLedger(ledgerPath);
    const run = l.getRun("t");
    if (!run) throw new Error("no run");
    const base = { runId: run.id, trigger: "2 discards in a row", decided: 2, afterN: 2, agent: "claude" };
    l.addAdvice({ ...base, verdict: "ideas", ideas: ["<b>wider</b>"], reason: "" });
    l.addAdvice({ ...base, verdict: "stop", ideas: [], reason: "flat since #0" });
    l.close();
    const app = appFor(ledgerPath);
    const status = (await get<Json>(app, "/api/status")).body;
    expect(status.advisor).toMatchObject({
      asked: 2,
      garbage: 0,
      ideas: { afterN: 2, ideas: ["<b>wider</b>"] },
      stop: {
        agent: "claude",
        afterN: 2,
        reason: "flat since #0",
        stoppedBecause: "the advisor (claude) stopped the run after #2: flat since #0",
      },
    });
    const exps = (await get<Json>(app, "/api/experiments")).body.experiments;
    expect(exps.map((e: { revisitOf: number | null }) => e.revisitOf)).toEqual([null, null, 1]);
  });
});

describe("API on a notebook with imported history (init --from)", () => {
  it("chart: the imported results as their own `prior` series; status: `imported`, never the baseline or best", async () => {
    const ledgerPath = buildNotebook(tempDir(), [{ experiments: MIXED.slice(0, 3) }]);
    const plain = appFor(ledgerPath);
    expect((await get<Json>(plain, "/api/chart")).body.prior).toBeUndefined();
    expect((await get<Json>(plain, "/api/status")).body.imported).toBeNull();
    const l = new SqliteLedger(ledgerPath);
    l.addImportedResults([
      {
        source: "autoresearch:results.tsv",
        seq: 1,
        commit: "a1b2c3d",
        metrics: { val_bpb: 2.1 },
        status: "keep",
        description: "baseline there",
      },
      {
        source: "autoresearch:results.tsv",
        seq: 2,
        commit: "b2c3d4e",
        metrics: {},
        status: "crash",
        description: "OOM",
      },
    ]);
    l.close();
    const app = appFor(ledgerPath);
    const chart = (await get<Json>(app, "/api/chart")).body;
    expect(chart.points.map((p: { n: number }) => p.n)).toEqual([0, 1, 2]);
    expect(chart.prior).toEqual([
      { seq: 1, metric: 2.1, status: "keep", label: "baseline there" },
      { seq: 2, metric: null, status: "crash", label: "OOM" },
    ]);
    const status = (await get<Json>(app, "/api/status")).body;
    expect(status.best.id).toBe(2);
    expect(status.best.metric).toBe(2.8);
    expect(status.baseline).toEqual({ id: 0, metric: 3 });
    expect(status.imported).toMatchObject({
      note: "before autolab, not re-measured",
      count: 2,
      lastKept: { metric: 2.1 },
    });
  });
});

describe("API on a lab with every outcome", () => {
  const dir = tempDir();
  const repo = createGitProject({ "train.ts": "const LEARNING_RATE = 3e-4;\n", "program.md": "" });
  repo.write({ "train.ts": "const LEARNING_RATE = 0.02;\n" });
  const second = repo.commitAll("candidate");
  const exps = MIXED.map((x, n) => (n === 2 ? { ...x, parent: repo.head as string, commit: second } : x));
  const ledgerPath = buildNotebook(dir, [
    { tag: "old", experiments: [{ action: "keep", metric: 5 }] },
    {
      tag: "main",
      programPath: join(repo.root, "program.md"),
      holdout: ["secret_holdout"],
      experiments: exps,
    },
  ]);

  it("lists runs, newest last, with their sizes", async () => {
    const { status, body } = await get<{ tag: string; experiments: number }[]>(
      appFor(ledgerPath),
      "/api/runs",
    );
    expect(status).toBe(200);
    expect(body.map((r) => [r.tag, r.experiments])).toEqual([
      ["old", 1],
      ["main", 6],
    ]);
  });

  it("status is statusOf of the newest run (or ?run=), plus open trials", async () => {
    const app = appFor(ledgerPath);
    const { body } = await get<Json>(app, "/api/status");
    expect(body.tag).toBe("main");
    expect(body.baseline).toEqual({ id: 0, metric: 3 });
    expect(body.best.id).toBe(2);
    expect(body.counts).toEqual({ total: 6, kept: 2, discarded: 2, crashed: 1, rejected: 1, pending: 0 });
    expect(body.running).toEqual([]);
    expect((await get<Json>(app, "/api/status?run=old")).body.tag).toBe("old");
    const missing = await get<{ error: { code: string } }>(app, "/api/status?run=nope");
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe("RUN_NOT_FOUND");
  });

  it("chart: one point per experiment, crashes without a metric", async () => {
    const { body } = await get<{
      metric: string;
      points: { n: number; action: string; metric: number | null }[];
    }>(appFor(ledgerPath), "/api/chart");
    expect(body.metric).toBe("val_bpb");
    expect(body.points.map((p) => p.action)).toEqual([
      "keep",
      "discard",
      "keep",
      "crash",
      "reject",
      "discard",
    ]);
    expect(body.points[3]?.metric).toBeNull();
  });

  it("chart from=n: the points of experiments n, n+1, … (what the dashboard fetches on events)", async () => {
    const app = appFor(ledgerPath);
    const all = (await get<{ points: { n: number }[] }>(app, "/api/chart")).body.points;
    const tail = await get<{ metric: string; points: { n: number }[] }>(app, "/api/chart?from=3");
    expect(tail.body.metric).toBe("val_bpb");
    expect(tail.body.points).toEqual(all.filter((p) => p.n >= 3));
    const bad = await get<{ error: { code: string } }>(app, "/api/chart?from=x");
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("BAD_QUERY");
  });

  it("experiments: filter by decision, search, sort, page", async () => {
    const app = appFor(ledgerPath);
    type List = {
      total: number;
      offset: number;
      limit: number;
      experiments: { id: number; decision: string }[];
    };
    const all = (await get<List>(app, "/api/experiments")).body;
    expect(all.total).toBe(6);
    expect(all.experiments.map((e) => e.id)).toEqual([0, 1, 2, 3, 4, 5]);

    const kept = (await get<List>(app, "/api/experiments?decision=keep,crash")).body;
    expect(kept.experiments.map((e) => e.id)).toEqual([0, 2, 3]);

    const text = (await get<List>(app, "/api/experiments?q=hidden")).body;
    expect(text.experiments.map((e) => e.id)).toEqual([1, 4]);
    expect(
      (await get<List>(app, "/api/experiments?q=out%20of%20memory")).body.experiments.map((e) => e.id),
    ).toEqual([3]);
    expect((await get<List>(app, "/api/experiments?q=%235")).body.experiments.map((e) => e.id)).toEqual([5]);

    // Metric ascending; the crash (no metric) sorts last either way.
    const byMetric = (await get<List>(app, "/api/experiments?sort=metric")).body;
    expect(byMetric.experiments.map((e) => e.id)).toEqual([4, 2, 5, 0, 1, 3]);
    const byMetricDesc = (await get<List>(app, "/api/experiments?sort=-metric")).body;
    expect(byMetricDesc.experiments.map((e) => e.id)).toEqual([1, 0, 5, 2, 4, 3]);

    const page = (await get<List>(app, "/api/experiments?sort=-n&limit=2&offset=2")).body;
    expect(page).toMatchObject({ total: 6, offset: 2, limit: 2 });
    expect(page.experiments.map((e) => e.id)).toEqual([3, 2]);

    const bad = await get<{ error: { code: string; hint: string } }>(app, "/api/experiments?sort=color");
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("BAD_QUERY");
    expect((await get(app, "/api/experiments?decision=maybe")).status).toBe(400);
    expect((await get(app, "/api/experiments?limit=-1")).status).toBe(400);
  });

  it("holdout metrics stay out of lists and details unless ?holdout=1", async () => {
    const app = appFor(ledgerPath);
    const list = await get<{ experiments: { metrics: Record<string, number> }[] }>(app, "/api/experiments");
    expect(JSON.stringify(list.body)).not.toContain("secret_holdout");
    const detail = await get<{ metrics: Record<string, number>; logTail: string }>(app, "/api/experiments/2");
    expect(detail.body.metrics).toEqual({ val_bpb: 2.8 });
    expect(detail.body.logTail).not.toContain("secret_holdout");
    const shown = await get<{ metrics: Record<string, number>; logTail: string }>(
      app,
      "/api/experiments/2?holdout=1",
    );
    expect(shown.body.metrics.secret_holdout).toBe(41);
    expect(shown.body.logTail).toContain("secret_holdout: 41");
  });

  it("an experiment's detail: hypothesis, mechanism, decision, costs, the diff from git", async () => {
    const { status, body } = await get<Json>(appFor(ledgerPath), "/api/experiments/2");
    expect(status).toBe(200);
    expect(body).toMatchObject({
      run: "main",
      id: 2,
      hypothesis: "LEARNING_RATE 3e-4 → 0.02",
      mechanism: "faster steps",
      decision: "keep",
      metric: 2.8,
      isBest: true,
      costs: { trials: 1 },
    });
    expect(body.costs.wallS).toBeGreaterThan(0);
    expect(body.diffText).toContain("-const LEARNING_RATE = 3e-4;");
    expect(body.diffText).toContain("+const LEARNING_RATE = 0.02;");
  });

  it("a diff that git cannot produce says so instead of failing", async () => {
    const { status, body } = await get<{ diffText: string }>(appFor(ledgerPath), "/api/experiments/1");
    expect(status).toBe(200);
    expect(body.diffText).toMatch(/diff unavailable/);
  });

  it("unknown experiments, bad ids and routes are JSON errors", async () => {
    const app = appFor(ledgerPath);
    expect((await get<{ error: { code: string } }>(app, "/api/experiments/99")).body.error.code).toBe(
      "EXPERIMENT_NOT_FOUND",
    );
    expect((await get(app, "/api/experiments/abc")).status).toBe(400);
    expect((await get(app, "/api/nothing")).status).toBe(404);
  });

  it("a lab without an org: no alarms, no roles, no session; its keeps are the findings", async () => {
    const app = appFor(ledgerPath);
    expect((await get(app, "/api/alarms")).body).toEqual([]);
    // No program.md to read the objective from: no noise model.
    expect((await get(app, "/api/noise")).body).toBe("null");
    const org = (await get<Json>(app, "/api/org")).body;
    expect(org).toMatchObject({ run: "main", roles: [], session: null, slots: [] });
    expect(org.findings.map((f: Json) => [f.kind, f.n])).toEqual([["kept", 2]]);
    const status = (await get<Json>(app, "/api/status")).body;
    expect(status.roles).toEqual([]);
    expect(status.slots).toMatchObject({ count: 0, utilization: null, perSlot: [] });
  });

  it("serves the dashboard and its assets from this server only", async () => {
    const app = appFor(ledgerPath);
    const page = await app.request("/");
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('<figure id="chart"');
    expect(html).not.toMatch(/https?:\/\//);
    expect(page.headers.get("content-security-policy")).toContain("default-src 'self'");
    const chart = await app.request("/assets/progress-chart.js");
    expect(chart.headers.get("content-type")).toContain("javascript");
    const js = await chart.text();
    expect(js).toContain("export function renderProgressChart");
    expect(js).not.toMatch(/: ChartSeries|interface ChartPoint/);
    expect((await app.request("/assets/app.js")).status).toBe(200);
    expect((await app.request("/assets/style.css")).status).toBe(200);
    expect((await app.request("/assets/nope.js")).status).toBe(404);
  });

  it("serves lit-html's browser modules that the dashboard imports, and nothing else of node_modules", async () => {
    const app = appFor(ledgerPath);
    const appJs = await (await app.request("/assets/app.js")).text();
    expect(appJs).toContain('from "./lit-html/lit-html.js"');
    expect(appJs).not.toContain("innerHTML");
    // Every module the page imports is served.
    for (const m of appJs.matchAll(/^import .* from "\.\/([^"]+)";$/gm))
      expect((await app.request(`/assets/${m[1]}`)).status, m[1]).toBe(200);
    for (const path of ["lit-html.js", "directive.js", "directives/unsafe-html.js"]) {
      const res = await app.request(`/assets/lit-html/${path}`);
      expect(res.status, path).toBe(200);
      expect(res.headers.get("content-type"), path).toContain("javascript");
      // The production build: no `process.env` or dev-mode warnings in the browser.
      expect(await res.text(), path).not.toContain("Lit is in dev mode");
    }
    // Relative imports inside lit-html resolve to files that are served.
    const directive = await (await app.request("/assets/lit-html/directives/unsafe-html.js")).text();
    for (const m of directive.matchAll(/from"(\.\.\/[^"]+)"/g))
      expect(
        (await app.request(new URL(m[1] as string, "http://x/assets/lit-html/directives/").pathname)).status,
      ).toBe(200);
    for (const path of [
      "/assets/lit-html/package.json",
      "/assets/lit-html/static.js",
      "/assets/lit-html/../../package.json",
      "/assets/lit-html/%2e%2e/%2e%2e/package.json",
      "/assets/constructor",
      "/assets/__proto__",
    ])
      expect((await app.request(path)).status, path).toBe(404);
  });

  it("is read-only: no route accepts a write", async () => {
    const app = appFor(ledgerPath);
    for (const path of ["/api/experiments", "/api/experiments/1", "/api/runs"]) {
      expect((await app.request(path, { method: "POST", body: "{}" })).status).toBe(404);
    }
  });
});

describe("API on a lab with hooks", () => {
  const dir = tempDir();
  const ledgerPath = buildNotebook(dir, [
    {
      tag: "main",
      holdout: ["secret_holdout"],
      experiments: [
        { action: "keep", metric: 3 },
        { action: "keep", metric: 2.5 },
      ],
    },
  ]);
  const l = new SqliteLedger(ledgerPath);
  const run = l.getRun("main");
  if (!run) throw new Error("fixture run missing");
  for (const phase of ["before", "after"] as const) {
    l.addHookRun({
      runId: run.id,
      n: 1,
      phase,
      command: `node ${phase}.mjs`,
      status: phase === "after" ? "failed" : "ok",
      ...(phase === "after" ? { reason: "exited with code 3: secret_holdout: 41" } : {}),
      exitCode: phase === "after" ? 3 : 0,
      wallS: 0.5,
      output: "<script>alert(1)</script>\nsecret_holdout: 41\n",
      logDir: `/logs/1/hook-${phase}`,
    });
  }
  l.close();

  it("an experiment's page carries its hook runs, holdout metrics redacted unless asked", async () => {
    const app = appFor(ledgerPath);
    const { status, body } = await get<Json>(app, "/api/experiments/1");
    expect(status).toBe(200);
    expect(body.hooks.map((h: Json) => [h.phase, h.status, h.exitCode])).toEqual([
      ["before", "ok", 0],
      ["after", "failed", 3],
    ]);
    // The API gives the text as it is (the page escapes it); holdout values are not in it.
    expect(body.hooks[0].output).toContain("<script>alert(1)</script>");
    // Without the timestamps: a finishedAt at hh:41 or …41Z would contain "41" by chance.
    const texts = body.hooks.map(
      (h: { output: string; reason?: string }) => `${h.output}\n${h.reason ?? ""}`,
    );
    expect(texts.join("\n")).not.toContain("41");
    const shown = await get<Json>(app, "/api/experiments/1?holdout=1");
    expect(shown.body.hooks[0].output).toContain("secret_holdout: 41");
    expect(shown.body.hooks[1].reason).toBe("exited with code 3: secret_holdout: 41");
    expect((await get<Json>(app, "/api/experiments/0")).body.hooks).toEqual([]);
  });
});

describe("API on unusual labs", () => {
  it("a notebook written before secrets were redacted: no answer carries a key (docs/security.md)", async () => {
    const key = `sk-proj-${"Q1w2E3r4T5y6U7i8".repeat(3)}`;
    const path = buildNotebook(tempDir(), [
      {
        experiments: [
          { action: "keep", metric: 3, hypothesis: "baseline" },
          { action: "discard", metric: 4, hypothesis: "placeholder" },
        ],
      },
    ]);
    // Written behind the ledger's back, as an older autolab would have.
    const db = new DatabaseSync(path);
    db.prepare("UPDATE experiments SET hypothesis = ? WHERE n = 1").run(`use ${key} please`);
    db.close();
    const app = appFor(path);
    for (const route of ["/api/experiments", "/api/experiments/1", "/api/status", "/api/tree"]) {
      const res = await app.request(route);
      const text = await res.text();
      expect(text, route).not.toContain(key);
      if (route === "/api/experiments/1")
        expect(JSON.parse(text).hypothesis).toBe("use [redacted:key] please");
    }
  });

  it("an empty notebook: no runs, and every view says so", async () => {
    const app = appFor(buildNotebook(tempDir(), []));
    expect((await get(app, "/api/runs")).body).toEqual([]);
    const status = await get<{ error: { code: string; hint: string } }>(app, "/api/status");
    expect(status.status).toBe(404);
    expect(status.body.error.code).toBe("RUN_NOT_FOUND");
    expect(status.body.error.hint).toMatch(/autolab run/);
    expect((await get(app, "/api/alarms")).body).toEqual([]);
    expect((await get(app, "/api/noise")).body).toBe("null");
    expect((await app.request("/")).status).toBe(200);
  });

  it("a run with no experiments yet", async () => {
    const app = appFor(buildNotebook(tempDir(), [{ experiments: [] }]));
    const s = await get<Json>(app, "/api/status");
    expect(s.body).toMatchObject({ baseline: null, best: null, counts: { total: 0 }, running: [] });
    expect((await get<{ points: unknown[] }>(app, "/api/chart")).body.points).toEqual([]);
    expect((await get<{ total: number }>(app, "/api/experiments")).body.total).toBe(0);
  });

  it("a lab full of crashes: no baseline, no best, every point without a metric", async () => {
    const crashes: FixtureExperiment[] = Array.from({ length: 8 }, (_, i) => ({
      action: "crash",
      hypothesis: `attempt ${i}`,
      reason: "crash: ModuleNotFoundError",
    }));
    const app = appFor(buildNotebook(tempDir(), [{ experiments: crashes }]));
    const s = await get<Json>(app, "/api/status");
    expect(s.body.baseline).toEqual({ id: 0, metric: null });
    expect(s.body.best).toBeNull();
    expect(s.body.improvement).toBeNull();
    expect(s.body.counts.crashed).toBe(8);
    const chart = await get<{ points: { metric: number | null; action: string }[] }>(app, "/api/chart");
    expect(chart.body.points).toHaveLength(8);
    expect(chart.body.points.every((p) => p.metric === null && p.action === "crash")).toBe(true);
    const e = await get<Json>(app, "/api/experiments/3");
    expect(e.body.reason).toBe("crash: ModuleNotFoundError");
    expect(e.body.trials[0].status).toBe("crash");
  });

  it("a running lab: the open trial is running while a harness holds the lock, else interrupted", async () => {
    const dir = tempDir();
    const ledgerPath = buildNotebook(dir, [
      {
        tag: "live",
        experiments: [
          { action: "keep", metric: 3 },
          { action: "discard", metric: 3.2 },
          { action: "running", hypothesis: "HIDDEN 32 → 48" },
        ],
      },
    ]);
    const app = appFor(ledgerPath);
    type S = { counts: { pending: number }; running: { n: number; state: string; hypothesis: string }[] };
    let s = (await get<S>(app, "/api/status")).body;
    expect(s.counts.pending).toBe(1);
    expect(s.running).toMatchObject([{ n: 2, state: "interrupted", hypothesis: "HIDDEN 32 → 48" }]);

    writeFileSync(join(dir, ".autolab", "run-live.lock"), String(process.pid));
    const app2 = appFor(ledgerPath);
    s = (await get<S>(app2, "/api/status")).body;
    expect(s.running).toMatchObject([{ n: 2, state: "running" }]);
    const e = (await get<{ decision: string; trials: { status: string }[] }>(app2, "/api/experiments/2"))
      .body;
    expect(e.decision).toBe("pending");
    expect(e.trials[0]?.status).toBe("running");
  });
});

describe("API on an organization", () => {
  // Three roles on 2 slots in one session: #4 is a merge candidate (rebase of #3), #6 runs on slot 1.
  const ORG: FixtureExperiment[] = [
    { action: "keep", metric: 3.0, slot: 0, wallS: 10 },
    {
      action: "keep",
      metric: 2.8,
      role: "tuner",
      slot: 0,
      wallS: 20,
      hypothesis: "LR up",
      mechanism: "faster",
    },
    {
      action: "discard",
      metric: 3.1,
      role: "explorer",
      slot: 1,
      wallS: 30,
      hypothesis: "wider MLP",
      mechanism: "more capacity",
    },
    { action: "keep", metric: 2.7, role: "explorer", slot: 1, wallS: 40, hypothesis: "rotary" },
    {
      action: "keep",
      metric: 2.6,
      role: "critic",
      rebaseOf: 3,
      slot: 0,
      wallS: 50,
      hypothesis: "rotary, rebased",
    },
    { action: "crash", role: "tuner", slot: 0, wallS: 5, hypothesis: "batch 4096" },
    { action: "running", role: "tuner", slot: 1, hypothesis: "warmup 200" },
  ];

  function orgNotebook(dir: string): string {
    const path = join(dir, ".autolab", "lab.db");
    const ledger = new SqliteLedger(path);
    try {
      writeRun(ledger, { tag: "old", experiments: [{ action: "keep", metric: 5 }] });
      const run = writeRun(ledger, { tag: "org", experiments: [] });
      ledger.startSession(run.id, 1);
      ledger.startSession(run.id, 2);
      ORG.forEach((x, n) => {
        appendExperiment(ledger, run, n, x);
      });
    } finally {
      ledger.close();
    }
    return path;
  }

  it("/api/org: credit per role, the latest session's slots, findings", async () => {
    const dir = tempDir();
    const ledgerPath = orgNotebook(dir);
    writeFileSync(join(dir, ".autolab", "run-org.lock"), String(process.pid));
    const { status, body } = await get<Json>(appFor(ledgerPath), "/api/org");
    expect(status).toBe(200);
    expect(body.run).toBe("org");
    expect(
      body.roles.map((r: Json) => [r.role, r.proposals, r.decided, r.kept, r.merges, r.computeS]),
    ).toEqual([
      ["tuner", 3, 2, 1, 0, 25],
      ["explorer", 2, 2, 1, 0, 70],
      ["critic", 1, 1, 1, 1, 50],
    ]);
    expect(body.roles[0].improvement).toBeCloseTo(0.2, 12);
    expect(body.roles[1].improvement).toBeCloseTo(0.1, 12);
    expect(body.roles[2].improvement).toBeCloseTo(0.1, 12);
    expect(body.roles[0].value).toBeCloseTo(0.2 / 25, 12);
    expect(body.roles[0].share).toBeCloseTo(0.5, 12);
    expect(body.session).toMatchObject({ slots: 2, live: true });
    expect(body.session.utilization).toBeGreaterThanOrEqual(0);
    expect(body.session.utilization).toBeLessThanOrEqual(1);
    expect(body.slots.map((s: Json) => [s.slot, s.trials])).toEqual([
      [0, 4],
      [1, 3],
    ]);
    expect(body.slots[0].running).toBeNull();
    expect(body.slots[1].running).toMatchObject({
      n: 6,
      role: "tuner",
      hypothesis: "warmup 200",
      state: "running",
    });
    expect(body.findings.map((f: Json) => [f.kind, f.n])).toEqual([
      ["kept", 4],
      ["kept", 3],
      ["refuted", 2],
      ["kept", 1],
    ]);
    expect(body.findings[0]).toMatchObject({ role: "critic", rebaseOf: 3, metric: 2.6 });

    // /api/status carries the same credit and slots; ?run= picks another run.
    const s = (await get<Json>(appFor(ledgerPath), "/api/status")).body;
    expect(s.roles).toEqual(body.roles);
    expect(s.slots).toMatchObject({ count: 2, live: true });
    const still = (x: Json) => ({ slot: x.slot, trials: x.trials, running: x.running });
    expect(s.slots.perSlot.map(still)).toEqual(body.slots.map(still));
    const old = (await get<Json>(appFor(ledgerPath), "/api/org?run=old")).body;
    expect(old).toMatchObject({ run: "old", roles: [], session: null, slots: [] });
  });

  it("without a harness the open trial was cut short", async () => {
    const { body } = await get<Json>(appFor(orgNotebook(tempDir())), "/api/org");
    expect(body.session.live).toBe(false);
    expect(body.slots[1].running).toMatchObject({ n: 6, state: "interrupted" });
  });

  it("an empty notebook has an empty org", async () => {
    const { body } = await get<Json>(appFor(buildNotebook(tempDir(), [])), "/api/org");
    expect(body).toEqual({ run: null, roles: [], session: null, slots: [], findings: [] });
  });
});

describe("API /api/tree (the tree frontier)", () => {
  it("answers every kept node with the node it grew from, its value, kind and the best", async () => {
    const path = buildNotebook(tempDir(), [{ tag: "tree", experiments: TREE_LAB }]);
    const { status, body } = await get<Json>(appFor(path), "/api/tree?run=tree");
    expect(status).toBe(200);
    expect(body).toMatchObject({ run: "tree", metric: "val_bpb", direction: "minimize", branched: true });
    expect(body.nodes.map((x: Json) => [x.n, x.parent, x.metric, x.kind, x.best])).toEqual([
      [0, null, 10, "keep", false],
      [1, 0, 8, "keep", false],
      [2, 0, 9, "node", false],
      [3, 2, 7, "keep", true],
    ]);
    // Researcher text is data: sent as typed, escaped where it is shown.
    expect(body.nodes[3].hypothesis).toContain("<img src=x onerror=alert(1)>");
  });

  it("a run that never branched is a chain (branched false); an unknown run is a 404", async () => {
    // As the single-branch ratchet records it: every candidate's parent is the best of its time.
    const sha = (i: number) => String(i).padStart(40, "c");
    const chain: FixtureExperiment[] = [
      { action: "keep", metric: 3, commit: sha(0) },
      { action: "discard", metric: 3.5, commit: sha(1), parent: sha(0) },
      { action: "keep", metric: 2, commit: sha(2), parent: sha(0) },
      { action: "crash", commit: sha(3), parent: sha(2) },
      { action: "keep", metric: 1, commit: sha(4), parent: sha(2) },
    ];
    const path = buildNotebook(tempDir(), [{ tag: "chain", experiments: chain }]);
    const { body } = await get<Json>(appFor(path), "/api/tree");
    expect(body.branched).toBe(false);
    expect(body.nodes.map((x: Json) => [x.n, x.parent, x.kind, x.best])).toEqual([
      [0, null, "keep", false],
      [2, 0, "keep", false],
      [4, 2, "keep", true],
    ]);
    const missing = await get<Json>(appFor(path), "/api/tree?run=nope");
    expect(missing.status).toBe(404);
  });
});

describe("GET /api/finalize (finalize's dry run)", () => {
  it("answers the plan: a branch per kept change from the base, dependencies and why, gains ± σ, the command", async () => {
    const lab = finalizeLab();
    const app = appFor(lab.ledgerPath);
    const { status, body } = await get<Json>(app, "/api/finalize?run=fin");
    expect(status).toBe(200);
    expect(body.run).toBe("fin");
    expect(body.message).toBeNull();
    expect(body.command).toBe("autolab finalize --apply --tag fin");
    const plan = body.plan;
    expect(plan).toMatchObject({ metric: "score", direction: "minimize", baseCommit: lab.base, dirty: [] });
    // Kept changes only (#2 was discarded), each the diff from the best before it.
    expect(plan.changes.map((c: Json) => [c.n, c.parent, c.commit, c.paths])).toEqual([
      [1, lab.base, lab.commits[1], ["params.txt"]],
      [3, lab.commits[1], lab.commits[3], ["params.txt"]],
      [4, lab.commits[3], lab.commits[4], ["params.txt"]],
    ]);
    // #4 rewrites the line #1 wrote: it depends on #1, in params.txt; #3 (line 12) stands alone.
    expect(plan.changes.map((c: Json) => c.dependsOn)).toEqual([[], [], [{ n: 1, paths: ["params.txt"] }]]);
    // One trial each, one value per experiment: no noise estimate, so σ is unknown (null, not NaN).
    expect(plan.changes.map((c: Json) => c.gain && [c.gain.value, c.gain.trials, c.gain.baseTrials])).toEqual(
      [
        [10, 1, 1],
        [4, 1, 1],
        [6, 1, 1],
      ],
    );
    expect(plan.changes.map((c: Json) => c.gain.sigma)).toEqual([null, null, null]);
    expect(plan.noise.sigma).toBeNull();
    expect(plan.changes[0].gainText).toBe(
      "Gain: 10 score (lower is better) ± σ unknown over the best before it; 1 trial vs 1",
    );
    expect(plan.branches.map((b: Json) => [b.n, b.contains, b.commits.length, b.applied, b.verify])).toEqual([
      [1, [1], 1, false, []],
      [3, [3], 1, false, []],
      [4, [1, 4], 2, false, []],
    ]);
    expect(plan.branches[0].name).toBe("autolab-finalize/fin/1-raise-a-to-1");
    expect(plan.branches[2].conflictsWith).toEqual([]);
    // Researcher text as it is (the page escapes it).
    expect(plan.changes[1].hypothesis).toContain("<img src=x");

    // What `finalize --apply` and `--verify` recorded is shown per branch.
    const b4 = plan.branches[2];
    const l = new SqliteLedger(lab.ledgerPath);
    const run = l.getRun("fin");
    if (!run) throw new Error("fixture run missing");
    l.addNote(run.id, null, `finalize: #4 is on branch ${b4.name} (${b4.tip.slice(0, 8)}) with #1 first`);
    l.addNote(
      run.id,
      null,
      `finalize --verify: #4 alone on ${b4.name}: gain 6 (exact) over its dependencies #1 (in the run: 6), 3 trials each — holds alone`,
    );
    l.close();
    const again = (await get<Json>(app, "/api/finalize?run=fin")).body.plan.branches[2];
    expect(again.applied).toBe(true);
    expect(again.verify.map((v: Json) => v.text)).toEqual([
      `#4 alone on ${b4.name}: gain 6 (exact) over its dependencies #1 (in the run: 6), 3 trials each — holds alone`,
    ]);
  });

  it("is read-only: no ref, no object, no index or checkout change; the commits are the ones --apply would make", async () => {
    const lab = finalizeLab();
    const g = (...args: string[]) => execFileSync("git", args, { cwd: lab.root, encoding: "utf8" });
    const before = {
      refs: g("for-each-ref"),
      objects: g("count-objects", "-v"),
      status: g("status", "--porcelain"),
      head: g("rev-parse", "HEAD"),
    };
    const app = appFor(lab.ledgerPath);
    const plan = (await get<Json>(app, "/api/finalize")).body.plan;
    expect(plan.branches).toHaveLength(3);
    expect({
      refs: g("for-each-ref"),
      objects: g("count-objects", "-v"),
      status: g("status", "--porcelain"),
      head: g("rev-parse", "HEAD"),
    }).toEqual(before);
    const tips: string[] = plan.branches.map((b: Json) => b.tip);
    for (const tip of tips) expect(() => g("cat-file", "-e", tip)).toThrow();
    // The same plan built in the repository (as --apply does) makes the very same commits.
    const l = new SqliteLedger(lab.ledgerPath);
    const run = l.getRun("fin");
    if (!run) throw new Error("fixture run missing");
    const inRepo = await planFinalize(await findRepo(lab.root), run, l.listExperiments(run.id));
    l.close();
    expect(inRepo.branches.map((b) => b.tip)).toEqual(tips);
    for (const tip of tips) expect(g("cat-file", "-t", tip).trim()).toBe("commit");
    // A dirty tree is reported (--apply would refuse), and still nothing is written.
    writeFileSync(join(lab.root, "params.txt"), "dirty\n");
    const dirty = (await get<Json>(app, "/api/finalize")).body.plan;
    expect(dirty.dirty).toEqual(["params.txt"]);
    expect(g("for-each-ref")).toBe(before.refs);
  });

  it("holdout values are redacted unless ?holdout=1", async () => {
    const lab = finalizeLab();
    const app = appFor(lab.ledgerPath);
    const hidden = (await get<Json>(app, "/api/finalize")).body;
    expect(JSON.stringify(hidden)).not.toContain("secret_holdout");
    expect(hidden.plan.changes[1].hypothesis).toContain("Raise C [holdout redacted]");
    const shown = (await get<Json>(app, "/api/finalize?holdout=1")).body;
    expect(shown.plan.changes[1].hypothesis).toBe(HOSTILE);
  });

  it("a run with nothing kept beyond its baseline: no plan, a message; an unknown run is a 404", async () => {
    const lab = finalizeLab({ kept: false });
    const app = appFor(lab.ledgerPath);
    const { status, body } = await get<Json>(app, "/api/finalize?run=fin");
    expect(status).toBe(200);
    expect(body.plan).toBeNull();
    expect(body.message).toContain("run fin kept no change beyond its baseline");
    // A lab whose commits git does not have (or not a repository at all): said, not a failure.
    const gone = appFor(buildNotebook(tempDir(), [{ experiments: MIXED.slice(0, 3) }]));
    const broken = await get<Json>(gone, "/api/finalize");
    expect(broken.status).toBe(200);
    expect(broken.body.plan).toBeNull();
    expect(broken.body.error).toContain("not inside a git");
    const missing = await get<Json>(app, "/api/finalize?run=nope");
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe("RUN_NOT_FOUND");
  });
});

describe("access", () => {
  const ledgerPath = buildNotebook(tempDir(), [{ experiments: MIXED }]);

  it("with a token, every request must carry it (header, ?token=, or the cookie set from it)", async () => {
    const app = appFor(ledgerPath, { token: "s3cret" });
    const denied = await get<{ error: { code: string; hint: string } }>(app, "/api/runs");
    expect(denied.status).toBe(401);
    expect(denied.body.error.hint).toMatch(/token=/);
    expect((await app.request("/")).status).toBe(401);
    expect((await app.request("/api/runs", { headers: { authorization: "Bearer wrong" } })).status).toBe(401);
    expect((await app.request("/api/runs", { headers: { authorization: "Bearer s3cret" } })).status).toBe(
      200,
    );
    expect((await app.request("/api/runs", { headers: { "x-autolab-token": "s3cret" } })).status).toBe(200);
    const viaQuery = await app.request("/?token=s3cret");
    const cookie = viaQuery.headers.get("set-cookie") ?? "";
    expect(cookie).toMatch(/autolab_token=s3cret/);
    expect(cookie).toMatch(/HttpOnly/i);
    const withCookie = await app.request("/assets/app.js", { headers: { cookie: "autolab_token=s3cret" } });
    expect(withCookie.status).toBe(200);
    expect((await app.request("/", { headers: { cookie: "autolab_token=s3cret" } })).status).toBe(200);
  });

  it("a token in the page's URL becomes the cookie, then the page reloads without it", async () => {
    const app = appFor(ledgerPath, { token: "s3cret" });
    const res = await app.request("/?run=fixture&token=s3cret");
    expect(res.status).toBe(303);
    // The same page, its other parameters kept, the token gone from the address bar and history.
    expect(res.headers.get("location")).toBe("/?run=fixture");
    expect(res.headers.get("set-cookie")).toMatch(/autolab_token=s3cret;.*HttpOnly/i);
    // Lax: a link followed from another site still carries the cookie through the redirect.
    expect(res.headers.get("set-cookie")).toMatch(/SameSite=Lax/i);
    expect((await app.request("/?token=s3cret")).headers.get("location")).toBe("/");
    // A wrong token is refused, not redirected; API calls with ?token= are answered directly.
    expect((await app.request("/?token=wrong")).status).toBe(401);
    expect((await app.request("/api/runs?token=s3cret")).status).toBe(200);
  });

  it("the page may not be framed (clickjacking)", async () => {
    const res = await appFor(ledgerPath, { loopbackOnly: true }).request("http://localhost/");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-security-policy")).toMatch(/(^|; )frame-ancestors 'none'(;|$)/);
  });

  it("without a token on loopback, requests for other host names are refused (DNS rebinding)", async () => {
    const app = appFor(ledgerPath, { loopbackOnly: true });
    expect((await app.request("http://localhost/api/runs")).status).toBe(200);
    expect((await app.request("http://127.0.0.1:8420/api/runs")).status).toBe(200);
    expect((await app.request("http://[::1]:8420/api/runs")).status).toBe(200);
    const evil = await app.request("http://attacker.example/api/runs");
    expect(evil.status).toBe(403);
    expect(await evil.text()).toMatch(/--token/);
  });
});

/** Reads SSE messages from a response body. */
function sseReader(res: Response) {
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let buf = "";
  return {
    async next(timeoutMs = 10_000): Promise<{ event: string; data: Json }> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const cut = buf.indexOf("\n\n");
        if (cut >= 0) {
          const block = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          if (block.startsWith(":")) continue;
          let event = "message";
          const data: string[] = [];
          for (const line of block.split("\n")) {
            if (line.startsWith("event:")) event = line.slice(6).trim();
            if (line.startsWith("data:")) data.push(line.slice(5).trim());
          }
          return { event, data: JSON.parse(data.join("\n")) };
        }
        if (Date.now() > deadline) throw new Error(`no SSE message within ${timeoutMs} ms; have: ${buf}`);
        const chunk = await Promise.race([
          reader.read(),
          new Promise<never>((_, rej) => setTimeout(() => rej(new Error("SSE read timed out")), timeoutMs)),
        ]);
        if (chunk.done) throw new Error("SSE stream ended");
        buf += decoder.decode(chunk.value, { stream: true });
      }
    },
    cancel: () => reader.cancel(),
  };
}

describe("event stream", () => {
  it("rows another connection appends arrive as loop events, in order", async () => {
    const dir = tempDir();
    const ledgerPath = buildNotebook(dir, [{ tag: "live", experiments: [{ action: "keep", metric: 3 }] }]);
    const app = appFor(ledgerPath, { pollMs: 20 });
    const res = await app.request("/api/events");
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const sse = sseReader(res);
    expect((await sse.next()).event).toBe("ready");

    // The writer is another connection, as `autolab run` in another process would be.
    const writer = new SqliteLedger(ledgerPath);
    try {
      const run = writer.getRun("live");
      if (!run) throw new Error("fixture run missing");
      appendExperiment(writer, run, 1, {
        action: "keep",
        metric: 2.5,
        hypothesis: "LEARNING_RATE 0.001 → 0.01",
        slot: 3,
      });
      const types: string[] = [];
      const events: Json[] = [];
      while (types.length < 4) {
        const m = await sse.next();
        types.push(m.data.type);
        events.push(m.data);
      }
      expect(types).toEqual(["experiment_created", "trial_started", "trial_finished", "decision"]);
      expect(events[0]).toMatchObject({ run: "live", n: 1, hypothesis: "LEARNING_RATE 0.001 → 0.01" });
      expect(events[1]).toMatchObject({ n: 1, attempt: 1, slot: 3 });
      expect(events[2]).toMatchObject({ n: 1, status: "ok", metric: 2.5 });
      expect(events[3]).toMatchObject({ n: 1, action: "keep", metric: 2.5, best: { n: 1, metric: 2.5 } });

      // A new run appears too; ?run= filters are honoured by a second stream.
      const only = sseReader(await app.request("/api/events?run=other"));
      expect((await only.next()).event).toBe("ready");
      const other = writer.createRun({ ...run, tag: "other", branch: "autolab/other" });
      appendExperiment(writer, other, 0, { action: "crash" });
      appendExperiment(writer, run, 2, { action: "discard", metric: 2.9 });
      expect((await only.next()).data).toMatchObject({ type: "run_started", run: "other", tag: "other" });
      expect((await only.next()).data).toMatchObject({ type: "experiment_created", run: "other", n: 0 });
      const seen: Json[] = [];
      while (!seen.some((e) => e.type === "decision" && e.run === "live")) seen.push((await sse.next()).data);
      expect(seen[0]).toMatchObject({ type: "run_started", tag: "other" });
      expect(seen.filter((e) => e.type === "decision").map((e) => [e.run, e.action])).toEqual([
        ["other", "crash"],
        ["live", "discard"],
      ]);
      await only.cancel();
    } finally {
      writer.close();
      await sse.cancel();
    }
  });
});

describe("listening", () => {
  it("serves the dashboard and the API on a real port (smoke)", async () => {
    const ledgerPath = buildNotebook(tempDir(), [{ experiments: MIXED }]);
    const server = await startServer({ ledgerPath, port: 0, host: "127.0.0.1" });
    try {
      expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
      const auth = { headers: { authorization: `Bearer ${server.token}` } };
      const runs = (await (await fetch(`${server.url}api/runs`, auth)).json()) as unknown[];
      expect(runs).toHaveLength(1);
      const page = await fetch(server.url, auth);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain("autolab");
      const events = await fetch(`${server.url}api/events`, auth);
      const sse = sseReader(events);
      expect((await sse.next()).event).toBe("ready");
      await sse.cancel();
    } finally {
      await server.close();
    }
  });

  it("asks every client for a token on loopback too; the printed address trades it for the browser's session cookie", async () => {
    // A process of this machine (a researcher, were it not confined; another user) reached the
    // dashboard on 127.0.0.1 with no token and read the holdout values (issue #34 class 5).
    const ledgerPath = buildNotebook(tempDir(), [{ experiments: MIXED }]);
    const server = await startServer({ ledgerPath, port: 0, host: "127.0.0.1" });
    try {
      for (const path of ["", "api/runs", "api/experiments?holdout=1", "api/events"]) {
        expect((await fetch(`${server.url}${path}`)).status, path).toBe(401);
      }
      expect(server.token.length).toBeGreaterThanOrEqual(32);
      expect(server.openUrl).toBe(`${server.url}?token=${server.token}`);
      const open = await fetch(server.openUrl, { redirect: "manual" });
      expect(open.status).toBe(303);
      const cookie = /^[^;]+/.exec(open.headers.get("set-cookie") ?? "")?.[0] ?? "";
      // One cookie per port: another dashboard on this machine keeps its own session.
      expect(cookie).toBe(`autolab_token_${server.port}=${server.token}`);
      expect((await fetch(`${server.url}api/runs`, { headers: { cookie } })).status).toBe(200);
      expect((await fetch(`${server.url}api/runs?token=wrong-token-0123456789`)).status).toBe(401);
    } finally {
      await server.close();
    }
  });

  it("refuses a non-loopback address without a token, with a fix", async () => {
    const ledgerPath = buildNotebook(tempDir(), []);
    await expect(startServer({ ledgerPath, port: 0, host: "0.0.0.0" })).rejects.toMatchObject({
      code: "TOKEN_REQUIRED",
      hint: expect.stringMatching(/--token/),
    });
  });

  it("refuses a token shorter than 16 characters, and never puts the token in its URL", async () => {
    const ledgerPath = buildNotebook(tempDir(), []);
    await expect(startServer({ ledgerPath, port: 0, host: "127.0.0.1", token: "x" })).rejects.toMatchObject({
      code: "TOKEN_TOO_SHORT",
      hint: expect.stringMatching(/at least 16/),
    });
    const token = "0123456789abcdef";
    const server = await startServer({ ledgerPath, port: 0, host: "127.0.0.1", token });
    try {
      expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
      expect(
        (await fetch(`${server.url}api/runs`, { headers: { authorization: `Bearer ${token}` } })).status,
      ).toBe(200);
    } finally {
      await server.close();
    }
  });

  it("autolab serve does not echo a token the user gave (AUTOLAB_TOKEN, --token), and refuses a short one", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "program.md"), "---\nname: x\n---\n");
    buildNotebook(dir, [{ experiments: MIXED }]);
    const secret = "s3cret-token-from-the-environment";
    for (const [args, env, source] of [
      [[], { AUTOLAB_TOKEN: secret }, "AUTOLAB_TOKEN"],
      [["--token", secret], {}, "--token"],
    ] as const) {
      const cli = spawnCli(["serve", "--port", "0", ...args], { cwd: dir, env: { ...env } });
      try {
        await cli.waitFor(/Ctrl-C stops/);
        expect(cli.stdout()).toContain(`every request needs the token (from ${source}; not shown)`);
        expect(cli.stdout()).not.toContain(secret);
      } finally {
        cli.child.kill("SIGTERM");
        await cli.done;
      }
    }
    const short = await runCli(["serve", "--port", "0"], { cwd: dir, env: { AUTOLAB_TOKEN: "x" } });
    expect(short.code).toBe(1);
    expect(short.stderr).toContain("the token is 1 character long");
    expect(short.stderr).toContain("fix: Use at least 16 random characters");
  });

  it("says so when the port is taken", async () => {
    const ledgerPath = buildNotebook(tempDir(), []);
    const a = await startServer({ ledgerPath, port: 0, host: "127.0.0.1" });
    try {
      await expect(startServer({ ledgerPath, port: a.port, host: "127.0.0.1" })).rejects.toMatchObject({
        code: "PORT_IN_USE",
      });
    } finally {
      await a.close();
    }
  });
});

describe("LabReader", () => {
  it("keeps its cached experiments equal to the notebook while another connection writes", () => {
    const dir = tempDir();
    const ledgerPath = buildNotebook(dir, [{ tag: "r", experiments: MIXED.slice(0, 3) }]);
    const readerLedger = new SqliteLedger(ledgerPath);
    const writer = new SqliteLedger(ledgerPath);
    try {
      const reader = new LabReader(readerLedger);
      const run = reader.run("r");
      const same = () => expect(reader.experiments(run)).toEqual(readerLedger.listExperiments(run.id));
      same();
      const cached = reader.experiments(run);
      expect(reader.experiments(run)).toBe(cached); // unchanged notebook: the same list
      // An experiment arrives row by row: created, trial started, result, decision.
      const e = writer.addExperiment({
        runId: run.id,
        n: 3,
        agent: "builtin",
        parentCommit: "p",
        commit: "c",
        ref: "refs/autolab/r/3",
        hypothesis: "step by step",
        diff: { files: 1, insertions: 1, deletions: 1 },
      });
      same();
      const t = writer.startTrial({
        experimentId: e.id,
        attempt: 1,
        seed: 0,
        command: "x",
        commit: "c",
        budgetMs: 1000,
        env: {},
      });
      same();
      writer.finishTrial(
        t,
        {
          status: "ok",
          exitCode: 0,
          signal: null,
          wallS: 1,
          cpuS: 1,
          peakRssMb: 1,
          metrics: { val_bpb: 2.5 },
          selfReported: false,
          seed: 0,
          command: "x",
          stdoutPath: "",
          stderrPath: "",
          logTail: "",
        },
        "/logs",
      );
      same();
      writer.decide(e.id, { action: "keep", reason: "improved", metric: 2.5 });
      same();
      // A second trial of an already decided experiment is noticed too.
      const old = writer.getExperiment(run.id, 1);
      writer.startTrial({
        experimentId: old?.id as number,
        attempt: 2,
        seed: 1,
        command: "x",
        commit: "c",
        budgetMs: 1000,
        env: {},
      });
      same();
      for (let n = 4; n < 10; n++) appendExperiment(writer, run, n, { action: "discard", metric: 3 + n });
      same();
    } finally {
      writer.close();
      readerLedger.close();
    }
  });
});

describe("writeRun fixture", () => {
  it("bulk-writes a large lab in one transaction", () => {
    const ledger = new SqliteLedger(join(tempDir(), "lab.db"));
    try {
      const run = writeRun(
        ledger,
        { experiments: Array.from({ length: 300 }, (_, i) => ({ action: "discard", metric: i }) as const) },
        { bulk: true },
      );
      expect(ledger.listExperiments(run.id)).toHaveLength(300);
    } finally {
      ledger.close();
    }
  });
});

describe("GET /api/prior-work", () => {
  const previous = process.env.AUTOLAB_KNOWLEDGE;
  afterEach(() => {
    if (previous === undefined) delete process.env.AUTOLAB_KNOWLEDGE;
    else process.env.AUTOLAB_KNOWLEDGE = previous;
  });

  it("the closest results of other runs (its own left out, this run's holdouts redacted); off and unreadable said so", async () => {
    const dir = tempDir("autolab-server-prior-");
    const ledgerPath = buildNotebook(dir, [
      {
        tag: "main",
        programPath: "/nonexistent/program.md",
        programName: "fixture-lab",
        holdout: ["secret_holdout"],
        experiments: [{ action: "keep", metric: 3, hypothesis: "baseline" }],
      },
    ]);
    const store = join(dir, "knowledge.db");
    process.env.AUTOLAB_KNOWLEDGE = store;
    const app = appFor(ledgerPath);
    expect((await get<Json>(app, "/api/prior-work")).body).toEqual({ enabled: true, store, hits: [] });

    const s = openKnowledgeStore(store);
    s.record([
      entry({
        project: "/nonexistent/program.md",
        projectName: "fixture-lab",
        run: "x",
        hypothesis: "<img src=x> secret_holdout 41.5",
      }),
      // Another project's (not shared): never shown to this one.
      entry({
        project: "/other/program.md",
        projectName: "other-lab",
        run: "y",
        hypothesis: "secret_holdout elsewhere",
      }),
      entry({
        project: "/nonexistent/program.md",
        projectName: "fixture-lab",
        run: "main",
        hypothesis: "own run",
      }),
    ]);
    s.close();
    const { body } = await get<Json>(app, "/api/prior-work");
    expect(body.hits.map((h: Json) => h.run)).toEqual(["x"]);
    expect(body.hits[0].hypothesis).toBe("<img src=x> [holdout redacted]");

    process.env.AUTOLAB_KNOWLEDGE = "off";
    expect((await get<Json>(app, "/api/prior-work")).body).toEqual({ enabled: false, store: null, hits: [] });

    process.env.AUTOLAB_KNOWLEDGE = join(dir, "garbage.db");
    writeFileSync(join(dir, "garbage.db"), "garbage ".repeat(1000));
    const broken = await get<Json>(app, "/api/prior-work");
    expect(broken.status).toBe(200);
    expect(broken.body.error).toMatch(/cannot be read/);
  });
});
