// @ts-check
// The autolab dashboard: plain ES modules, no build step, nothing from outside this server.
// Data comes from the JSON API; live changes from /api/events (SSE). The progress chart is the
// same renderer the report uses (src/chart/progress-chart.ts, served with its types stripped).
// Markup is lit-html templates (served from node_modules by this server): every value put in a
// template is text or an attribute value, escaped by the library, never parsed as HTML. The one
// exception is the chart renderer's SVG, which escapes its own text (unsafeHTML in drawChart).
// Typechecked against the API's shapes (src/server/api-types.ts) by test/dashboard-types.test.ts.

import { unsafeHTML } from "./lit-html/directives/unsafe-html.js";
import { html, render } from "./lit-html/lit-html.js";
import { chartLayout, pointPosition, pointSummary, renderProgressChart } from "./progress-chart.js";

/**
 * @typedef {import("../api-types.ts").RunsResponse} RunsResponse
 * @typedef {import("../api-types.ts").StatusResponse} StatusResponse
 * @typedef {import("../api-types.ts").ChartResponse} ChartResponse
 * @typedef {import("../api-types.ts").ExperimentsResponse} ExperimentsResponse
 * @typedef {import("../api-types.ts").ExperimentResponse} ExperimentResponse
 * @typedef {import("../api-types.ts").AlarmsResponse} AlarmsResponse
 * @typedef {import("../api-types.ts").NoiseResponse} NoiseResponse
 * @typedef {import("../api-types.ts").OrgResponse} OrgResponse
 * @typedef {import("../api-types.ts").PriorWorkResponse} PriorWorkResponse
 * @typedef {import("../api-types.ts").TreeResponse} TreeResponse
 * @typedef {import("../api-types.ts").WorkersResponse} WorkersResponse
 * @typedef {import("../api-types.ts").FinalizeResponse} FinalizeResponse
 * @typedef {import("../api-types.ts").EventMessage} EventMessage
 * @typedef {import("../api-types.ts").ErrorResponse} ErrorResponse
 * @typedef {import("../../chart/progress-chart.ts").ChartPoint} ChartPoint
 * @typedef {import("./lit-html/lit-html.js").TemplateResult} TemplateResult
 * @typedef {TemplateResult | string} Markup  what a helper hands to a template: markup or text
 * @typedef {Error & { code?: string, hint?: string | null }} ApiError
 */

const DECISIONS = ["keep", "discard", "crash", "reject", "pending"];
const PAGE = 50;

/** An element of index.html by its id (they are all there: a missing one is a bug of the page). */
const $ = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id));
/** @type {(id: string) => HTMLButtonElement} */
const button = (id) => /** @type {HTMLButtonElement} */ ($(id));
/** @type {(id: string) => HTMLAnchorElement} */
const link = (id) => /** @type {HTMLAnchorElement} */ ($(id));

const state = {
  run: new URLSearchParams(location.search).get("run") ?? "",
  /** @type {RunsResponse} */
  runs: [],
  /** @type {StatusResponse | null} */
  status: null,
  /** @type {ChartResponse | null} */
  series: null,
  /** @type {Map<number, ChartPoint>} */
  byN: new Map(),
  /** The lowest experiment an event changed since the chart's points were last fetched. @type {number | null} */
  chartFrom: null,
  table: { decisions: /** @type {Set<string>} */ (new Set()), q: "", sort: "-n", offset: 0 },
  connected: false,
  loaded: false,
  /** The notebook version (X-Autolab-Version) the current snapshot was read at. @type {string | null} */
  version: null,
  /** The version the event stream started from, until the snapshot is compared with it. @type {string | null} */
  readyVersion: null,
  loading: false,
  /**
   * Every point's position in the drawn chart (for the pointer), and the chart's width.
   * @type {{ p: ChartPoint, x: number, y: number }[] | null}
   */
  hits: null,
  svgWidth: 0,
};

// ---------------------------------------------------------------------------------------------
// helpers

/**
 * GET one API route; the answer's type is the route's (src/server/api-types.ts).
 * @template T
 * @param {string} path
 * @param {Record<string, string | number | undefined>} [params]
 * @returns {Promise<T>}
 */
async function api(path, params = {}) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(params))
    if (v !== undefined && v !== "") url.searchParams.set(k, String(v));
  const res = await fetch(url, { headers: { accept: "application/json" } });
  const version = res.headers.get("x-autolab-version");
  // One version for the whole snapshot, or "mixed" when the notebook changed while it loaded.
  if (version) state.version = state.version === null || state.version === version ? version : "mixed";
  const body = await res.json();
  if (!res.ok) {
    const error = /** @type {Partial<ErrorResponse> | null} */ (body)?.error;
    const err = /** @type {ApiError} */ (new Error(error?.message ?? res.statusText));
    err.code = error?.code;
    err.hint = error?.hint;
    throw err;
  }
  return body;
}

/** @param {number | null | undefined} x */
function fmt(x) {
  if (x === null || x === undefined) return "—";
  if (!Number.isFinite(x)) return String(x);
  const a = Math.abs(x);
  if (a !== 0 && (a < 1e-4 || a >= 1e7)) return x.toExponential(4);
  return String(Number(x.toPrecision(6)));
}

/** @param {number | null | undefined} from @param {number | null | undefined} to */
function change(from, to) {
  if (from === null || to === null || from === undefined || to === undefined || from === 0) return "";
  const pct = ((to - from) / Math.abs(from)) * 100;
  return `${pct >= 0 ? "+" : ""}${pct.toFixed(2)}%`;
}

/** @param {string | null | undefined} iso */
function ago(iso) {
  if (!iso) return "—";
  const s = (Date.now() - Date.parse(iso)) / 1000;
  if (s < 60) return `${Math.max(0, Math.round(s))}s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${(s / 3600).toFixed(1)} h ago`;
  return new Date(iso).toLocaleString();
}

