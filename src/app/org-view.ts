import { showValue } from "../agents/builtin/literals.ts";
import { bestOf, objectiveOf } from "../core/experiments.ts";
import type { ExperimentRecord, RunRecord, SessionRecord, TrialRecord } from "../core/ledger.ts";
import type { ParamValue } from "../core/types.ts";

/**
 * The organization as viewers show it (`autolab status`, `/api/org`, the dashboard): credit
 * per role, slot utilization of the latest harness session, and the findings board. Pure:
 * everything is derived from notebook rows and a clock reading passed in.
 */

/** What one role has brought, from its experiments in the notebook. */
export interface RoleCredit {
  role: string;
  /** Experiments the role proposed (merge candidates included; the baseline never counts). */
  proposals: number;
  decided: number;
  kept: number;
  /** Of its proposals, merge candidates (an older change rebased onto a newer best). */
  merges: number;
  /** Σ over its kept experiments of how far each moved the running best (good direction, ≥ 0). */
  improvement: number;
  /** Σ wall seconds of its experiments' trials. */
  computeS: number;
  /** improvement / computeS (0 before any compute): improvement per trial second. */
  value: number;
  /** proposals / all roles' proposals. */
  share: number;
}

/** The experiment on a slot: a trial started in the session that has no result yet. */
export interface SlotTrial {
  n: number;
  attempt: number;
  hypothesis: string;
  role: string | null;
  startedAt: string;
  /** "interrupted" when the session is not live (the harness died or stopped during it). */
  state: "running" | "interrupted";
}

export interface SlotUse {
  slot: number;
  /** Seconds the slot spent in trials within the session window. */
  busyS: number;
  /** busyS / windowS. */
  utilization: number;
  /** Trials started on this slot in the session. */
  trials: number;
  running: SlotTrial | null;
}

/** The latest session (one start of `autolab run` on the run) and how busy its slots were. */
export interface SessionUse {
  id: number;
  /** Slots the harness ran in this session (1 for a serial run). */
  slots: number;
  startedAt: string;
  /** End of the window: the clock while the session is live, else its last activity. */
  until: string;
  live: boolean;
  windowS: number;
  /** Σ over slots of busyS. */
  busyS: number;
  /** busyS / (windowS × slots); 0 for an empty window. */
  utilization: number;
}

/**
 * The findings board: what was kept, which stated mechanisms the evidence refuted, and, for the
 * built-in optimizer (whose "mechanism" is its sampler's state, not a claim about the code),
 * which knob ranges and choices its measurements rule out.
 */
export interface Finding {
  kind: "kept" | "refuted" | "ruled-out";
  /** The experiment; on "ruled-out", the newest of the region's. */
  n: number;
  role: string | null;
  /** On "ruled-out": the region in words, e.g. "LEARNING_RATE above 0.02 (the best's): 3 of 3 not better". */
  hypothesis: string;
  mechanism: string | null;
  metric: number | null;
  /** On a merge candidate: the experiment whose change was rebased. */
  rebaseOf: number | null;
  decidedAt: string;
  /** On "ruled-out": the knob region and its count. */
  region?: KnobRegion;
}

/**
 * Configurations of the built-in optimizer whose value of one knob lies on one side of the
 * best's value (or is one other choice), and how many of them were not better than the best of
 * their time (discarded, pruned, crashed or rejected).
 */
export interface KnobRegion {
  knob: string;
  /** Numeric knobs: above or below the best's value; categorical ones: this other choice. */
  side: "above" | "below" | "is";
  /** The best's value ("above"/"below"), or the choice ("is"). */
  value: ParamValue;
  /** The values tried in the region, ascending (numbers) or the choice. */
  tried: ParamValue[];
  notBetter: number;
  of: number;
  /** Of notBetter, how many crashed or were rejected (no usable measurement). */
  failed: number;
  /** The experiments in the region, ascending. */
  ns: number[];
}

export interface OrgView {
  /** Ordered by first appearance; empty when no experiment has a role. */
  roles: RoleCredit[];
  /** The latest session; null in notebooks without sessions. */
  session: SessionUse | null;
  /** Per slot of the latest session (empty without one). */
  slots: SlotUse[];
  /** Kept and refuted ones newest first, at most `maxFindings`; then ruled-out knob regions (findingsOf). */
  findings: Finding[];
}

