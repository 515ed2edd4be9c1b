/**
 * The shared vocabulary of autolab (see docs/architecture.md). Everything here is plain data
 * or an interface; core imports nothing from adapters (runner, workspace, ledger, agents).
 */
import type { RubricEvaluation } from "../rubric/grade.ts";
import type { FrontierConfig } from "./frontier.ts";

export type Direction = "minimize" | "maximize";

/**
 * A knob's value: a number, or a choice of a categorical knob (a YAML scalar: text, a number,
 * true/false). The notebook stores params as JSON, so all three kinds round-trip.
 */
export type ParamValue = number | string | boolean;
/** Knob values by knob name (the built-in optimizer's configuration, as written in the files). */
export type Params = Record<string, ParamValue>;

/**
 * When a conditional knob is active: every named (categorical) knob is active and has one of
 * the listed choices. An inactive knob is left untouched in the files and is no part of the
 * configuration's identity.
 */
export type KnobCondition = Record<string, ParamValue[]>;

/** A numeric knob of the built-in optimizer: a `NAME = value` constant line in an editable file. */
export interface NumericKnob {
  low: number;
  high: number;
  log: boolean;
  int: boolean;
  when?: KnobCondition;
}

/** A categorical knob: the constant line holds one of the choices (`OPTIMIZER = "adam"`). */
export interface CategoricalKnob {
  /** At least two, all distinct. */
  choices: ParamValue[];
  when?: KnobCondition;
}

/** A knob with `choices` is categorical (src/agents/builtin/knobs.ts: isCategorical). */
export type Knob = NumericKnob | CategoricalKnob;

/** Which researcher proposes, and how to reach it (program.md `agent:`). */
export interface AgentConfig {
  /** builtin | claude | codex | gemini | opencode | pi | qwen | aider | llm | command */
  backend: string;
  model?: string;
  /** The model API's endpoint (a local server such as vLLM or Ollama, or a proxy). */
  baseUrl?: string;
  /** For backend llm: openai-compatible (default), anthropic or openai. */
  provider?: string;
  /** Name of the environment variable that holds the API key. */
  apiKeyEnv?: string;
  /** Wall-clock limit of one proposal; the agent's process tree is killed after it. */
  timeoutMs?: number;
  maxTurns?: number;
  /** USD per million input / output tokens (program.md agent.price), over the price table. */
  price?: { input: number; output: number };
  /** backend command: the command line, with {prompt_file} and {workdir} substituted. */
  command?: string;
  /** Extra arguments for the CLI. */
  args: string[];
  /** Extra environment for the CLI. */
  env: Record<string, string>;
}

/** One metric of several objectives. */
export interface ObjectiveMetric {
  metric: string;
  direction: Direction;
}

export const OBJECTIVE_MODES = ["pareto", "threshold_then_optimize"] as const;
export type ObjectiveMode = (typeof OBJECTIVE_MODES)[number];

/**
 * `objective: { metrics: [...], mode }` (2–3 metrics, each once). pareto: keep a candidate that is
 * credibly better than its parent on one metric and not credibly dominated by a kept point.
 * threshold_then_optimize (exactly two metrics): raise `threshold.metric` past `threshold.bar`,
 * then optimize the other metric without falling back below the bar.
 */
export interface Objectives {
  metrics: ObjectiveMetric[];
  mode: ObjectiveMode;
  threshold?: { metric: string; bar: number };
}

