/**
 * The dashboard in a real browser: playwright-core driving Debian's chromium against fixture
 * notebooks served by `startServer`. Skipped, with a message, where no chromium is installed
 * (.ci/run installs it). The screenshots land in test-artifacts/ (gitignored).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openKnowledgeStore } from "../src/ledger/knowledge-store.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { type RunningServer, startServer } from "../src/server/serve.ts";
import { entry } from "./contracts/knowledge-contract.ts";
import { CHROMIUM, launchChromium } from "./helpers/chromium.ts";
import { finalizeLab } from "./helpers/finalize-fixture.ts";
import { cleanupTemp, createGitProject, tempDir } from "./helpers/git-project.ts";
import {
  appendExperiment,
  buildNotebook,
  type FixtureExperiment,
  syntheticExperiments,
  TREE_LAB,
} from "./helpers/notebook-fixture.ts";
import { REPO_ROOT } from "./helpers/toy-project.ts";

const ARTIFACTS = join(REPO_ROOT, "test-artifacts");

if (!CHROMIUM) {
  console.warn(
    "dashboard browser test skipped: no chromium at /usr/bin/chromium (install it: apt-get install -y chromium, or set AUTOLAB_CHROMIUM)",
  );
}

describe.skipIf(!CHROMIUM)(`dashboard in chromium${CHROMIUM ? "" : " (skipped: no chromium found)"}`, () => {
  let browser: Browser;
  const servers: RunningServer[] = [];
  const errors: string[] = [];

  async function serve(ledgerPath: string): Promise<RunningServer> {
    const s = await startServer({ ledgerPath, port: 0, host: "127.0.0.1", pollMs: 100 });
    servers.push(s);
    return s;
  }

  async function open(url: string, width = 1280): Promise<Page> {
    const page = await browser.newPage({ viewport: { width, height: 1000 } });
    page.on("pageerror", (e) => errors.push(`pageerror: ${e.message}`));
    page.on("console", (m) => {
      if (m.type() === "error") errors.push(`console: ${m.text()}`);
    });
    await page.goto(url);
    return page;
  }

  beforeAll(async () => {
    browser = await launchChromium(CHROMIUM as string);
    mkdirSync(ARTIFACTS, { recursive: true });
  });
  afterAll(async () => {
    for (const s of servers) await s.close();
    await browser?.close();
    cleanupTemp();
  });

  it("draws every experiment, lists them, opens one on click, and adds new ones live", async () => {
    const repo = createGitProject({
      "train.ts": "const LEARNING_RATE = 3e-4;\nconst HIDDEN = 32;\n",
      "program.md": [
        "---",
        "name: tiny-lm",
        "objective: { metric: val_bpb, direction: minimize }",
        "run: { command: node train.ts, budget: 5s }",
        "files: { editable: [train.ts] }",
        "---",
        "",
      ].join("\n"),
    });
    repo.write({ "train.ts": "const LEARNING_RATE = 0.02;\nconst HIDDEN = 32;\n" });
    const candidate = repo.commitAll("candidate");
    const exps: FixtureExperiment[] = syntheticExperiments(40, 3);
    exps[3] = {
      action: "keep",
      metric: 3.05,
      hypothesis: "LEARNING_RATE 3e-4 → 0.02",
      mechanism: "larger steps early",
      parent: repo.head as string,
      commit: candidate,
      // A categorical knob's value is text: the page must show it, never run it.
      params: { LEARNING_RATE: 0.02, OPTIMIZER: '<img src=x onerror="document.body.dataset.pwned=1">' },
      usage: { wallS: 12.5, inputTokens: 1200, outputTokens: 300, costUsd: 0.0123 },
    };
    // Pruned at its third progress value: drawn there, not left out of the chart.
    exps[5] = {
      action: "discard",
      status: "pruned",
      reason: "pruned: progress worse than the best's",
      hypothesis: "HIDDEN 32 → 8",
      progress: [
        [0.1, 3.4],
        [0.2, 3.35],
        [0.3, 3.3],
      ],
      metrics: { train_loss: 3.3 },
    };
    exps.push({ action: "running", hypothesis: "HIDDEN 32 → 48" });
    const dir = tempDir();
    const ledgerPath = buildNotebook(dir, [
      { tag: "demo", programName: "tiny-lm", programPath: join(repo.root, "program.md"), experiments: exps },
    ]);
    const server = await serve(ledgerPath);
    const page = await open(server.openUrl);

    await page.waitForSelector(`body[data-chart-drawn="${exps.length}"]`);
    expect(await page.locator("#chart svg .pt").count()).toBe(exps.length);
    expect(await page.locator("#chart svg .pt.keep").count()).toBe(
      exps.filter((e) => e.action === "keep").length,
    );
    expect(await page.locator("#chart svg .pt.crash").count()).toBe(
      exps.filter((e) => e.action === "crash").length,
    );
    await page.waitForSelector("#experiments tbody tr.row");
    expect(await page.locator("#experiments tbody tr.row").count()).toBe(exps.length);
    expect(await page.locator("#live").textContent()).toContain("live");
    expect(await page.locator("#summary").textContent()).toContain(String(exps.length));
    // A count is coloured only when it is not zero.
    for (const t of await page
      .locator("#summary .sub .k, #summary .sub .c, #summary .sub .r")
      .allTextContents())
      expect(Number.parseInt(t, 10)).toBeGreaterThan(0);
    // The run picker is a live control even with one run to pick.
    const picker = page.locator("#run-select");
    expect(await picker.isEnabled()).toBe(true);
    // (A page script as a string: the tests are typechecked without the DOM's types.)
    expect(await page.evaluate('getComputedStyle(document.getElementById("run-select")).cursor')).toBe(
      "pointer",
    );
    // Every column's header is aligned as its cells are (numbers right, text left).
    const align = await columnAlignment(page, "#experiments");
    for (const [name, th, td] of align) expect(th, `column ${name}`).toBe(td);
    expect(align[2]?.[1]).toBe("right"); // the metric's column
    await page.screenshot({ path: join(ARTIFACTS, "dashboard.png"), fullPage: true });

    // The run's noise, explained next to the alarms (the baseline ran once: σ not known yet).
    await page.waitForSelector("#noise-line");
    expect(await page.locator("#noise-line").textContent()).toMatch(
      /^noise: val_bpb — σ unknown: nothing was repeated yet/,
    );

    // Hover shows the hypothesis.
    await page.hover('#chart .pt[data-n="3"]');
    await expect.poll(() => page.locator("#tooltip").isVisible()).toBe(true);
    expect(await page.locator("#tooltip").textContent()).toContain("LEARNING_RATE 3e-4 → 0.02");
    // A pruned one is on the chart, with where its learning curve stopped.
    expect(await page.locator('#chart .pt.pruned[data-n="5"]').count()).toBe(1);
    expect(await page.locator("#chart .legend").textContent()).toContain("pruned");
    await page.hover('#chart .pt[data-n="5"]');
    await expect
      .poll(() => page.locator("#tooltip").textContent())
      .toContain("pruned at step 3 (30% of the budget), train_loss 3.3");

    // Clicking a point opens its page: decision, reason, diff, log tail.
    await page.click('#chart .pt[data-n="3"]');
    await page.waitForSelector("#exp-body h1");
    expect(page.url()).toMatch(/#\/e\/3$/);
    expect(await page.locator("#exp-body h1").textContent()).toContain("#3");
    expect(await page.locator("#exp-body .decision").textContent()).toContain("keep");
    expect(await page.locator("#exp-body pre.diff").textContent()).toContain("+const LEARNING_RATE = 0.02;");
    expect(await page.locator("#exp-body pre.log").count()).toBe(1);
    for (const [name, th, td] of await columnAlignment(page, "#exp-body table.trials"))
      expect(th, `trials column ${name}`).toBe(td);
    // The researcher's usage under human labels; no field name of ours leaks as it is spelled in code.
    const cost = (await page.locator("#exp-body .grid").textContent()) ?? "";
    expect(cost).toContain("agent time12.5s");
    expect(cost).toContain("input tokens1200");
    expect(cost).toContain("agent cost$0.0123");
    const ours = `${cost} ${await page.locator("#exp-body .trials").textContent()}`.replace(
      /LEARNING_RATE|OPTIMIZER|val_bpb/g,
      "",
    );
    expect(ours).not.toMatch(/\b[a-z]+[A-Z]\w*|\b[a-z]+_[a-z]\w*/);
    expect(await page.locator("#exp-body .params").textContent()).toContain(
      'OPTIMIZER<img src=x onerror="document.body.dataset.pwned=1">',
    );
    expect(await page.locator("#exp-body .params img").count()).toBe(0);
    expect(await page.locator("body").getAttribute("data-pwned")).toBeNull();
    expect(await page.locator("#overview").isVisible()).toBe(false);
    await page.screenshot({ path: join(ARTIFACTS, "experiment.png"), fullPage: true });

    // Back to the overview; the table filters and sorts.
    await page.click("text=← all experiments");
    await page.click('#decision-filters [data-decision="crash"]');
    await expect
      .poll(() => page.locator("#experiments tbody tr.row").count())
      .toBe(exps.filter((e) => e.action === "crash").length);
    await page.click('#decision-filters [data-decision="crash"]');
    await page.click('th[data-sort="metric"]');
    await expect
      .poll(() => page.locator("#experiments tbody tr.row").first().getAttribute("data-n"))
      .toBe(String(bestIndex(exps)));
    await page.fill("#search", "HIDDEN 32 → 48");
    await expect.poll(() => page.locator("#experiments tbody tr.row").count()).toBe(1);
    await page.fill("#search", "");

    // A row appended by another process appears without a reload.
    const writer = new SqliteLedger(ledgerPath);
    const run = writer.getRun("demo");
    if (!run) throw new Error("fixture run missing");
    appendExperiment(writer, run, exps.length, { action: "discard", metric: 3.3, hypothesis: "live one" });
    writer.close();
    await page.waitForSelector(`body[data-chart-drawn="${exps.length + 1}"]`);
    expect(await page.locator("#chart svg .pt").count()).toBe(exps.length + 1);
    await expect.poll(() => page.locator("#experiments tbody tr.row").count()).toBe(exps.length + 1);
    await page.close();
    expect(errors).toEqual([]);
  });

  it("shows an experiment's hook runs, their output as text", async () => {
    const ledgerPath = buildNotebook(tempDir(), [
      {
        tag: "hooks",
        experiments: [
          { action: "keep", metric: 3 },
          { action: "keep", metric: 2.5, hypothesis: "with hooks" },
        ],
      },
    ]);
    const writer = new SqliteLedger(ledgerPath);
    const run = writer.getRun("hooks");
    if (!run) throw new Error("fixture run missing");
    for (const phase of ["before", "after"] as const) {
      writer.addHookRun({
        runId: run.id,
        n: 1,
        phase,
        command: `node ${phase}.mjs`,
        status: phase === "before" ? "ok" : "timeout",
        ...(phase === "after" ? { reason: "exceeded budget 1s + grace 2s; killed (SIGTERM)" } : {}),
        exitCode: null,
        wallS: 3,
        output: `${phase} says <img src=x onerror="document.body.dataset.pwned=1">`,
        logDir: `/logs/1/hook-${phase}`,
      });
    }
    writer.close();
    const server = await serve(ledgerPath);
    const page = await open(`${server.openUrl}#/e/1`);
    await page.waitForSelector("#exp-body .hook");
    expect(await page.locator("#exp-body .hook").count()).toBe(2);
    const heads = (await page.locator("#exp-body .hook p").allTextContents()).map((t) =>
      t.replace(/\s+/g, " ").trim(),
    );
    expect(heads).toEqual([
      "before node before.mjs: ok 3.00s",
      "after node after.mjs: timeout — exceeded budget 1s + grace 2s; killed (SIGTERM) 3.00s",
    ]);
    expect(await page.locator("#exp-body pre.hook-output").first().textContent()).toBe(
      'before says <img src=x onerror="document.body.dataset.pwned=1">',
    );
    expect(await page.locator("#exp-body img").count()).toBe(0);
    expect(await page.locator("body").getAttribute("data-pwned")).toBeNull();
    await page.close();
    expect(errors).toEqual([]);
  });

  it("renders an empty notebook and a lab full of crashes sensibly", async () => {
    const empty = await serve(buildNotebook(tempDir(), []));
    let page = await open(empty.openUrl);
    await page.waitForSelector('body[data-chart-drawn="0"]');
    expect(await page.locator("#summary").textContent()).toContain("No runs yet");
    expect(await page.locator("#chart").textContent()).toContain("no experiments yet");
    expect(await page.locator("#experiments tbody").textContent()).toContain("No experiments yet");
    expect(await page.locator("#alarms-body").textContent()).toContain("No alarms");
    await page.close();

    const crashes: FixtureExperiment[] = Array.from({ length: 6 }, (_, i) => ({
      action: "crash",
      hypothesis: `try ${i}`,
      reason: "crash: SyntaxError",
    }));
    const crashed = await serve(buildNotebook(tempDir(), [{ experiments: crashes }]));
    page = await open(crashed.openUrl, 900);
    await page.waitForSelector('body[data-chart-drawn="6"]');
    expect(await page.locator("#chart .pt.crash").count()).toBe(6);
    expect(await page.locator("#chart").textContent()).toContain("nothing measured yet");
    expect(await page.locator("#summary").textContent()).toContain("none yet");
    // "0 kept" is not green, "6 crashed" is red.
    expect(await page.locator("#summary").textContent()).toContain("0 kept");
    expect(await page.locator("#summary .k").count()).toBe(0);
    expect(await page.locator("#summary .c").textContent()).toBe("6 crashed");
    await page.screenshot({ path: join(ARTIFACTS, "dashboard-crashes.png"), fullPage: true });
    await page.close();
    expect(errors).toEqual([]);
  });

  it("the Prior work panel lists other runs' closest results, their text escaped", async () => {
    const dir = tempDir();
    const path = buildNotebook(dir, [{ tag: "main", experiments: [{ action: "keep", metric: 3 }] }]);
    const store = join(dir, "knowledge.db");
    const s = openKnowledgeStore(store);
    s.record([
      // Another run of the same project (another project's results are shown only when both opt in).
      entry({
        project: "/nonexistent/program.md",
        projectName: "fixture-lab",
        run: "oct1",
        hypothesis: 'warmup <img src=x onerror="document.body.dataset.pwned=1">',
        action: "keep",
        value: 2.5,
        gain: 0.5,
      }),
    ]);
    s.close();
    const previous = process.env.AUTOLAB_KNOWLEDGE;
    process.env.AUTOLAB_KNOWLEDGE = store;
    try {
      const page = await open((await serve(path)).openUrl);
      await page.waitForSelector(".prior-work li");
      const panel = (await page.locator("#prior-work-body").textContent()) ?? "";
      expect(panel).toContain("not measured in this run");
      expect(panel).toContain("fixture-lab/oct1#1");
      expect(panel).toContain('warmup <img src=x onerror="document.body.dataset.pwned=1">');
      expect(await page.locator("#prior-work-body img").count()).toBe(0);
      expect(await page.evaluate("document.body.dataset.pwned ?? null")).toBeNull();
      await page.close();
    } finally {
      if (previous === undefined) delete process.env.AUTOLAB_KNOWLEDGE;
      else process.env.AUTOLAB_KNOWLEDGE = previous;
    }
  });

  it("draws the tree of a run that branched (the tree frontier), researcher text as text", async () => {
    const page = await open((await serve(buildNotebook(tempDir(), [{ experiments: TREE_LAB }]))).openUrl);
    await page.waitForSelector("#tree:not([hidden]) ul.tree");
    // Nested: #3 sits under #2, which sits under the baseline beside #1.
    const nested = await page.evaluate(`(() => [...document.querySelectorAll("#tree li")].map((li) => {
      const parent = li.parentElement.closest("li");
      return [li.querySelector("a").textContent, parent ? parent.querySelector("a").textContent : null];
    }))()`);
    expect(nested).toEqual([
      ["#0", null],
      ["#1", "#0"],
      ["#2", "#0"],
      ["#3", "#2"],
    ]);
    const text = (await page.locator("#tree").textContent()) ?? "";
    expect(text).toContain("tree node");
    expect(text).toContain("<img src=x onerror=alert(1)>");
    expect(await page.locator("#tree img").count()).toBe(0);
    expect(await page.locator("#tree .badge.keep").textContent()).toBe("best");
    await page.screenshot({ path: join(ARTIFACTS, "dashboard-tree.png"), fullPage: true });
    await page.close();

    // A run that never branched has no tree panel.
    const chain = await open(
      (await serve(buildNotebook(tempDir(), [{ experiments: [{ action: "keep", metric: 1 }] }]))).openUrl,
    );
    await chain.waitForSelector('body[data-chart-drawn="1"]');
    expect(await chain.locator("#tree").isHidden()).toBe(true);
    await chain.close();
  });

  it("several objectives: the Front panel lists the kept non-dominated experiments, researcher text inert", async () => {
    const dir = tempDir();
    const programPath = join(dir, "program.md");
    writeFileSync(
      programPath,
      "---\nname: two\nobjective:\n  metrics:\n    - { metric: loss, direction: minimize }\n    - { metric: latency, direction: minimize }\nrun:\n  command: node t.js\n  budget: 5s\nfiles:\n  editable: [t.js]\n---\n",
    );
    const path = buildNotebook(dir, [
      {
        programPath,
        metric: "loss",
        experiments: [
          { action: "keep", metric: 1, metrics: { latency: 10 } },
          {
            action: "keep",
            metric: 0.8,
            metrics: { latency: 12 },
            hypothesis: "<img src=x onerror=alert(1)>",
          },
          { action: "discard", metric: 1.1, metrics: { latency: 13 } },
          { action: "keep", metric: 0.9, metrics: { latency: 5 }, hypothesis: "faster" },
        ],
      },
    ]);
    const page = await open((await serve(path)).openUrl);
    await page.waitForSelector("#front table.front tbody tr");
    expect(await page.locator("#front").isVisible()).toBe(true);
    const rows = await page.locator("#front tbody tr").allTextContents();
    expect(rows).toHaveLength(2);
    expect(rows[0]).toContain("#1");
    expect(rows[0]).toContain("<img src=x onerror=alert(1)>");
    expect(rows[1]).toContain("★");
    expect(await page.locator("#front img").count()).toBe(0);
    expect(await page.locator(".front-mode").textContent()).toContain(
      "pareto over minimize loss, minimize latency",
    );
    await page.locator("#front").screenshot({ path: join(ARTIFACTS, "dashboard-front.png") });
    await page.close();
    // One objective: no panel.
    const one = await open(
      (await serve(buildNotebook(tempDir(), [{ experiments: [{ action: "keep", metric: 1 }] }]))).openUrl,
    );
    await one.waitForSelector('body[data-chart-drawn="1"]');
    expect(await one.locator("#front").isVisible()).toBe(false);
    await one.close();
  });

  it("shows the advisor's stop, escaped, and marks a revisit in the experiment table", async () => {
    const path = buildNotebook(tempDir(), [
      {
        experiments: [
          { action: "keep", metric: 3 },
          { action: "discard", metric: 3.2, hypothesis: "wider" },
          { action: "discard", metric: 3.1, hypothesis: "revisit #1: wider on the new best" },
        ],
      },
    ]);
    const writer = new SqliteLedger(path);
    const run = writer.latestRun();
    if (!run) throw new Error("fixture run missing");
    writer.addAdvice({
      runId: run.id,
      trigger: "2 discards in a row",
      decided: 2,
      afterN: 2,
      agent: "claude",
      verdict: "stop",
      ideas: [],
      reason: "<img src=x onerror=alert(1)> nothing left",
    });
    writer.close();
    const page = await open((await serve(path)).openUrl);
    await page.waitForSelector("#advisor-stop");
    expect(await page.locator("#advisor-stop").textContent()).toBe(
      "after #2: <img src=x onerror=alert(1)> nothing left",
    );
    expect(await page.locator("#summary img").count()).toBe(0);
    await page.waitForSelector("#experiments tbody tr.row");
    expect(await page.locator('#experiments tr[data-n="2"] .badge.revisit').textContent()).toBe("revisit");
    expect(await page.locator('#experiments tr[data-n="1"] .badge.revisit').count()).toBe(0);
    await page.close();
    expect(errors).toEqual([]);
  });

  it("the Finalize panel shows the plan and the command to apply it, researcher text as text; hidden with nothing kept", async () => {
    const lab = finalizeLab();
    const page = await open((await serve(lab.ledgerPath)).openUrl);
    await page.waitForSelector("#finalize:not([hidden]) ol.finalize li");
    const items = await page.locator("#finalize ol.finalize > li").allTextContents();
    expect(items).toHaveLength(3);
    expect(items[0]).toContain("autolab-finalize/fin/1-raise-a-to-1");
    expect(items[0]).toContain("Gain: 10 score (lower is better)");
    expect(items[0]).toContain("files: params.txt");
    expect(items[2]).toContain("autolab-finalize/fin/4-raise-a-to-2");
    expect(items[2]).toContain("depends on #1 (overlapping lines in params.txt)");
    expect(items[2]).toMatch(/commits: #1 [0-9a-f]{8} → #4 [0-9a-f]{8}/);
    // The hostile hypothesis is text, its holdout value redacted; nothing of it ran.
    expect(items[1]).toContain('<img src=x onerror="window.__pwned=1">Raise C [holdout redacted]');
    expect(await page.locator("#finalize img").count()).toBe(0);
    expect(await page.evaluate("window.__pwned")).toBeUndefined();
    expect(await page.locator("#finalize code.command").textContent()).toBe(
      "autolab finalize --apply --tag fin",
    );
    expect(await page.locator("#finalize").textContent()).toContain("Dry run: nothing is written.");
    // A link to the change's experiment page.
    await page.locator('#finalize li[data-n="4"] a[href="#/e/1"]').click();
    await page.waitForSelector("#experiment:not([hidden])");
    await page.goBack();
    await page.locator("#finalize").screenshot({ path: join(ARTIFACTS, "dashboard-finalize.png") });
    await page.close();

    const none = await open((await serve(finalizeLab({ kept: false }).ledgerPath)).openUrl);
    await none.waitForSelector('#finalize[data-loaded="1"]', { state: "attached" });
    expect(await none.locator("#finalize").isHidden()).toBe(true);
    await none.close();
    expect(errors).toEqual([]);
  });

  it("the findings board says which knob ranges the built-in optimizer found not better", async () => {
    const x = (action: FixtureExperiment["action"], LR: number, metric?: number): FixtureExperiment => ({
      action,
      params: { LR },
      hypothesis: `LR → ${LR}`,
      mechanism: "TPE: sampled from the density of the best 2 of 5 observed configurations",
      ...(metric !== undefined ? { metric } : {}),
    });
    const path = buildNotebook(tempDir(), [
      {
        experiments: [
          { action: "keep", metric: 3, params: { LR: 0.01 } },
          x("keep", 0.02, 2.8),
          x("discard", 0.3, 3.4),
          x("discard", 0.5, 3.6),
          x("discard", 0.9, 3.9),
        ],
      },
    ]);
    // A session: the organization panel shows slots and findings.
    const writer = new SqliteLedger(path);
    const run = writer.latestRun();
    if (!run) throw new Error("fixture run missing");
    writer.startSession(run.id, 1);
    writer.close();
    const page = await open((await serve(path)).openUrl);
    await page.waitForSelector(".findings li");
    const board = (await page.locator(".findings").textContent()) ?? "";
    expect(board).toContain("not better LR above 0.02 (the best's; tried 0.3–0.9): 3 of 3 not better");
    expect(board).toContain("LR → 0.02");
    expect(board).not.toMatch(/TPE|density|refuted/);
    expect(await page.locator(".findings li.ruled-out a").allTextContents()).toEqual(["#2", "#3", "#4"]);
    await page.close();
    expect(errors).toEqual([]);
  });
});

/**
 * [header text, header's text-align, first row cell's text-align] per column of a table.
 * (A page script as a string: the tests are typechecked without the DOM's types.)
 */
async function columnAlignment(page: Page, selector: string): Promise<[string, string, string][]> {
  return (await page.evaluate(`(() => {
    const table = document.querySelector(${JSON.stringify(selector)});
    const row = table.tBodies[0].rows[0];
    return [...table.tHead.rows[0].cells].map((th, i) => [
      th.textContent,
      getComputedStyle(th).textAlign,
      getComputedStyle(row.cells[i]).textAlign,
    ]);
  })()`)) as [string, string, string][];
}

function bestIndex(exps: FixtureExperiment[]): number {
  let best = -1;
  exps.forEach((e, i) => {
    if (e.metric === undefined || e.action === "crash") return;
    const b = exps[best]?.metric;
    if (best < 0 || (b !== undefined && e.metric < b)) best = i;
  });
  return best;
}
