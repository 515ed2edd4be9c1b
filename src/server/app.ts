import { createHash, timingSafeEqual } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { createRequire, stripTypeScriptTypes } from "node:module";
import { dirname, join } from "node:path";
import { Hono } from "hono";
import { getCookie, setCookie } from "hono/cookie";
import { HTTPException } from "hono/http-exception";
import { streamSSE } from "hono/streaming";
import { alarmsOf, noiseOf } from "../app/alarms.ts";
import { experimentJson, hookJson, viewedHooks } from "../app/experiment-json.ts";
import { finalizeView } from "../app/finalize-view.ts";
import { LabReader } from "../app/lab-reader.ts";
import { orgView } from "../app/org-view.ts";
import { knowledgePath, priorWorkOf } from "../app/prior-work.ts";
import { progressSeries } from "../app/progress-series.ts";
import { statusOf } from "../app/status.ts";
import { treeOf } from "../app/tree.ts";
import { ERROR_CODES } from "../core/error-codes.ts";
import { AutolabError, isAutolabError } from "../core/errors.ts";
import { lastResult } from "../core/experiments.ts";
import type { ExperimentRecord, RunRecord } from "../core/ledger.ts";
import type { ReadableNotebook } from "../core/notebook-reader.ts";
import { redactSecrets } from "../core/secrets.ts";
import type { Program } from "../core/types.ts";
import { holdoutNames, redactHoldouts, redactHoldoutsDeep } from "../core/views.ts";
import type { FleetUrl } from "../fleet/db.ts";
import { readWorkers } from "../fleet/workers-view.ts";
import { openNotebook } from "../ledger/open-notebook.ts";
import { loadProgram } from "../program/index.ts";
import type {
  Alarm,
  ExperimentResponse,
  ExperimentsResponse,
  FinalizeResponse,
  NoiseResponse,
  OrgResponse,
  PriorWorkResponse,
  StatusResponse,
  TreeResponse,
  WorkersResponse,
} from "./api-types.ts";
import { EventHub } from "./event-hub.ts";
import { applyExperimentQuery, parseExperimentQuery } from "./experiment-query.ts";

export interface AppDeps {
  /** The notebook (`.autolab/lab.db`); opened here and closed by `close()`. */
  ledgerPath?: string;
  /** Or a notebook already open (the caller closes it). */
  ledger?: ReadableNotebook;
  /** `.autolab/` of the notebook, for lock files (running vs interrupted); default: the notebook's directory. */
  stateDir?: string;
  /** Every request must carry this token (header, `?token=` or the cookie set from it). */
  token?: string;
  /** Refuse requests whose Host is not a loopback name (DNS rebinding) — for a loopback bind without a token. */
  loopbackOnly?: boolean;
  /** How often the SSE stream looks for new rows. Default 500 ms. */
  pollMs?: number;
  /** Heartbeat comment on idle SSE streams. Default 15 s. */
  heartbeatMs?: number;
  /** Read the newest run's experiments right away, so the first page view does not wait for it. */
  warm?: boolean;
  /** A worker fleet whose workers GET /api/workers shows (`serve --fleet`). */
  fleet?: FleetUrl;
}

export type { Alarm } from "./api-types.ts";

export type LabApp = Hono & { close(): void };

/** The run's program.md as it is now (acceptance, holdouts for alarms); undefined if it no longer parses. */
function programFor(run: RunRecord): Program | undefined {
  try {
    return loadProgram(run.programPath);
  } catch {
    return undefined;
  }
}

const ASSETS = new URL("./assets/", import.meta.url);

/**
 * The lab over HTTP, read-only: a JSON API, a server-sent event stream of the loop's events
 * and the dashboard. Built without a port, so tests call `app.request()`; only serve.ts
 * listens. Shapes are documented in docs/dashboard.md.
 */