/** A validated program.md. Durations are in milliseconds. */
export interface Program {
  /** Absolute path of the program.md this came from. */
  path: string;
  name: string;
  /**
   * The primary objective: the only one with `objective: { metric, direction }`; with several
   * (`objectives`), the first listed. Every single-metric reader (the chart, the decision's
   * metric, the researcher's view) uses it.
   */
  objective: { metric: string; direction: Direction };
  /** Several objectives (docs/objectives.md); absent with one. */
  objectives?: Objectives;
  run: {
    /** Runs once per workspace (worktree), before its first trial. */
    setup?: string;
    /** The experiment: editable code runs here, once per trial. */
    command: string;
    /** The protected scoring step, run after `command`; its stdout carries the metrics. */
    evaluate?: string;
    /**
     * Rubric-graded evaluation (`evaluate: { rubric: …, judges: … }`, docs/learning.md): LLM
     * judges grade the trial's files after the evaluate command (if any), in the harness.
     */
    rubric?: RubricEvaluation;
    /** Wall-clock budget of `command`; the harness kills the process tree at budget + grace. */
    budgetMs: number;
    graceMs: number;
    /** Time limit of `setup` and of `evaluate`. */
    setupTimeoutMs: number;
    evaluateTimeoutMs: number;
  };
  files: {
    editable: string[];
    protected: string[];
    /**
     * Holdout data (e.g. the test split): protected, and hidden from the command and from
     * researchers; only the evaluate step reads them. May be files that setup creates.
     */
    holdout: string[];
  };
  /**
   * What the command writes for the evaluate step (a checkpoint, predictions), relative to the
   * project. Evaluate runs on the committed tree, setup's files and these: nothing else the
   * command wrote.
   */
  outputs: string[];
  /** How trials and researchers are confined (docs/security.md). */
  sandbox: {
    /** false: `sandbox: off`, an explicit choice to run unsandboxed. */
    enabled: boolean;
    /** Refuse to run when no sandbox can be made (default: warn once, run unsandboxed). */
    required: boolean;
    /** Trials may reach the network (researchers always may: they call model endpoints). */
    network: boolean;
    /** Writable in every trial and kept between trials: project-relative, absolute or ~/. */
    caches: string[];
    /** Names of environment variables passed into trials (the rest of autolab's stays out). */
    env: string[];
    limits: SandboxLimits;
  };
  metrics: {
    /** Recorded for every trial, never shown to an agent. */
    holdout: string[];
    /** Intermediate values streamed while a trial runs (learning curves). */
    progress?: string;
  };
  /** Expressions over metrics and costs, e.g. "peak_rss_mb <= 4096". */
  constraints: string[];
  /**
   * The acceptance rule: noise-aware (default), autoresearch's greedy keep-if-better, greedy with
   * the answer re-measured in the budget's reserve, or the posterior rule (src/trust/posterior-judge.ts).
   */
  acceptance: "noise" | "greedy" | "greedy-final" | "posterior";
  agent: AgentConfig;
  search: Record<string, Knob>;
  /**
   * Parallel slots: `count` trials run at once, each in its own worktree; with `gpus`, slot i
   * gets CUDA_VISIBLE_DEVICES=gpus[i % gpus.length]. `proposers`: proposals prepared at once.
   * Absent when program.md has no `slots:` (the serial loop, unless there is an org).
   */
  slots?: { count: number; gpus?: number[]; proposers: number };
  /** An organization: role files in `roles` (a directory, relative to program.md) and the orchestrator's policy. */
  org?: { roles: string; policy: "bandit" | "round-robin" };
  /**
   * The proxy ladder (docs/trust.md): a candidate runs one trial per cheaper rung, cheapest
   * first, and climbs only while it ranks among the best `promote` fraction of that rung (or
   * beats the best there); the top rung is run.budgetMs, judged as usual.
   */
  ladder?: {
    /** The cheaper rungs, ascending, each below run.budgetMs. */
    rungs: Array<{ budgetMs: number; graceMs: number }>;
    /** Fraction of a rung's values, best first, whose candidates climb to the next rung. */
    promote: number;
    /** The proxy alarm fires when adjacent rungs' rank correlation falls below this. */
    alarmBelow: number;
    /** Candidates measured on both of two adjacent rungs before the alarm judges them. */
    minPairs: number;
  };
  /**
   * Iteration hooks (docs/program.md "Hooks"): `before` runs before each proposal in the
   * worktree at the best, `after` after each decision, both in a trial's sandbox under
   * `budgetMs` + `graceMs`; their output reaches the researcher's next context. A failing hook is
   * recorded and never stops the run. Absent when program.md has no `hooks:`.
   */
  hooks?: { before?: string; after?: string; budgetMs: number; graceMs: number };
  /**
   * The tree frontier (docs/loop.md "The tree frontier"): which kept node each candidate builds
   * on. Absent: `best`, the single-branch ratchet.
   */
  frontier?: FrontierConfig;
  /**
   * The advisor (docs/advisor.md): a researcher backend asked, after `afterDiscards` discards in
   * a row or `plateau` experiments without a keep, for up to three ideas or a stop verdict.
   * Absent: no advisor.
   */
  advisor?: {
    agent: AgentConfig;
    /** Discards in a row (crashes and rejections skipped) that call the advisor. */
    afterDiscards?: number;
    /** Experiments decided without a keep that call the advisor. */
    plateau?: number;
  };
  /**
   * Where trials run (docs/distributed.md): absent, on this machine (the local executor);
   * `slurm`, each trial one `sbatch` job; `fleet`, a worker fleet's PostgreSQL URL (no password).
   * One or the other.
   */
  executor?: { slurm?: SlurmConfig; fleet?: { db: string } };
  /** The markdown body: research directions for agents. */
  directions: string;
  /**
   * Prior work (core/knowledge.ts): the closest results of other runs in the researcher's
   * context. Absent means on, for this project's runs with the same objective (`prior_work:
   * true` or `project`); "machine" (`prior_work: machine`) shares this project's results with
   * other projects that opted in and shows theirs; `prior_work: false` turns it off.
   */
  priorWork?: false | "machine";
}