/** @param {number} seconds */
function duration(seconds) {
  if (seconds < 120) return `${seconds.toFixed(1)} s`;
  if (seconds < 7200) return `${(seconds / 60).toFixed(1)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

/** @param {string | null | undefined} s */
function firstLine(s) {
  return String(s ?? "").split("\n")[0] ?? "";
}

/**
 * The harness's own field names as people read them: a key the API sends is never shown as it
 * is spelled in code ("wallS"). Known ones have a label; any other camelCase, snake_case or
 * kebab-case key is split into words. Researcher-chosen names (metrics, knobs) are not keys of
 * ours and are shown as written.
 * @type {Record<string, string>}
 */
const LABELS = {
  wallS: "agent time",
  inputTokens: "input tokens",
  outputTokens: "output tokens",
  costUsd: "agent cost",
};

/** @param {string} key */
function label(key) {
  return (
    LABELS[key] ??
    String(key)
      .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
      .replace(/[_-]+/g, " ")
      .toLowerCase()
  );
}

/**
 * A count with its word, coloured only when there is something to count ("0 crashed" is not alarming).
 * @param {number} n @param {string} word @param {string} [cls]
 * @returns {Markup}
 */
function count(n, word, cls) {
  return n > 0 && cls ? html`<span class=${cls}>${n} ${word}</span>` : `${n} ${word}`;
}

/** A usage value in its unit: seconds, dollars, or a plain count. @param {string} key @param {number} v */
function usageValue(key, v) {
  if (key === "wallS") return `${v.toFixed(1)}s`;
  if (key === "costUsd") return `$${v.toFixed(4)}`;
  return fmt(v);
}

/** A decision's badge: its colour from `decision`, its words `text` (the decision by default). @param {string} decision @param {string} [text] */
function badge(decision, text = decision) {
  return html`<span class="badge ${decision}">${text}</span>`;
}

/**
 * @template {unknown[]} A
 * @param {(...a: A) => void} fn @param {number} ms
 * @returns {(...a: A) => void}
 */
function debounce(fn, ms) {
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let t;
  return (...a) => {
    clearTimeout(t);
    t = setTimeout(() => fn(...a), ms);
  };
}

// ---------------------------------------------------------------------------------------------
// loading

/** @param {RunsResponse} [runs] */
async function loadRuns(runs) {
  state.runs = runs ?? (await api("/api/runs"));
  const select = /** @type {HTMLSelectElement} */ ($("run-select"));
  render(
    state.runs
      .slice()
      .reverse()
      .map((r) => html`<option value=${r.tag}>${r.tag} · ${r.program} (${r.experiments})</option>`),
    select,
  );
  if (!state.run && state.runs.length)
    state.run = /** @type {RunsResponse[number]} */ (state.runs.at(-1)).tag;
  select.value = state.run;
}

/**
 * Loads everything at once (the page brought the list of runs), noting the notebook version
 * the answers saw, for the event stream's "ready" to compare.
 * @param {{ runs?: RunsResponse } | null} [boot]
 */
async function loadAll(boot) {
  state.loaded = true;
  state.loading = true;
  state.version = null;
  try {
    await loadRuns(boot?.runs);
    if (!state.runs.length) return showEmpty();
    await Promise.all([
      loadStatus(),
      loadChart(),
      loadTable(),
      loadOrg(),
      loadWorkers(),
      loadAlarms(),
      loadPriorWork(),
      loadTree(),
    ]).catch(showError);
    // Built from git: a repository that moved or lost a commit hides this panel, not the page.
    loadFinalize().catch(() => {
      $("finalize").hidden = true;
    });
    const n = currentExperiment();
    if (n !== null) await loadExperiment(n).catch(showError);
  } catch (err) {
    showError(/** @type {ApiError} */ (err));
  } finally {
    state.loading = false;
    reconcile();
  }
}

/**
 * The snapshot and the event stream meet: rows written after the stream's "ready" arrive as
 * events; rows written between the snapshot and "ready" would be missed, so when the two saw
 * different notebook versions the snapshot is read again.
 */
function reconcile() {
  if (state.loading || state.readyVersion === null) return;
  const stale = state.version !== state.readyVersion;
  state.readyVersion = null;
  if (stale) loadAll();
}

async function loadStatus() {
  state.status = await api("/api/status", { run: state.run });
  renderStatus();
}

async function loadChart() {
  /** @type {ChartResponse} */
  const series = await api("/api/chart", { run: state.run });
  state.series = series;
  state.byN = new Map(series.points.map((p) => [p.n, p]));
  drawChart();
}

/** The chart's points from experiment `state.chartFrom` on, merged into the series drawn. */
async function loadPoints() {
  const series = state.series;
  const from = state.chartFrom;
  if (!series || from === null) return;
  state.chartFrom = null;
  /** @type {ChartResponse} */
  const fresh = await api("/api/chart", { run: state.run, from: String(from) });
  if (state.series !== series) return; // the run changed meanwhile: its chart was reloaded
  for (const p of fresh.points) {
    if (!state.byN.has(p.n)) series.points.push(p);
    else series.points[series.points.findIndex((q) => q.n === p.n)] = p;
    state.byN.set(p.n, p);
  }
  series.points.sort((a, b) => a.n - b.n);
  drawChart();
}

async function loadTable() {
  const t = state.table;
  /** @type {ExperimentsResponse} */
  const res = await api("/api/experiments", {
    run: state.run,
    decision: [...t.decisions].join(","),
    q: t.q,
    sort: t.sort,
    limit: PAGE,
    offset: t.offset,
  });
  renderTable(res);
}

/** The worker fleet (`serve --fleet`): read every 5 s, since heartbeats are no notebook events. */
let workersTimer = 0;
async function loadWorkers() {
  /** @type {WorkersResponse} */
  const w = await api("/api/workers", {});
  renderWorkers(w);
  if (w.fleet && !workersTimer) workersTimer = window.setInterval(() => loadWorkers().catch(() => {}), 5000);
}

/** @param {WorkersResponse} w */
function renderWorkers(w) {
  const panel = $("workers");
  panel.hidden = w.fleet === null;
  if (w.fleet === null) return;
  const live = w.workers.filter((x) => x.state === "live");
  const slots = live.reduce((a, x) => a + x.slots, 0);
  // Worker names and hosts come from other machines: lit-html escapes them.
  render(
    html`<p class="muted">${w.fleet}: ${live.length} live, ${slots} slot${slots === 1 ? "" : "s"}</p>
      ${w.problem ? html`<p class="empty">${w.problem}</p>` : ""}
      <table class="workers"><thead><tr><th>worker</th><th>host</th><th>slots</th><th>state</th><th>last heartbeat</th><th>running</th></tr></thead>
      <tbody>${w.workers.map(
        (x) =>
          html`<tr><td>${x.name}</td><td>${x.host}</td><td>${x.slots}${x.gpus ? ` (GPUs ${x.gpus})` : ""}</td><td>${x.state}</td><td>${Math.round(x.heartbeatAgeS)} s ago</td><td>${x.current.length ? x.current.map((c) => `slot ${c.slot}: ${c.label}`).join(", ") : x.state === "live" ? "idle" : "—"}</td></tr>`,
      )}</tbody></table>`,
    $("workers-body"),
  );
}

async function loadOrg() {
  renderOrg(await api("/api/org", { run: state.run }));
}

async function loadTree() {
  renderTree(await api("/api/tree", { run: state.run }));
}

/**
 * The tree frontier's tree: every kept node under the node it grew from, with its value; shown
 * only when the run branched (otherwise the kept changes are a chain, as the table shows).
 * @param {TreeResponse} tree
 */
function renderTree(tree) {
  const panel = $("tree");
  panel.hidden = !tree.branched;
  if (!tree.branched) return;
  /** @type {Map<number | null, TreeResponse["nodes"]>} */
  const children = new Map();
  for (const node of tree.nodes) {
    const list = children.get(node.parent) ?? [];
    list.push(node);
    children.set(node.parent, list);
  }
  /** @param {number | null} parent @returns {Markup} */
  const list = (parent) => {
    const nodes = children.get(parent) ?? [];
    if (!nodes.length) return "";
    return html`<ul class="tree">${nodes.map(
      (node) => html`<li><a href="#/${node.n}">#${node.n}</a> <span class="num">${fmt(node.metric)}</span>
        ${node.best ? badge("keep", "best") : node.kind === "node" ? html`<span class="muted" title="kept in the tree: beat its parent, not the best">tree node</span>` : ""}
        <span class="muted">${firstLine(node.hypothesis)}</span>${list(node.n)}</li>`,
    )}</ul>`;
  };
  const kept = tree.nodes.filter((x) => x.kind === "node").length;
  render(
    html`<p class="muted small">${tree.nodes.length} kept nodes, ${kept} kept in the tree without moving the ratchet (they beat the node they grew from, not the best); ${tree.metric}, ${tree.direction === "minimize" ? "lower" : "higher"} is better.</p>${list(null)}`,
    $("tree-body"),
  );
}

/** Seconds as `45s`, `16m05s`, `1h02m` (as `autolab status` prints them). @param {number} seconds */
function clock(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

/** @param {number} x @param {number} [digits] */
function pct(x, digits = 0) {
  return `${(x * 100).toFixed(digits)}%`;
}

/** @param {OrgResponse} org */
function renderOrg(org) {
  const body = $("org-body");
  const roles = org.roles ?? [];
  const slots = org.slots ?? [];
  const session = org.session;
  const findings = org.findings ?? [];
  if (!roles.length && !session) {
    render(
      html`<p class="empty">One researcher, one slot. Roles (with their credit) and slot utilization appear here when the lab runs an organization.</p>`,
      body,
    );
    return;
  }
  const parts = [];
  if (roles.length) {
    const rows = roles.map(
      (
        r,
      ) => html`<tr><td>${r.role}</td><td class="num">${r.proposals}</td><td class="num">${r.kept}${r.merges ? html` <span class="muted" title="merge candidates">(${r.merges} merge${r.merges === 1 ? "" : "s"})</span>` : ""}</td>
          <td class="num">${fmt(r.improvement)}</td><td class="num">${clock(r.computeS)}</td>
          <td class="num" title="improvement per compute hour">${fmt(r.value * 3600)}</td>
          <td class="nowrap"><span class="bar share"><span style="width:${(r.share * 100).toFixed(1)}%"></span></span> ${pct(r.share)}</td></tr>`,
    );
    parts.push(
      html`<table class="small credit"><thead><tr><th>role</th><th class="num">proposals</th><th class="num">kept</th><th class="num">improvement</th><th class="num">compute</th><th class="num">value/h</th><th>share</th></tr></thead><tbody>${rows}</tbody></table>`,
    );
  }
  if (session) {
    const when = session.live ? "this session" : "last session";
    parts.push(
      html`<p class="slots-line">slots: ${session.slots} · utilization <b>${pct(session.utilization, 1)}</b> <span class="muted">(busy ${clock(session.busyS)} of ${session.slots} × ${clock(session.windowS)} ${when})</span></p>`,
    );
    const rows = slots.map((s) => {
      const r = s.running;
      const what = r
        ? html`${r.state === "running" ? html`<span class="pulse"></span> ` : html`<span class="muted">cut short</span> `}<a href="#/e/${r.n}">#${r.n}</a>${r.role ? html` <span class="muted">${r.role}</span>` : ""} ${firstLine(r.hypothesis)}`
        : html`<span class="muted">idle</span>`;
      return html`<tr><td>${s.slot}</td><td class="nowrap"><span class="bar"><span style="width:${Math.min(100, s.utilization * 100).toFixed(1)}%"></span></span> ${pct(s.utilization)}</td><td class="num">${s.trials}</td><td class="hyp">${what}</td></tr>`;
    });
    parts.push(
      html`<table class="small slots"><thead><tr><th>slot</th><th>busy</th><th class="num">trials</th><th>running</th></tr></thead><tbody>${rows}</tbody></table>`,
    );
  }
  if (findings.length) {
    parts.push(
      // The ten newest kept and refuted, then the knob ranges the built-in optimizer ruled out.
      html`<h3>Findings</h3><ul class="findings">${[
        ...findings.filter((f) => f.kind !== "ruled-out").slice(0, 10),
        ...findings.filter((f) => f.kind === "ruled-out"),
      ].map((f) =>
        f.kind === "ruled-out"
          ? // The built-in optimizer's knob ranges that were not better (src/app/org-view.ts).
            html`<li class="ruled-out"><span class="badge discard">not better</span> ${f.hypothesis} <span class="muted">${(
              f.region?.ns ?? []
            )
              .slice(-5)
              .map(
                (n, i) => html`${i ? " " : ""}<a href="#/e/${n}">#${n}</a>`,
              )}${(f.region?.ns.length ?? 0) > 5 ? " …" : ""}</span></li>`
          : html`<li>${f.kind === "kept" ? badge("keep") : html`<span class="badge discard">refuted</span>`} <a href="#/e/${f.n}">#${f.n}</a>${f.role ? html` <span class="muted">${f.role}</span>` : ""} ${firstLine(f.mechanism ?? f.hypothesis)}${f.metric === null ? "" : html` <span class="muted">${fmt(f.metric)}</span>`}</li>`,
      )}</ul>`,
    );
  }
  render(parts, body);
}

async function loadFinalize() {
  renderFinalize(await api("/api/finalize", { run: state.run }));
}

/**
 * `autolab finalize`'s dry run: the branches the run's kept changes would become (one per
 * change, from the base, its dependencies first), each change's measured gain, conflicts, and
 * what --apply and --verify recorded; hidden while the run kept nothing beyond its baseline.
 * Read-only: the page shows the command that creates the branches, it never runs it.
 * @param {FinalizeResponse} f
 */
function renderFinalize(f) {
  const panel = $("finalize");
  const plan = f.plan;
  panel.hidden = !plan && !f.error;
  panel.dataset.loaded = "1";
  if (!plan) {
    if (f.error)
      render(html`<p class="empty">The plan cannot be built here: ${f.error}</p>`, $("finalize-body"));
    return;
  }
  const changes = new Map(plan.changes.map((c) => [c.n, c]));
  const sha = (/** @type {string} */ s) => s.slice(0, 8);
  const ref = (/** @type {number} */ n) => html`<a href="#/e/${n}">#${n}</a>`;
  const join = (/** @type {Markup[]} */ parts, sep = ", ") => parts.map((p, i) => html`${i ? sep : ""}${p}`);
  const empty = plan.changes.filter((c) => c.empty);
  render(
    html`<p class="muted small">${plan.changes.length} kept change${plan.changes.length === 1 ? "" : "s"} → ${plan.branches.length} branch${plan.branches.length === 1 ? "" : "es"}, each from the base <code>${sha(plan.baseCommit)}</code> with the changes it depends on first (one commit each). ${plan.noise.explain}. Dry run: nothing is written.</p>
      ${
        plan.dirty.length
          ? html`<p class="finalize-dirty">Uncommitted changes in ${plan.dirty.join(", ")}: <code>--apply</code> refuses until they are committed or stashed.</p>`
          : ""
      }
      <ol class="finalize">${plan.branches.map((b) => {
        const c = changes.get(b.n);
        if (!c) return "";
        return html`<li data-n=${b.n}>
          <div><code class="branch">${b.name}</code> ${b.applied ? badge("keep", "created") : html`<span class="muted">planned</span>`}</div>
          <div>${ref(c.n)} <span class="hyp">${firstLine(c.hypothesis)}</span></div>
          <div class="muted">${c.gainText}</div>
          <div class="muted">files: ${c.paths.join(", ")}</div>
          ${
            c.dependsOn.length
              ? html`<div>depends on ${join(c.dependsOn.map((d) => html`${ref(d.n)} (overlapping lines in ${d.paths.join(", ")})`))}</div>`
              : ""
          }
          ${b.conflictsWith.map(
            (x) =>
              html`<div class="finalize-conflict">conflict: #${b.n} does not apply without ${ref(x.n)} (${x.paths.join(", ")}): kept together on this branch</div>`,
          )}
          <div class="muted">commits: ${join(
            b.contains.map((n, i) => html`#${n} <code>${sha(b.commits[i] ?? "")}</code>`),
            " → ",
          )}</div>
          ${b.verify.map((v) => html`<div class="finalize-verify">verify: ${v.text}</div>`)}
        </li>`;
      })}</ol>
      ${empty.map((c) => html`<p class="muted small">#${c.n} changed no file: no branch.</p>`)}
      <p>To create the branches: <code class="command">${f.command}</code> <span class="muted small">(<code>--verify</code> re-measures each branch alone; <code>--pr</code> opens a pull request per branch)</span></p>`,
    $("finalize-body"),
  );
}

/**
 * Prior work: the closest results of other runs on this machine, as this run's researcher is
 * shown them. Read with the page (it changes as other runs decide, not with this run's events).
 */
async function loadPriorWork() {
  /** @type {PriorWorkResponse} */
  const pw = await api("/api/prior-work", { run: state.run });
  const body = $("prior-work-body");
  if (!pw.enabled) {
    render(
      html`<p class="empty">Off for this run (program.md's <code>prior_work: false</code>, or AUTOLAB_KNOWLEDGE=off).</p>`,
      body,
    );
    return;
  }
  if (pw.error) {
    render(html`<p class="empty">The knowledge store cannot be read: ${pw.error}</p>`, body);
    return;
  }
  if (!pw.hits.length) {
    render(
      html`<p class="empty">No results of other runs on this machine are close to this program yet (store: ${pw.store}).</p>`,
      body,
    );
    return;
  }
  // Other runs' researchers wrote these texts: lit-html escapes them; claims, not this run's measurements.
  render(
    html`<p class="muted">Other runs on this machine, not measured in this run: what the researcher is shown.</p>
      <ul class="prior-work">${pw.hits.map(
        (h) =>
          html`<li>${badge(h.action)} <span class="muted">${h.projectName}/${h.run}#${h.n} · ${h.date.slice(0, 10)}</span> ${firstLine(h.hypothesis)}${h.value === undefined ? "" : html` <span class="muted">${h.metric} ${fmt(h.value)}${h.gain === undefined ? "" : html` (${h.gain >= 0 ? "+" : ""}${fmt(h.gain)} vs its parent)`}</span>`}</li>`,
      )}</ul>`,
    body,
  );
}

async function loadAlarms() {
  /** @type {[AlarmsResponse, NoiseResponse]} */
  const [alarms, noise] = await Promise.all([
    api("/api/alarms", { run: state.run }),
    api("/api/noise", { run: state.run }),
  ]);
  // Every σ is explained: the run's noise model, where σ came from (src/trust/noise-model.ts).
  const noiseLine = noise ? html`<p class="noise" id="noise-line">${noise.reason}</p>` : "";
  render(
    html`${noiseLine}${
      alarms.length
        ? html`<ul class="alarms">${alarms.map(
            (a) =>
              html`<li><span class="badge crash">${label(a.type)}</span> ${a.reason} <span class="muted">${ago(a.at)}${a.n !== undefined ? html` · <a href="#/e/${a.n}">#${a.n}</a>` : ""}</span></li>`,
          )}</ul>`
        : html`<p class="empty">No alarms. Suspicious gains, noise and tampering are reported here.</p>`
    }`,
    $("alarms-body"),
  );
}

// ---------------------------------------------------------------------------------------------
// rendering: overview

function renderStatus() {
  const s = state.status;
  if (!s) return;
  $("headline").textContent =
    `${s.program} · ${s.direction} ${s.metric}${s.selfReported ? " · self-reported" : ""}`;
  const c = s.counts;
  /** @type {[string, string, Markup][]} */
  const cards = [
    ["baseline", fmt(s.baseline?.metric), s.baseline ? `#0` : "not measured"],
    [
      "best",
      fmt(s.best?.metric),
      s.best
        ? html`<a href="#/e/${s.best.id}">#${s.best.id}</a> ${change(s.baseline?.metric, s.best.metric)}`
        : "none yet",
    ],
    [
      "experiments",
      String(c.total),
      html`${count(c.kept, "kept", "k")} · ${count(c.discarded, "discarded")} · ${count(c.crashed, "crashed", "c")} · ${count(c.rejected, "rejected", "r")}${c.pending ? html` · ${count(c.pending, "pending")}` : ""}`,
    ],
    ["trial time", duration(s.trialSeconds), `last activity ${ago(s.lastActivity)}`],
  ];
  // Results imported by `autolab init --from`: claims, shown apart from the run's own numbers.
  if (s.imported) {
    const last = s.imported.lastKept;
    cards.push([
      "prior history",
      String(s.imported.count),
      html`imported, ${s.imported.note}${last ? html` · last kept there ${fmt(last.metric)}` : ""}`,
    ]);
  }
  // The advisor (docs/advisor.md): its stop when that ended the run, else its newest answer.
  const a = s.advisor;
  if (a) {
    cards.push(
      a.stop
        ? [
            "advisor",
            "stopped",
            html`<span id="advisor-stop">after #${a.stop.afterN}: ${a.stop.reason}</span>`,
          ]
        : [
            "advisor",
            `asked ${a.asked}×`,
            html`<span id="advisor-last">${a.ideas ? html`ideas after #${a.ideas.afterN}: ${a.ideas.ideas.join(" · ")}` : html`last: ${a.last.verdict}${a.last.reason ? ` — ${firstLine(a.last.reason)}` : ""}`}</span>${a.garbage ? html` <span class="muted">(${a.garbage} not used)</span>` : ""}`,
          ],
    );
  }
  render(
    cards.map(
      ([label, value, sub]) =>
        html`<div class="card"><div class="label">${label}</div><div class="value">${value}</div><div class="sub">${sub}</div></div>`,
    ),
    $("summary"),
  );
  renderFront(s.front);
  renderRunning();
}

