import { openLedger, programPath } from "../app/lab.ts";
import { LabReader, type OpenTrial } from "../app/lab-reader.ts";
import { statusOf } from "../app/status.ts";
import { adviceLine } from "../core/advisor.ts";
import { isAutolabError } from "../core/errors.ts";
import { lastResult, objectiveOf } from "../core/experiments.ts";
import { firstLine, formatChange, formatCount, formatMetric, formatSeconds } from "../core/format.ts";
import type { ExperimentRecord, RunRecord, SessionRecord } from "../core/ledger.ts";
import type { NotebookEvent } from "../core/notebook-reader.ts";
import { viewerFleetUrl, workerLinesOrProblem } from "../fleet/workers-view.ts";
import { loadProgram } from "../program/index.ts";
import { onOutputClosed } from "./closed-output.ts";
import { safeText } from "./safe-text.ts";
import { orgLines } from "./views.ts";

export interface WatchFlags {
  program?: string;
  tag?: string;
  last?: number;
  interval?: number;
  fleet?: string;
}

export interface WatchOptions {
  reader: LabReader;
  out: NodeJS.WritableStream & { columns?: number; rows?: number };
  /** Redraw a screen in place (a terminal), or print one plain line per event. */
  tty: boolean;
  tag?: string;
  last: number;
  intervalMs: number;
  signal: AbortSignal;
  now?: () => number;
  /** The fleet's workers as lines (a run on a worker fleet), read every few seconds. */
  workers?: () => Promise<string[]>;
}

/** `autolab watch`: a live view of a lab that another process is running, until Ctrl-C. */
export async function watchCommand(flags: WatchFlags): Promise<void> {
  let programDb: string | undefined;
  try {
    programDb = loadProgram(programPath(flags.program)).executor?.fleet?.db;
  } catch {
    // no readable program.md: only --fleet or the environment name a fleet
  }
  const fleet = viewerFleetUrl(flags.fleet, programDb);
  const { ledger, stateDir } = openLedger(flags.program);
  const ac = new AbortController();
  const stop = () => ac.abort();
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  const offClosed = onOutputClosed(stop);
  try {
    await watchLab({
      reader: new LabReader(ledger, { stateDir }),
      out: process.stdout,
      tty: process.stdout.isTTY === true,
      ...(flags.tag ? { tag: flags.tag } : {}),
      ...(fleet ? { workers: () => workerLinesOrProblem(fleet) } : {}),
      last: flags.last ?? 10,
      intervalMs: flags.interval ?? 500,
      signal: ac.signal,
    });
  } finally {
    offClosed();
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
    ledger.close();
  }
}

/**
 * Polls the notebook every `intervalMs`. In a terminal: the whole screen redrawn (alternate
 * screen, restored on exit) when the notebook changes or a trial is running. Elsewhere: the
 * run's status once, then one plain line per event, no control characters.
 */