/** program.md `executor: { slurm: … }`: how each trial's `sbatch` job is asked for. */
export interface SlurmConfig {
  /** `--partition`; absent: the cluster's default partition. */
  partition?: string;
  /** `--gres` (e.g. `gpu:1`). */
  gres?: string;
  /** `--account`. */
  account?: string;
  /** More `sbatch` options, one argv item each (never through a shell). */
  extraArgs: string[];
  /** A job still pending after this long is cancelled and recorded as a crash saying why. */
  pendingLimitMs: number;
}

/** How a trial ended. Outcomes are data, never exceptions. */
export type TrialStatus =
  | "ok"
  | "crash" // non-zero exit of command or evaluate, or a command that does not exist
  | "timeout" // killed at budget + grace
  | "missing_metric" // the objective metric never appeared
  | "nonfinite_metric" // the objective metric was NaN or infinite
  | "tampered" // a protected file changed while the trial ran
  | "pruned" // stopped early: its learning curve was confidently worse than the best's
  | "interrupted"; // the harness died or was stopped while the trial ran

/** What rubric grading made of a trial's files (src/rubric/trial-grader.ts). */
export interface TrialGradeOutcome {
  status: "ok" | "crash";
  reason?: string;
  metrics: Record<string, number>;
  /** Flagged judges, disagreements, a missed hard threshold: said to the user, not failures. */
  warnings: string[];
}

/** Grades one trial's files with the program's rubric (wired by the composition root). */
export type TrialGrader = (o: {
  cwd: string;
  logDir: string;
  /** Which trial of its experiment (0 for the first): rotates the judges, paces the canary. */
  seedIndex: number;
  signal?: AbortSignal;
}) => Promise<TrialGradeOutcome>;

export interface TrialSpec {
  /** Directory the commands run in (the experiment's worktree). */
  cwd: string;
  command: string;
  evaluate?: string;
  budgetMs: number;
  graceMs: number;
  evaluateTimeoutMs: number;
  seed: number;
  /** Directory for this trial's log files. */
  logDir: string;
  /** Extra environment; AUTOLAB_SEED and AUTOLAB_BUDGET_S are always set by the runner. */
  env?: Record<string, string>;
  objective: string;
  /**
   * Called between `command` and `evaluate`: checks protected files and turns the worktree into
   * the pristine tree evaluate runs on (committed files, setup's files, declared outputs).
   * Returns a reason when the trial must not be scored (tampering, a missing output).
   */
  beforeEvaluate?: () => Promise<{ status: "tampered" | "crash"; reason: string } | undefined>;
  /** Confinement of the command and of the evaluate step; absent: they run unsandboxed. */
  sandbox?: { command: SandboxSpec; evaluate: SandboxSpec };
  /**
   * Rubric grading (program.md `evaluate: { rubric: … }`): called after the evaluate command (if
   * any) on the pristine tree; its metrics win over the command's, and `crash` fails the trial.
   */
  grade?: () => Promise<TrialGradeOutcome>;
  /**
   * Called for every metric line as it appears on the command's stdout. `elapsedMs`: how long
   * the command had run when it printed the line, when the executor knows better than the
   * caller's clock (a remote worker: the time in its queue does not count); absent locally.
   */
  onMetric?: (name: string, value: number, elapsedMs?: number) => void;
  signal?: AbortSignal;
  /** Aborted by the harness's pruner (reason: why); the trial ends as "pruned", not "interrupted". */
  prune?: AbortSignal;
}

