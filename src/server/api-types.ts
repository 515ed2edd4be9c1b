/**
 * The JSON the API answers, route by route, as the dashboard reads it (src/server/assets/app.js
 * refers to these types in JSDoc and is typechecked against them: test/dashboard-types.test.ts).
 * Built from the types the answers are made of, so a change there reaches the page's checks.
 * Field by field in docs/dashboard.md.
 */

import type { ExperimentJson, HookJson } from "../app/experiment-json.ts";
import type { FinalizeJson } from "../app/finalize-view.ts";
import type { OpenTrial, RunSummary } from "../app/lab-reader.ts";
import type { OrgView } from "../app/org-view.ts";
import type { StatusJson } from "../app/status.ts";
import type { TreeJson } from "../app/tree.ts";
import type { ChartSeries } from "../chart/progress-chart.ts";
import type { KnowledgeHit } from "../core/knowledge.ts";
import type { NotebookEvent } from "../core/notebook-reader.ts";
import type { WorkerView } from "../fleet/workers-view.ts";

/** GET /api/runs (and the page's boot data: `{ runs }`). */
export type RunsResponse = RunSummary[];

/** GET /api/status: `autolab status --json` plus the trials running now. */
export type StatusResponse = StatusJson & { running: OpenTrial[] };

/** GET /api/chart. */
export type ChartResponse = ChartSeries;

/** GET /api/experiments: one page of the filtered, sorted list. */
export interface ExperimentsResponse {
  run: string;
  total: number;
  offset: number;
  limit: number;
  experiments: ExperimentJson[];
}

/** GET /api/experiments/:n: one experiment with what its page shows. */
export type ExperimentResponse = ExperimentJson & {
  run: string;
  isBest: boolean;
  costs: { trials: number; wallS: number; cpuS: number; peakRssMb: number };
  /** The log's last lines, holdout metrics redacted unless `?holdout=1`. */
  logTail: string;
  /** The change against its parent (`git diff`), "" for none. */
  diffText: string;
  /** Its hook runs (program.md `hooks:`), oldest first; outputs are trial-controlled text, holdout names redacted unless `?holdout=1`. */
  hooks: HookJson[];
};

/** An alarm raised by the trust layer (overfitting canary, a baseline too noisy to accept anything). */
export interface Alarm {
  type: string;
  reason: string;
  at: string;
  n?: number;
}

/** GET /api/alarms. */
export type AlarmsResponse = Alarm[];

/** GET /api/noise: the run's σ and where it came from; null before the baseline is measured. */
export type NoiseResponse = {
  sigma: number | null;
  source: string;
  explain: string;
  reason: string;
} | null;

/**
 * GET /api/prior-work: the closest results of other runs on this machine, as the run's
 * researcher is shown them (core/knowledge.ts). `enabled` false: `prior_work: false` or
 * AUTOLAB_KNOWLEDGE=off. `error`: the store could not be read (the run goes on without it).
 */
export interface PriorWorkResponse {
  enabled: boolean;
  store: string | null;
  hits: KnowledgeHit[];
  error?: string;
}

/** GET /api/tree: the run's kept nodes and the node each grew from (the tree frontier). */
export type TreeResponse = TreeJson;

/**
 * GET /api/finalize: `autolab finalize`'s dry-run plan (branches, what each holds, dependencies,
 * gains ± σ, conflicts, recorded --apply and --verify notes); `plan` null with nothing kept.
 * Hypotheses are researcher text; holdout names redacted unless `?holdout=1`.
 */
export type FinalizeResponse = FinalizeJson;

/** GET /api/org (`run` null and everything empty in an empty notebook). */
export type OrgResponse = OrgView & { run: string | null };

/** GET /api/workers: the worker fleet's workers when the dashboard was given one (`serve --fleet`). */
export interface WorkersResponse {
  /** The fleet's URL, password masked; null without a fleet. */
  fleet: string | null;
  workers: WorkerView[];
  /** Why the workers cannot be read (the database unreachable), else null. */
  problem: string | null;
}

/** One message of GET /api/events (server-sent events): a loop event with its run's tag. */
export type EventMessage = NotebookEvent;

/** The error every route answers with a status ≥ 400. */
export interface ErrorResponse {
  error: { code: string; message: string; hint: string | null };
}
