/**
 * The hub's page (src/hub/page.ts, GET /), attacked first: contributors whose commit subjects
 * are markup (`<img src=x onerror=…>`, `</script><script>…`), reasons and ids with `"'&<>`. The
 * page must hold them only escaped, as text, with the same tags as a page of harmless strings,
 * and be sent with a CSP that allows its one script by hash (never 'unsafe-inline'). Over real
 * HTTP, real PostgreSQL and real git (startHub), and on the renderer alone with every string
 * hostile. The inline script's event formatting is run in node:vm against the server's.
 */
import { createHash } from "node:crypto";
import vm from "node:vm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StartedHub, startHub } from "../src/hub/hub.ts";
import {
  eventParts,
  type HubPageData,
  PAGE_CSP,
  PAGE_SCRIPT,
  renderHubPage,
  shownTime,
} from "../src/hub/page.ts";
import { cleanupTemp, tempDir } from "./helpers/git-project.ts";
import { claimAt, registerAt } from "./helpers/hub-http.ts";
import { hubProject } from "./helpers/hub-project.ts";
import { dropSchemas, freshSchemaUrl, PG_SKIP, PG_SKIP_REASON, pgQuery } from "./helpers/pg.ts";

const IMG = "<img src=x onerror=alert(1)>";
const SCRIPT = "</script><script>alert(1)</script>";
const QUOTES = `"'&<>`;
const IMG_ESCAPED = "&lt;img src=x onerror=alert(1)&gt;";
const SCRIPT_ESCAPED = "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;";
const QUOTES_ESCAPED = "&quot;&#39;&amp;&lt;&gt;";
/** An id that would break out of an attribute if it were not escaped. */
const ATTR = `"><img src=x onerror=alert(2)>`;
const ATTR_ESCAPED = "&quot;&gt;&lt;img src=x onerror=alert(2)&gt;";

/** The page's tags in order (names only), and each tag's whole text. */
function tags(page: string): { names: string[]; texts: string[] } {
  const texts = [...page.matchAll(/<[^>]*>/g)].map((m) => m[0]);
  return { names: texts.map((t) => (/^<\/?[a-zA-Z!]+/.exec(t)?.[0] ?? t).toLowerCase()), texts };
}

/** The page with the script's and stylesheet's own text taken out (they are constants). */
function markupOf(page: string): string {
  const script = page.indexOf("<script>");
  const end = page.indexOf("</script>", script);
  expect(page.slice(script + "<script>".length, end)).toBe(PAGE_SCRIPT);
  const style = page.indexOf("<style>");
  const styleEnd = page.indexOf("</style>", style);
  return page.slice(0, style + 7) + page.slice(styleEnd, script + 8) + page.slice(end);
}

/** Asserts every hostile string is in the page only escaped, and the page is the harmless page's shape. */
function onlyEscaped(page: string, harmless: string): void {
  const markup = markupOf(page);
  for (const raw of [IMG, SCRIPT, ATTR, `'&<`]) expect(markup).not.toContain(raw);
  // One script element, one style element: nothing the data said became a tag.
  expect(page.match(/<script/gi)).toHaveLength(1);
  expect(page.match(/<\/script/gi)).toHaveLength(1);
  expect(page.match(/<style/gi)).toHaveLength(1);
  const hostile = tags(markup);
  expect(hostile.names).toEqual(tags(markupOf(harmless)).names);
  for (const t of hostile.texts) checkTag(t);
}