export interface TrialResult {
  status: TrialStatus;
  /** Human-readable reason for any status but ok. */
  reason?: string;
  exitCode: number | null;
  signal: string | null;
  wallS: number;
  cpuS: number;
  peakRssMb: number;
  /** Metrics from the command and the evaluate step (evaluate wins on a clash). */
  metrics: Record<string, number>;
  /** True when the objective metric came from the editable command, not a protected evaluate step. */
  selfReported: boolean;
  seed: number;
  command: string;
  stdoutPath: string;
  stderrPath: string;
  /** Last lines of stdout+stderr, for the notebook and the agent. */
  logTail: string;
  /** The progress metric's learning curve: [elapsed fraction of the budget, value]. */
  progress?: Array<[number, number]>;
}

/** Where trials run. */
export interface Executor {
  /** Runs `setup` once in a workspace. Returns a failed result rather than throwing. */
  setup(
    cwd: string,
    command: string,
    timeoutMs: number,
    logDir: string,
    signal?: AbortSignal,
    sandbox?: SandboxSpec,
  ): Promise<TrialResult>;
  runTrial(spec: TrialSpec): Promise<TrialResult>;
  /**
   * Kills what is left of a trial whose harness died (its processes carry
   * AUTOLAB_TRIAL_TOKEN=<token>); returns how many processes were killed.
   */
  reap?(token: string): Promise<number>;
  /**
   * How many trials it can run at once now, where that changes during a run (a worker fleet:
   * its live workers' slots). Synchronous and cheap: the scheduler asks often. Absent: as many
   * as the run has slots.
   */
  capacity?(): number;
}

/** The unix sockets of a harness-side egress proxy, as a sandbox reaches them (src/runner/egress-proxy.ts). */
export interface SandboxEgress {
  /** The directory holding the sockets (made by the harness, mode 0700): bound read-only inside. */
  dir: string;
  /** The HTTP CONNECT + forward proxy's socket; inside, HTTP_PROXY/HTTPS_PROXY/ALL_PROXY name its bridge. */
  proxy: string;
  /** Named local model endpoints: inside, 127.0.0.1:`port` is bridged to `socket` (a plain TCP forward). */
  forwards: Array<{ port: number; socket: string }>;
}

/**
 * How one process (a trial's command, the evaluate step, setup, a researcher) is confined
 * (src/runner/sandbox.ts turns it into a bubblewrap command line). Everything not named here is
 * read-only (`/`), except a private `/tmp`; mounts apply parents first, so a path named here
 * may lie inside another (a hidden file inside a writable tree). Paths are absolute; missing
 * ones are skipped, except `writable` and `devices`, which must exist.
 */
export interface SandboxSpec {
  /** Bound read-write (the worktree, declared caches, a researcher's log directory). */
  writable: string[];
  /** Bound read-only on top of a writable one (protected files, the worktree's .git file, setup's files). */
  readOnly: string[];
  /** Made invisible: an empty read-only directory or an empty read-only file (holdout data, .autolab, the repository's .git). */
  hidden: string[];
  /** Network namespace shared with the host (setup, `sandbox: { network: true }`); otherwise loopback only. */
  network: boolean;
  /**
   * With `network: false`: the only way out, through the harness's egress proxy (a researcher's
   * model endpoints, src/runner/egress-proxy.ts). A bridge inside the sandbox's own loopback
   * forwards to the proxy's unix sockets; HTTP(S)_PROXY point at it.
   */
  egress?: SandboxEgress;
  /** The whole environment inside: nothing else of the harness's environment enters. */
  env: Record<string, string>;
  limits: SandboxLimits;
  /** Device nodes passed through (/dev/nvidia0, /dev/nvidiactl, …). */
  devices: string[];
}

