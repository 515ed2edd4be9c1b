/**
 * Prior work (core/knowledge.ts) for the app: the run's source (on unless --no-prior-work,
 * `prior_work: false` or AUTOLAB_KNOWLEDGE=off) and reads of the store for `autolab knowledge`,
 * `autolab context`, MCP's `prior_work` tool and the dashboard.
 */
import { existsSync } from "node:fs";
import { AutolabError } from "../core/errors.ts";
import type { LoopEventListener } from "../core/events.ts";
import {
  type KnowledgeHit,
  type KnowledgeSearchOptions,
  type KnowledgeStats,
  type KnowledgeStore,
  knowledgeScope,
  type PriorWorkSource,
  priorWorkQuery,
  priorWorkSource,
} from "../core/knowledge.ts";
import type { RunRecord } from "../core/ledger.ts";
import type { Program } from "../core/types.ts";
import { knowledgePath, openKnowledgeStore } from "../ledger/knowledge-store.ts";

export { knowledgePath };

/** The run's prior-work source, or undefined when it is off (flag, program.md, AUTOLAB_KNOWLEDGE=off). */
export function priorWorkFor(
  program: Program,
  run: RunRecord,
  opts: { priorWork?: boolean; onEvent?: LoopEventListener },
): PriorWorkSource | undefined {
  if (opts.priorWork === false || program.priorWork === false) return undefined;
  const path = knowledgePath();
  if (!path) return undefined;
  const warn = (message: string) => {
    if (opts.onEvent) opts.onEvent({ type: "warning", message });
    else process.stderr.write(`autolab: warning: ${message}\n`);
  };
  return priorWorkSource(() => openKnowledgeStore(path), program, run, { warn });
}

/**
 * Runs `fn` on the machine's store. Undefined when there is none yet (nothing is created by a
 * read) or it is off; a store that cannot be opened or read is KNOWLEDGE_UNAVAILABLE.
 */
export function readKnowledge<T>(fn: (store: KnowledgeStore) => T): T | undefined {
  const path = knowledgePath();
  if (!path || !existsSync(path)) return undefined;
  let store: KnowledgeStore | undefined;
  try {
    store = openKnowledgeStore(path);
    return fn(store);
  } catch (err) {
    if (err instanceof AutolabError) throw err;
    throw new AutolabError(
      "KNOWLEDGE_UNAVAILABLE",
      `the knowledge store ${path} cannot be read: ${(err as Error).message}`,
      "Runs go on without prior work meanwhile. Move the file away to start a new store (it holds only copies of notebooks' results), or set AUTOLAB_KNOWLEDGE to another path.",
    );
  } finally {
    try {
      store?.close();
    } catch {}
  }
}

/**
 * The closest prior results for a query. Without `opts.scope` every entry (the user's own
 * `autolab knowledge search`); a researcher's view always passes the program's scope.
 */
export function searchPriorWork(query: string, k: number, opts: KnowledgeSearchOptions = {}): KnowledgeHit[] {
  return readKnowledge((s) => s.search(query, k, opts)) ?? [];
}

/**
 * What a run of `program` would be shown (its own run left out, the program's scope:
 * core/knowledge.ts knowledgeScope): `autolab context`, MCP, the dashboard.
 */
export function priorWorkOf(
  program: Pick<Program, "name" | "directions" | "objective" | "priorWork" | "path">,
  run: RunRecord | undefined,
  k = 5,
): KnowledgeHit[] {
  if (program.priorWork === false) return [];
  const project = run?.programPath ?? program.path;
  return searchPriorWork(priorWorkQuery(program), k, {
    ...(run ? { exclude: { project: run.programPath, run: run.tag } } : {}),
    scope: knowledgeScope(program, project, run ?? program.objective),
  });
}

/** The store's counts, or undefined when there is none yet. */
export function knowledgeStats():
  | (KnowledgeStats & { exists: true })
  | { path: string | undefined; exists: false } {
  const stats = readKnowledge((s) => s.stats());
  return stats ? { ...stats, exists: true } : { path: knowledgePath(), exists: false };
}
