import { once } from "node:events";
import { closeSync, writeSync } from "node:fs";
import { dirname, join } from "node:path";
import { evidenceByN } from "../app/evidence.ts";
import { experimentJson, holdoutOf, hookJson, viewedHooks } from "../app/experiment-json.ts";
import { locateNotebook, notebookExists, openLedger, programPath, selectRun } from "../app/lab.ts";
import { lockHolder } from "../app/lock.ts";
import { piLogContinuation, piLogJsonl } from "../app/migrate/pi-autoresearch.ts";
import { type PriorHistory, priorHistoryOf } from "../app/prior-history.ts";
import { priorWorkOf } from "../app/prior-work.ts";
import { predictedBestLine, resultsTsv, type StatusJson, statusOf, visibleMetrics } from "../app/status.ts";
import { exportTrajectories, TRAJECTORY_FORMATS, type TrajectoryFormat } from "../app/trajectories.ts";
import { type Directive, directivesOf } from "../core/directives.ts";
import { AutolabError } from "../core/errors.ts";
import { evidenceLabel } from "../core/evidence.ts";
import { lastResult, objectiveOf } from "../core/experiments.ts";
import { formatChange, formatClock, formatMetric, formatMetricTo, formatSeconds } from "../core/format.ts";
import type { KnowledgeHit } from "../core/knowledge.ts";
import type { ExperimentRecord, Ledger, RunRecord } from "../core/ledger.ts";
import { formatUsd } from "../core/run-budget.ts";
import { redactSecrets } from "../core/secrets.ts";
import { graceOverrun } from "../core/trial-step.ts";
import type { Program } from "../core/types.ts";
import {
  buildContext,
  failuresText,
  hookOutputLines,
  notebookExtras,
  redactHoldouts,
} from "../core/views.ts";
import { readWorkers, viewerFleetUrl, type WorkerView, workerLines } from "../fleet/workers-view.ts";
import { loadProgram } from "../program/index.ts";
import { git } from "../workspace/git.ts";
import { findRepo } from "../workspace/git-workspace.ts";
import { onOutputClosed } from "./closed-output.ts";
import { frontLines } from "./front-lines.ts";
import { existingText, type OutputMode, openOutput, outputMode } from "./output-file.ts";
import { safeJson, safeText } from "./safe-text.ts";

interface ViewFlags {
  program?: string;
  tag?: string;
  json?: boolean;
  holdout?: boolean;
}

type RunView<T> = (
  run: RunRecord,
  exps: ExperimentRecord[],
  holdout: string[],
  lab: { ledger: Ledger; stateDir: string },
) => T;
function withRun<T>(flags: ViewFlags, fn: RunView<T>): T;
/** `before` is asked first, on the same open notebook (one open: a PostgreSQL one costs a connection); true ends there. */
function withRun<T>(flags: ViewFlags, fn: RunView<T>, before: (ledger: Ledger) => boolean): T | undefined;
function withRun<T>(flags: ViewFlags, fn: RunView<T>, before?: (ledger: Ledger) => boolean): T | undefined {
  const { ledger, stateDir } = openLedger(flags.program);
  try {
    if (before?.(ledger)) return undefined;
    const run = selectRun(ledger, flags.tag);
    return fn(run, ledger.listExperiments(run.id), holdoutOf(run), { ledger, stateDir });
  } finally {
    ledger.close();
  }
}

/** Prints text for people: researcher text in it is untrusted (src/cli/safe-text.ts). */
function print(text: string): void {
  write(safeText(text));
}

function printJson(json: string): void {
  write(safeJson(json));
}

/** Every view's output without secrets (src/core/secrets.ts; the notebook holds none, a diff may). */
function write(text: string): void {
  const clean = redactSecrets(text);
  process.stdout.write(clean.endsWith("\n") ? clean : `${clean}\n`);
}

/**
 * The run's status as `status` shows it, read from the open notebook (its sessions, notes,
 * imported history, advice and whether a harness holds its lock). `summary` reads the same.
 */
