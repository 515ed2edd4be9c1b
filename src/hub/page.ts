/**
 * The hub's page (docs/hub.md "The hub's page"): `GET /` is one self-contained HTML document —
 * the program and how to join, the chain of accepted commits, the leaderboard and the latest
 * findings — rendered on the server, then kept live by a small inline script that follows
 * GET /api/feed (SSE).
 *
 * Everything shown comes from contributors or from what their code printed (commit subjects,
 * key ids, reasons, metric names): untrusted. On the server every interpolation goes through
 * the `html` template tag, which escapes it unless it is markup the tag made itself; in the
 * browser the script builds nodes with createElement and textContent only (never innerHTML),
 * and the page's Content-Security-Policy allows no script but that one (by its sha256), no
 * inline style but the page's own stylesheet (by its sha256), nothing loaded from anywhere, and
 * requires Trusted Types for the DOM's HTML sinks, so a slip of either kind is refused by the
 * browser too.
 */
import { createHash } from "node:crypto";
import type { Context } from "hono";
import { formatMetric } from "../core/format.ts";
import type { HubRepo } from "./repo.ts";
import type { ChainEntry, HubEvent, HubStore, LeaderboardEntry } from "./store.ts";

export interface HubPageDeps {
  store: HubStore;
  repo: HubRepo;
  hardwareClass: string;
}

/** At most this many rows of each list on the page (the JSON routes have them all). */
export const PAGE_CHAIN = 200;
export const PAGE_LEADERS = 100;
export const PAGE_FINDINGS = 50;
/** Hex digits of a key id or commit shown (the whole one is in the element's title). */
const KEY_PREFIX = 12;
const COMMIT_PREFIX = 10;

// --- escaping ------------------------------------------------------------------------------

/** Markup the `html` tag made: the only thing interpolated without escaping. */
class Html {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
  toString(): string {
    return this.text;
  }
}

/** Text as HTML text or a quoted attribute value: & < > " ' escaped. */
export function escapeHtml(s: string): string {
  return s.replace(
    /[&<>"']/g,
    (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[ch] as string,
  );
}

type Part = Html | string | number | null | undefined | readonly Part[];

function interpolate(v: Part): string {
  if (v === null || v === undefined) return "";
  if (v instanceof Html) return v.text;
  if (Array.isArray(v)) return v.map(interpolate).join("");
  return escapeHtml(String(v));
}

/** A template whose every interpolation is escaped, unless it is itself an `html` result. */
export function html(strings: TemplateStringsArray, ...values: Part[]): Html {
  let out = strings[0] ?? "";
  for (let i = 0; i < values.length; i++) out += interpolate(values[i] as Part) + (strings[i + 1] ?? "");
  return new Html(out);
}

// --- what an event says ---------------------------------------------------------------------

/**
 * One event of the feed as the page shows it: pieces of text with a class each. The inline
 * script has the same function (`parts` in PAGE_SCRIPT); test/hub-page.test.ts runs both.
 */
export function eventParts(e: { kind: string; payload: unknown }): Array<[string, string]> {
  const p = (e.payload && typeof e.payload === "object" ? e.payload : {}) as Record<string, unknown>;
  const s = (v: unknown): string => (typeof v === "string" ? v : "");
  const n = (v: unknown): string => (typeof v === "number" ? formatMetric(v) : "");
  const who = s(p.contributor).slice(0, KEY_PREFIX);
  const commit = s(p.commit).slice(0, COMMIT_PREFIX);
  const out: Array<[string, string]> = [];
  const add = (cls: string, text: string) => {
    if (text !== "") out.push([cls, text]);
  };
  if (e.kind === "frontier") {
    add("kind good", "frontier moved");
    add("commit", commit);
    add("subject", s(p.subject));
    add("value", n(p.value) && `${n(p.value)}`);
    add("gain", typeof p.gain === "number" ? `+${formatMetric(Number(p.gain.toFixed(2)))}σ` : "");
    add("who", who && `by ${who}`);
  } else if (e.kind === "refuted") {
    add("kind bad", s(p.status) === "checked" ? "negative result" : "refuted");
    add("commit", commit);
    add("subject", s(p.subject));
    add("value", n(p.value) && `measured ${n(p.value)}`);
    add("who", who && `by ${who}`);
    add("reason", s(p.reason));
  } else if (e.kind === "claim") {
    add("kind", s(p.kind) === "frontier" ? "claim under verification" : "finding under check");
    add("commit", commit);
    add("subject", s(p.subject));
    add("value", n(p.claimedValue) && `claimed ${s(p.metric)} ${n(p.claimedValue)}`);
    add("who", who && `by ${who}`);
  } else if (e.kind === "quarantine") {
    add("kind bad", "quarantined");
    add("who", s(p.identity).slice(0, KEY_PREFIX));
    add("reason", s(p.reason));
    const w = Array.isArray(p.withdrawn) ? p.withdrawn.length : 0;
    add("value", w > 0 ? `${w} accepted commit${w === 1 ? "" : "s"} withdrawn for re-verification` : "");
  } else {
    add("kind", e.kind);
  }
  return out;
}

/** "2026-11-25 10:00 UTC" from an ISO time; the text as is when it is not one. */
export function shownTime(iso: string): string {
  const m = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})/.exec(iso);
  return m ? `${m[1]} ${m[2]} UTC` : iso;
}

