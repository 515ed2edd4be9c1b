/**
 * The `HubTrials` interface of the design (src/hub/hub-trials.ts, helper "trials"), declared here
 * until that file lands on this branch: the verifier driver imports the type only. The lead
 * reconciles (this file then re-exports from hub-trials.ts or goes away).
 */
import type { HubTrial } from "./verification-policy.ts";

export interface HubTrialRequest {
  /** Deterministic: `hub-<claimId[0:16]>-r<round>-v<idx>-<side>-<seed>`; the same key re-attaches to the same fleet job. */
  key: string;
  commit: string;
  seed: number;
  label: string;
  signal?: AbortSignal;
}

export interface HubTrials {
  run(req: HubTrialRequest): Promise<HubTrial>;
  close(): Promise<void>;
}
