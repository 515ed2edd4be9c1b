/** The program room's public face: program.md → Program, and durations. */
export { parseDuration } from "./duration.ts";
export { defaultGraceMs, loadProgram, parseProgram } from "./parse.ts";