// --- the browser's part ---------------------------------------------------------------------

/**
 * The page's one script (its sha256 is in the CSP, so it must stay byte-identical: no data in
 * it — what it needs is read from data- attributes). It appends each feed event to the findings
 * (textContent only), appends accepted commits to the chain, marks withdrawn ones, and reloads
 * the head and the leaderboard from the JSON routes after a change.
 */
export const PAGE_SCRIPT = `"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const KEY = ${KEY_PREFIX};
  const COMMIT = ${COMMIT_PREFIX};
  function fmt(x) {
    if (typeof x !== "number") return "";
    if (!Number.isFinite(x)) return String(x);
    const a = Math.abs(x);
    if (a !== 0 && (a < 1e-4 || a >= 1e7)) return x.toExponential(4);
    return Number(x.toPrecision(6)).toString();
  }
  function when(iso) {
    const m = /^(\\d{4}-\\d{2}-\\d{2})T(\\d{2}:\\d{2})/.exec(String(iso));
    return m ? m[1] + " " + m[2] + " UTC" : String(iso);
  }
  function parts(e) {
    const p = e.payload && typeof e.payload === "object" ? e.payload : {};
    const s = (v) => (typeof v === "string" ? v : "");
    const n = (v) => (typeof v === "number" ? fmt(v) : "");
    const who = s(p.contributor).slice(0, KEY);
    const commit = s(p.commit).slice(0, COMMIT);
    const out = [];
    const add = (cls, text) => { if (text !== "") out.push([cls, text]); };
    if (e.kind === "frontier") {
      add("kind good", "frontier moved");
      add("commit", commit);
      add("subject", s(p.subject));
      add("value", n(p.value) && n(p.value));
      add("gain", typeof p.gain === "number" ? "+" + fmt(Number(p.gain.toFixed(2))) + "σ" : "");
      add("who", who && "by " + who);
    } else if (e.kind === "refuted") {
      add("kind bad", s(p.status) === "checked" ? "negative result" : "refuted");
      add("commit", commit);
      add("subject", s(p.subject));
      add("value", n(p.value) && "measured " + n(p.value));
      add("who", who && "by " + who);
      add("reason", s(p.reason));
    } else if (e.kind === "claim") {
      add("kind", s(p.kind) === "frontier" ? "claim under verification" : "finding under check");
      add("commit", commit);
      add("subject", s(p.subject));
      add("value", n(p.claimedValue) && "claimed " + s(p.metric) + " " + n(p.claimedValue));
      add("who", who && "by " + who);
    } else if (e.kind === "quarantine") {
      add("kind bad", "quarantined");
      add("who", s(p.identity).slice(0, KEY));
      add("reason", s(p.reason));
      const w = Array.isArray(p.withdrawn) ? p.withdrawn.length : 0;
      add("value", w > 0 ? w + " accepted commit" + (w === 1 ? "" : "s") + " withdrawn for re-verification" : "");
    } else {
      add("kind", s(e.kind));
    }
    return out;
  }
  function el(tag, cls, text, title) {
    const x = document.createElement(tag);
    if (cls) x.className = cls;
    if (text !== undefined) x.textContent = text;
    if (title) x.title = title;
    return x;
  }
  const list = $("findings-list");
  const chain = $("chain-rows");
  const leaders = $("leader-rows");
  const state = $("feed-state");
  function finding(e) {
    const li = el("li", "event");
    li.dataset.seq = String(e.seq);
    li.append(el("time", "at", when(e.at)));
    for (const [cls, text] of parts(e)) li.append(" ", el("span", cls, text));
    const empty = $("findings-empty");
    if (empty) empty.remove();
    list.prepend(li);
    while (list.children.length > ${PAGE_FINDINGS * 4}) list.lastElementChild.remove();
  }
  function chainRow(p, at) {
    const c = typeof p.commit === "string" ? p.commit : "";
    const who = typeof p.contributor === "string" ? p.contributor : "";
    const tr = el("tr");
    tr.dataset.commit = c;
    tr.append(
      el("td", "num", String(typeof p.chainSeq === "number" ? p.chainSeq : "")),
      el("td", "commit", c.slice(0, COMMIT), c),
      el("td", "subject", typeof p.subject === "string" ? p.subject : ""),
      el("td", "who", who.slice(0, KEY), who),
      el("td", "num", fmt(p.value)),
      el("td", "num", typeof p.gain === "number" ? "+" + fmt(Number(p.gain.toFixed(2))) : ""),
      el("td", "at", when(at)),
    );
    chain.append(tr);
  }
  function withdraw(commits) {
    for (const tr of chain.querySelectorAll("tr")) if (commits.has(tr.dataset.commit)) tr.classList.add("withdrawn");
  }
  async function json(path) {
    const r = await fetch(path, { headers: { accept: "application/json" } });
    if (!r.ok) throw new Error(path + ": " + r.status);
    return r.json();
  }
  let timer;
  function reload() {
    clearTimeout(timer);
    timer = setTimeout(() => {
      json("/api/program").then((p) => {
        const h = typeof p.head === "string" ? p.head : "";
        $("head-commit").textContent = h.slice(0, COMMIT);
        $("head-commit").title = h;
        $("head-value").textContent = p.headValue === null ? "being measured" : fmt(p.headValue);
      }, () => {});
      json("/api/leaderboard").then((b) => {
        const rows = [];
        for (const x of (Array.isArray(b.entries) ? b.entries : []).slice(0, ${PAGE_LEADERS})) {
          const who = typeof x.contributor === "string" ? x.contributor : "";
          const tr = el("tr");
          tr.append(
            el("td", "num", String(rows.length + 1)),
            el("td", "who", who.slice(0, KEY), who),
            el("td", "num", fmt(Number(Number(x.credit).toFixed(2)))),
            el("td", "num", String(x.accepted)),
            el("td", "num", String(x.claims)),
            el("td", "num", String(x.rejected)),
          );
          rows.push(tr);
        }
        if (rows.length === 0) {
          const tr = el("tr");
          tr.append(el("td", "empty", "no claims yet"));
          tr.firstChild.colSpan = 6;
          rows.push(tr);
        }
        leaders.replaceChildren(...rows);
      }, () => {});
    }, 300);
  }
  function on(e) {
    finding(e);
    const p = e.payload && typeof e.payload === "object" ? e.payload : {};
    if (e.kind === "frontier") chainRow(p, e.at);
    if (e.kind === "quarantine" && Array.isArray(p.withdrawn))
      withdraw(new Set(p.withdrawn.map((w) => (w && typeof w.commit === "string" ? w.commit : ""))));
    reload();
  }
  const after = Number(document.body.dataset.after || "0");
  const feed = new EventSource("/api/feed?after=" + (Number.isSafeInteger(after) ? after : 0));
  for (const kind of ["claim", "frontier", "refuted", "quarantine"])
    feed.addEventListener(kind, (m) => {
      let e;
      try {
        e = JSON.parse(m.data);
      } catch {
        return;
      }
      if (e && typeof e === "object") on(e);
    });
  feed.addEventListener("ready", () => {
    state.textContent = "live";
    state.className = "live";
  });
  feed.addEventListener("error", () => {
    state.textContent = "reconnecting…";
    state.className = "off";
  });
  const join = $("join");
  join.textContent = "autolab contribute --hub " + location.origin;
})();
`;

