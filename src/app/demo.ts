import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LoopEventListener } from "../core/events.ts";
import { createRun, type RunOutcome } from "./create-run.ts";
import { initProject } from "./init.ts";

export interface DemoOptions {
  dir?: string;
  maxExperiments?: number;
  budgetMs?: number;
  /** Trials at once (tiny-lm trains on one core: 2 slots use both cores of a 2-core machine). */
  slots?: number;
  signal?: AbortSignal;
  onEvent?: LoopEventListener;
}

/** `autolab demo`: tiny-lm in a fresh temporary git repository, about ten experiments. */
export async function runDemo(opts: DemoOptions): Promise<RunOutcome> {
  const dir = opts.dir ?? join(mkdtempSync(join(tmpdir(), "autolab-demo-")), "tiny-lm");
  await initProject(dir, "tiny-lm");
  return createRun({
    program: dir,
    tag: "demo",
    maxExperiments: opts.maxExperiments ?? 10,
    ...(opts.budgetMs !== undefined ? { budgetMs: opts.budgetMs } : {}),
    ...(opts.slots !== undefined ? { slots: opts.slots } : {}),
    ...(opts.signal ? { signal: opts.signal } : {}),
    ...(opts.onEvent ? { onEvent: opts.onEvent } : {}),
  });
}