/**
 * Several objectives: the kept experiments no other kept one dominates, one row each with every
 * objective metric (status.front, src/app/front.ts); the panel is hidden with one objective.
 * @param {StatusResponse["front"]} f
 */
function renderFront(f) {
  const el = $("front");
  if (!f) {
    el.hidden = true;
    return;
  }
  el.hidden = false;
  const threshold = f.threshold;
  const how =
    f.mode === "pareto"
      ? `pareto over ${f.metrics.map((m) => `${m.direction} ${m.metric}`).join(", ")}`
      : `threshold then optimize: ${threshold ? `${threshold.metric} past ${fmt(threshold.bar)}, then ` : ""}${f.metrics
          .filter((m) => m.metric !== threshold?.metric)
          .map((m) => `${m.direction} ${m.metric}`)
          .join(", ")}`;
  render(
    html`<p class="front-mode">${how}: ${f.points.length} of ${f.kept} kept non-dominated; ${
      f.points.some((p) => p.head) || f.head === null
        ? "★ the branch holds it (the last kept)"
        : html`the branch holds <a href="#/e/${f.head}">#${f.head}</a> (the last kept), no longer on the front`
    }</p>
      <table class="front">
        <thead><tr><th class="num">#</th>${f.metrics.map((m) => html`<th class="num">${m.metric}</th>`)}<th class="num">trials</th><th>hypothesis</th></tr></thead>
        <tbody>${f.points.map(
          (p) =>
            html`<tr data-n=${p.id}><td class="num"><a href="#/e/${p.id}">#${p.id}</a>${p.head ? " ★" : ""}</td>${f.metrics.map(
              (m) => html`<td class="num">${fmt(p.values[m.metric])}</td>`,
            )}<td class="num">${p.trials}</td><td class="hyp">${firstLine(p.hypothesis)}</td></tr>`,
        )}</tbody>
      </table>`,
    $("front-body"),
  );
}

function renderRunning() {
  const el = $("running");
  const open = state.status?.running ?? [];
  if (!open.length) {
    el.hidden = true;
    return;
  }
  el.hidden = false;
  render(
    open.map((t) => {
      if (t.state === "interrupted")
        return html`<div class="trial interrupted">#${t.n} trial ${t.attempt} was cut short (no harness is running) — <code>autolab run</code> runs it again. <a href="#/e/${t.n}">${firstLine(t.hypothesis)}</a></div>`;
      const elapsed = (Date.now() - Date.parse(t.startedAt)) / 1000;
      const budget = t.budgetMs / 1000;
      const pct = Math.min(100, (elapsed / budget) * 100);
      return html`<div class="trial"><span class="pulse"></span> running <a href="#/e/${t.n}">#${t.n}</a> trial ${t.attempt}
        <span class="bar"><span style="width:${pct.toFixed(1)}%"></span></span> ${elapsed.toFixed(0)}s / ${budget}s
        <span class="hyp">${firstLine(t.hypothesis)}</span></div>`;
    }),
    el,
  );
}

