import { basename, dirname, extname, join, relative } from "node:path";
import { runBench } from "../learn/bench.ts";
import { benchSummary, writeBenchReport } from "../learn/bench-report.ts";
import { loadSuite } from "../learn/suite.ts";
import { safeText } from "./safe-text.ts";

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
  // Ctrl-C (or SIGTERM) once: no new cell starts, the running ones finish and are recorded (a cell
  // cut short would not have had its budget). Twice: leave at once — the running cells start again
  // from fresh clones on the next invocation. Exit 130 either way when cells are left.
  const controller = new AbortController();
  const stop = () => {
    if (controller.signal.aborted) process.exit(130);
    process.stderr.write(
      "bench: stopping after the running cells (run it again to resume; Ctrl-C again to quit now)\n",
    );
    controller.abort();
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  try {
    const run = await runBench(suite, {
      out,
      ...(flags.parallel !== undefined ? { parallel: flags.parallel } : {}),
      ...(flags.fleet ? { fleet: flags.fleet } : {}),
      signal: controller.signal,
      onLine: (line) => process.stderr.write(`${safeText(line, { oneLine: true })}\n`),
    });
    const summary = benchSummary(suite, run);
    const files = writeBenchReport(summary, join(out, "report"));
    if (controller.signal.aborted && !summary.complete) process.exitCode = 130;
    if (flags.json) {
      process.stdout.write(`${JSON.stringify(summary)}\n`);
      return;
    }
    const show = (p: string) => {
      const r = relative(process.cwd(), p);
      return r.startsWith("..") ? p : r;
    };
    const lines = [
      ...summary.verdicts.map((v) => v.line),
      ...(summary.complete ? [] : ["incomplete: run the bench again to finish it"]),
      `report: ${files.map(show).join(", ")}`,
    ];
    process.stdout.write(`${safeText(lines.join("\n"))}\n`);
  } finally {
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
  }
}
