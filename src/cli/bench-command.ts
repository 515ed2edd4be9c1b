import { basename, dirname, extname, join } from "node:path";
import { runBench } from "../learn/bench.ts";
import { benchSummary, writeBenchReport } from "../learn/bench-report.ts";
import { loadSuite } from "../learn/suite.ts";
import { gracefulStop } from "./graceful-stop.ts";
import { safeText } from "./safe-text.ts";
import { shownPath } from "./shown-path.ts";

export interface BenchFlags {
  out?: string;
  parallel?: number;
  fleet?: string;
  json?: boolean;
}

/** `autolab bench <suite>`: runs (or resumes) the suite's cells, then writes the report. */
export async function benchCommand(suitePath: string, flags: BenchFlags): Promise<void> {
  const suite = loadSuite(suitePath);
  const out =
    flags.out ?? join(dirname(suite.file), ".autolab", "bench", basename(suite.file, extname(suite.file)));
  const stop = gracefulStop("bench");
  try {
    const run = await runBench(suite, {
      out,
      ...(flags.parallel !== undefined ? { parallel: flags.parallel } : {}),
      ...(flags.fleet ? { fleet: flags.fleet } : {}),
      signal: stop.signal,
      onLine: (line) => process.stderr.write(`${safeText(line, { oneLine: true })}\n`),
    });
    const summary = benchSummary(suite, run);
    const files = writeBenchReport(summary, join(out, "report"));
    if (stop.signal.aborted && !summary.complete) process.exitCode = 130;
    if (flags.json) {
      process.stdout.write(`${JSON.stringify(summary)}\n`);
      return;
    }
    const show = shownPath;
    const lines = [
      ...summary.verdicts.map((v) => v.line),
      ...(summary.complete ? [] : ["incomplete: run the bench again to finish it"]),
      `report: ${files.map(show).join(", ")}`,
    ];
    process.stdout.write(`${safeText(lines.join("\n"))}\n`);
  } finally {
    stop.dispose();
  }
}