let chartFrame = 0;
function drawChart() {
  if (chartFrame) return;
  chartFrame = requestAnimationFrame(() => {
    chartFrame = 0;
    const el = $("chart");
    const series = state.series;
    if (!series) return;
    const width = Math.max(480, Math.floor(el.clientWidth));
    const options = { width, height: 440 };
    // The renderer's SVG is markup by contract: it escapes every text it draws (labels,
    // hypotheses, the metric's name) itself, as it does for the report.
    render(unsafeHTML(renderProgressChart(series, options)), el);
    el.dataset.points = String(series.points.length);
    // Hit-testing uses the renderer's own layout: crowded discards are dots of one path.
    const layout = chartLayout(series, options);
    state.hits = series.points.map((p) => ({ p, ...pointPosition(layout, p) }));
    state.svgWidth = width;
    // For tests and the benchmark: when the chart was last drawn (after the browser painted it).
    requestAnimationFrame(() => {
      /** @type {Window & { autolabChartDrawnAt?: number }} */ (window).autolabChartDrawnAt =
        performance.now();
      document.body.dataset.chartDrawn = String(series.points.length);
    });
  });
}

/** @param {Pick<ExperimentsResponse, "experiments" | "total" | "offset">} res */
function renderTable(res) {
  const tbody = /** @type {HTMLTableSectionElement} */ ($("experiments").querySelector("tbody"));
  $("metric-col").textContent = state.status?.metric ?? "metric";
  if (!res.experiments.length) {
    render(
      html`<tr class="empty-row"><td colspan="7">${res.total === 0 && !state.table.q && !state.table.decisions.size ? "No experiments yet." : "No experiment matches."}</td></tr>`,
      tbody,
    );
  } else {
    render(
      res.experiments.map((e) => {
        const wall = e.trials.at(-1)?.wallS;
        return html`<tr data-n="${e.id}" class="row ${e.decision}">
          <td class="num">${e.id}</td>
          <td>${badge(e.decision)}</td>
          <td class="num">${fmt(e.metric)}</td>
          <td class="num">${wall === null || wall === undefined ? "—" : `${wall.toFixed(1)}s`}</td>
          <td><code>${e.commit.slice(0, 8)}</code></td>
          <td class="hyp" title="${e.hypothesis}">${e.revisitOf !== null && e.revisitOf !== undefined ? html`<span class="badge revisit" title="tries #${e.revisitOf} again on a newer best">revisit</span> ` : ""}${e.id === 0 ? "baseline" : firstLine(e.hypothesis)}</td>
          <td class="reason" title="${e.reason ?? ""}">${e.reason ?? ""}</td>
        </tr>`;
      }),
      tbody,
    );
  }
  const from = res.total ? res.offset + 1 : 0;
  $("page-info").textContent = `${from}–${res.offset + res.experiments.length} of ${res.total}`;
  button("prev").disabled = res.offset === 0;
  button("next").disabled = res.offset + res.experiments.length >= res.total;
  for (const th of $("experiments").querySelectorAll("th[data-sort]")) {
    if (!(th instanceof HTMLElement)) continue;
    const key = th.dataset.sort;
    th.classList.toggle("sorted", state.table.sort.replace(/^-/, "") === key);
    th.dataset.dir = state.table.sort === key ? "asc" : state.table.sort === `-${key}` ? "desc" : "";
  }
}

