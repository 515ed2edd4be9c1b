import { type FinalizeOptions, finalizeRun, renderPlan } from "../app/finalize.ts";
import { AutolabError } from "../core/errors.ts";
import { safeJson, safeText } from "./safe-text.ts";

/** The command's flags: the library's options a user can give, and --json. */
export type FinalizeFlags = Pick<
  FinalizeOptions,
  "program" | "tag" | "apply" | "verify" | "trials" | "pr" | "remote"
> & { json?: boolean };

/** `autolab finalize`: the plan (dry run), or the branches with --apply, --verify, --pr. */
export async function finalizeCommand(flags: FinalizeFlags): Promise<void> {
  if (flags.trials !== undefined && !flags.verify) {
    throw new AutolabError(
      "BAD_FLAG",
      "--trials sets how many trials --verify runs per configuration; without --verify nothing is measured.",
      "Add --verify (autolab finalize --verify --trials 3), or leave --trials out.",
    );
  }
  const plan = await finalizeRun({
    ...(flags.program ? { program: flags.program } : {}),
    ...(flags.tag ? { tag: flags.tag } : {}),
    apply: flags.apply ?? false,
    verify: flags.verify ?? false,
    pr: flags.pr ?? false,
    ...(flags.trials !== undefined ? { trials: flags.trials } : {}),
    ...(flags.remote ? { remote: flags.remote } : {}),
    // Progress goes to stderr: stdout is the plan (or its JSON).
    onProgress: (line) => process.stderr.write(`${safeText(line, { oneLine: true })}\n`),
  });
  if (flags.json) process.stdout.write(`${safeJson(JSON.stringify(plan, null, 2))}\n`);
  else process.stdout.write(safeText(renderPlan(plan)));
  // A pull request that could not be opened (a push refused, gh failed) fails the command.
  if (plan.branches.some((b) => b.pr && "error" in b.pr)) process.exitCode = 1;
}