export async function watchLab(opts: WatchOptions): Promise<void> {
  const { reader, out, signal } = opts;
  const now = opts.now ?? Date.now;
  const feed = reader.ledger.eventFeed();
  feed.prime();
  // Where the notebook pushes (PostgreSQL), a commit wakes the loop at once and the timer is
  // only a backstop; a terminal with a trial running still redraws every interval (its clocks).
  let wake: (() => void) | undefined;
  const unlisten = reader.ledger.onChange?.(() => wake?.());
  let lastVersion = "";
  let printedHeader = false;
  let workerText: string[] = [];
  let workersReadAt = 0;
  let workersPrinted = "";
  if (opts.tty) out.write("\x1b[?1049h\x1b[?25l");
  try {
    while (!signal.aborted) {
      const run = findRun(reader, opts.tag);
      let workersChanged = false;
      if (opts.workers && now() - workersReadAt >= 2000) {
        workersReadAt = now();
        const next = await opts.workers();
        workersChanged = next.join("\n") !== workerText.join("\n");
        workerText = next;
      }
      if (opts.tty) {
        const version = reader.version();
        const exps = run ? reader.experiments(run) : [];
        const open = run ? reader.openTrials(run, exps) : [];
        if (version !== lastVersion || open.length || workersChanged) {
          lastVersion = version;
          const screen = watchScreen(run, exps, open, {
            last: opts.last,
            // A terminal that does not say its size (0) is taken as 100 × 40.
            columns: out.columns || 100,
            rows: out.rows || 40,
            now: now(),
            ...(run ? { sessions: reader.sessions(run) } : {}),
          });
          const shown = workerText.length
            ? `${screen.replace(/\n$/, "")}\n\n${workerText.map((l) => safeText(l, { oneLine: true })).join("\n")}\n`
            : screen;
          // Home, each line cleared to its end, the rest of the screen cleared: no flicker.
          out.write(`\x1b[H${shown.replace(/\n/g, "\x1b[K\n")}\x1b[J`);
        }
      } else {
        if (!printedHeader && run) {
          const lines = statusLines(run, reader.experiments(run), now(), reader.sessions(run));
          out.write(`${lines.map((l) => safeText(l, { oneLine: true })).join("\n")}\n`);
          printedHeader = true;
        } else if (!printedHeader) {
          out.write("waiting for a run to start (autolab run)…\n");
          printedHeader = true;
        }
        // Ages change at every read: a change is who is live and what each runs.
        const w = workerText.join("\n").replace(/heartbeat \d+s ago/g, "");
        if (w && w !== workersPrinted) {
          // Plain output: the workers again whenever they change (who is live, what each runs).
          workersPrinted = w;
          out.write(`${workerText.map((l) => safeText(l, { oneLine: true })).join("\n")}\n`);
        }
        for (const e of feed.poll()) {
          if (opts.tag && e.run !== opts.tag) continue;
          const line = eventLine(e);
          if (line) out.write(`${line}\n`);
        }
      }
      const ticking =
        opts.tty && run !== undefined && reader.openTrials(run, reader.experiments(run)).length > 0;
      await sleep(unlisten && !ticking ? Math.max(opts.intervalMs, 5000) : opts.intervalMs, signal, (w) => {
        wake = w;
      });
    }
  } finally {
    unlisten?.();
    if (opts.tty) out.write("\x1b[?25h\x1b[?1049l");
  }
}

function findRun(reader: LabReader, tag: string | undefined): RunRecord | undefined {
  try {
    return reader.run(tag);
  } catch (err) {
    if (isAutolabError(err) && err.code === "RUN_NOT_FOUND") return undefined;
    throw err;
  }
}

function statusLines(
  run: RunRecord,
  exps: ExperimentRecord[],
  now: number,
  sessions?: SessionRecord[],
): string[] {
  const s = statusOf(run, exps, undefined, sessions ? { sessions, now } : {});
  const c = s.counts;
  const lines = [
    `Run ${s.tag} (${s.program}) on ${s.branch}: ${s.direction} ${s.metric}${s.selfReported ? " [self-reported]" : ""}`,
  ];
  const best = s.best
    ? `best ${formatMetric(s.best.metric ?? undefined)} (#${s.best.id}${
        s.baseline?.metric != null && s.best.metric != null
          ? `, ${formatChange(s.baseline.metric, s.best.metric)}`
          : ""
      })`
    : "no best yet";
  lines.push(
    `${best} · baseline ${formatMetric(s.baseline?.metric ?? undefined)} · ${formatCount(c.total, "experiment")}: ${c.kept} kept, ${c.discarded} discarded, ${c.crashed} crashed, ${c.rejected} rejected${c.pending ? `, ${c.pending} pending` : ""}`,
  );
  lines.push(`trial time ${formatSeconds(s.trialSeconds)} · last activity ${ago(s.lastActivity, now)}`);
  // Roles' credit and the slots line (the per-slot lines are the running trials below).
  if (sessions) lines.push(...orgLines(s).filter((l) => !l.startsWith("  slot ")));
  return lines;
}

