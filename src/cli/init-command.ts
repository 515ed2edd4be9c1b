import { initProject } from "../app/init.ts";
import { handleError } from "./errors.ts";
import { safeText } from "./safe-text.ts";

export async function initCommand(dir: string, flags: { example?: string }): Promise<void> {
  try {
    const res = await initProject(dir, flags.example);
    const lines = [
      `Created ${res.files.join(", ")} in ${res.dir}${res.committed ? " (new git repository, first commit made)" : ""}.`,
    ];
    lines.push(
      flags.example
        ? `Next: cd ${res.dir} && autolab run --max-experiments 10`
        : "Next: edit program.md (metric, command, files, budget), commit, then `autolab run`.",
    );
    if (!res.committed)
      lines.push("Commit the new files before `autolab run`: a run starts from the last commit.");
    process.stdout.write(`${safeText(lines.join("\n"))}\n`);
  } catch (err) {
    process.exitCode = handleError(err);
  }
}