export interface OrgViewOptions {
  /**
   * Whether a harness is running the latest session now (the run's lock is held). Default: it
   * is when a trial started in that session has no result yet.
   */
  live?: boolean;
  /** Cap of the kept and refuted findings (default 20; ruled-out knob regions: at most 6 more). */
  maxFindings?: number;
}

export function orgView(
  run: RunRecord,
  exps: ExperimentRecord[],
  sessions: SessionRecord[],
  now: Date | number | string,
  opts: OrgViewOptions = {},
): OrgView {
  const slots = slotsOf(exps, sessions.at(-1), toMs(now), opts.live);
  return {
    roles: roleCredit(run, exps),
    session: slots?.session ?? null,
    slots: slots?.slots ?? [],
    findings: findingsOf(exps, opts.maxFindings ?? 20),
  };
}

// ---------------------------------------------------------------------------------------------
// credit

/**
 * Credit per role. Improvement: the kept experiments are walked in decision order (decidedAt,
 * ties by n) from the baseline's metric; each is credited with how far its kept value
 * (`decision.metric`) moved the running best in the objective's good direction, 0 when it did
 * not beat it. The running best only moves in the good direction, so the roles' improvements
 * (with keeps of no role) add up to best-ever − baseline. A merge candidate is credited to
 * its role like any experiment.
 */
export function roleCredit(run: RunRecord, exps: ExperimentRecord[]): RoleCredit[] {
  const byRole = new Map<string, RoleCredit>();
  for (const e of exps) {
    if (e.role === undefined || e.n === 0) continue;
    let c = byRole.get(e.role);
    if (!c) {
      c = {
        role: e.role,
        proposals: 0,
        decided: 0,
        kept: 0,
        merges: 0,
        improvement: 0,
        computeS: 0,
        value: 0,
        share: 0,
      };
      byRole.set(e.role, c);
    }
    c.proposals++;
    if (e.rebaseOf !== undefined) c.merges++;
    if (e.decision) c.decided++;
    if (e.decision?.action === "keep") c.kept++;
    for (const t of e.trials) c.computeS += t.result?.wallS ?? 0;
  }
  if (byRole.size === 0) return [];

  const sign = run.direction === "minimize" ? -1 : 1;
  const baseline = exps.find((e) => e.n === 0);
  let best = baseline ? objectiveOf(baseline, run.metric) : undefined;
  const keeps = exps
    .filter((e) => e.n !== 0 && e.decision?.action === "keep")
    .sort((a, b) => cmp(a.decision?.decidedAt ?? "", b.decision?.decidedAt ?? "") || a.n - b.n);
  for (const e of keeps) {
    const m = objectiveOf(e, run.metric);
    if (m === undefined || !Number.isFinite(m)) continue;
    if (best === undefined || !Number.isFinite(best)) {
      best = m;
      continue;
    }
    const gain = sign * (m - best);
    if (gain <= 0) continue;
    best = m;
    const c = e.role !== undefined ? byRole.get(e.role) : undefined;
    if (c) c.improvement += gain;
  }

  const total = [...byRole.values()].reduce((s, c) => s + c.proposals, 0);
  return [...byRole.values()].map((c) => ({
    ...c,
    computeS: round2(c.computeS),
    value: c.computeS > 0 ? c.improvement / c.computeS : 0,
    share: total > 0 ? c.proposals / total : 0,
  }));
}

// ---------------------------------------------------------------------------------------------
// slots

/**
 * Slot use in `session` (the latest). The window runs from the session's start to its end:
 * `now` while the session is live (a harness runs it), else the session's last activity (the
 * latest experiment, trial start, trial result or decision written at or after its start).
 * A trial is busy from its start row to its result row; one still open counts until the end of
 * the window (one left open by an earlier session is ignored: it was interrupted). Busy time
 * is clipped to the window; utilization = Σ busy / (window × slots). Trials without a slot
 * (serial runs) ran on slot 0.
 */