function renderDecisionChips() {
  render(
    DECISIONS.map(
      (d) =>
        html`<button type="button" class="chip ${d}${state.table.decisions.has(d) ? " on" : ""}" data-decision="${d}" aria-pressed="${state.table.decisions.has(d)}">${d}</button>`,
    ),
    $("decision-filters"),
  );
}

function showEmpty() {
  $("headline").textContent = "";
  render(
    html`<div class="card wide"><div class="label">empty notebook</div><div class="sub">No runs yet. Start one with <code>autolab run</code>; it appears here as it goes.</div></div>`,
    $("summary"),
  );
  state.series = { metric: "metric", direction: "minimize", points: [] };
  state.byN = new Map();
  drawChart();
  renderTable({ experiments: [], total: 0, offset: 0 });
  loadOrg().catch(() => {});
  render(html`<p class="empty">No alarms.</p>`, $("alarms-body"));
}

/** @param {ApiError} err */
function showError(err) {
  render(
    html`<div class="card wide error"><div class="label">error</div><div class="sub">${err.message}${err.hint ? html`<br>${err.hint}` : ""}</div></div>`,
    $("summary"),
  );
}

// ---------------------------------------------------------------------------------------------
// rendering: one experiment

function currentExperiment() {
  const m = /^#\/e\/(\d+)/.exec(location.hash);
  return m ? Number(m[1]) : null;
}