export function statusWith(
  run: RunRecord,
  exps: ExperimentRecord[],
  lab: { ledger: Ledger; stateDir: string },
  program: Program | undefined = programOf(run),
  notes = lab.ledger.listNotes(run.id),
): StatusJson {
  return statusOf(run, exps, program, {
    sessions: lab.ledger.listSessions(run.id),
    notes,
    live: lockHolder(join(lab.stateDir, `run-${run.tag}.lock`)) !== undefined,
    imported: lab.ledger.listImportedResults(),
    advice: lab.ledger.listAdvice(run.id),
  });
}

/** The run's program.md as it is now, if it still parses (views must work without it). */
export function programOf(run: RunRecord): Program | undefined {
  try {
    return loadProgram(run.programPath);
  } catch {
    return undefined;
  }
}

/**
 * The fleet's workers when the run uses one (`--fleet`, $AUTOLAB_FLEET_DB, program.md's
 * `executor.fleet.db`): read before the notebook, as lines, or undefined without a fleet.
 */
async function fleetWorkers(
  flags: ViewFlags & { fleet?: string },
): Promise<{ lines: string[]; workers?: WorkerView[] } | undefined> {
  let programDb: string | undefined;
  try {
    programDb = loadProgram(programPath(flags.program)).executor?.fleet?.db;
  } catch {
    // no readable program.md: only --fleet or the environment name a fleet
  }
  const url = viewerFleetUrl(flags.fleet, programDb);
  if (!url) return undefined;
  try {
    const workers = await readWorkers(url);
    return { lines: workerLines(workers, url.shown), workers };
  } catch (err) {
    // A viewer never fails on the fleet: it says why the workers cannot be shown.
    return { lines: [`Workers: ${err instanceof Error ? err.message : String(err)}`] };
  }
}

