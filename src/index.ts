/**
 * autolab as a library: the public surface (docs/library.md). Everything else under src/ is
 * internal and may change between versions; what is exported here follows semantic versioning.
 *
 * - Run the research loop from another program: `createRun` (what `autolab run` calls), with
 *   your own researcher (`Agent`), your own place to run trials (`Executor`) and a listener
 *   for the loop's events (`LoopEvent`).
 * - Read and validate a program.md: `loadProgram`, `parseProgram`.
 * - Read a notebook: `SqliteLedger` implements `Ledger`.
 * - Turn a run's kept changes into reviewable branches: `finalizeRun` (what `autolab finalize` calls).
 * - Search what runs on this machine found: `openKnowledgeStore(knowledgePath())` (what
 *   `autolab knowledge` reads and a new run's researcher is shown as prior work).
 * - Several objectives: `judgeFor(program)` (the rule a run uses), `createObjectivesJudge`,
 *   `paretoFront`, and `frontOf` (the front status shows).
 * - The advisor (docs/advisor.md): `RunOptions.advisor` takes your own `Agent`; `parseAdvice`
 *   reads an answer, `adviceDue` says when a run would ask, `revisitOf` finds a revisit.
 * - Measuring research itself (docs/learning.md): the bench (`loadSuite`, `runBench`,
 *   `benchSummary`, `writeBenchReport`: what `autolab bench` calls), tournaments between
 *   versions of program.md's instructions (`incumbentOf`, `readVariant`, `runTournament`,
 *   `rankVariants`, `writeTournamentReport`, and `evolve` with your own `AskWriter`: what `autolab
 *   tournament [--evolve]` calls), the curriculum
 *   (`nextProgram`), the trajectory export (`exportTrajectories`: what `autolab export --format
 *   trajectories…` writes), and rubric grading (`parseRubric`, `gradeAnswer`).
 */

export { createRun, type RunOptions, type RunOutcome } from "./app/create-run.ts";
export {
  type FinalizeBranch,
  type FinalizeChange,
  type FinalizeOptions,
  type FinalizePlan,
  finalizeRun,
  renderPlan,
  type VerifyResult,
} from "./app/finalize.ts";
export { type FrontPointJson, frontOf, type StatusFront } from "./app/front.ts";
export {
  type ChatMessage,
  type DpoRecord,
  exportTrajectories,
  TRAJECTORY_FORMATS,
  type TrajectoryFormat,
  type TrajectoryRecord,
} from "./app/trajectories.ts";
export { type TreeJson, type TreeNodeJson, treeOf } from "./app/tree.ts";
export { adviceDue, type ParsedAdvice, parseAdvice, revisitOf } from "./core/advisor.ts";
export { AutolabError, isAutolabError } from "./core/errors.ts";
export type { LoopEvent, LoopEventListener } from "./core/events.ts";
export {
  chooseNode,
  DEFAULT_FRONTIER,
  FRONTIER_STRATEGIES,
  type FrontierConfig,
  type FrontierNode,
  type FrontierStrategy,
} from "./core/frontier.ts";
export type { Judge, JudgeInput, MoreTrials } from "./core/judge.ts";
export type {
  KnowledgeEntry,
  KnowledgeHit,
  KnowledgeSearchOptions,
  KnowledgeStats,
  KnowledgeStore,
} from "./core/knowledge.ts";
export type {
  AdviceRecord,
  AdviceVerdict,
  ExperimentRecord,
  HookPhase,
  HookRunRecord,
  HookStatus,
  Ledger,
  RunRecord,
  TrialRecord,
} from "./core/ledger.ts";
export type { LoopSummary } from "./core/loop-deps.ts";
export type {
  Agent,
  Decision,
  DecisionAction,
  Direction,
  Executor,
  ExperimentView,
  Knob,
  ObjectiveMetric,
  ObjectiveMode,
  Objectives,
  Params,
  Program,
  Proposal,
  ProposalContext,
  SandboxSpec,
  TrialResult,
  TrialSpec,
  TrialStatus,
} from "./core/types.ts";
export {
  type BenchOptions,
  type BenchRun,
  type CellKey,
  type CellRecord,
  type OrderEntry,
  runBench,
  STATE_FILE as BENCH_STATE_FILE,
} from "./learn/bench.ts";
export {
  type BenchSummary,
  benchSummary,
  renderBenchMarkdown,
  writeBenchReport,
} from "./learn/bench-report.ts";
export type { CellOutcome, Interval, LayerVerdict } from "./learn/bench-stats.ts";
export {
  type CurriculumChoice,
  type CurriculumOptions,
  nextProgram,
  type ProgramRecord,
} from "./learn/curriculum.ts";
export { type AskWriter, type EvolveOptions, type EvolveResult, evolve } from "./learn/evolve.ts";
export {
  type Layer,
  loadSuite,
  type Split,
  type Suite,
  type SuiteConfiguration,
  type SuiteProgram,
} from "./learn/suite.ts";
export {
  incumbentOf,
  readVariant,
  runTournament,
  type TournamentOptions,
  type TournamentResult,
  type Variant,
} from "./learn/tournament.ts";
export { tournamentSummary, writeTournamentReport } from "./learn/tournament-report.ts";
export {
  rankVariants,
  type Standing,
  type Standings,
  type TournamentCell,
} from "./learn/tournament-stats.ts";
export { knowledgePath, openKnowledgeStore } from "./ledger/knowledge-store.ts";
export { SqliteLedger } from "./ledger/sqlite-ledger.ts";
export { loadProgram, parseProgram } from "./program/index.ts";
export {
  type AskJudge,
  type GradeReport,
  gradeAnswer,
  type JudgeAnswer,
  type JudgeReply,
  type JudgeSpec,
  type RubricEvaluation,
} from "./rubric/grade.ts";
export { parseRubric, type Rubric, type RubricCriterion, type RubricLevel } from "./rubric/rubric.ts";
export { LocalExecutor } from "./runner/local-executor.ts";
export { type AcceptanceRule, createJudge, judgeFor } from "./trust/acceptance.ts";
export { createObjectivesJudge, type FrontPoint, paretoFront } from "./trust/objectives-judge.ts";