const PAGE_STYLE = `
:root { color-scheme: light dark; --muted: #6b7280; --good: #15803d; --bad: #b91c1c; --line: #d1d5db; }
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 72rem; padding: 1.5rem; }
h1 { margin: 0; font-size: 1.6rem; } h2 { font-size: 1.15rem; margin: 2rem 0 .5rem; }
.sub, .muted, .at, .who { color: var(--muted); }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; margin: 1rem 0; }
dt { color: var(--muted); } dd { margin: 0; }
code, .commit, .who { font-family: ui-monospace, monospace; font-size: .9em; }
pre { background: rgba(127,127,127,.12); padding: .6rem .8rem; border-radius: 6px; overflow-x: auto; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .3rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; font-size: .85rem; color: var(--muted); }
.num { text-align: right; font-variant-numeric: tabular-nums; }
.subject { overflow-wrap: anywhere; }
tr.withdrawn td { text-decoration: line-through; color: var(--muted); }
ol.feed { list-style: none; padding: 0; margin: 0; }
ol.feed li { padding: .35rem 0; border-bottom: 1px solid var(--line); overflow-wrap: anywhere; }
.kind { font-weight: 600; } .good { color: var(--good); } .bad { color: var(--bad); }
.reason { color: var(--muted); font-style: italic; }
#feed-state { font-size: .85rem; } #feed-state.live { color: var(--good); } #feed-state.off { color: var(--bad); }
.empty { color: var(--muted); font-style: italic; }
`;

