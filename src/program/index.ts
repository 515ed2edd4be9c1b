/** The program room's public face: program.md → Program, and durations. */
export { parseDuration } from "./duration.ts";
export { DEFAULT_HOOK_BUDGET_MS, defaultGraceMs, loadProgram, parseProgram } from "./parse.ts";
