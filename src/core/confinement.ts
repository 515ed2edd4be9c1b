import type { SandboxSpec } from "./types.ts";
import type { Workspace } from "./workspace.ts";

/**
 * How a run confines the processes it starts (built by src/app/confinement.ts). Every method
 * returns undefined when the run is unsandboxed: the process then runs with the harness's
 * privileges, and status and reports say so.
 */
export interface Confinement {
  /** "bubblewrap 0.8.0", or "unsandboxed: <why>": recorded with every harness session. */
  readonly description: string;
  readonly sandboxed: boolean;
  /** How to get a sandbox when there is none (e.g. install bubblewrap). */
  readonly hint?: string;
  /** Declared caches inside the project: kept when the tree is cleaned between trials. */
  readonly projectCaches: string[];
  /** The setup step, in `ws` (network allowed: setup typically downloads data). */
  setup(ws: Workspace, env: Record<string, string>): SandboxSpec | undefined;
  /**
   * A trial's command and its evaluate step in `ws`; `setupFiles` (project-relative) are
   * read-only for both; `env` is added to the trial's environment (the slot's GPU, …).
   */
  trial(
    ws: Workspace,
    setupFiles: string[],
    env: Record<string, string>,
  ): { command: SandboxSpec; evaluate: SandboxSpec } | undefined;
  /**
   * A researcher process in `ws`, also writing `writable` (its logs, its home); setup's files
   * stay read-only. Its `env` is empty: the agent puts its own whole environment there.
   */
  researcher(ws: Workspace, setupFiles: string[], writable: string[]): SandboxSpec | undefined;
}