function slotsOf(
  exps: ExperimentRecord[],
  session: SessionRecord | undefined,
  nowMs: number,
  liveOpt: boolean | undefined,
): { session: SessionUse; slots: SlotUse[] } | undefined {
  if (!session) return undefined;
  const start = Date.parse(session.startedAt);
  const inSession: { e: ExperimentRecord; t: TrialRecord }[] = [];
  let last = start;
  let open = false;
  for (const e of exps) {
    last = Math.max(last, notBefore(e.createdAt, start));
    if (e.decision) last = Math.max(last, notBefore(e.decision.decidedAt, start));
    for (const t of e.trials) {
      const ts = Date.parse(t.startedAt);
      if (t.result) last = Math.max(last, notBefore(t.result.finishedAt, start));
      if (ts < start) {
        if (t.result && Date.parse(t.result.finishedAt) > start) inSession.push({ e, t });
        continue;
      }
      last = Math.max(last, ts);
      inSession.push({ e, t });
      if (!t.result) open = true;
    }
  }
  const live = liveOpt ?? open;
  const end = live ? Math.max(nowMs, last) : last;
  const windowS = Math.max(0, (end - start) / 1000);

  let count = session.slots;
  for (const { t } of inSession) count = Math.max(count, (t.slot ?? 0) + 1);
  const slots: SlotUse[] = Array.from({ length: count }, (_, slot) => ({
    slot,
    busyS: 0,
    utilization: 0,
    trials: 0,
    running: null,
  }));
  let busyS = 0;
  for (const { e, t } of inSession) {
    const s = slots[t.slot ?? 0] as SlotUse;
    const ts = Date.parse(t.startedAt);
    if (ts >= start) s.trials++;
    const te = t.result ? Date.parse(t.result.finishedAt) : end;
    const busy = Math.max(0, (Math.min(te, end) - Math.max(ts, start)) / 1000);
    s.busyS += busy;
    busyS += busy;
    if (!t.result && ts >= start && (!s.running || s.running.startedAt < t.startedAt)) {
      s.running = {
        n: e.n,
        attempt: t.attempt,
        hypothesis: e.hypothesis,
        role: e.role ?? null,
        startedAt: t.startedAt,
        state: live ? "running" : "interrupted",
      };
    }
  }
  for (const s of slots) {
    s.utilization = windowS > 0 ? s.busyS / windowS : 0;
    s.busyS = round2(s.busyS);
  }
  return {
    session: {
      id: session.id,
      slots: session.slots,
      startedAt: session.startedAt,
      until: new Date(end).toISOString(),
      live,
      windowS: round2(windowS),
      busyS: round2(busyS),
      utilization: windowS > 0 && session.slots > 0 ? busyS / (windowS * session.slots) : 0,
    },
    slots,
  };
}

// ---------------------------------------------------------------------------------------------
// findings

/**
 * Kept changes (the baseline aside) and refuted mechanisms (discards whose stated mechanism the
 * judge found not confirmed), newest decision first, at most `max`; then the built-in
 * optimizer's ruled-out knob regions (`knobRegions`), strongest first, at most 6. The built-in optimizer's mechanism
 * ("TPE: sampled from the density of…", "GP: expected improvement…") says how its sampler chose,
 * which no measurement confirms or refutes: its experiments are never "refuted", and its kept
 * changes are told by what changed (the hypothesis), not by the sampler.
 */
export function findingsOf(exps: ExperimentRecord[], max = 20): Finding[] {
  if (max <= 0) return [];
  const out: Finding[] = [];
  for (const e of exps) {
    const d = e.decision;
    if (!d || e.n === 0) continue;
    const sampler = isBuiltin(e);
    let kind: Finding["kind"] | undefined;
    if (d.action === "keep") kind = "kept";
    else if (!sampler && d.action === "discard" && d.mechanismConfirmed === false && e.mechanism?.trim())
      kind = "refuted";
    if (!kind) continue;
    out.push({
      kind,
      n: e.n,
      role: e.role ?? null,
      hypothesis: e.hypothesis,
      mechanism: sampler ? null : (e.mechanism ?? null),
      metric: d.metric ?? null,
      rebaseOf: e.rebaseOf ?? null,
      decidedAt: d.decidedAt,
    });
  }
  out.sort((a, b) => cmp(b.decidedAt, a.decidedAt) || b.n - a.n);
  const decided = new Map(exps.map((e) => [e.n, e.decision?.decidedAt ?? ""]));
  const regions = knobRegions(exps)
    .slice(0, Math.min(max, MAX_REGIONS))
    .map((region): Finding => {
      const n = region.ns.reduce((a, b) => ((decided.get(b) ?? "") >= (decided.get(a) ?? "") ? b : a));
      return {
        kind: "ruled-out",
        n,
        role: null,
        hypothesis: regionText(region),
        mechanism: null,
        metric: null,
        rebaseOf: null,
        decidedAt: decided.get(n) ?? "",
        region,
      };
    });
  return [...out.slice(0, max), ...regions];
}