export function createApp(deps: AppDeps): LabApp {
  const ownLedger = !deps.ledger;
  const ledger = deps.ledger ?? openNotebookAt(deps.ledgerPath);
  const stateDir = deps.stateDir ?? (deps.ledgerPath ? dirname(deps.ledgerPath) : undefined);
  const lab = new LabReader(ledger, stateDir ? { stateDir } : {});
  const hub = new EventHub(ledger, deps.pollMs ?? 500);
  const heartbeatMs = deps.heartbeatMs ?? 15_000;
  const assets = loadAssets();
  const app = new Hono();
  if (deps.warm) {
    setImmediate(() => {
      try {
        lab.experiments(lab.run());
      } catch {
        // An empty notebook: nothing to read yet.
      }
    });
  }

  app.onError((err, c) => {
    if (err instanceof HTTPException) return err.getResponse();
    if (isAutolabError(err)) {
      return c.json(
        { error: { code: err.code, message: err.message, hint: err.hint ?? null } },
        ERROR_CODES[err.code].http,
      );
    }
    process.stderr.write(`autolab serve: ${(err as Error)?.stack ?? String(err)}\n`);
    return c.json(
      { error: { code: "INTERNAL", message: String((err as Error)?.message ?? err), hint: null } },
      500,
    );
  });

  if (deps.loopbackOnly) {
    app.use(async (c, next) => {
      const host = new URL(c.req.url).hostname;
      if (!isLoopbackName(host)) {
        return c.text(
          `refused: this lab answers loopback names only, not Host "${host}" (serve with --token to allow other hosts)`,
          403,
        );
      }
      await next();
    });
  }

  if (deps.token) {
    const want = digest(deps.token);
    app.use(async (c, next) => {
      const header =
        c.req.header("authorization")?.replace(/^Bearer\s+/i, "") ?? c.req.header("x-autolab-token");
      const query = c.req.query("token");
      // One cookie per port: browsers send a host's cookies to all its ports, and two
      // dashboards on one machine must not log each other out.
      const port = new URL(c.req.url).port;
      const cookie = port ? `autolab_token_${port}` : "autolab_token";
      const given = header ?? query ?? getCookie(c, cookie);
      if (!given || !timingSafeEqual(digest(given), want)) {
        return c.json(
          {
            error: {
              code: "UNAUTHORIZED",
              message: "this lab needs its token.",
              hint: "Open the dashboard as http://HOST:PORT/?token=TOKEN, or send `Authorization: Bearer TOKEN`.",
            },
          },
          401,
        );
      }
      // A token given in the URL becomes a cookie, so assets and the event stream carry it too.
      if (query) {
        // Lax, not Strict: a link to the dashboard followed from another site is a cross-site
        // navigation, and the redirect below must still carry the cookie. Every route is a
        // read-only GET, so Lax gives a cross-site page nothing to forge.
        setCookie(c, cookie, query, { httpOnly: true, sameSite: "Lax", path: "/" });
        // The page is then reloaded without it: the token leaves the address bar and history.
        if (c.req.method === "GET" && c.req.path === "/") {
          const bare = new URL(c.req.url);
          bare.searchParams.delete("token");
          c.header("Cache-Control", "no-store");
          return c.redirect(`${bare.pathname}${bare.search}`, 303);
        }
      }
      await next();
    });
  }

  // Second line of defense after the notebook's write boundary (src/core/secrets.ts): no answer
  // of the API carries a secret value or a key-shaped token — a diff of the researcher's commit,
  // a log, a notebook written before redaction. The event stream is redacted event by event.
  app.use("/api/*", async (c, next) => {
    await next();
    const type = c.res.headers.get("content-type") ?? "";
    if (!/^(application\/json|text\/plain)/.test(type)) return;
    const body = await c.res.text();
    const clean = redactSecrets(body);
    if (clean === body) {
      c.res = new Response(body, c.res);
      return;
    }
    const headers = new Headers(c.res.headers);
    headers.delete("content-length");
    c.res = new Response(clean, { status: c.res.status, statusText: c.res.statusText, headers });
  });

  app.use(async (c, next) => {
    // The notebook's version as this request saw it: a client compares it with the event
    // stream's "ready" to know whether it missed rows between its snapshot and its subscription.
    const version = c.req.path.startsWith("/api/") ? lab.version() : undefined;
    await next();
    if (version) c.header("X-Autolab-Version", version);
    c.header("X-Content-Type-Options", "nosniff");
    c.header("Referrer-Policy", "no-referrer");
    c.header("Cache-Control", "no-cache");
  });

  // --- dashboard ---------------------------------------------------------------------------
  app.get("/", (c) => {
    c.header(
      "Content-Security-Policy",
      "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'",
    );
    // The runs ride along with the page, so the dashboard asks for everything else at once.
    let runs: ReturnType<LabReader["runs"]> = [];
    try {
      runs = lab.runs();
    } catch {
      // The page still loads; its API calls will say what is wrong.
    }
    const boot = JSON.stringify({ runs }).replace(/</g, "\\u003c");
    // The chart's data is the biggest answer: the browser fetches it while it loads the scripts.
    const tag = c.req.query("run") || runs.at(-1)?.tag;
    const preload = tag
      ? `<link rel="preload" as="fetch" crossorigin="anonymous" href="/api/chart?run=${encodeURIComponent(tag)}">\n`
      : "";
    return c.html(
      assets.html.replace(
        "</head>",
        `${preload}<script id="boot" type="application/json">${boot}</script>\n</head>`,
      ),
    );
  });
  // Files are looked up by their path under /assets/ in a fixed table: nothing else on disk is reachable.
  app.get("/assets/*", (c) => {
    const name = c.req.path.slice("/assets/".length);
    const a = Object.hasOwn(assets.files, name) ? assets.files[name] : undefined;
    if (!a) throw new HTTPException(404, { message: "no such asset" });
    return c.body(a.body, 200, { "Content-Type": a.type });
  });

  // --- API -----------------------------------------------------------------------------------
  app.get("/api/runs", (c) => c.json(lab.runs()));

  app.get("/api/status", (c) => {
    const run = lab.run(c.req.query("run"));
    const exps = lab.experiments(run);
    const org = {
      sessions: lab.sessions(run),
      live: lab.harnessAlive(run),
      imported: lab.imported(),
      advice: lab.advice(run),
    };
    return c.json({
      ...statusOf(run, exps, programFor(run), org),
      running: lab.openTrials(run, exps),
    } satisfies StatusResponse);
  });

  app.get("/api/chart", (c) => {
    const run = lab.run(c.req.query("run"));
    // `from=n`: only experiments n, n+1, … — what the dashboard fetches when events arrive, so
    // the points are always derived here (progressSeries), never again in the browser.
    const from = c.req.query("from");
    if (from !== undefined && !/^\d+$/.test(from))
      throw new AutolabError(
        "BAD_QUERY",
        `from=${from} is not an experiment number.`,
        "Pass from=<n>, e.g. from=12.",
      );
    const exps = lab.experiments(run);
    // A partial series (from=) is the page's update: the imported history came with the whole one.
    if (from !== undefined)
      return c.json(
        progressSeries(
          run,
          exps.filter((e) => e.n >= Number(from)),
        ),
      );
    return c.json(progressSeries(run, exps, lab.imported()));
  });

  app.get("/api/experiments", (c) => {
    const run = lab.run(c.req.query("run"));
    const query = parseExperimentQuery(c.req.query());
    const res = applyExperimentQuery(lab.experiments(run), run.metric, query);
    const holdout = lab.holdout(run);
    const show = wantsHoldout(c.req.query("holdout"));
    return c.json({
      run: run.tag,
      total: res.total,
      offset: res.offset,
      limit: res.limit,
      experiments: res.page.map((e) => experimentJson(e, holdout, show, run.metric)),
    } satisfies ExperimentsResponse);
  });

  app.get("/api/experiments/:n", async (c) => {
    const run = lab.run(c.req.query("run"));
    const id = c.req.param("n").replace(/^#/, "");
    const n = Number(id);
    if (!/^\d+$/.test(id))
      throw new AutolabError(
        "BAD_ID",
        `"${id}" is not an experiment number.`,
        "Use a number from /api/experiments.",
      );
    const exps = lab.experiments(run);
    const e = exps.find((x) => x.n === n);
    if (!e)
      throw new AutolabError(
        "EXPERIMENT_NOT_FOUND",
        `run ${run.tag} has no experiment #${n}.`,
        "See /api/experiments.",
      );
    const holdout = lab.holdout(run);
    const show = wantsHoldout(c.req.query("holdout"));
    const best = exps.reduce<ExperimentRecord | undefined>(
      (b, x) => (x.decision?.action === "keep" ? x : b),
      undefined,
    );
    return c.json({
      run: run.tag,
      ...experimentJson(e, holdout, show, run.metric),
      expected: e.expected ?? null,
      usage: e.usage ?? null,
      costs: costsOf(e),
      isBest: best?.n === e.n,
      logTail: redactHoldouts(
        lastResult(e)?.logTail ?? e.trials.at(-1)?.result?.logTail ?? "",
        show ? [] : holdout,
      ),
      diffText: await lab.diff(run, e),
      hooks: viewedHooks(lab.hooks(run, n), holdout, show).map(hookJson),
    } satisfies ExperimentResponse);
  });

  // Alarms arrive with the trust work (suspicious gains, noise, tampering); a lab has none yet.
  app.get("/api/prior-work", (c) => {
    const tag = c.req.query("run");
    const store = knowledgePath() ?? null;
    if (!tag && lab.runs().length === 0)
      return c.json({ enabled: false, store, hits: [] } satisfies PriorWorkResponse);
    const run = lab.run(tag);
    // The program as it is now; without one, the query is made of what the run recorded.
    const now = programFor(run);
    const program: Pick<Program, "name" | "directions" | "objective" | "priorWork" | "path"> = now ?? {
      path: run.programPath,
      name: run.programName,
      directions: "",
      objective: { metric: run.metric, direction: run.direction },
    };
    if (program.priorWork === false || !store)
      return c.json({ enabled: false, store, hits: [] } satisfies PriorWorkResponse);
    try {
      const hits = priorWorkOf(program, run);
      return c.json({
        enabled: true,
        store,
        hits: redactHoldoutsDeep(hits, holdoutNames(now, run)),
      } satisfies PriorWorkResponse);
    } catch (err) {
      if (!isAutolabError(err)) throw err;
      return c.json({ enabled: true, store, hits: [], error: err.message } satisfies PriorWorkResponse);
    }
  });

  app.get("/api/alarms", (c) => {
    const tag = c.req.query("run");
    if (!tag && lab.runs().length === 0) return c.json([]);
    const run = lab.run(tag);
    const exps = lab.experiments(run);
    const program = programFor(run);
    const at = exps.reduce(
      (t, e) => (e.decision && e.decision.decidedAt > t ? e.decision.decidedAt : t),
      run.startedAt,
    );
    const alarms: Alarm[] = program
      ? alarmsOf(program, exps).map((a) => ({ type: a.kind, reason: a.reason, at }))
      : [];
    return c.json(alarms);
  });

  // The run's noise: σ and where it came from (null before the baseline is measured).
  app.get("/api/noise", (c) => {
    const tag = c.req.query("run");
    if (!tag && lab.runs().length === 0) return c.json(null);
    const run = lab.run(tag);
    const program = programFor(run);
    const noise = program ? noiseOf(program, lab.experiments(run)) : undefined;
    if (!noise) return c.json(null);
    return c.json({
      sigma: Number.isFinite(noise.sigma) ? noise.sigma : null,
      source: noise.source,
      explain: noise.explain,
      reason: noise.reason,
    } satisfies NoiseResponse);
  });

  // The tree of kept nodes (the tree frontier; a chain when the run never branched).
  app.get("/api/tree", (c) => {
    const run = lab.run(c.req.query("run"));
    return c.json(treeOf(run, lab.experiments(run)) satisfies TreeResponse);
  });

  // `autolab finalize`'s dry run: the branches the kept changes would become. Read-only: the
  // commits are built in a scratch object directory, no ref is written (docs/finalize.md).
  app.get("/api/finalize", async (c) => {
    const run = lab.run(c.req.query("run"));
    const program = programFor(run);
    const view = await finalizeView(run, lab.experiments(run), lab.ledger.listNotes(run.id), program);
    const show = wantsHoldout(c.req.query("holdout"));
    return c.json(
      (show ? view : redactHoldoutsDeep(view, holdoutNames(program, run))) satisfies FinalizeResponse,
    );
  });

  // Roles with their credit, the latest session's slots, the findings board (src/app/org-view.ts).
  app.get("/api/org", (c) => {
    const tag = c.req.query("run");
    if (!tag && lab.runs().length === 0)
      return c.json({ run: null, roles: [], session: null, slots: [], findings: [] } satisfies OrgResponse);
    const run = lab.run(tag);
    const exps = lab.experiments(run);
    const view = orgView(run, exps, lab.sessions(run), Date.now(), { live: lab.harnessAlive(run) });
    return c.json({ run: run.tag, ...view } satisfies OrgResponse);
  });

  // The worker fleet's workers: host, slots, state, last heartbeat, current trials.
  app.get("/api/workers", async (c) => {
    const fleet = deps.fleet;
    if (!fleet) return c.json({ fleet: null, workers: [], problem: null } satisfies WorkersResponse);
    try {
      const workers = await readWorkers(fleet);
      return c.json({ fleet: fleet.shown, workers, problem: null } satisfies WorkersResponse);
    } catch (err) {
      const problem = err instanceof Error ? err.message : String(err);
      return c.json({ fleet: fleet.shown, workers: [], problem } satisfies WorkersResponse);
    }
  });

  app.get("/api/events", (c) => {
    const only = c.req.query("run");
    return streamSSE(c, async (stream) => {
      let id = 0;
      const queue: string[] = [];
      let wake: (() => void) | undefined;
      const unsubscribe = hub.subscribe((e) => {
        if (only && e.run !== only) return;
        queue.push(redactSecrets(JSON.stringify(e)));
        wake?.();
      });
      let closed = false;
      stream.onAbort(() => {
        closed = true;
        unsubscribe();
        wake?.();
      });
      // "ready": the subscription is live. Every row written after `version` arrives as an
      // event; a client whose snapshot has another version reloads it (events for rows already
      // in a snapshot are harmless).
      await stream.writeSSE({
        event: "ready",
        data: JSON.stringify({ pollMs: deps.pollMs ?? 500, version: lab.version() }),
      });
      while (!closed) {
        while (queue.length) await stream.writeSSE({ data: queue.shift() as string, id: String(++id) });
        await new Promise<void>((resolve) => {
          wake = resolve;
          const t = setTimeout(resolve, heartbeatMs);
          t.unref();
        });
        wake = undefined;
        if (!queue.length && !closed) await stream.write(": ping\n\n");
      }
      unsubscribe();
    });
  });

  app.notFound((c) =>
    c.json({ error: { code: "NOT_FOUND", message: `no route ${c.req.path}`, hint: null } }, 404),
  );

  return Object.assign(app, {
    close: () => {
      hub.close();
      if (ownLedger) ledger.close();
    },
  });
}

function openNotebookAt(path: string | undefined): ReadableNotebook {
  if (!path) throw new Error("createApp needs ledgerPath or ledger");
  return openNotebook(path);
}

function wantsHoldout(v: string | undefined): boolean {
  return v === "1" || v === "true";
}

function costsOf(e: ExperimentRecord) {
  let wallS = 0;
  let cpuS = 0;
  let peakRssMb = 0;
  for (const t of e.trials) {
    wallS += t.result?.wallS ?? 0;
    cpuS += t.result?.cpuS ?? 0;
    peakRssMb = Math.max(peakRssMb, t.result?.peakRssMb ?? 0);
  }
  return { trials: e.trials.length, wallS: round(wallS), cpuS: round(cpuS), peakRssMb: round(peakRssMb) };
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}

function digest(s: string): Buffer {
  return createHash("sha256").update(s).digest();
}

export function isLoopbackName(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h.endsWith(".localhost") || h === "::1" || /^127(\.\d{1,3}){3}$/.test(h);
}

interface Asset {
  body: string;
  type: string;
}

/**
 * lit-html's browser modules that the dashboard imports (app.js: the library; its one directive,
 * for the chart's markup), served from node_modules under /assets/lit-html/ so their relative
 * imports (`../lit-html.js`, `../directive.js`) resolve on this server too.
 */
const LIT_HTML_FILES = ["lit-html.js", "directive.js", "directives/unsafe-html.js"];

/** The dashboard's files, read once; the chart renderer is the report's own module with its types stripped. */
function loadAssets(): { html: string; files: Record<string, Asset> } {
  const read = (name: string) => readFileSync(new URL(name, ASSETS), "utf8");
  // Compiled (dist/, the published package) or not (src/, the checkout): the same extension as this module.
  const compiled = import.meta.url.endsWith(".js");
  const chart = readFileSync(
    new URL(`../chart/progress-chart.${compiled ? "js" : "ts"}`, import.meta.url),
    "utf8",
  );
  const js = (body: string): Asset => ({ body, type: "text/javascript; charset=utf-8" });
  const lit = packageDir("lit-html");
  return {
    html: read("index.html"),
    files: {
      "app.js": js(read("app.js")),
      "style.css": { body: read("style.css"), type: "text/css; charset=utf-8" },
      "progress-chart.js": js(compiled ? chart : stripTypes(chart)),
      ...Object.fromEntries(
        LIT_HTML_FILES.map((f) => [`lit-html/${f}`, js(readFileSync(join(lit, f), "utf8"))]),
      ),
    },
  };
}

/**
 * The directory of an installed package, found from where Node resolves its entry point (for
 * lit-html, its `node/` build; the browser build sits at the package's root).
 */
function packageDir(name: string): string {
  let dir = dirname(createRequire(import.meta.url).resolve(name));
  while (!isPackageRoot(dir, name)) {
    const up = dirname(dir);
    if (up === dir) throw new Error(`package ${name}: no package.json above its entry point`);
    dir = up;
  }
  return dir;
}

function isPackageRoot(dir: string, name: string): boolean {
  const pkg = join(dir, "package.json");
  return existsSync(pkg) && (JSON.parse(readFileSync(pkg, "utf8")) as { name?: string }).name === name;
}

/** Node's own type stripping (the one that runs autolab), without its one-time "experimental" warning. */
function stripTypes(source: string): string {
  const emit = process.emitWarning;
  process.emitWarning = () => {};
  try {
    return stripTypeScriptTypes(source);
  } finally {
    process.emitWarning = emit;
  }
}