export async function statusCommand(flags: ViewFlags & { fleet?: string }): Promise<void> {
  const fleet = await fleetWorkers(flags);
  const onlyPriorHistory = (ledger: Ledger) =>
    !flags.tag && (flags.json ? noRunJson(ledger, flags, fleet) : priorHistoryOnly(ledger, flags));
  if (flags.json && !flags.tag && !notebookHere(flags)) {
    noRunJson(undefined, flags, fleet);
    return;
  }
  withRun(
    flags,
    (run, exps, _holdout, lab) => {
      const s = statusWith(run, exps, lab);
      if (flags.json)
        return printJson(JSON.stringify(fleet ? { ...s, workers: fleet.workers ?? null } : s, null, 2));
      const lines = [`Run ${s.tag} (${s.program}) on branch ${s.branch}`];
      lines.push(
        `Objective: ${s.direction} ${s.metric}${s.selfReported ? "  [self-reported: no protected evaluate step]" : ""}`,
      );
      if (s.sandbox !== null || s.unsandboxed) {
        lines.push(
          s.unsandboxed
            ? `Sandbox: UNSANDBOXED${s.sandbox?.startsWith("unsandboxed") ? ` (${s.sandbox.slice("unsandboxed: ".length)})` : " in an earlier session"} — trials and researchers ran with autolab's privileges`
            : `Sandbox: ${s.sandbox}`,
        );
      }
      if (s.baseline) lines.push(`Baseline: ${formatMetric(s.baseline.metric ?? undefined)}`);
      if (s.best) {
        const change =
          s.baseline?.metric != null && s.best.metric != null
            ? ` (${formatChange(s.baseline.metric, s.best.metric)})`
            : "";
        lines.push(
          `Best:     ${formatMetric(s.best.metric ?? undefined)}${change}  #${s.best.id} ${s.best.commit.slice(0, 8)} ${s.best.hypothesis}`,
        );
        if (s.cost)
          lines.push(
            `Cost:     ${formatUsd(s.cost.usd)} reported by the researchers${s.cost.perKept !== null ? ` (${formatUsd(s.cost.perKept)} per kept change)` : " (nothing kept yet)"}`,
          );
        if (s.bestEvidence && s.best.id !== 0)
          lines.push(`Evidence: ${evidenceLabel(s.bestEvidence)} — ${s.bestEvidence.why}`);
      }
      const predicted = predictedBestLine(s);
      if (predicted) lines.push(predicted);
      const c = s.counts;
      lines.push(
        `Experiments: ${c.total} total — ${c.kept} kept, ${c.discarded} discarded, ${c.crashed} crashed, ${c.rejected} rejected${c.pending ? `, ${c.pending} pending (run \`autolab run\` to resume)` : ""}`,
      );
      if (s.noise) lines.push(`Noise: ${s.noise.reason.replace(/^noise: /, "")}`);
      if (s.acceptance) lines.push(`Acceptance: ${s.acceptance}`);
      for (const a of s.alarms) lines.push(`ALARM ${a.kind}: ${a.reason}`);
      if (s.ladder) {
        const steps = s.ladder.map(
          (l) =>
            `${l.low} → ${l.high}: ${l.promoted} of ${l.measured} promoted, rho ${l.rho === null ? "—" : l.rho.toFixed(2)} over ${l.pairs} pairs`,
        );
        lines.push(`Ladder: ${steps.join("; ")}`);
      }
      lines.push(`Trial time: ${formatSeconds(s.trialSeconds)}. Last activity: ${s.lastActivity ?? "—"}`);
      if (s.front) lines.push(...frontLines(s.front));
      if (s.imported) lines.push(priorHistoryLine(s.imported, s.metric));
      lines.push(...advisorLines(s));
      lines.push(...orgLines(s));
      if (fleet) lines.push(...fleet.lines);
      print(lines.join("\n"));
    },
    onlyPriorHistory,
  );
}

/** Whether the program's notebook exists (a view of a project that never ran has none). */
function notebookHere(flags: ViewFlags): boolean {
  try {
    return notebookExists(locateNotebook(flags.program).db);
  } catch {
    return true; // the view itself then says what is wrong
  }
}

/**
 * `status --json` before the first run (no notebook yet, or one holding only `init --from`'s
 * imported history): JSON on stdout all the same, `run: null` and the prior history, never an
 * error a script has to parse from stderr. False (nothing printed) when the notebook has a run.
 */
function noRunJson(
  ledger: Ledger | undefined,
  flags: ViewFlags,
  fleet: { workers?: WorkerView[] } | undefined,
): boolean {
  if (ledger?.latestRun()) return false;
  const imported = ledger?.listImportedResults() ?? [];
  let metric: string | undefined;
  try {
    metric = loadProgram(programPath(flags.program)).objective.metric;
  } catch {
    metric = Object.keys(imported[0]?.metrics ?? {})[0];
  }
  const json = {
    run: null,
    message:
      "No run yet: `autolab run` starts one, and its first experiment measures autolab's own baseline.",
    metric: metric ?? null,
    imported: imported.length ? priorHistoryOf(imported, metric ?? "metric") : null,
    ...(fleet ? { workers: fleet.workers ?? null } : {}),
  };
  printJson(JSON.stringify(json, null, 2));
  return true;
}

/**
 * `autolab status` after `init --from` and before the first run: the imported history alone.
 * False (nothing printed) when the notebook has a run, or no imported results either.
 */
function priorHistoryOnly(ledger: Ledger, flags: ViewFlags): boolean {
  if (ledger.latestRun()) return false;
  const imported = ledger.listImportedResults();
  if (!imported.length) return false;
  let metric = "metric";
  try {
    metric = loadProgram(programPath(flags.program)).objective.metric;
  } catch {
    metric = Object.keys(imported[0]?.metrics ?? {})[0] ?? metric;
  }
  const h = priorHistoryOf(imported, metric) as PriorHistory;
  print(
    [
      "No run yet: `autolab run` starts one, and its first experiment measures autolab's own baseline.",
      priorHistoryLine(h, metric),
    ].join("\n"),
  );
  return true;
}

/** What the advisor said: its stop when that ended the run, else its answers and newest ideas. */
function advisorLines(s: StatusJson): string[] {
  const a = s.advisor;
  if (!a) return [];
  if (a.stop) return [`Stopped by the advisor (${a.stop.agent}) after #${a.stop.afterN}: ${a.stop.reason}`];
  const out = [
    `Advisor: asked ${a.asked} time${a.asked === 1 ? "" : "s"}${a.garbage ? ` (${a.garbage} answer${a.garbage === 1 ? "" : "s"} not used)` : ""}; last after #${a.last.afterN}: ${a.last.verdict}${a.last.reason ? ` — ${a.last.reason}` : ""}`,
  ];
  if (a.ideas && a.last.verdict !== "ideas")
    out.push(`Advisor's ideas (after #${a.ideas.afterN}): ${a.ideas.ideas.join(" | ")}`);
  return out;
}

/** The imported results in one line, always saying what they are. */
export function priorHistoryLine(h: PriorHistory, metric: string): string {
  const counts = Object.entries(h.statuses)
    .map(([k, v]) => `${v} ${k}`)
    .join(", ");
  const last = h.lastKept
    ? `; last kept there: ${metric} ${formatMetric(h.lastKept.metric)}${h.lastKept.commit ? ` (${h.lastKept.commit.slice(0, 8)})` : ""} ${h.lastKept.description.split("\n")[0] ?? ""}`
    : "";
  return `Prior history: ${h.count} result${h.count === 1 ? "" : "s"} imported from ${h.sources.join(", ")} — ${h.note} (${counts})${last}`;
}

/**
 * The organization in `autolab status`: a credit table per role and the slots of the latest
 * session with what each runs. Nothing for a lab without roles and sessions.
 */
export function orgLines(s: StatusJson): string[] {
  const lines: string[] = [];
  if (s.roles.length) {
    lines.push("Roles:");
    const rows = [["role", "proposals", "kept", "improvement", "compute", "value/h", "share"]];
    for (const r of s.roles) {
      rows.push([
        r.role,
        String(r.proposals),
        String(r.kept),
        formatMetric(r.improvement),
        formatClock(r.computeS),
        formatMetricTo(r.value * 3600, 4),
        `${(r.share * 100).toFixed(0)}%`,
      ]);
    }
    lines.push(
      ...table(rows, [1, 2, 3, 4, 5, 6])
        .split("\n")
        .map((l) => `  ${l}`),
    );
  }
  const sl = s.slots;
  if (sl.count > 0 && sl.utilization !== null) {
    const when = sl.live ? "this session" : "last session";
    lines.push(
      `slots: ${sl.count} · utilization ${(sl.utilization * 100).toFixed(1)}% (busy ${formatClock(sl.busyS)} of ${sl.count} × ${formatClock(sl.windowS)} ${when})`,
    );
    if (sl.count > 1 || sl.perSlot.some((p) => p.running)) {
      for (const p of sl.perSlot) {
        const r = p.running;
        const what = r
          ? `${r.state === "running" ? "running" : "cut short:"} #${r.n}${r.role ? ` [${r.role}]` : ""} ${r.hypothesis.split("\n")[0] ?? ""}`
          : "idle";
        lines.push(
          `  slot ${p.slot}: ${what}  (${p.trials} trial${p.trials === 1 ? "" : "s"}, ${(p.utilization * 100).toFixed(0)}% busy)`,
        );
      }
    }
  }
  return lines;
}

export function logCommand(flags: ViewFlags): void {
  withRun(flags, (run, exps, holdout, lab) => {
    const evidence = evidenceByN(run, exps, lab.ledger.listNotes(run.id), programOf(run));
    if (flags.json) {
      return printJson(
        JSON.stringify(
          exps.map((e) => experimentJson(e, holdout, flags.holdout ?? false, run.metric, evidence.get(e.n))),
          null,
          2,
        ),
      );
    }
    const rows = [["#", "decision", run.metric, "evidence", "wall", "commit", "hypothesis"]];
    // Directives (`autolab direct`) in time order among the experiments they came before.
    const directives = directivesOf(lab.ledger.listNotes(run.id));
    const directiveRow = (d: Directive) => [
      "—",
      "directive",
      "",
      "",
      "",
      "",
      `${d.id}: ${d.text.split("\n")[0] ?? ""}${d.withdrawnAt ? " (withdrawn)" : ""}`,
    ];
    for (const e of exps) {
      while (directives[0] && directives[0].at <= e.createdAt)
        rows.push(directiveRow(directives.shift() as Directive));
      const r = lastResult(e);
      rows.push([
        String(e.n),
        e.decision?.action ?? "pending",
        formatMetric(objectiveOf(e, run.metric)),
        evidenceLabel(evidence.get(e.n)),
        r ? formatSeconds(r.wallS) : "—",
        e.commit.slice(0, 8),
        e.hypothesis.split("\n")[0] ?? "",
      ]);
    }
    for (const d of directives) rows.push(directiveRow(d));
    print(table(rows));
  });
}

/** Columns padded to their widest cell; columns listed in `right` are right-aligned. */
function table(rows: string[][], right: number[] = []): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length))) ?? [];
  return rows
    .map((r) =>
      r
        .map((c, i) =>
          right.includes(i) ? c.padStart(widths[i] ?? 0) : i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0),
        )
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