/** The terminal screen, as text (exported for tests). */
export function watchScreen(
  run: RunRecord | undefined,
  exps: ExperimentRecord[],
  open: OpenTrial[],
  o: { last: number; columns: number; rows: number; now: number; sessions?: SessionRecord[] },
): string {
  // Hypotheses and roles are researcher text: no control character reaches the screen.
  const cut = (line: string) => {
    const s = safeText(line, { oneLine: true });
    return s.length > o.columns - 1 ? `${s.slice(0, o.columns - 2)}…` : s;
  };
  const time = new Date(o.now).toLocaleTimeString();
  if (!run) return `autolab watch · ${time}\n\nWaiting for a run to start (autolab run)…\n\nCtrl-C quits.\n`;
  const lines = [`autolab watch · ${time}`, ...statusLines(run, exps, o.now, o.sessions), ""];
  if (open.length === 0) lines.push("idle: no trial running");
  for (const t of open) {
    if (t.state === "interrupted") {
      lines.push(`#${t.n} trial ${t.attempt} was cut short (no harness running); autolab run runs it again`);
      continue;
    }
    const elapsed = (o.now - Date.parse(t.startedAt)) / 1000;
    const budget = t.budgetMs / 1000;
    const width = 20;
    const filled = Math.max(0, Math.min(width, Math.round((elapsed / budget) * width)));
    lines.push(
      `▶ #${t.n} trial ${t.attempt} ▕${"█".repeat(filled)}${"░".repeat(width - filled)}▏ ${formatSeconds(elapsed)}/${budget}s  ${firstLine(t.hypothesis)}`,
    );
  }
  lines.push("");
  const shown = exps.slice(-Math.max(1, Math.min(o.last, o.rows - lines.length - 4)));
  const rows = [["#", "decision", run.metric, "wall", "hypothesis"]];
  for (const e of shown.reverse()) {
    const r = lastResult(e);
    rows.push([
      String(e.n),
      e.decision?.action ?? "pending",
      formatMetric(objectiveOf(e, run.metric)),
      r ? formatSeconds(r.wallS) : "—",
      e.n === 0 ? "baseline" : firstLine(e.hypothesis),
    ]);
  }
  const widths = [0, 1, 2, 3].map((i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  for (const r of rows) lines.push(r.map((c, i) => (i < 4 ? c.padEnd(widths[i] ?? 0) : c)).join("  "));
  lines.push("", "Ctrl-C quits.");
  return `${lines.map(cut).join("\n")}\n`;
}

/** One plain line per notebook event (no control characters: researcher text is made safe). */
export function eventLine(e: NotebookEvent): string | undefined {
  const line = eventText(e);
  return line === undefined ? undefined : safeText(line, { oneLine: true });
}

function eventText(e: NotebookEvent): string | undefined {
  switch (e.type) {
    case "run_started":
      return `run ${e.tag} started on ${e.branch} (${e.metric})`;
    case "experiment_created":
      return `#${e.n} proposed: ${firstLine(e.hypothesis)}`;
    case "trial_started":
      return `#${e.n} trial ${e.attempt} started (budget ${e.budgetMs / 1000}s, seed ${e.seed})`;
    case "trial_finished":
      return `#${e.n} trial ${e.attempt}: ${e.status}${e.metric !== undefined ? ` ${formatMetric(e.metric)}` : ""} in ${formatSeconds(e.wallS)}${e.reason ? ` — ${e.reason}` : ""}`;
    case "decision":
      return `#${e.n} ${e.action}${e.metric !== undefined ? ` ${formatMetric(e.metric)}` : ""} (${e.reason})${
        Number.isFinite(e.best.metric) ? ` · best ${formatMetric(e.best.metric)} (#${e.best.n})` : ""
      }`;
    case "advice":
      return adviceLine(e);
    default:
      return undefined;
  }
}

function ago(iso: string | null, now: number): string {
  if (!iso) return "—";
  const s = Math.max(0, (now - Date.parse(iso)) / 1000);
  if (s < 90) return `${Math.round(s)}s ago`;
  if (s < 5400) return `${Math.round(s / 60)} min ago`;
  return `${(s / 3600).toFixed(1)} h ago`;
}

/** Resolves after `ms`, on abort, or when the function handed to `onWake` is called. */
function sleep(ms: number, signal: AbortSignal, onWake?: (wake: () => void) => void): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    onWake?.(done);
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done);
  });
}