export interface SandboxLimits {
  /** Address space (RLIMIT_AS) in MiB; a cgroup memory limit where one can be made. */
  memoryMb?: number;
  /** Processes and threads. */
  processes?: number;
  /** Largest file the process may write (RLIMIT_FSIZE), MiB. */
  fileSizeMb?: number;
  /** CPU time (RLIMIT_CPU), seconds. */
  cpuSeconds?: number;
}

export type DecisionAction = "keep" | "discard" | "crash" | "reject";

export interface Decision {
  action: DecisionAction;
  /** Always present: why this decision was taken. */
  reason: string;
  /** The metric the decision used (for keep: the value the best now carries). */
  metric?: number;
  /** Whether the candidate's stated mechanism held up; null when unknown. */
  mechanismConfirmed?: boolean | null;
  /**
   * The tree frontier (program.md `frontier:`): a discard that credibly beat the kept node it
   * was built on, but not the best, stays in the tree as a node later candidates may build on.
   * The ratchet did not move; only keeps move it.
   */
  treeNode?: boolean;
  /**
   * A fact about the run the rule found while deciding (e.g. the objective is deterministic):
   * the loop writes it to the notebook once, the first time it is given (not stored with the decision).
   */
  notice?: string;
}

/** What a researcher proposes: the edit itself lives in the worktree. */
export interface Proposal {
  hypothesis: string;
  /** Why it should work. */
  mechanism?: string;
  expected?: string;
  /** Knob values of the candidate (built-in optimizer). */
  params?: Params;
  usage?: { inputTokens?: number; outputTokens?: number; costUsd?: number; wallS?: number };
}

/** A past experiment as a researcher may see it (never holdout metrics). */
export interface ExperimentView {
  n: number;
  hypothesis: string;
  mechanism?: string;
  params?: Params;
  action?: DecisionAction;
  reason?: string;
  /** Objective value, when it was measured. */
  metric?: number;
  /**
   * The objective values of its full-budget ok trials, one per seed (an incumbent re-measured
   * has several): what a model of the noise needs. Absent when none finished.
   */
  values?: number[];
}

export interface ProposalContext {
  /**
   * The worktree to edit; it is at `best` when propose is called: the current best, or with a
   * branching `frontier:` the kept node this candidate builds on (docs/loop.md).
   */
  worktree: string;
  program: Program;
  /** What the candidate builds on: the best, or the kept node the tree frontier chose. */
  best: { n: number; metric: number; params?: Params };
  history: ExperimentView[];
  /** The notebook rendered as text for agents (autolab context). */
  contextText: string;
  /** Where the agent keeps its own logs (transcripts, raw output) for this proposal. */
  logDir: string;
  /**
   * What is asked: "propose" (the default) an experiment by editing files, or "advise" (the
   * advisor, src/core/advisor.ts): answer in the summary with IDEA:/STOP: lines, edit nothing.
   */
  task?: "propose" | "advise";
  signal?: AbortSignal;
  /**
   * How a researcher that runs as a process (a coding-agent CLI, the command backend) is
   * confined: writable worktree and logDir, holdout data and the notebook invisible. `env` is
   * empty: the agent puts its own environment there. Absent: the run is unsandboxed.
   */
  sandbox?: SandboxSpec;
}

export interface Agent {
  readonly name: string;
  /**
   * Proposes in well under a second (the built-in optimizer). The parallel scheduler then
   * proposes one candidate at a time and only for a slot that is free, so each proposal sees
   * every experiment still running instead of being made a trial ahead, blind to the others.
   */
  readonly instant?: boolean;
  propose(ctx: ProposalContext): Promise<Proposal>;
  /**
   * The parameters of an unmodified worktree (the built-in optimizer's knob values), recorded
   * with the baseline so later proposals know where the search started.
   */
  paramsOf?(worktree: string, program: Program): Promise<Params>;
}

/** Stops a trial early when its learning curve is confidently worse than the best's. */
export interface TrialPruner {
  /** x: elapsed fraction of the budget; value: the progress metric. */
  observe(x: number, value: number): { prune: boolean; reason: string };
}

/** Something a person should look at: an overfitting canary, a proxy that stopped predicting, … */
export interface Alarm {
  kind: string;
  reason: string;
}