/** @param {number} n */
async function loadExperiment(n) {
  /** @type {ExperimentResponse} */
  const e = await api(`/api/experiments/${n}`, { run: state.run });
  const body = $("exp-body");
  const metricName = state.status?.metric ?? "metric";
  const params = e.params
    ? html`<dl class="params">${Object.entries(e.params)
        // A categorical knob's value is text (or a boolean): shown as text, never HTML.
        .map(
          ([k, v]) => html`<dt>${k}</dt><dd>${typeof v === "number" ? fmt(v) : String(v ?? "")}</dd>`,
        )}</dl>`
    : "";
  const metrics = Object.entries(e.metrics);
  const usage = Object.entries(e.usage ?? {}).map(
    ([k, v]) => html`<tr><th>${label(k)}</th><td class="num">${usageValue(k, v)}</td></tr>`,
  );
  const trials = e.trials.map(
    (t) =>
      html`<tr><td>${t.attempt}</td><td>${t.seed}</td><td>${badge(t.status === "ok" ? "keep" : t.status === "running" ? "pending" : "crash", label(t.status))}</td><td class="num">${t.wallS === null ? "—" : `${t.wallS.toFixed(2)}s`}</td><td class="num">${t.cpuS === null ? "—" : `${t.cpuS.toFixed(2)}s`}</td><td class="num">${t.peakRssMb === null ? "—" : `${t.peakRssMb.toFixed(0)} MB`}</td><td>${t.reason ?? ""}</td></tr>`,
  );
  render(
    html`
    <h1>#${e.id} ${badge(e.decision)}${e.isBest ? html` <span class="badge best">current best</span>` : ""}</h1>
    <p class="hypothesis">${e.id === 0 ? "baseline" : e.hypothesis}</p>
    ${e.mechanism ? html`<p><span class="muted">mechanism</span> ${e.mechanism}</p>` : ""}
    ${e.expected ? html`<p><span class="muted">expected</span> ${e.expected}</p>` : ""}
    <div class="decision ${e.decision}"><strong>${e.decision}</strong> — ${e.reason ?? "no decision yet"}${
      e.mechanismConfirmed === true
        ? " (mechanism confirmed)"
        : e.mechanismConfirmed === false
          ? " (mechanism refuted)"
          : ""
    }</div>
    <div class="grid">
      <section><h2>Metrics</h2>
        <table class="small"><tbody>
          <tr><th>${metricName} (objective)</th><td class="num">${fmt(e.metric)}</td></tr>
          ${metrics
            .filter(([k]) => k !== metricName)
            .map(([k, v]) => html`<tr><th>${k}</th><td class="num">${fmt(v)}</td></tr>`)}
        </tbody></table>
      </section>
      <section><h2>Cost</h2>
        <table class="small"><tbody>
          <tr><th>trials</th><td class="num">${e.costs.trials}</td></tr>
          <tr><th>wall</th><td class="num">${e.costs.wallS.toFixed(2)}s</td></tr>
          <tr><th>cpu</th><td class="num">${e.costs.cpuS.toFixed(2)}s</td></tr>
          <tr><th>peak memory</th><td class="num">${e.costs.peakRssMb.toFixed(0)} MB</td></tr>
          ${usage}
        </tbody></table>
      </section>
      <section><h2>Change</h2>
        <p><span class="muted">agent</span> ${e.agent}<br>
        <span class="muted">commit</span> <code>${e.commit.slice(0, 12)}</code> on <code>${e.parent.slice(0, 12)}</code><br>
        <span class="muted">ref</span> <code>${e.ref}</code><br>
        <span class="muted">diff</span> ${e.diff.files} file(s), ${e.diff.insertions ? html`<span class="k">+${e.diff.insertions}</span>` : "+0"} ${e.diff.deletions ? html`<span class="c">−${e.diff.deletions}</span>` : "−0"}</p>
        ${params}
      </section>
    </div>
    <h2>Trials</h2>
    <table class="small trials"><thead><tr><th>#</th><th>seed</th><th>status</th><th class="num">wall</th><th class="num">cpu</th><th class="num">peak</th><th>reason</th></tr></thead><tbody>${trials.length ? trials : html`<tr><td colspan="7" class="empty">no trial started</td></tr>`}</tbody></table>
    <h2>Diff</h2>
    ${e.diffText ? html`<pre class="diff">${colorDiff(e.diffText)}</pre>` : html`<p class="empty">No change against its parent${e.id === 0 ? " (the baseline runs the code as it is)" : ""}.</p>`}
    <h2>Log tail</h2>
    ${e.logTail ? html`<pre class="log">${e.logTail}</pre>` : html`<p class="empty">No log yet.</p>`}
    ${
      e.hooks.length
        ? html`<h2>Hooks</h2>
          ${e.hooks.map(
            (
              h,
            ) => html`<section class="hook"><p><strong>${h.phase}</strong> <code>${h.command}</code>: <span class="${h.status === "ok" ? "k" : "c"}">${h.status}</span>${h.reason ? ` — ${h.reason}` : ""} <span class="muted">${h.wallS.toFixed(2)}s</span></p>
            ${h.output ? html`<pre class="log hook-output">${h.output}</pre>` : html`<p class="empty">No output.</p>`}</section>`,
          )}`
        : ""
    }
  `,
    body,
  );
  // A log tail is read from its end.
  const log = body.querySelector("pre.log");
  if (log) log.scrollTop = log.scrollHeight;
  const ns = state.series ? state.series.points.map((p) => p.n) : [];
  const i = ns.indexOf(n);
  const prev = i > 0 ? ns[i - 1] : undefined;
  const next = i >= 0 && i < ns.length - 1 ? ns[i + 1] : undefined;
  link("exp-prev").hidden = prev === undefined;
  link("exp-next").hidden = next === undefined;
  if (prev !== undefined) link("exp-prev").href = `#/e/${prev}`;
  if (next !== undefined) link("exp-next").href = `#/e/${next}`;
  document.title = `#${e.id} · autolab`;
}

