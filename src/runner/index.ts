/** The local executor room: run trials as local processes, with their whole tree under the harness's clock. */
export { createLocalExecutor, LocalExecutor, type LocalExecutorOptions } from "./local-executor.ts";
export { LineSplitter, type MetricPair, parseMetricLine, parseNumber } from "./metrics.ts";
export { type KillReport, killTree, ProcessTree, spawnGroup, type TreeUsage } from "./process-tree.ts";