export async function showCommand(id: string, flags: ViewFlags): Promise<void> {
  const n = Number(id.replace(/^#/, ""));
  if (!Number.isInteger(n) || n < 0) {
    throw new AutolabError(
      "BAD_ID",
      `"${id}" is not an experiment number.`,
      "Use a number from `autolab log`.",
    );
  }
  const found = withRun(flags, (run, exps, holdout, lab) => ({
    run,
    e: exps.find((x) => x.n === n),
    holdout,
    hooks: lab.ledger.listHookRuns(run.id, n),
    evidence: evidenceByN(run, exps, lab.ledger.listNotes(run.id), programOf(run)).get(n),
  }));
  const { run, e, holdout } = found;
  const hooks = viewedHooks(found.hooks, holdout, flags.holdout === true);
  if (!e)
    throw new AutolabError(
      "EXPERIMENT_NOT_FOUND",
      `run ${run.tag} has no experiment #${n}.`,
      "See `autolab log`.",
    );
  let diff = "";
  try {
    const repo = await findRepo(dirname(run.programPath));
    diff =
      e.parentCommit === e.commit
        ? ""
        : await git(repo.root, ["diff", "--no-renames", e.parentCommit, e.commit]);
  } catch {
    diff = "(diff unavailable: the repository is not reachable)";
  }
  if (flags.json) {
    return printJson(
      JSON.stringify(
        {
          ...experimentJson(e, holdout, flags.holdout ?? false, run.metric, found.evidence),
          hooks: hooks.map(hookJson),
          diffText: diff,
        },
        null,
        2,
      ),
    );
  }
  const lines = [`Experiment #${e.n} of run ${run.tag} (agent ${e.agent})`];
  lines.push(`Hypothesis: ${e.hypothesis}`);
  if (e.mechanism) lines.push(`Mechanism:  ${e.mechanism}`);
  if (e.params)
    lines.push(
      `Params:     ${Object.entries(e.params)
        // Text (a categorical knob's choice) quoted and escaped: nothing in it reaches the terminal raw.
        .map(([k, v]) => `${k}=${typeof v === "string" ? JSON.stringify(v) : v}`)
        .join(" ")}`,
    );
  lines.push(`Commit:     ${e.commit} (parent ${e.parentCommit.slice(0, 8)}), ref ${e.ref}`);
  lines.push(`Diff:       ${e.diff.files} file(s), +${e.diff.insertions} −${e.diff.deletions}`);
  if (found.evidence) lines.push(`Evidence:   ${evidenceLabel(found.evidence)} — ${found.evidence.why}`);
  if (e.expected) lines.push(`Expected:   ${e.expected}`);
  if (e.usage && Object.keys(e.usage).length) {
    const u = e.usage;
    const parts = [
      u.inputTokens !== undefined ? `${u.inputTokens} input tokens` : "",
      u.outputTokens !== undefined ? `${u.outputTokens} output tokens` : "",
      u.costUsd !== undefined ? `$${u.costUsd.toFixed(4)}` : "",
      u.wallS !== undefined ? `${formatSeconds(u.wallS)} thinking` : "",
    ].filter(Boolean);
    if (parts.length) lines.push(`Researcher: ${parts.join(", ")}`);
  }
  if (e.decision) {
    const mc = e.decision.mechanismConfirmed;
    lines.push(
      `Decision:   ${e.decision.action} — ${e.decision.reason}${mc === null || mc === undefined ? "" : mc ? " (mechanism confirmed)" : " (mechanism refuted)"}`,
    );
  } else lines.push("Decision:   pending");
  for (const t of e.trials) {
    const r = t.result;
    const over = r ? graceOverrun(r, t.budgetMs) : undefined;
    lines.push(
      `Trial ${t.attempt} (seed ${t.seed}, budget ${t.budgetMs / 1000}s): ${r ? r.status : "running or cut short"}${r?.reason ? ` — ${r.reason}` : ""}${
        over !== undefined ? ` [overran its budget by ${formatSeconds(over)}, inside the grace window]` : ""
      }`,
    );
    if (r) {
      const m = visibleMetrics({ ...e, trials: [t] }, holdout, flags.holdout ?? false);
      lines.push(
        `  metrics: ${
          Object.entries(m)
            .map(([k, v]) => `${k}=${formatMetric(v)}`)
            .join(" ") || "—"
        }`,
      );
      lines.push(
        `  cost: wall ${r.wallS.toFixed(2)}s, cpu ${r.cpuS.toFixed(2)}s, peak ${r.peakRssMb.toFixed(0)} MB${r.selfReported ? ", self-reported" : ""}`,
      );
      if (r.logDir) lines.push(`  logs: ${r.logDir}`);
    }
  }
  for (const h of hooks) {
    lines.push(
      `Hook ${h.phase} (\`${h.command}\`): ${h.status}${h.reason ? ` — ${h.reason}` : ""}, ${h.wallS.toFixed(2)}s`,
    );
    lines.push(...hookOutputLines(h.output).map((l) => `  ${l}`));
    lines.push(`  logs: ${h.logDir}`);
  }
  if (diff) lines.push("", diff.trimEnd());
  print(lines.join("\n"));
}

/**
 * The prior work a researcher of this run is shown (the run's own results left out). A store
 * that cannot be read is said on stderr and left out: the context is printed all the same.
 */
function contextPriorWork(program: Program, run: RunRecord | undefined, on = true): KnowledgeHit[] {
  if (!on) return [];
  try {
    return priorWorkOf(program, run);
  } catch (err) {
    if (!(err instanceof AutolabError)) throw err;
    process.stderr.write(`autolab: warning: prior work left out: ${err.message}\n`);
    return [];
  }
}

export function contextCommand(flags: ViewFlags & { priorWork?: boolean }): void {
  const { ledger } = openLedger(flags.program);
  try {
    // Before the first run (after `init --from`), the context is program.md and the prior history.
    if (!flags.tag && !ledger.latestRun()) {
      const program = loadProgram(programPath(flags.program));
      const priorWork = contextPriorWork(program, undefined, flags.priorWork);
      print(buildContext(program, undefined, [], { imported: ledger.listImportedResults(), priorWork }));
      return;
    }
    const run = selectRun(ledger, flags.tag);
    const program = loadProgram(run.programPath);
    const priorWork = contextPriorWork(program, run, flags.priorWork);
    print(
      buildContext(program, run, ledger.listExperiments(run.id), {
        ...notebookExtras(ledger, program, run.id),
        priorWork,
      }),
    );
  } finally {
    ledger.close();
  }
}

export function failuresCommand(flags: ViewFlags): void {
  withRun(flags, (_run, exps, holdout) => {
    const failed = exps.filter((e) => e.decision?.action === "crash" || e.decision?.action === "reject");
    if (flags.json) {
      return printJson(
        JSON.stringify(
          failed.map((e) => ({
            id: e.n,
            hypothesis: redactHoldouts(e.hypothesis, holdout),
            decision: e.decision?.action,
            reason: redactHoldouts(e.decision?.reason ?? "", holdout),
            logTail: redactHoldouts(lastResult(e)?.logTail ?? "", holdout),
          })),
          null,
          2,
        ),
      );
    }
    print(failuresText(exps, holdout));
  });
}

const EXPORT_FORMATS = ["results-tsv", "log-jsonl", "jsonl", ...TRAJECTORY_FORMATS] as const;

export async function exportCommand(
  flags: ViewFlags & { format?: string; out?: string; append?: boolean; force?: boolean },
): Promise<void> {
  const format = flags.format ?? "results-tsv";
  if (!(EXPORT_FORMATS as readonly string[]).includes(format)) {
    throw new AutolabError(
      "BAD_FORMAT",
      `unknown export format "${format}".`,
      `Use --format ${EXPORT_FORMATS.join(", --format ")}.`,
    );
  }
  // A user's file is never overwritten: refused unless --append or --force (src/cli/output-file.ts).
  const out = flags.out !== undefined ? { path: flags.out, mode: outputMode(flags.out, flags) } : undefined;
  if (!out && (flags.append || flags.force)) {
    throw new AutolabError("BAD_FLAG", "--append and --force need a file (-o FILE).", "Add -o FILE.");
  }
  const before = out ? existingText(out.path, out.mode) : "";
  // An addition starts on a line of its own.
  const lead = before !== "" && !before.endsWith("\n") ? "\n" : "";
  if ((TRAJECTORY_FORMATS as readonly string[]).includes(format)) {
    // The notebook stays open while the lines stream: each proposal's context is read when its record is made.
    return await writeLines(
      exportTrajectories({
        format: format as TrajectoryFormat,
        ...(flags.program !== undefined ? { program: flags.program } : {}),
        ...(flags.tag !== undefined ? { tag: flags.tag } : {}),
      }),
      out,
      lead,
    );
  }
  let text = withRun(flags, (run, exps, holdout, lab) => {
    // Appended under autoresearch's own file, the rows take its memory_gb column (0.0: unmeasured).
    if (format === "results-tsv") return resultsTsv(run, exps, /^[^\n]*\tmemory_gb\t/.test(before));
    if (format === "log-jsonl")
      return piLogJsonl(run, exps, holdout, before ? piLogContinuation(before) : undefined);
    const evidence = evidenceByN(run, exps, lab.ledger.listNotes(run.id), programOf(run));
    return `${exps.map((e) => JSON.stringify(experimentJson(e, holdout, true, run.metric, evidence.get(e.n)))).join("\n")}\n`;
  });
  if (format === "results-tsv" && before.trim() !== "") text = rowsUnder(before, text, out?.path ?? "");
  // Secrets out (src/core/secrets.ts): the notebook holds none, this is the second line of defense.
  const safe = redactSecrets(format === "results-tsv" ? safeText(text) : safeJson(text));
  if (!out) return write(safe);
  const fd = openOutput(out.path, out.mode);
  try {
    writeSync(fd, lead + safe);
  } finally {
    closeSync(fd);
  }
}

/**
 * results.tsv's rows appended under an existing file's header: only when the header is the same
 * (another objective's column would be read as this one's).
 */
function rowsUnder(existing: string, tsv: string, path: string): string {
  const header = tsv.slice(0, tsv.indexOf("\n"));
  const theirs = existing
    .slice(0, existing.indexOf("\n") === -1 ? undefined : existing.indexOf("\n"))
    .trimEnd();
  if (theirs !== header) {
    throw new AutolabError(
      "OUTPUT_EXISTS",
      `${path}'s header is not this run's: it has "${theirs.replace(/\t/g, " ")}", this run "${header.replace(/\t/g, " ")}".`,
      "Append to results of the same objective, or write to another file (-o), or replace it (--force).",
    );
  }
  return tsv.slice(header.length + 1);
}

/**
 * Lines as they come, JSON-escaped (safeJson), to a file or stdout (waiting for a slow reader):
 * a large export is never one string.
 */
async function writeLines(
  lines: AsyncIterable<string>,
  out: { path: string; mode: OutputMode } | undefined,
  lead = "",
): Promise<void> {
  const it = lines[Symbol.asyncIterator]();
  // The first line (or the source's error: no notebook, no such run) before the file is made.
  let next = await it.next();
  let fd: number | undefined;
  try {
    fd = out ? openOutput(out.path, out.mode) : undefined;
    if (fd !== undefined && lead) writeSync(fd, lead);
  } catch (err) {
    await it.return?.();
    throw err;
  }
  // A reader that stops early (`| head`) is a normal end: stop making lines.
  let stopGone: () => void = () => {};
  const gone = new Promise<void>((resolve) => {
    stopGone = onOutputClosed((stream) => {
      if (stream === "stdout") resolve();
    });
  });
  let closed = false;
  void gone.then(() => {
    closed = true;
  });
  try {
    for (; !next.done; next = await it.next()) {
      if (closed) break;
      const text = `${redactSecrets(safeJson(next.value))}\n`;
      if (fd !== undefined) writeSync(fd, text);
      else if (!process.stdout.write(text)) await Promise.race([once(process.stdout, "drain"), gone]);
    }
  } finally {
    // Left early (a closed reader, an error): the source closes what it holds (the notebook).
    if (!next.done) await it.return?.();
    stopGone();
    if (fd !== undefined) closeSync(fd);
  }
}