/** A tag of the page: its attributes' values are quoted strings holding no markup, and outside them no handler. */
function checkTag(t: string): void {
  // Every attribute's value is one quoted string: no quote of the data closed it.
  const bare = t.replace(/="[^"]*"/g, '=""');
  expect(bare.includes('"="') || /"[^=\s>]/.test(bare.replace(/=""/g, "")), t).toBe(false);
  expect(bare, t).not.toMatch(/onerror|alert|<img/i);
  for (const v of t.matchAll(/="([^"]*)"/g)) expect(v[1], t).not.toMatch(/[<>]/);
}

const KEY = "a".repeat(64);
const COMMIT = "b".repeat(40);

function pageData(s: (what: string) => string): HubPageData {
  return {
    name: s("name"),
    metric: s("metric"),
    direction: "minimize",
    hardwareClass: s("class"),
    budgetS: 60,
    rootCommit: s("root"),
    head: { commit: s("head"), value: 0.5 },
    chain: [
      {
        seq: 1,
        commit: s("root"),
        claimId: null,
        contributor: null,
        value: null,
        gain: 0,
        acceptedAt: s("time"),
        subject: s("root subject"),
      },
      {
        seq: 2,
        commit: s("commit"),
        claimId: s("claim"),
        contributor: s("contributor"),
        value: 0.5,
        gain: 1.234,
        acceptedAt: "2026-11-25T10:00:00.000Z",
        subject: s("subject"),
      },
    ],
    chainOmitted: 3,
    leaders: [{ contributor: s("contributor"), accepted: 1, credit: 1.234, claims: 2, rejected: 1 }],
    findings: ["frontier", "refuted", "claim", "quarantine", s("kind")].map((kind, i) => ({
      seq: 10 - i,
      kind,
      at: s("time"),
      payload: {
        commit: s("commit"),
        subject: s("subject"),
        contributor: s("contributor"),
        identity: s("identity"),
        reason: s("reason"),
        metric: s("metric"),
        kind: s("kind"),
        status: s("status"),
        value: 0.5,
        claimedValue: 0.4,
        gain: 2,
        withdrawn: [{ claimId: s("claim"), commit: s("commit") }],
      },
    })),
    after: 10,
    origin: s("origin"),
  };
}

describe("the hub's page, rendered", () => {
  const hostiles = [IMG, SCRIPT, QUOTES, ATTR];

  it("holds every hostile string of every field only escaped, with the harmless page's tags", () => {
    for (const [i, h] of hostiles.entries()) {
      const page = renderHubPage(pageData((what) => `${what}${h}${i}`));
      const harmless = renderHubPage(pageData((what) => `${what}x${i}`));
      onlyEscaped(page, harmless);
      const escaped = [IMG_ESCAPED, SCRIPT_ESCAPED, QUOTES_ESCAPED, ATTR_ESCAPED][i] as string;
      // Shown (escaped) where the page shows it: the name, the subject, the reason, a contributor.
      for (const what of ["name", "subject", "reason", "metric", "contributor"])
        expect(page, what).toContain(`${what}${escaped}`);
    }
  });

  it("is sent with a CSP that allows only its own script and stylesheet, by hash", () => {
    const page = renderHubPage(pageData((w) => w));
    const script = /<script>([\s\S]*)<\/script>/.exec(page)?.[1] as string;
    const style = /<style>([\s\S]*)<\/style>/.exec(page)?.[1] as string;
    const hash = (s: string) => `'sha256-${createHash("sha256").update(s).digest("base64")}'`;
    const directives = Object.fromEntries(
      PAGE_CSP.split(";").map((d) => {
        const [name, ...values] = d.trim().split(/\s+/);
        return [name, values];
      }),
    );
    expect(directives["default-src"]).toEqual(["'none'"]);
    expect(directives["script-src"]).toEqual([hash(script)]);
    expect(directives["style-src"]).toEqual([hash(style)]);
    expect(directives["connect-src"]).toEqual(["'self'"]);
    expect(directives["frame-ancestors"]).toEqual(["'none'"]);
    expect(directives["require-trusted-types-for"]).toEqual(["'script'"]);
    expect(PAGE_CSP).not.toMatch(/unsafe-inline|unsafe-eval|\*|data:|https?:/);
    // The script builds nodes from text only.
    expect(PAGE_SCRIPT).not.toMatch(
      /innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function/,
    );
  });

  it("the inline script describes events as the server does (run in node:vm)", () => {
    const start = PAGE_SCRIPT.indexOf("const KEY");
    const end = PAGE_SCRIPT.indexOf("function el(");
    const { parts, when } = vm.runInNewContext(`${PAGE_SCRIPT.slice(start, end)}; ({ parts, when })`, {}) as {
      parts: (e: unknown) => Array<[string, string]>;
      when: (s: string) => string;
    };
    const events = [
      ...pageData((w) => `${w}${IMG}`).findings,
      ...pageData((w) => w).findings,
      {
        kind: "frontier",
        payload: { commit: COMMIT, contributor: KEY, value: 1234567.891, gain: 0.00049, subject: QUOTES },
      },
      { kind: "refuted", payload: { status: "checked", value: 1e-7, reason: SCRIPT } },
      { kind: "claim", payload: { kind: "frontier", claimedValue: -0, metric: "m" } },
      { kind: "quarantine", payload: { identity: KEY, withdrawn: [] } },
      { kind: "claim", payload: null },
      { kind: "frontier", payload: "not an object" },
      { kind: "refuted", payload: { value: Number.NaN, gain: "1" } },
    ];
    for (const e of events) expect(JSON.parse(JSON.stringify(parts(e)))).toEqual(eventParts(e));
    for (const t of ["2026-11-25T10:00:00.000Z", "not a time", IMG]) expect(when(t)).toBe(shownTime(t));
  });
});

describe.skipIf(PG_SKIP)(`the hub's page over HTTP${PG_SKIP ? ` (${PG_SKIP_REASON})` : ""}`, () => {
  const p = hubProject();
  const root = p.head as string;
  const now = Date.parse("2026-11-25T10:00:00.000Z");
  let hub: StartedHub;
  let schema: string;
  const logged: string[] = [];
  const commits: string[] = [];

  beforeAll(async () => {
    const url = freshSchemaUrl("hubpage");
    schema = new URL(url).searchParams.get("schema") as string;
    hub = await startHub({
      db: url,
      projectDir: p.root,
      dataDir: tempDir("autolab-hub-page-"),
      port: 0,
      clock: () => now,
      log: (m) => logged.push(m),
    });
    const mallory = await registerAt(hub.url);
    for (const [i, message] of [IMG, SCRIPT, QUOTES].entries()) {
      const c = await claimAt(hub.url, mallory, p, {
        parent: root,
        message,
        files: { "train.py": `LR = 0.0${i + 1}\n` },
        createdAt: now,
      });
      expect(c.status, JSON.stringify(c.body)).toBe(202);
      commits.push(c.commit);
    }
    // What the verifier writes (the chain, its events' reasons), as hostile as a row can be: a
    // contributor id and reason no gate would let in, to see the page not rely on the gates.
    await pgQuery(
      `INSERT INTO ${schema}.hub_chain (commit_sha, claim_id, contributor, value, gain) VALUES ($1, $2, $3, 0.5, 1.5)`,
      [commits[0], ATTR, ATTR],
    );
    await pgQuery(
      `INSERT INTO ${schema}.hub_events (kind, payload) VALUES ('refuted', $1), ('quarantine', $2)`,
      [
        JSON.stringify({ commit: commits[1], subject: SCRIPT, contributor: ATTR, reason: QUOTES, value: 1 }),
        JSON.stringify({ identity: ATTR, reason: IMG, withdrawn: [{ commit: commits[0] }] }),
      ],
    );
  });

  afterAll(async () => {
    await hub?.close();
    await dropSchemas();
    cleanupTemp();
  });

  it("answers GET / with 200 text/html, the security headers, and the hostile text only escaped", async () => {
    const r = await fetch(`${hub.url}/`);
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toMatch(/^text\/html; charset=utf-8$/);
    const csp = r.headers.get("content-security-policy") ?? "";
    expect(csp).toBe(PAGE_CSP);
    expect(csp).toMatch(/(^|; )default-src 'none'(;|$)/);
    expect(csp).toMatch(/(^|; )script-src 'sha256-[A-Za-z0-9+/]+=*'(;|$)/);
    expect(csp).toMatch(/(^|; )frame-ancestors 'none'(;|$)/);
    expect(csp).not.toContain("unsafe-inline");
    expect(r.headers.get("x-content-type-options")).toBe("nosniff");
    expect(r.headers.get("referrer-policy")).toBe("no-referrer");
    const page = await r.text();
    // The subjects as the contributor wrote them, escaped: in the findings (claim events) and the chain.
    expect(page).toContain(`<span class="subject">${IMG_ESCAPED}</span>`);
    expect(page).toContain(`<span class="subject">${SCRIPT_ESCAPED}</span>`);
    expect(page).toContain(`<span class="subject">${QUOTES_ESCAPED}</span>`);
    expect(page).toContain(`<td class="subject">${IMG_ESCAPED}</td>`);
    expect(page).toContain(`<span class="reason">${QUOTES_ESCAPED}</span>`);
    expect(page).toContain(`<span class="reason">${IMG_ESCAPED}</span>`);
    expect(page).toContain(`title="${ATTR_ESCAPED}"`);
    // The program, the head, the join line.
    expect(page).toContain("<title>hub-toy — autolab hub</title>");
    expect(page).toContain(`<code>val_loss</code>, minimize`);
    expect(page).toContain(`autolab contribute --hub ${hub.url}`);
    expect(page).toContain(
      `title="${commits[0]}">${commits[0]?.slice(0, 10)}</code> at <strong id="head-value">0.5</strong>`,
    );
    // The feed resumes after the newest event the page shows.
    const [last] = await pgQuery<{ m: string }>(`SELECT max(seq) AS m FROM ${schema}.hub_events`);
    expect(page).toContain(`<body data-after="${last?.m}">`);
    // Nothing the data said became markup.
    const markup = markupOf(page);
    for (const raw of [IMG, SCRIPT, ATTR]) expect(markup).not.toContain(raw);
    expect(page.match(/<script/gi)).toHaveLength(1);
    for (const t of tags(markup).texts) checkTag(t);
    expect(logged).toEqual([]);
  });

  it("HEAD / answers the GET's headers; the JSON routes are unchanged", async () => {
    const head = await fetch(`${hub.url}/`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.headers.get("content-security-policy")).toBe(PAGE_CSP);
    const chain = (await (await fetch(`${hub.url}/api/chain`)).json()) as { chain: unknown[] };
    expect(chain.chain).toHaveLength(2);
    const miss = await fetch(`${hub.url}/index.html`);
    expect(miss.status).toBe(404);
    expect(((await miss.json()) as { error: { code: string } }).error.code).toBe("not_found");
  });
});
