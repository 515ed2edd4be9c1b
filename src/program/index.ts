/** The program room's public face: program.md → Program, and durations. */
export { formatDuration, parseDuration } from "./duration.ts";
export { defaultGraceMs, loadProgram, parseProgram } from "./parse.ts";
