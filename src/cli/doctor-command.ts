import { type Check, runDoctor } from "../app/doctor.ts";
import { handleError } from "./errors.ts";
import { safeText } from "./safe-text.ts";

const LABEL = { ok: "ok  ", warn: "warn", fail: "FAIL" } as const;

/** One line per check (`ok   git: git 2.39.5`), a `fix:` line under each warning and failure. */
export function renderChecks(checks: readonly Check[]): string {
  const lines: string[] = [];
  for (const c of checks) {
    // Details quote program.md, role files and programs' output: shown escaped.
    lines.push(`${LABEL[c.status]}  ${safeText(`${c.name}: ${c.detail}`, { oneLine: true })}`);
    if (c.fix && c.status !== "ok") lines.push(`      fix: ${safeText(c.fix, { oneLine: true })}`);
  }
  const fails = checks.filter((c) => c.status === "fail").length;
  const warns = checks.filter((c) => c.status === "warn").length;
  lines.push(
    fails
      ? `${fails} problem${fails === 1 ? "" : "s"} to fix${warns ? `, ${warns} warning${warns === 1 ? "" : "s"}` : ""}.`
      : `Nothing to fix${warns ? ` (${warns} warning${warns === 1 ? "" : "s"})` : ""}.`,
  );
  return `${lines.join("\n")}\n`;
}

/** `autolab doctor [dir]`: exit code 0 when nothing fails, 1 otherwise. */
export async function doctorCommand(dir: string | undefined): Promise<void> {
  try {
    const checks = await runDoctor(dir);
    process.stdout.write(renderChecks(checks));
    process.exitCode = checks.some((c) => c.status === "fail") ? 1 : 0;
  } catch (err) {
    process.exitCode = handleError(err);
  }
}