const sha256b64 = (s: string) => createHash("sha256").update(s, "utf8").digest("base64");

/** The page's Content-Security-Policy: nothing but its own script and stylesheet, by hash. */
export const PAGE_CSP = [
  "default-src 'none'",
  `script-src 'sha256-${sha256b64(PAGE_SCRIPT)}'`,
  `style-src 'sha256-${sha256b64(PAGE_STYLE)}'`,
  "connect-src 'self'",
  "img-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'",
].join("; ");

/** The headers the page is sent with (docs/hub.md "The hub's page"). */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  "Content-Type": "text/html; charset=utf-8",
  "Content-Security-Policy": PAGE_CSP,
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
  "X-Frame-Options": "DENY",
  "Cross-Origin-Opener-Policy": "same-origin",
  "Cache-Control": "no-cache",
};

// --- the page's data ------------------------------------------------------------------------

export interface HubPageData {
  name: string;
  metric: string;
  direction: "minimize" | "maximize";
  hardwareClass: string;
  budgetS: number;
  rootCommit: string;
  head: { commit: string; value: number | null };
  chain: Array<ChainEntry & { subject: string }>;
  /** How many chain entries came before those shown. */
  chainOmitted: number;
  leaders: LeaderboardEntry[];
  findings: HubEvent[];
  /** The last event's seq: the live feed continues after it. */
  after: number;
  /** What the join line names until the script puts the browser's own origin there. */
  origin: string;
}

/**
 * What the page shows, read with the store's queries plus two of its own (the latest events,
 * newest first, and the subjects of the chain's commits) — reads only.
 */
export async function hubPageData(deps: HubPageDeps, origin: string): Promise<HubPageData> {
  const { store, repo } = deps;
  const t = (name: string) => `${store.schema}.${name}`;
  const [head, chain, leaders, latest] = await Promise.all([
    store.head(),
    store.chain(),
    store.leaderboard(),
    store.pool.query(`SELECT seq, kind, payload, at FROM ${t("hub_events")} ORDER BY seq DESC LIMIT $1`, [
      PAGE_FINDINGS,
    ]),
  ]);
  const shown = chain.slice(-PAGE_CHAIN);
  const subjects = new Map<string, string>();
  if (shown.length > 0) {
    const r = await store.pool.query<{ sha: string; subject: string }>(
      `SELECT sha, subject FROM ${t("hub_commits")} WHERE sha = ANY($1)`,
      [shown.map((c) => c.commit)],
    );
    for (const row of r.rows) subjects.set(row.sha, row.subject);
  }
  const findings: HubEvent[] = latest.rows.map((x) => ({
    seq: Number(x.seq),
    kind: String(x.kind),
    payload: x.payload,
    at: new Date(x.at).toISOString(),
  }));
  const program = repo.program;
  return {
    name: program.name,
    metric: program.objective.metric,
    direction: program.objective.direction,
    hardwareClass: deps.hardwareClass,
    budgetS: program.run.budgetMs / 1000,
    rootCommit: repo.rootCommit,
    head: head ?? { commit: repo.rootCommit, value: null },
    chain: shown.map((c) => ({ ...c, subject: subjects.get(c.commit) ?? "" })),
    chainOmitted: chain.length - shown.length,
    leaders: leaders.slice(0, PAGE_LEADERS),
    findings,
    after: findings[0]?.seq ?? 0,
    origin,
  };
}

// --- the page -------------------------------------------------------------------------------

const short = (s: string | null | undefined, n: number): Html =>
  s ? html`<span title="${s}">${s.slice(0, n)}</span>` : html``;
const gainText = (g: number): string => `+${formatMetric(Number(g.toFixed(2)))}`;

