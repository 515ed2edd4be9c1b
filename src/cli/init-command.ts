import { exampleNextSteps, initProject } from "../app/init.ts";
import { initFrom } from "../app/migrate/import.ts";
import { AutolabError } from "../core/errors.ts";
import { handleError } from "./errors.ts";
import { safeText } from "./safe-text.ts";

export async function initCommand(dir: string, flags: { example?: string; from?: string }): Promise<void> {
  try {
    if (flags.from !== undefined) {
      if (flags.example !== undefined) {
        throw new AutolabError("BAD_FLAG", "--from and --example exclude each other.", "Give one of them.");
      }
      return await initFromCommand(dir, flags.from);
    }
    const res = await initProject(dir, flags.example);
    const lines = [
      `Created ${res.files.join(", ")} in ${res.dir}${res.committed ? " (new git repository, first commit made)" : ""}.`,
    ];
    const steps = flags.example ? exampleNextSteps(flags.example) : undefined;
    if (steps)
      lines.push(`Next, in ${res.dir} (the example's README, "Run it"):`, ...steps.map((l) => `  ${l}`));
    else
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

/** `autolab init --from <tool>`: what was found, written, imported and skipped. */
async function initFromCommand(dir: string, from: string): Promise<void> {
  const res = await initFrom(dir, from);
  const p = res.plan;
  const s = p.settings;
  const lines = [
    `Imported ${p.source === "autoresearch" ? "an" : "a"} ${p.source} project in ${res.dir}:`,
    `  program.md  ${p.directionsFrom === "program.md" ? "frontmatter added above its text (kept verbatim as the research directions)" : `new, with ${p.directionsFrom}'s text as the research directions`}`,
    `  objective   ${s.direction} ${s.metric}`,
    `  command     ${s.command}`,
    `  files       editable ${s.editable.join(", ")}${s.protected.length ? `; protected ${s.protected.join(", ")}` : ""}`,
    `  agent       ${s.search.length ? `builtin, ${s.search.length} knobs from ${s.editable[0]} (review their ranges)` : "claude"}`,
  ];
  if (p.historyFrom) {
    lines.push(
      `  history     ${p.history.length} result${p.history.length === 1 ? "" : "s"} from ${p.historyFrom} (before autolab, not re-measured: shown as prior history, never a baseline or the best)${res.imported === 0 && p.history.length ? "; already in the notebook" : ""}`,
    );
  }
  if (p.problems.length) {
    lines.push(`Not imported (${p.problems.length} line${p.problems.length === 1 ? "" : "s"}):`);
    for (const pr of p.problems.slice(0, 20)) lines.push(`  ${pr}`);
    if (p.problems.length > 20) lines.push(`  … and ${p.problems.length - 20} more`);
  }
  for (const n of p.notes) lines.push(`Note: ${n}`);
  lines.push(
    res.committed.length
      ? `Committed ${res.committed.join(", ")}${res.newRepo ? " (new git repository)" : ""}.`
      : "Nothing new to commit.",
  );
  lines.push(
    `Next: cd ${res.dir} && autolab run${p.maxExperiments !== undefined ? ` -n ${p.maxExperiments}` : ""}  (the first experiment measures autolab's own baseline)`,
  );
  process.stdout.write(`${safeText(lines.join("\n"))}\n`);
}
