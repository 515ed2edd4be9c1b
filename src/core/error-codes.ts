/**
 * Every error code autolab reports, in one table: what it means, the exit code of the CLI and
 * the HTTP status of the API (docs/cli.md "Error codes" lists them; test/error-codes.test.ts
 * keeps the two in step). An `AutolabError` takes only a code from this table.
 *
 * - `user`: a problem the user can fix (bad input, a broken environment): message and fix,
 *   exit 1.
 * - `usage`: a bad command line: exit 2, like an unknown flag.
 * - `bug`: an invariant of autolab itself was broken: printed with its stack as an internal
 *   error, exit 70 (EX_SOFTWARE), HTTP 500 — never presented as the user's fault.
 *
 * Outcomes of trials and of researchers are data (TrialResult.status, AgentFailure), never
 * errors.
 */
export interface ErrorCodeInfo {
  kind: "user" | "usage" | "bug";
  /** HTTP status when the API reports it. */
  http: 400 | 401 | 403 | 404 | 409 | 500;
  /** What it means, for docs/cli.md. */
  meaning: string;
}

export const ERROR_CODES = {
  ACCEPTANCE_INVALID: {
    kind: "user",
    http: 400,
    meaning: "program.md names an acceptance rule that does not exist",
  },
  ADVICE_INVALID: {
    kind: "user",
    http: 400,
    meaning:
      "an advisor's answer (MCP `advise`) is neither IDEA: lines nor one STOP: line; recorded as garbage",
  },
  AGENT_API_KEY_MISSING: {
    kind: "user",
    http: 400,
    meaning: "the researcher's endpoint needs an API key that is not set",
  },
  AGENT_CONFIG_INVALID: {
    kind: "user",
    http: 400,
    meaning: "program.md's `agent:` settings (args, model, provider) cannot work",
  },
  AGENT_FAILING: {
    kind: "user",
    http: 500,
    meaning: "the researcher failed several proposals in a row; the run stopped",
  },
  AGENT_NOT_INSTALLED: { kind: "user", http: 400, meaning: "the agent backend's CLI is not installed" },
  AGENT_UNAVAILABLE: {
    kind: "user",
    http: 400,
    meaning: "the agent backend is known but not available in this version",
  },
  AGENT_UNKNOWN: { kind: "user", http: 400, meaning: "no agent backend by that name" },
  BAD_FLAG: { kind: "usage", http: 400, meaning: "a command-line flag's value is invalid" },
  BAD_FORMAT: { kind: "usage", http: 400, meaning: "unknown export format" },
  BAD_HOST: { kind: "user", http: 400, meaning: "`serve --host` is not an address of this machine" },
  BAD_ID: { kind: "user", http: 400, meaning: "an experiment id in a request is not a number" },
  BAD_PORT: { kind: "user", http: 400, meaning: "`serve --port` is not a TCP port" },
  BAD_QUERY: { kind: "user", http: 400, meaning: "a query parameter of the HTTP API is invalid" },
  BASELINE_FAILED: {
    kind: "user",
    http: 500,
    meaning: "the baseline's trials did not produce the objective",
  },
  BENCH_PROGRAM_MISSING: {
    kind: "user",
    http: 404,
    meaning: "a bench suite names a program (or a program.md variant) that does not exist",
  },
  BENCH_STATE_MISMATCH: {
    kind: "user",
    http: 409,
    meaning: "the bench's output directory holds the state of another suite (or of an edited one)",
  },
  BENCH_SUITE_INVALID: { kind: "user", http: 400, meaning: "a bench suite file is missing or invalid" },
  BRANCH_EXISTS: {
    kind: "user",
    http: 409,
    meaning: "the branch autolab/<tag> exists already and is not this run's",
  },
  BUDGET_BELOW_LADDER: {
    kind: "user",
    http: 400,
    meaning: "`--budget` is not above the proxy ladder's last rung",
  },
  BUSY: { kind: "user", http: 409, meaning: "an MCP step is already running" },
  CANONICAL_JSON_INVALID: {
    kind: "user",
    http: 400,
    meaning:
      "a value canonical JSON (RFC 8785) cannot represent: NaN, ±Infinity, a lone surrogate, a non-plain object",
  },
  CONSTRAINT_INVALID: { kind: "user", http: 400, meaning: "a constraint in program.md cannot be evaluated" },
  DB_NOT_EMPTY: {
    kind: "user",
    http: 409,
    meaning: "`db import` into a PostgreSQL notebook that already holds runs",
  },
  DB_UNAVAILABLE: {
    kind: "user",
    http: 500,
    meaning:
      "the PostgreSQL notebook cannot be reached (down, wrong password, no such database) or stayed away too long",
  },
  DB_URL_INVALID: { kind: "user", http: 400, meaning: "a notebook address is not a valid postgres:// URL" },
  DIRTY_WORKTREE: {
    kind: "user",
    http: 409,
    meaning: "editable or protected files have uncommitted changes",
  },
  DURATION_INVALID: { kind: "user", http: 400, meaning: "a duration is not a number with a unit" },
  EGRESS_ENDPOINT_UNREACHABLE: {
    kind: "user",
    http: 500,
    meaning: "a model endpoint the researcher may reach (agent.base_url, the CLI's vendor) does not answer",
  },
  EXAMPLE_UNKNOWN: { kind: "user", http: 400, meaning: "`init --example` names no example" },
  EXPERIMENT_NOT_FOUND: { kind: "user", http: 404, meaning: "no experiment with that number" },
  FINALIZE_BRANCH_EXISTS: {
    kind: "user",
    http: 409,
    meaning: "`finalize --apply` would overwrite a branch that holds something else",
  },
  FINALIZE_DIRTY: {
    kind: "user",
    http: 409,
    meaning: "`finalize` beyond a dry run on a tree with uncommitted changes",
  },
  FILE_MISSING: {
    kind: "user",
    http: 400,
    meaning: "a file or pattern under `files:` matches nothing committed",
  },
  FLEET_OPTIONS_INVALID: {
    kind: "usage",
    http: 400,
    meaning:
      "`autolab worker`, `run --fleet` or `bench --fleet` got slots, GPUs or a name that cannot work, or a rubric-graded program (the fleet does not grade)",
  },
  FLEET_UNREACHABLE: {
    kind: "user",
    http: 500,
    meaning: "the worker fleet's PostgreSQL database cannot be reached or used",
  },
  FLEET_URL_INVALID: { kind: "user", http: 400, meaning: "`--db`/`--fleet` is not a postgres:// URL" },
  GH_NOT_FOUND: { kind: "user", http: 400, meaning: "`finalize --pr` needs the GitHub CLI `gh` on PATH" },
  GIT_FAILED: { kind: "user", http: 500, meaning: "a git command failed" },
  GIT_NOT_FOUND: { kind: "user", http: 500, meaning: "git is not installed" },
  GPU_DEVICE_MISSING: { kind: "user", http: 500, meaning: "slots name GPUs but no GPU device is present" },
  HOOKS_INVALID: {
    kind: "user",
    http: 400,
    meaning: "the library's `hooks` option has an empty command or a budget that is no time limit",
  },
  HUB_CLONE_INVALID: {
    kind: "user",
    http: 409,
    meaning:
      "`autolab contribute` cannot use its directory: not a git repository, or the hub's head cannot be checked out there",
  },
  HUB_IDENTITY_INVALID: {
    kind: "user",
    http: 400,
    meaning: "the contributor's hub identity file cannot be read as a key pair",
  },
  HUB_REFUSED: {
    kind: "user",
    http: 409,
    meaning: "the hub refused a request; its code and reason are shown",
  },
  HUB_STATE_MISMATCH: {
    kind: "user",
    http: 409,
    meaning:
      "`autolab hub`'s database and its data directory or flags disagree (another root commit, hardware class or a lost repository)",
  },
  HUB_UNREACHABLE: { kind: "user", http: 500, meaning: "the hub at `--hub` does not answer" },
  HUB_URL_INVALID: { kind: "usage", http: 400, meaning: "`--hub` is not an http(s):// URL" },
  IMPORT_EXISTS: {
    kind: "user",
    http: 409,
    meaning: "the notebook already holds history imported from that source",
  },
  IMPORT_UNRECOGNIZED: {
    kind: "user",
    http: 400,
    meaning:
      "`init --from` found no autoresearch or pi-autoresearch checkout to import (what it expected and found given)",
  },
  INIT_CLASH: { kind: "user", http: 409, meaning: "`init` would overwrite existing files" },
  INTERNAL: {
    kind: "bug",
    http: 500,
    meaning: "an invariant of autolab was broken (a row it just wrote is missing, an impossible state)",
  },
  INVALID_BUDGET: {
    kind: "user",
    http: 400,
    meaning: "a run budget (`--max-trials`, …) leaves no trial for a candidate",
  },
  INVALID_KNOB: {
    kind: "user",
    http: 400,
    meaning: "a search knob cannot be searched (empty range, a cycle in `when:`)",
  },
  KNOB_AMBIGUOUS: {
    kind: "user",
    http: 400,
    meaning: "a knob is defined more than once in the editable files",
  },
  KNOB_NOT_A_CHOICE: {
    kind: "user",
    http: 400,
    meaning: "a categorical knob's line holds a value that is not one of its choices",
  },
  KNOB_NOT_A_NUMBER: { kind: "user", http: 400, meaning: "a numeric knob's line does not hold a number" },
  KNOB_NOT_FOUND: { kind: "user", http: 400, meaning: "a knob is not defined in the editable files" },
  KNOWLEDGE_UNAVAILABLE: {
    kind: "user",
    http: 500,
    meaning: "the knowledge store (prior work across runs) cannot be opened or read",
  },
  LEDGER_OPEN_FAILED: {
    kind: "user",
    http: 500,
    meaning: "the notebook cannot be opened (permissions, disk)",
  },
  LEDGER_TOO_NEW: { kind: "user", http: 409, meaning: "the notebook was written by a newer autolab" },
  LISTEN_FAILED: { kind: "user", http: 500, meaning: "`serve` could not listen" },
  PG_DRIVER_MISSING: {
    kind: "user",
    http: 500,
    meaning: "a PostgreSQL notebook was asked for but the `pg` driver cannot be loaded",
  },
  NOTEBOOK_DAMAGED: { kind: "user", http: 500, meaning: "the notebook file is damaged" },
  NOTEBOOK_EMPTY: { kind: "user", http: 409, meaning: "the notebook was emptied where a lab has run" },
  NOTHING_TO_FINALIZE: {
    kind: "user",
    http: 409,
    meaning: "`finalize` on a run that kept no change beyond its baseline",
  },
  NOT_A_GIT_REPO: { kind: "user", http: 400, meaning: "program.md is not in a git repository" },
  NO_BEST: {
    kind: "bug",
    http: 500,
    meaning: "the run has no measured best where one must exist (an invariant of the loop)",
  },
  NO_COMMITS: { kind: "user", http: 400, meaning: "the repository has no commits" },
  NO_NOTEBOOK: { kind: "user", http: 404, meaning: "there is no notebook here" },
  NO_SEARCH_SPACE: { kind: "user", http: 400, meaning: "the built-in optimizer has no knobs to search" },
  ORG_EMPTY: { kind: "user", http: 400, meaning: "`org:` names a directory without role files" },
  OUTPUT_EXISTS: {
    kind: "user",
    http: 409,
    meaning: "the file named by -o exists; autolab overwrites it only with --force (or adds with --append)",
  },
  PORT_FORBIDDEN: { kind: "user", http: 403, meaning: "`serve` may not listen on that port (privileged)" },
  PORT_IN_USE: { kind: "user", http: 409, meaning: "`serve`'s port is taken" },
  PROGRAM_CHANGED: {
    kind: "user",
    http: 409,
    meaning: "program.md's contract changed since the run started",
  },
  PROGRAM_DIRTY: { kind: "user", http: 409, meaning: "program.md has uncommitted changes" },
  PROGRAM_EXISTS: { kind: "user", http: 409, meaning: "`init` found a program.md already" },
  PROGRAM_INVALID: { kind: "user", http: 400, meaning: "program.md does not validate (line and fix given)" },
  PROGRAM_NOT_FOUND: { kind: "user", http: 404, meaning: "no program.md where it was looked for" },
  PROGRAM_UNCOMMITTED: { kind: "user", http: 409, meaning: "program.md was never committed" },
  PROGRAM_UNREADABLE: { kind: "user", http: 400, meaning: "program.md cannot be read" },
  PROTECTED_CHANGED: { kind: "user", http: 409, meaning: "a protected file differs from its pinned hash" },
  RATCHET_MOVED: { kind: "user", http: 409, meaning: "the ratchet branch was moved outside autolab" },
  RESET_FAILED: {
    kind: "user",
    http: 500,
    meaning:
      "something in a run's worktree cannot be removed, so a trial cannot start (or be scored) in a pristine tree",
  },
  ROLE_INVALID: { kind: "user", http: 400, meaning: "an org role file does not validate" },
  RUBRIC_INVALID: {
    kind: "user",
    http: 400,
    meaning: "the rubric file of `evaluate: { rubric: … }` does not parse (line and fix given)",
  },
  RUN_LOCKED: { kind: "user", http: 409, meaning: "another process holds the run's lock" },
  RUN_NOT_FOUND: { kind: "user", http: 404, meaning: "no run with that tag" },
  SANDBOX_EGRESS_UNAVAILABLE: {
    kind: "user",
    http: 500,
    meaning:
      "a sandboxed researcher's egress proxy cannot be set up here (bubblewrap too old, no network namespace)",
  },
  SANDBOX_UNAVAILABLE: {
    kind: "user",
    http: 500,
    meaning: "`sandbox.required` is set and no sandbox can be made",
  },
  SEARCH_EXHAUSTED: { kind: "user", http: 400, meaning: "the search space has no other configuration" },
  SETUP_FAILED: { kind: "user", http: 500, meaning: "the program's setup command failed" },
  SLURM_UNAVAILABLE: {
    kind: "user",
    http: 500,
    meaning: "`executor.slurm` is set but sbatch, squeue or scancel is missing here",
  },
  TAG_INVALID: { kind: "user", http: 400, meaning: "a run tag has characters a branch name cannot" },
  TOKEN_REQUIRED: { kind: "user", http: 401, meaning: "`serve` off loopback needs a token" },
  TOKEN_TOO_SHORT: { kind: "user", http: 400, meaning: "the dashboard token is shorter than 16 characters" },
  TOURNAMENT_VARIANT_INVALID: {
    kind: "user",
    http: 400,
    meaning: "a tournament variant is missing, empty, a duplicate, or changes more than the instructions",
  },
  TOURNAMENT_WRITER_INVALID: {
    kind: "user",
    http: 400,
    meaning: "`tournament --evolve` has no usable LLM to write the next variant",
  },
  TRIALS_FAILING: {
    kind: "user",
    http: 500,
    meaning: "ten candidates in a row failed their trials; the run stopped",
  },
  UNTRACKED_FILES: { kind: "user", http: 409, meaning: "editable or protected files are not committed" },
} as const satisfies Record<string, ErrorCodeInfo>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** The CLI's exit code for an error of this code. */
export function exitCodeOf(code: ErrorCode): number {
  const { kind } = ERROR_CODES[code];
  return kind === "usage" ? 2 : kind === "bug" ? 70 : 1;
}
