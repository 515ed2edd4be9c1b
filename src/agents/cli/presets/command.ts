/**
 * Any other CLI, from a template: program.md `agent: { backend: command, command: "mytool
 * --prompt-file {prompt_file} --cwd {workdir}" }`. `{prompt_file}` and `{workdir}` are replaced
 * by the (shell-quoted) prompt file and worktree; `agent.args` are appended. The command runs
 * with /bin/sh in the worktree, with the real HOME (it is the user's own tool and its config),
 * and these variables: AUTOLAB_PROMPT_FILE, AUTOLAB_WORKDIR, AUTOLAB_EDITABLE (absolute paths,
 * one a line), AUTOLAB_SUMMARY_SCHEMA, and when configured AUTOLAB_MODEL, AUTOLAB_BASE_URL,
 * AUTOLAB_API_KEY.
 *
 * Scope is not limited by the command: the loop's scope check rejects a candidate that touched
 * anything but the editable files. In autolab's sandbox the command can write only the editable
 * files and new files next to them (`sandboxEdits: "replace"`: `sed -i` works), HOME is read-only
 * (its credential files invisible) and XDG_CACHE_HOME / XDG_STATE_HOME point into the proposal's
 * log directory. The summary is the last JSON block (or object) on stdout.
 */
import { AutolabError } from "../../../core/errors.ts";
import { findExecutable, shellQuote } from "../cli-agent.ts";
import type { CliPreset, PresetInput } from "../preset.ts";

const preset: CliPreset = {
  backend: "command",
  install: "install the program that agent.command runs, or fix agent.command in program.md",
  hostKeys: "all",
  isolateHome: false,
  // Any tool: it may edit by rename (`sed -i`, an editor's atomic save).
  sandboxEdits: "replace",
  validate(config) {
    const template = config.command?.trim();
    if (!template) {
      throw new AutolabError(
        "AGENT_CONFIG_INVALID",
        "agent backend command needs agent.command, the command line to run.",
        'Add it to program.md, e.g. agent: { backend: command, command: "mytool --prompt-file {prompt_file} --cwd {workdir}" }',
      );
    }
    // A plain program name first (not a shell construct) can be checked before the run starts.
    const first = template.split(/\s+/)[0] ?? "";
    if (/^[A-Za-z0-9_./-]+$/.test(first) && !first.includes("=") && !findExecutable(first)) {
      throw new AutolabError(
        "AGENT_NOT_INSTALLED",
        `agent.command runs \`${first}\`, which is not installed (not found on PATH).`,
        "Install it, or fix agent.command in program.md.",
      );
    }
  },
  invocation(input: PresetInput) {
    const { config, ctx } = input;
    const shell = [
      (config.command ?? "")
        .replaceAll("{prompt_file}", shellQuote(input.promptFile))
        .replaceAll("{workdir}", shellQuote(ctx.worktree)),
      ...config.args.map(shellQuote),
    ].join(" ");
    return {
      args: [],
      shell,
      env: {
        AUTOLAB_PROMPT_FILE: input.promptFile,
        AUTOLAB_WORKDIR: ctx.worktree,
        AUTOLAB_EDITABLE: input.editable.join("\n"),
        AUTOLAB_SUMMARY_SCHEMA: JSON.stringify(input.summarySchema),
        ...(config.model ? { AUTOLAB_MODEL: config.model } : {}),
        ...(config.baseUrl ? { AUTOLAB_BASE_URL: config.baseUrl } : {}),
        ...(input.apiKey ? { AUTOLAB_API_KEY: input.apiKey } : {}),
      },
    };
  },
  parse(out) {
    return { text: out.stdout };
  },
};

export default preset;