/** The page's HTML: every value from `d` is escaped (the `html` tag). */
export function renderHubPage(d: HubPageData): string {
  const dir = d.direction === "minimize" ? "lower is better" : "higher is better";
  const chainRows = d.chain.map(
    (c) => html`<tr data-commit="${c.commit}">
<td class="num">${c.seq}</td><td class="commit">${short(c.commit, COMMIT_PREFIX)}</td>
<td class="subject">${c.claimId === null ? html`<span class="muted">(root) </span>` : ""}${c.subject}</td>
<td class="who">${short(c.contributor, KEY_PREFIX)}</td>
<td class="num">${c.value === null ? html`<span class="muted">being measured</span>` : formatMetric(c.value)}</td>
<td class="num">${c.claimId === null ? "" : gainText(c.gain)}</td><td class="at">${shownTime(c.acceptedAt)}</td></tr>
`,
  );
  const leaderRows =
    d.leaders.length === 0
      ? html`<tr><td class="empty" colspan="6">no claims yet</td></tr>`
      : d.leaders.map(
          (
            l,
            i,
          ) => html`<tr><td class="num">${i + 1}</td><td class="who">${short(l.contributor, KEY_PREFIX)}</td>
<td class="num">${formatMetric(Number(l.credit.toFixed(2)))}</td><td class="num">${l.accepted}</td>
<td class="num">${l.claims}</td><td class="num">${l.rejected}</td></tr>
`,
        );
  const findings =
    d.findings.length === 0
      ? html`<li id="findings-empty" class="empty">no findings yet</li>`
      : d.findings.map(
          (e) =>
            html`<li class="event" data-seq="${e.seq}"><time class="at">${shownTime(e.at)}</time>${eventParts(
              e,
            ).map(([cls, text]) => html` <span class="${cls}">${text}</span>`)}</li>
`,
        );
  const join = `autolab contribute --hub ${d.origin}`;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${d.name} — autolab hub</title>
<style>${new Html(PAGE_STYLE)}</style>
</head>
<body data-after="${d.after}">
<header>
<h1>${d.name}</h1>
<p class="sub">an autolab hub: contributors search on their own machines, the hub's verifiers re-run every claim that would move the frontier, and only what they measured is recorded.</p>
</header>
<section id="program">
<dl>
<dt>objective</dt><dd><code>${d.metric}</code>, ${d.direction} (${dir})</dd>
<dt>head</dt><dd><code id="head-commit" title="${d.head.commit}">${d.head.commit.slice(0, COMMIT_PREFIX)}</code> at <strong id="head-value">${d.head.value === null ? "being measured" : formatMetric(d.head.value)}</strong></dd>
<dt>hardware class</dt><dd><code>${d.hardwareClass}</code> (claims are verified on it)</dd>
<dt>trial budget</dt><dd>${formatMetric(d.budgetS)} s</dd>
<dt>root</dt><dd><code title="${d.rootCommit}">${d.rootCommit.slice(0, COMMIT_PREFIX)}</code></dd>
</dl>
<p>Join with your own machine and researcher:</p>
<pre><code id="join">${join}</code></pre>
</section>
<section id="chain">
<h2>The chain: accepted commits, in order</h2>
${d.chainOmitted > 0 ? html`<p class="muted">${d.chainOmitted} earlier entries not shown (GET /api/chain lists them all).</p>` : ""}
<table>
<thead><tr><th class="num">#</th><th>commit</th><th>subject</th><th>contributor</th><th class="num">${d.metric}</th><th class="num">gain (σ)</th><th>accepted</th></tr></thead>
<tbody id="chain-rows">
${chainRows}</tbody>
</table>
</section>
<section id="leaderboard">
<h2>Leaderboard: credit for verified improvement</h2>
<p class="muted">Credit is the sum of a contributor's accepted gains in noise units (σ of the verifiers' paired trials).</p>
<table>
<thead><tr><th class="num">#</th><th>contributor</th><th class="num">credit (σ)</th><th class="num">accepted</th><th class="num">claims</th><th class="num">rejected</th></tr></thead>
<tbody id="leader-rows">
${leaderRows}</tbody>
</table>
</section>
<section id="findings">
<h2>Findings: frontier moves and refuted ideas <span id="feed-state" class="off">connecting…</span></h2>
<ol id="findings-list" class="feed">
${findings}</ol>
</section>
<script>${new Html(PAGE_SCRIPT)}</script>
</body>
</html>
`.text;
}

/** The GET / handler. */
export function hubPage(deps: HubPageDeps): (c: Context) => Promise<Response> {
  return async (c) => {
    const data = await hubPageData(deps, new URL(c.req.url).origin);
    return c.body(renderHubPage(data), 200, { ...PAGE_HEADERS });
  };
}
