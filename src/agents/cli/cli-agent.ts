import { accessSync, constants, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { delimiter, dirname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { AgentFailure } from "../../core/agent-failure.ts";
import { AutolabError } from "../../core/errors.ts";
import type { Agent, AgentConfig, Program, Proposal, ProposalContext } from "../../core/types.ts";
import { formatDuration } from "../../program/index.ts";
import { runProcess } from "../../runner/run-process.ts";
import { agentEnv, resolveApiKey } from "./env.ts";
import type { CliPreset, ParsedOutput } from "./preset.ts";
import { buildPrompt, editablePaths, protectedPaths, SUMMARY_JSON_SCHEMA } from "./prompt.ts";
import { extractSummary } from "./summary.ts";

/** Default wall-clock limit of one proposal. */
export const DEFAULT_AGENT_TIMEOUT_MS = 15 * 60_000;
/** Between SIGTERM and SIGKILL when an agent's tree is killed. */
const KILL_GRACE_MS = 2000;
/** Cap of each raw log (a long pi --mode json session is a few MB). */
const LOG_CAP_BYTES = 32 * 1024 * 1024;

const AUTOLAB_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

export interface CliAgentOptions {
  /** Overrides the wall-clock limit (default: config.timeoutMs, else 15 minutes). */
  timeoutMs?: number;
}

/**
 * An Agent that runs a coding-agent CLI once per proposal: the prompt is built from the
 * notebook, the CLI runs in the worktree with an isolated home (`<logDir>/home`), a scrubbed
 * environment, stdin closed and a wall-clock limit after which its whole process tree is
 * killed. Its raw output is kept in `<logDir>/agent.stdout.log` / `agent.stderr.log`.
 *
 * Outcomes: a Proposal, or an AgentFailure (timeout, crashed, garbage, no_summary) whose detail
 * is the last lines of stderr. A CLI that is not installed is an AutolabError
 * AGENT_NOT_INSTALLED, raised here (before any run exists), with the install command.
 *
 * Scope is enforced twice: by the CLI where it can (see each preset) and, whatever the CLI did,
 * by the loop's scope check after `propose`.
 */
export function createCliAgent(
  preset: CliPreset,
  config: AgentConfig,
  program: Program,
  opts: CliAgentOptions = {},
): Agent {
  preset.validate?.(config, program);
  const executablePath = preset.executable ? findExecutable(preset.executable) : undefined;
  if (preset.executable && !executablePath) {
    throw new AutolabError(
      "AGENT_NOT_INSTALLED",
      `the agent backend "${preset.backend}" needs the \`${preset.executable}\` command, which is not installed (not found on PATH).`,
      `Install it: ${preset.install}${preset.docs ? ` (${preset.docs})` : ""}`,
    );
  }
  const apiKey = resolveApiKey(config);
  const timeoutMs = opts.timeoutMs ?? config.timeoutMs ?? DEFAULT_AGENT_TIMEOUT_MS;

  return {
    name: config.model ? `${preset.backend}:${config.model}` : preset.backend,
    async propose(ctx: ProposalContext): Promise<Proposal> {
      mkdirSync(ctx.logDir, { recursive: true });
      const home = preset.isolateHome === false ? undefined : join(ctx.logDir, "home");
      if (home) mkdirSync(home, { recursive: true });
      const prompt = buildPrompt(ctx, preset.summaryTool ? { summaryTool: preset.summaryTool } : {});
      const promptFile = join(ctx.logDir, "prompt.md");
      writeFileSync(promptFile, prompt);
      const inv = await preset.invocation({
        config,
        ctx,
        prompt,
        promptFile,
        home: home ?? process.env.HOME ?? ctx.logDir,
        editable: editablePaths(ctx),
        protected: protectedPaths(ctx),
        summarySchema: SUMMARY_JSON_SCHEMA,
        apiKey,
        executablePath,
      });
      const env = agentEnv(preset, config, home, inv.env);
      const command = inv.shell ?? [executablePath ?? "", ...inv.args].map(shellQuote).join(" ");
      const stdoutPath = join(ctx.logDir, "agent.stdout.log");
      const stderrPath = join(ctx.logDir, "agent.stderr.log");
      writeFileSync(join(ctx.logDir, "agent.command.txt"), `${command}\n`);

      const out = await runProcess({
        command,
        cwd: ctx.worktree,
        env,
        stdoutPath,
        stderrPath,
        killAfterMs: timeoutMs,
        killGraceMs: KILL_GRACE_MS,
        logCapBytes: LOG_CAP_BYTES,
        sampleIntervalMs: 250,
        tailLines: 20,
        tailChars: 4000,
        ...(ctx.signal ? { signal: ctx.signal } : {}),
      });
      const stdout = readText(stdoutPath);
      const stderr = readText(stderrPath);
      const detail = lastLines(stderr) || lastLines(stdout);
      const who = preset.executable ?? "the agent command";
      let parsed: ParsedOutput | undefined;
      let parseError: unknown;
      try {
        parsed = preset.parse({ stdout, stderr, exitCode: out.exitCode });
      } catch (err) {
        parseError = err;
      }
      const usage = usageOf(parsed, out.wallS);

      if (out.spawnError)
        throw new AgentFailure("crashed", `${who} could not be started: ${out.spawnError}`, detail, usage);
      if (out.interrupted) throw new AgentFailure("crashed", `${who} was interrupted`, detail, usage);
      if (out.timedOut) {
        throw new AgentFailure(
          "timeout",
          `${who} did not finish within ${formatDuration(timeoutMs)}; its process tree was killed`,
          detail,
          usage,
        );
      }
      // An error the CLI reported (an API failure) says more than its stderr.
      const errorDetail = parsed?.error ? `${parsed.error}\n${detail}`.trim() : detail;
      if (out.exitCode !== 0) {
        const why = out.signal ? `was killed by ${out.signal}` : `exited with code ${out.exitCode}`;
        throw new AgentFailure(
          "crashed",
          `${who} ${why}${parsed?.error ? `: ${firstLine(parsed.error)}` : ""}`,
          errorDetail,
          usage,
        );
      }
      if (parseError || !parsed) {
        if (parseError instanceof AgentFailure) {
          throw new AgentFailure(parseError.kind, parseError.message, parseError.detail || detail, usage);
        }
        throw parseError;
      }
      if (parsed.error) {
        throw new AgentFailure(
          "crashed",
          `${who} reported an error: ${firstLine(parsed.error)}`,
          errorDetail,
          usage,
        );
      }
      let summary: ReturnType<typeof extractSummary>;
      try {
        summary = extractSummary(parsed, "");
      } catch (err) {
        if (err instanceof AgentFailure)
          throw new AgentFailure(err.kind, err.message, err.detail || detail, usage);
        throw err;
      }
      return { ...summary, usage };
    },
  };
}

/** Absolute path of `name` on PATH, then in autolab's own node_modules/.bin (its pinned CLIs); undefined if absent. */
export function findExecutable(name: string, path = process.env.PATH ?? ""): string | undefined {
  const candidates =
    isAbsolute(name) || name.includes("/")
      ? [resolve(name)]
      : [...path.split(delimiter).filter(Boolean), join(AUTOLAB_ROOT, "node_modules", ".bin")].map((d) =>
          join(d, name),
        );
  for (const c of candidates) {
    try {
      accessSync(c, constants.X_OK);
      return c;
    } catch {}
  }
  return undefined;
}

export function shellQuote(s: string): string {
  return /^[A-Za-z0-9_\-./:=@%+,]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

function usageOf(parsed: ParsedOutput | undefined, wallS: number) {
  const u = parsed?.usage ?? {};
  return {
    ...(u.inputTokens !== undefined ? { inputTokens: u.inputTokens } : {}),
    ...(u.outputTokens !== undefined ? { outputTokens: u.outputTokens } : {}),
    ...(u.costUsd !== undefined ? { costUsd: u.costUsd } : {}),
    wallS: Math.round(wallS * 1000) / 1000,
  };
}

function readText(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

function lastLines(text: string, lines = 20, chars = 4000): string {
  const t = text.trimEnd().split("\n").slice(-lines).join("\n");
  return t.length > chars ? t.slice(-chars) : t;
}

function firstLine(s: string): string {
  const l = s.trim().split("\n")[0] ?? "";
  return l.length > 300 ? `${l.slice(0, 297)}…` : l;
}