/** A unified diff, line by line, coloured by what each line is. @param {string} text */
function colorDiff(text) {
  return text.split("\n").map((l, i) => {
    const cls =
      l.startsWith("+++") || l.startsWith("---") || l.startsWith("diff ") || l.startsWith("index ")
        ? "meta"
        : l.startsWith("+")
          ? "add"
          : l.startsWith("-")
            ? "del"
            : l.startsWith("@@")
              ? "hunk"
              : "";
    return html`${i ? "\n" : ""}${cls ? html`<span class=${cls}>${l}</span>` : l}`;
  });
}

async function route() {
  const n = currentExperiment();
  $("overview").hidden = n !== null;
  $("experiment").hidden = n === null;
  if (n === null) {
    document.title = state.status ? `${state.status.program} · autolab` : "autolab";
    drawChart();
    return;
  }
  window.scrollTo(0, 0);
  render(html`<p class="muted">loading #${n}…</p>`, $("exp-body"));
  await loadExperiment(n).catch((err) => {
    render(html`<p class="error">${err.message}</p>`, $("exp-body"));
  });
}

// ---------------------------------------------------------------------------------------------
// live updates

const pointsSoon = debounce(() => loadPoints().catch(() => {}), 100);

/** The plan is rebuilt from git: only when a change was kept. */
const finalizeSoon = debounce(() => loadFinalize().catch(() => {}), 1000);

const refreshSoon = debounce(() => {
  loadStatus().catch(() => {});
  loadTable().catch(() => {});
  loadOrg().catch(() => {});
  loadTree().catch(() => {});
  const n = currentExperiment();
  if (n !== null) loadExperiment(n).catch(() => {});
}, 250);

