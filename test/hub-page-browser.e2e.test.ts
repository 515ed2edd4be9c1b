/**
 * The hub's page in a real browser (playwright-core driving Debian's chromium, as
 * test/dashboard.browser.test.ts does): hostile commit subjects arrive over the live feed and are
 * appended as text — no element, no script, no dialog — under the page's CSP, which the browser
 * enforces (Trusted Types refuse an innerHTML assignment). The screenshot lands in
 * test-artifacts/hub-page.png (gitignored). Skipped, with a message, where no
 * chromium is installed or PostgreSQL is not configured.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StartedHub, startHub } from "../src/hub/hub.ts";
import { CHROMIUM, launchChromium } from "./helpers/chromium.ts";
import { cleanupTemp, tempDir } from "./helpers/git-project.ts";
import { claimAt, registerAt } from "./helpers/hub-http.ts";
import { hubProject } from "./helpers/hub-project.ts";
import { dropSchemas, freshSchemaUrl, PG_SKIP, PG_SKIP_REASON, pgQuery } from "./helpers/pg.ts";
import { REPO_ROOT } from "./helpers/toy-project.ts";

const ARTIFACTS = join(REPO_ROOT, "test-artifacts");

const IMG = "<img src=x onerror=alert(1)>";
const SCRIPT = "</script><script>alert(1)</script>";
const QUOTES = `"'&<>`;
const ATTR = `"><img src=x onerror=alert(2)>`;

if (!CHROMIUM) {
  console.warn(
    "hub page browser test skipped: no chromium at /usr/bin/chromium (install it: apt-get install -y chromium, or set AUTOLAB_CHROMIUM)",
  );
}

const skip = !CHROMIUM || PG_SKIP;
const why = !CHROMIUM ? " (skipped: no chromium found)" : PG_SKIP ? ` (${PG_SKIP_REASON})` : "";

describe.skipIf(skip)(`the hub's page in chromium${why}`, () => {
  const p = hubProject();
  const root = p.head as string;
  const now = Date.parse("2026-11-25T10:00:00.000Z");
  let hub: StartedHub;
  let schema: string;
  let browser: Browser;
  const errors: string[] = [];
  const dialogs: string[] = [];
  const requests: string[] = [];

  beforeAll(async () => {
    const url = freshSchemaUrl("hubpageb");
    schema = new URL(url).searchParams.get("schema") as string;
    hub = await startHub({
      db: url,
      projectDir: p.root,
      dataDir: tempDir("autolab-hub-page-b-"),
      port: 0,
      clock: () => now,
      feedPollMs: 100,
      log: (m) => errors.push(`hub: ${m}`),
    });
    browser = await launchChromium(CHROMIUM as string);
  });

  afterAll(async () => {
    await browser?.close();
    await hub?.close();
    await dropSchemas();
    cleanupTemp();
  });

  async function open(): Promise<Page> {
    const page = await browser.newPage();
    page.on("pageerror", (e) => errors.push(`pageerror: ${e.message}`));
    page.on("console", (m) => {
      if (m.type() === "error" || m.type() === "warning") errors.push(`console: ${m.text()}`);
    });
    page.on("dialog", (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    page.on("request", (r) => requests.push(r.url()));
    await page.goto(`${hub.url}/`);
    return page;
  }

  it("appends hostile subjects from the live feed as text, and the CSP holds", async () => {
    const mallory = await registerAt(hub.url);
    const first = await claimAt(hub.url, mallory, p, {
      parent: root,
      message: IMG,
      files: { "train.py": "LR = 0.01\n" },
      createdAt: now,
    });
    expect(first.status).toBe(202);

    const page = await open();
    await page.waitForSelector("#feed-state.live");
    expect(await page.textContent("#findings-list li.event .subject")).toBe(IMG);
    expect(await page.textContent("#join")).toBe(`autolab contribute --hub ${hub.url}`);

    // A claim sent while the page is open: the feed brings it, the script appends it.
    const second = await claimAt(hub.url, mallory, p, {
      parent: root,
      message: SCRIPT,
      files: { "train.py": "LR = 0.02\n" },
      createdAt: now,
    });
    expect(second.status).toBe(202);
    await page.waitForSelector("#findings-list li.event >> nth=1");
    expect(await page.textContent("#findings-list li.event:first-child .subject")).toBe(SCRIPT);

    // What the verifier writes (another process: the feed's poll finds it): an accepted commit
    // whose contributor id and reason no gate would let in, then the chain row the head reads.
    await pgQuery(
      `INSERT INTO ${schema}.hub_chain (commit_sha, claim_id, contributor, value, gain) VALUES ($1, $2, $3, 0.42, 1.5)`,
      [first.commit, "c".repeat(64), ATTR],
    );
    await pgQuery(
      `INSERT INTO ${schema}.hub_events (kind, payload) VALUES ('frontier', $1), ('refuted', $2)`,
      [
        JSON.stringify({
          commit: first.commit,
          subject: QUOTES,
          contributor: ATTR,
          value: 0.42,
          gain: 1.5,
          chainSeq: 2,
          reason: IMG,
        }),
        JSON.stringify({
          commit: second.commit,
          subject: SCRIPT,
          contributor: ATTR,
          reason: QUOTES,
          value: 1,
        }),
      ],
    );
    await page.waitForSelector("#findings-list li.event >> nth=3");
    await page.waitForSelector("#chain-rows tr >> nth=1");
    expect(await page.textContent("#chain-rows tr:last-child .subject")).toBe(QUOTES);
    expect(await page.getAttribute("#chain-rows tr:last-child .who", "title")).toBe(ATTR);
    expect(await page.textContent("#findings-list li.event:first-child .reason")).toBe(QUOTES);
    await page.waitForSelector('#head-value:text-is("0.42")');
    await page.waitForSelector("#leader-rows .who");
    expect(await page.getAttribute("#leader-rows .who", "title")).toBe(mallory.id.keyId);

    // Nothing the data said became an element or ran.
    expect(await page.evaluate(`document.querySelectorAll("img").length`)).toBe(0);
    expect(await page.evaluate(`document.scripts.length`)).toBe(1);
    expect(dialogs).toEqual([]);
    // The browser enforces the CSP: Trusted Types refuse HTML from a string, inline script is blocked.
    expect(
      await page.evaluate(`(() => {
        try {
          document.body.insertAdjacentHTML("beforeend", "<b>x</b>");
          return "allowed";
        } catch (e) {
          return e.name;
        }
      })()`),
    ).toBe("TypeError");
    // An inline script the page did not bring: refused by Trusted Types when its text is set
    // from a string, by script-src (no hash matches) when it comes in as a text node.
    errors.length = 0;
    const tries = (await page.evaluate(`(() => {
      const out = [];
      for (const how of ["textContent", "node"]) {
        const s = document.createElement("script");
        try {
          if (how === "textContent") s.textContent = "window.__ran = true";
          else s.append(document.createTextNode("window.__ran = true"));
          document.body.append(s);
          out.push(how + ": appended");
        } catch (e) {
          out.push(how + ": " + e.name);
        }
      }
      return out;
    })()`)) as string[];
    expect(tries[0]).toBe("textContent: TypeError");
    expect(await page.evaluate("window.__ran ?? false")).toBe(false);
    expect(errors.join("\n"), JSON.stringify(tries)).toMatch(
      /Content Security Policy|TrustedScript|Trusted Type/,
    );
    errors.length = 0;
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, "hub-page.png"), fullPage: true });
    // Only the hub was asked for anything.
    for (const u of requests) expect(u.startsWith(`${hub.url}/`), u).toBe(true);
    await page.close();
  });

  it("loads with no console error or CSP report", async () => {
    errors.length = 0;
    const page = await open();
    await page.waitForSelector("#feed-state.live");
    expect(errors).toEqual([]);
    await page.close();
  });
});