/** Ruled-out knob regions on the board, strongest first: more would crowd out what was kept. */
const MAX_REGIONS = 6;

/** Proposed by the built-in optimizer: it records every proposal's knob values (`params`). */
function isBuiltin(e: ExperimentRecord): boolean {
  return e.agent === "builtin" && e.params !== undefined;
}

/**
 * What the built-in optimizer's measurements rule out, knob by knob: for each knob of the
 * best's configuration, the decided configurations with a larger value, with a smaller one, and
 * with each other choice. A region is reported when at least three of its configurations, and
 * at least three in four, were not better than the best of their time; the most such first.
 * One knob at a time: the other knobs differed too, so a region says where the search found
 * nothing, not why.
 */
export function knobRegions(exps: ExperimentRecord[]): KnobRegion[] {
  const best = bestOf(exps)?.params;
  if (!best) return [];
  const tried = exps.filter((e) => e.n !== 0 && isBuiltin(e) && e.params && e.decision);
  const out: KnobRegion[] = [];
  for (const [knob, at] of Object.entries(best)) {
    const groups = new Map<string, KnobRegion>();
    // The distinct values per region (a Set: a long run has thousands of them).
    const values = new Map<KnobRegion, Set<ParamValue>>();
    for (const e of tried) {
      const v = e.params?.[knob];
      if (v === undefined || v === at) continue;
      const numeric = typeof v === "number" && typeof at === "number";
      const side = numeric ? (v > at ? "above" : "below") : "is";
      const key = numeric ? side : `is ${JSON.stringify(v)}`;
      let g = groups.get(key);
      if (!g) {
        g = { knob, side, value: numeric ? at : v, tried: [], notBetter: 0, of: 0, failed: 0, ns: [] };
        groups.set(key, g);
        values.set(g, new Set());
      }
      g.of++;
      g.ns.push(e.n);
      if (numeric) values.get(g)?.add(v);
      const action = e.decision?.action;
      if (action !== "keep") g.notBetter++;
      if (action === "crash" || action === "reject") g.failed++;
    }
    for (const g of groups.values()) {
      if (g.notBetter < 3 || g.notBetter * 4 < g.of * 3) continue;
      g.tried =
        g.side === "is"
          ? [g.value]
          : [...(values.get(g) ?? [])].sort((a, b) => (a as number) - (b as number));
      out.push(g);
    }
  }
  return out.sort(
    // ns ascend (experiments come in order of n): the last is the newest.
    (a, b) => b.notBetter - a.notBetter || b.of - a.of || (b.ns.at(-1) ?? 0) - (a.ns.at(-1) ?? 0),
  );
}

/** "LEARNING_RATE above 0.02 (the best's; tried 0.05–0.1): 3 of 3 not better (1 crashed or rejected)". */
function regionText(r: KnobRegion): string {
  const lo = r.tried[0] as ParamValue;
  const hi = r.tried[r.tried.length - 1] as ParamValue;
  const range = lo === hi ? showValue(lo) : `${showValue(lo)}–${showValue(hi)}`;
  const where =
    r.side === "is"
      ? `${r.knob} = ${showValue(r.value)}`
      : `${r.knob} ${r.side} ${showValue(r.value)} (the best's; tried ${range})`;
  const failed = r.failed ? ` (${r.failed} crashed or rejected)` : "";
  return `${where}: ${r.notBetter} of ${r.of} not better${failed}`;
}

// ---------------------------------------------------------------------------------------------

function toMs(t: Date | number | string): number {
  if (t instanceof Date) return t.getTime();
  return typeof t === "number" ? t : Date.parse(t);
}

/** An ISO time as ms when it is at or after `start`, else `start` (it does not extend the window). */
function notBefore(iso: string, start: number): number {
  const ms = Date.parse(iso);
  return Number.isFinite(ms) && ms >= start ? ms : start;
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function round2(x: number): number {
  return Math.round(x * 100) / 100;
}