/** @param {EventMessage} e */
function onEvent(e) {
  if (e.type === "run_started") {
    loadRuns().catch(() => {});
    return;
  }
  if (state.run && e.run !== state.run) return;
  if (
    state.series &&
    (e.type === "experiment_created" || e.type === "trial_finished" || e.type === "decision")
  ) {
    // The points of the experiments this event touches come from the server, which derives
    // every point of the chart (src/app/progress-series.ts): fetched from the lowest one changed.
    state.chartFrom = Math.min(state.chartFrom ?? e.n, e.n);
    pointsSoon();
  }
  if (e.type === "decision" && e.action === "keep") finalizeSoon();
  refreshSoon();
}

function connect() {
  const es = new EventSource("/api/events");
  const live = $("live");
  es.addEventListener("ready", (m) => {
    state.connected = true;
    live.textContent = "● live";
    live.className = "live on";
    state.readyVersion = JSON.parse(m.data).version;
    if (!state.loaded) loadAll();
    else reconcile();
  });
  es.onmessage = (m) => onEvent(JSON.parse(m.data));
  es.onerror = () => {
    state.connected = false;
    live.textContent = "○ reconnecting";
    live.className = "live off";
  };
}

// ---------------------------------------------------------------------------------------------
// wiring

/** The element an event happened on, for `closest()`. @param {Event} ev */
const targetOf = (ev) => /** @type {Element} */ (ev.target);

function wire() {
  renderDecisionChips();
  $("run-select").addEventListener("change", (ev) => {
    state.run = /** @type {HTMLSelectElement} */ (ev.target).value;
    const url = new URL(location.href);
    url.searchParams.set("run", state.run);
    history.replaceState(null, "", url);
    state.table.offset = 0;
    loadAll();
  });
  $("decision-filters").addEventListener("click", (ev) => {
    const d = targetOf(ev).closest("[data-decision]")?.getAttribute("data-decision");
    if (!d) return;
    if (state.table.decisions.has(d)) state.table.decisions.delete(d);
    else state.table.decisions.add(d);
    state.table.offset = 0;
    renderDecisionChips();
    loadTable().catch(showError);
  });
  $("search").addEventListener(
    "input",
    debounce((/** @type {Event} */ ev) => {
      state.table.q = /** @type {HTMLInputElement} */ (ev.target).value;
      state.table.offset = 0;
      loadTable().catch(showError);
    }, 200),
  );
  $("experiments")
    .querySelector("thead")
    ?.addEventListener("click", (ev) => {
      const key = targetOf(ev).closest("th[data-sort]")?.getAttribute("data-sort");
      if (!key) return;
      const t = state.table;
      t.sort = t.sort === `-${key}` ? key : t.sort === key ? `-${key}` : key === "n" ? "-n" : key;
      t.offset = 0;
      loadTable().catch(showError);
    });
  $("experiments")
    .querySelector("tbody")
    ?.addEventListener("click", (ev) => {
      const n = targetOf(ev).closest("tr[data-n]")?.getAttribute("data-n");
      if (n !== undefined && n !== null) location.hash = `#/e/${n}`;
    });
  $("prev").addEventListener("click", () => {
    state.table.offset = Math.max(0, state.table.offset - PAGE);
    loadTable().catch(showError);
  });
  $("next").addEventListener("click", () => {
    state.table.offset += PAGE;
    loadTable().catch(showError);
  });

  const chart = $("chart");
  const tip = $("tooltip");
  const SVG_NS = "http://www.w3.org/2000/svg";
  /** The experiment nearest the pointer, within 10 px. @param {MouseEvent} ev */
  const nearest = (ev) => {
    const svg = chart.querySelector("svg");
    if (!svg || !state.hits) return null;
    const box = svg.getBoundingClientRect();
    const k = state.svgWidth / box.width;
    const x = (ev.clientX - box.left) * k;
    const y = (ev.clientY - box.top) * k;
    let best = null;
    let bestD = 100;
    for (const h of state.hits) {
      const d = (h.x - x) ** 2 + (h.y - y) ** 2;
      if (d < bestD) {
        bestD = d;
        best = h;
      }
    }
    return best;
  };
  /** @type {ChartPoint | null} */
  let shown = null;
  chart.addEventListener("mousemove", (ev) => {
    const h = nearest(ev);
    if (h?.p === shown) return;
    shown = h?.p ?? null;
    const svg = chart.querySelector("svg");
    let ring = svg?.querySelector(".hover-ring");
    if (!h || !svg) {
      tip.hidden = true;
      ring?.remove();
      chart.style.cursor = "";
      return;
    }
    if (!ring) {
      ring = document.createElementNS(SVG_NS, "circle");
      ring.setAttribute("class", "hover-ring");
      ring.setAttribute("r", "7");
      ring.setAttribute("fill", "none");
      ring.setAttribute("stroke", "#111");
      ring.setAttribute("stroke-width", "1.5");
      svg.appendChild(ring);
    }
    ring.setAttribute("cx", String(h.x));
    ring.setAttribute("cy", String(h.y));
    chart.style.cursor = "pointer";
    const p = h.p;
    // A pruned one was discarded; the renderer says where its learning curve stopped.
    const what =
      p.action === "pruned"
        ? html`${badge("discard")} ${pointSummary(p)}`
        : html`${badge(p.action)} ${p.metric === null ? "" : `${state.series?.metric} ${fmt(p.metric)}`}`;
    render(html`<strong>#${p.n}</strong> ${what}<br>${p.label}`, tip);
    tip.hidden = false;
    const box = chart.getBoundingClientRect();
    const k = box.width / state.svgWidth;
    tip.style.left = `${Math.min(box.width - 320, Math.max(0, h.x * k - 150))}px`;
    tip.style.top = `${h.y * k + chart.offsetTop + 16}px`;
  });
  chart.addEventListener("mouseleave", () => {
    shown = null;
    tip.hidden = true;
    chart.querySelector(".hover-ring")?.remove();
  });
  chart.addEventListener("click", (ev) => {
    const h = nearest(ev);
    if (h) location.hash = `#/e/${h.p.n}`;
  });

  window.addEventListener("hashchange", route);
  window.addEventListener("resize", debounce(drawChart, 150));
  setInterval(() => {
    if (state.status?.running?.length) renderRunning();
  }, 1000);
}

wire();
route();
loadAll(JSON.parse(document.getElementById("boot")?.textContent || "null"));
connect();
