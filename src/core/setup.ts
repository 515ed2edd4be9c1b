import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { AutolabError } from "./errors.ts";
import type { LoopEvent } from "./events.ts";
import type { LoopDeps } from "./loop-deps.ts";

/**
 * The program's `setup` step, once per worktree: it runs on the base commit in a clean tree,
 * and the untracked files it leaves are recorded in a stamp (kept, read-only, in every trial).
 */
export async function runSetup(
  deps: LoopDeps,
  emit: (e: LoopEvent) => void,
  signal?: AbortSignal,
): Promise<void> {
  const { program, workspace: ws, executor } = deps;
  const setup = program.run.setup;
  if (!setup || validStamp(deps.setupStamp)) return;
  emit({ type: "setup_started", command: setup });
  const logDir = join(
    deps.logDir,
    deps.slot && deps.slot.index > 0 ? `setup-slot${deps.slot.index}` : "setup",
  );
  await mkdir(logDir, { recursive: true });
  // Setup runs on the base commit in a clean tree, so that what it leaves is exactly its files.
  const caches = deps.confinement?.projectCaches ?? [];
  await ws.cleanTree(deps.run.baseCommit, caches);
  const res = await executor.setup(
    ws.projectDir,
    setup,
    program.run.setupTimeoutMs,
    logDir,
    signal,
    deps.confinement?.setup(ws, deps.slot?.env ?? {}),
  );
  if (res.status === "interrupted") return;
  emit({
    type: "setup_finished",
    ok: res.status === "ok",
    wallS: res.wallS,
    ...(res.reason ? { reason: res.reason } : {}),
  });
  if (res.status !== "ok") {
    const tail = res.logTail.trim().split("\n").slice(-8).join("\n");
    throw new AutolabError(
      "SETUP_FAILED",
      `setup \`${setup}\` failed: ${res.reason ?? res.status}${tail ? `\n--- last lines of its log ---\n${tail}` : ""}`,
      `Fix it so that \`${setup}\` succeeds in a fresh checkout, commit, and run again. Logs: ${logDir}`,
    );
  }
  const files = (await ws.untrackedPaths())
    .map((p) => p.replace(/\/$/, ""))
    .filter((p) => !caches.includes(p));
  const stamp: SetupStamp = { at: new Date().toISOString(), command: setup, files };
  writeFileSync(deps.setupStamp, `${JSON.stringify(stamp)}\n`);
  setupFilesCache.set(deps.setupStamp, files);
  await ws.resetTo(await ws.bestCommit());
}

/** A stamp of this autolab's format (older ones did not list setup's files: setup runs again). */
function validStamp(path: string): boolean {
  if (!existsSync(path)) return false;
  try {
    return Array.isArray((JSON.parse(readFileSync(path, "utf8")) as SetupStamp).files);
  } catch {
    return false;
  }
}

/** What runSetup records: the untracked files setup left in the worktree (kept, read-only, in every trial). */
interface SetupStamp {
  at: string;
  command: string;
  files: string[];
}

const setupFilesCache = new Map<string, string[]>();

/** The files setup made in this worker's worktree (project-relative); none without a setup step. */
export function setupFilesOf(deps: Pick<LoopDeps, "program" | "setupStamp">): string[] {
  if (!deps.program.run.setup) return [];
  const cached = setupFilesCache.get(deps.setupStamp);
  if (cached) return cached;
  let files: string[] = [];
  try {
    files = (JSON.parse(readFileSync(deps.setupStamp, "utf8")) as SetupStamp).files ?? [];
  } catch {
    // No stamp yet (setup has not run), or one from an older autolab: runSetup runs it again.
  }
  setupFilesCache.set(deps.setupStamp, files);
  return files;
}
