import type { AgentConfig, Program, ProposalContext } from "../../core/types.ts";

/**
 * How one coding-agent CLI is driven headlessly. A preset is plain data plus three pure-ish
 * functions; createCliAgent (cli-agent.ts) owns everything the presets share: the prompt, the
 * isolated home, the environment, the clock, the logs, and turning output into a Proposal.
 *
 * Adding a CLI is one file: `src/agents/cli/presets/<backend>.ts` with a default export of a
 * CliPreset whose `backend` is the file name (and is listed in AGENT_BACKENDS in
 * src/program/schema.ts). register.ts finds it by its file name.
 */
export interface CliPreset {
  /** program.md `agent.backend`; equal to the preset's file name. */
  backend: string;
  /** Executable looked up on PATH (then among autolab's own pinned CLIs: cli-agent.ts findExecutable); undefined: the preset runs a shell command. */
  executable?: string;
  /** The exact command that installs the CLI, shown when it is missing. */
  install: string;
  /** Where to read more (shown in errors). */
  docs?: string;
  /**
   * Host credentials passed to the CLI when no `base_url` is configured (the CLI talks to its
   * vendor): "all" keeps every credential-looking variable, a list keeps those names, "none"
   * keeps none. With a `base_url` no host credential is passed (see env.ts).
   */
  hostKeys: "all" | "none" | readonly string[];
  /**
   * Where the CLI talks to its vendor when no `base_url` is configured (URLs; scheme, host and
   * port count). In a sandbox these are its only network: the egress proxy serves them (public
   * addresses only) and nothing else (docs/security.md "5. The researcher gets only what it needs").
   */
  endpoints?: readonly string[];
  /**
   * Paths under the user's real home (relative) the CLI may read in a sandbox, where the rest of
   * the home is hidden: its own installation or cache, never a credential store. Default none
   * (the isolated home holds its configuration).
   */
  homeReads?: readonly string[];
  /** Runs with HOME (and XDG dirs) pointed at `<logDir>/home`. Default true. */
  isolateHome?: boolean;
  /**
   * How the CLI writes the editable files, which decides what a sandbox lets it write (see
   * `agentSandbox` in cli-agent.ts). "in-place" (default): it rewrites them in place, so only
   * the editable files themselves are writable. "replace": it (or a shell command it runs, such
   * as `sed -i`) may write a temporary file next to an editable file and rename it over it, which
   * a read-only directory and a bind-mounted file forbid; the directories holding editable files
   * then take new files too, while every other entry in them stays read-only (a new file is left
   * to the loop's scope check).
   */
  sandboxEdits?: "in-place" | "replace";
  /** A tool the CLI offers for the summary (the prompt mentions it); the JSON block is asked for anyway. */
  summaryTool?: string;
  /** What `createCliAgent` checks once, before any run exists; throws an AutolabError for bad configuration. */
  validate?(config: AgentConfig, program: Program): void;
  /** The command line of one proposal. May write config files under `input.home`. */
  invocation(input: PresetInput): Promise<Invocation> | Invocation;
  /** Reads the CLI's machine output. Throws AgentFailure("garbage") when it cannot be read. */
  parse(output: CliOutput): ParsedOutput;
}

/** Everything a preset needs to build one invocation. */
export interface PresetInput {
  config: AgentConfig;
  ctx: ProposalContext;
  /** The researcher prompt (prompt.ts), also written to `promptFile`. */
  prompt: string;
  promptFile: string;
  /** The isolated home directory (exists), or the real one when the preset opts out. */
  home: string;
  /** Absolute paths of the editable files in the worktree. */
  editable: string[];
  /** Absolute paths of the protected files and directories in the worktree. */
  protected: string[];
  /** JSON schema of the summary, for CLIs that accept one. */
  summarySchema: Record<string, unknown>;
  /** The API key to use, resolved from `api_key_env` (or a placeholder when only base_url is set). */
  apiKey: string | undefined;
  /** Resolved absolute path of `executable`. */
  executablePath: string | undefined;
}

export interface Invocation {
  /** argv after the executable (ignored when `shell` is set). */
  args: string[];
  /** A full shell command line instead of executable + args (the `command` preset). */
  shell?: string;
  /** Environment added on top of the scrubbed host environment (config.env is added after it). */
  env: Record<string, string>;
}

export interface CliOutput {
  stdout: string;
  stderr: string;
  exitCode: number | null;
}

export interface ParsedOutput {
  /** The final assistant text. */
  text?: string;
  /** A structured summary (a submit tool's arguments, `structured_output`). */
  structured?: unknown;
  /** Set when the CLI reports that the run failed (e.g. an API error), even with exit code 0. */
  error?: string;
  usage?: { inputTokens?: number; outputTokens?: number; costUsd?: number };
}
