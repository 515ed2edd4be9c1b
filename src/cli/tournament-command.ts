import { join } from "node:path";
import { programPath } from "../app/lab.ts";
import { AutolabError } from "../core/errors.ts";
import { askWithModel, evolve, writerConfig } from "../learn/evolve.ts";
import {
  defaultTournamentDir,
  incumbentOf,
  readVariant,
  runTournament,
  type TournamentOptions,
  type Variant,
} from "../learn/tournament.ts";
import { type Generation, tournamentSummary, writeTournamentReport } from "../learn/tournament-report.ts";
import { standingLines } from "../learn/tournament-stats.ts";
import { loadProgram } from "../program/index.ts";
import { gracefulStop } from "./graceful-stop.ts";
import { safeText } from "./safe-text.ts";
import { shownPath } from "./shown-path.ts";

export interface TournamentFlags {
  program?: string;
  seeds?: number;
  experiments?: number;
  trials?: number;
  time?: number;
  remeasure?: number;
  agent?: string;
  out?: string;
  parallel?: number;
  fleet?: string;
  json?: boolean;
  evolve?: boolean;
  generations?: number;
  writerModel?: string;
  writerBaseUrl?: string;
  writerProvider?: string;
  writerApiKeyEnv?: string;
}

/**
 * `autolab tournament [variants...]`: the program's own instructions against each variant, or
 * with `--evolve` against what an LLM writes from the evidence, generation by generation.
 */
export async function tournamentCommand(files: string[], flags: TournamentFlags): Promise<void> {
  const programFile = programPath(flags.program);
  const program = loadProgram(programFile);
  if (!flags.evolve && files.length === 0)
    throw new AutolabError(
      "TOURNAMENT_VARIANT_INVALID",
      "a tournament needs at least one variant of the instructions to run against program.md's own",
      "autolab tournament variants/terse.md variants/detailed.md — or --evolve to have an LLM write them",
    );
  if (flags.evolve && files.length)
    throw new AutolabError(
      "TOURNAMENT_VARIANT_INVALID",
      "--evolve writes its own challengers; it does not take variant files",
      "Run the files first (autolab tournament a.md b.md), commit the winner to program.md, then --evolve from it.",
    );
  const variants: Variant[] = [incumbentOf(programFile)];
  for (const f of files) variants.push(readVariant(programFile, f, variants));
  const writer = flags.evolve
    ? writerConfig(program, {
        ...(flags.writerModel ? { model: flags.writerModel } : {}),
        ...(flags.writerBaseUrl ? { baseUrl: flags.writerBaseUrl } : {}),
        ...(flags.writerProvider ? { provider: flags.writerProvider } : {}),
        ...(flags.writerApiKeyEnv ? { apiKeyEnv: flags.writerApiKeyEnv } : {}),
      })
    : undefined;
  const out = flags.out ?? defaultTournamentDir(programFile);
  const stop = gracefulStop("tournament");
  const budget =
    flags.experiments === undefined && flags.trials === undefined && flags.time === undefined
      ? { experiments: 10 }
      : {
          ...(flags.experiments !== undefined ? { experiments: flags.experiments } : {}),
          ...(flags.trials !== undefined ? { trials: flags.trials } : {}),
          ...(flags.time !== undefined ? { timeMs: flags.time } : {}),
        };
  const opts: TournamentOptions = {
    program: programFile,
    variants,
    seeds: Array.from({ length: flags.seeds ?? 5 }, (_, i) => i + 1),
    budget,
    remeasure: flags.remeasure ?? 3,
    out,
    ...(flags.agent ? { agent: flags.agent } : {}),
    ...(flags.parallel !== undefined ? { parallel: flags.parallel } : {}),
    ...(flags.fleet ? { fleet: flags.fleet } : {}),
    signal: stop.signal,
    onLine: (line) => process.stderr.write(`${safeText(line, { oneLine: true })}\n`),
  };
  try {
    let generations: Generation[] | undefined;
    let result: Awaited<ReturnType<typeof runTournament>>;
    if (writer) {
      const e = await evolve({
        ...opts,
        generations: flags.generations ?? 1,
        ask: await askWithModel(writer),
        writer: writer.model ?? writer.backend,
      });
      result = e.result;
      generations = e.generations;
    } else result = await runTournament(opts);
    const summary = tournamentSummary(result, out, generations);
    const report = writeTournamentReport(summary, join(out, "report"));
    if (stop.signal.aborted && !result.complete) process.exitCode = 130;
    if (flags.json) {
      process.stdout.write(`${JSON.stringify(summary)}\n`);
      return;
    }
    const show = shownPath;
    const lines = [
      ...(generations ?? []).map((g) => g.line),
      ...standingLines(result.standings),
      ...(result.complete ? [] : ["incomplete: run the tournament again to finish it"]),
      ...(result.complete && !generations
        ? [
            result.standings.winner
              ? `${result.standings.winner} beats program.md's instructions: put its instructions in program.md to adopt them`
              : "no variant beats program.md's instructions with confidence (more seeds narrow the intervals: --seeds 10)",
          ]
        : []),
      `report: ${report.map(show).join(", ")}`,
    ];
    process.stdout.write(`${safeText(lines.join("\n"))}\n`);
  } finally {
    stop.dispose();
  }
}
