import { accessSync, constants, existsSync, mkdirSync, readdirSync, realpathSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { basename, delimiter, dirname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { AgentFailure } from "../../core/agent-failure.ts";
import { AutolabError } from "../../core/errors.ts";
import { firstLine, formatDuration } from "../../core/format.ts";
import { redactSecrets } from "../../core/secrets.ts";
import type {
  Agent,
  AgentConfig,
  Program,
  Proposal,
  ProposalContext,
  SandboxEgress,
  SandboxSpec,
} from "../../core/types.ts";
import { readUntrustedText, writeUntrusted } from "../../core/untrusted-file.ts";
import { runProcess } from "../../runner/run-process.ts";
import { openEgress } from "./egress.ts";
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
 * killed. Its raw output is kept in `<logDir>/agent.stdout.log` / `agent.stderr.log`. With
 * `ctx.sandbox` (the loop's researcher confinement) the CLI runs inside it, with exactly the
 * environment built here (an allowlist then: env.ts), writing only what the spec allows.
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
      installHint(preset),
    );
  }
  const apiKey = resolveApiKey(config);
  const timeoutMs = opts.timeoutMs ?? config.timeoutMs ?? DEFAULT_AGENT_TIMEOUT_MS;

  return {
    name: config.model ? `${preset.backend}:${config.model}` : preset.backend,
    async propose(ctx: ProposalContext): Promise<Proposal> {
      mkdirSync(ctx.logDir, { recursive: true });
      const realHome = process.env.HOME ?? homedir();
      const home = preset.isolateHome === false ? undefined : join(ctx.logDir, "home");
      if (home) mkdirSync(home, { recursive: true });
      // The prompt is recorded (prompt.md): no secret in it (src/core/secrets.ts).
      const prompt = redactSecrets(
        buildPrompt(ctx, preset.summaryTool ? { summaryTool: preset.summaryTool } : {}),
      );
      const promptFile = join(ctx.logDir, "prompt.md");
      writeUntrusted(promptFile, prompt);
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
      const sandbox = ctx.sandbox;
      const env = agentEnv(preset, config, home, inv.env, process.env, { sandboxed: sandbox !== undefined });
      if (sandbox && !home) {
        // The real HOME is read-only in the sandbox (its credential files invisible): caches and
        // state go to the proposal's log directory, which is writable.
        for (const [k, dir] of [
          ["XDG_CACHE_HOME", join("home", ".cache")],
          ["XDG_STATE_HOME", join("home", ".local", "state")],
        ] as const) {
          if (config.env[k] !== undefined) continue;
          env[k] = join(ctx.logDir, dir);
          mkdirSync(env[k], { recursive: true });
        }
      }
      const command = inv.shell ?? [executablePath ?? "", ...inv.args].map(shellQuote).join(" ");
      const stdoutPath = join(ctx.logDir, "agent.stdout.log");
      const stderrPath = join(ctx.logDir, "agent.stderr.log");
      writeUntrusted(join(ctx.logDir, "agent.command.txt"), `${redactSecrets(command)}\n`);

      // Sandboxed: the model endpoints only, through the egress proxy (stopped after the CLI).
      const egress = sandbox ? await openEgress(preset, config, join(ctx.logDir, "egress.log")) : undefined;
      let out: Awaited<ReturnType<typeof runProcess>>;
      try {
        out = await runProcess({
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
          ...(sandbox
            ? {
                sandbox: agentSandbox(sandbox, {
                  logDir: ctx.logDir,
                  env,
                  editable: editablePaths(ctx),
                  ...(preset.sandboxEdits ? { edits: preset.sandboxEdits } : {}),
                  reads: [
                    ...(preset.homeReads ?? []).map((p) => join(realHome, p)),
                    ...(executablePath ? [installDir(executablePath)] : []),
                  ],
                  ...(egress ? { egress: egress.spec } : {}),
                }),
              }
            : {}),
          ...(ctx.signal ? { signal: ctx.signal } : {}),
        });
      } finally {
        await egress?.close();
      }
      // The researcher can write its log directory: its logs are read through the one door
      // (no symlink followed, no FIFO waited on), and a log it replaced is a refusal.
      const stdoutRead = readLog(stdoutPath);
      const stderrRead = readLog(stderrPath);
      const stdout = stdoutRead.text;
      const stderr = stderrRead.text;
      const detail = lastLines(stderr) || lastLines(stdout);
      const who = preset.executable ?? "the agent command";
      const refused = stdoutRead.refused ?? stderrRead.refused;
      if (refused && !out.spawnError && !out.interrupted) {
        throw new AgentFailure(
          "refused",
          `${who} left its log ${refused}; the harness does not read it`,
          "",
          {
            wallS: Math.round(out.wallS * 1000) / 1000,
          },
        );
      }
      let parsed: ParsedOutput | undefined;
      let parseError: unknown;
      try {
        parsed = preset.parse({ stdout, stderr, exitCode: out.exitCode });
      } catch (err) {
        parseError = err;
      }
      const usage = usageOf(parsed, out.wallS, config.price);

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
          `${who} ${why}${parsed?.error ? `: ${firstLine(parsed.error.trim(), 300, 297)}` : ""}`,
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
          `${who} reported an error: ${firstLine(parsed.error.trim(), 300, 297)}`,
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

/**
 * The loop's researcher sandbox as this agent runs in it: with the agent's own environment (the
 * spec's is empty: the agent fills it in) and its log directory writable (the loop names it
 * already; a caller that did not still gets the isolated home and the logs written). For a CLI
 * that edits by replacing files (`sandboxEdits: "replace"`), each editable file the spec binds
 * writable is made writable through its directory instead, and every other entry of that
 * directory is bound read-only: a temporary file can be created and renamed over the editable
 * file, nothing that exists can be changed, and a new file is left to the scope check.
 */
export function agentSandbox(
  spec: SandboxSpec,
  opts: {
    logDir: string;
    env: Record<string, string>;
    editable: string[];
    edits?: "in-place" | "replace";
    /** Read-only on top of what the spec hides: the CLI's installation, its preset's home allowlist. */
    reads?: string[];
    egress?: SandboxEgress;
  },
): SandboxSpec {
  const within = (p: string, dir: string) => p === dir || p.startsWith(`${dir}/`);
  let writable = spec.writable.map((p) => resolve(p));
  let readOnly = [...spec.readOnly];
  if (opts.edits === "replace") {
    const files = opts.editable.map((p) => resolve(p)).filter((p) => writable.includes(p) && isFile(p));
    const dirs = [...new Set(files.map((f) => dirname(f)))];
    const trees = writable.filter((w) => !files.includes(w));
    writable = [...new Set([...trees, ...dirs])];
    // The worktree itself is bound read-only: at the same path that bind would win.
    readOnly = readOnly.filter((r) => !dirs.includes(resolve(r)));
    for (const d of dirs) {
      // Inside a writable tree (an editable directory) everything is writable already.
      if (trees.some((w) => w !== d && within(d, w))) continue;
      for (const name of readdirSync(d)) {
        const p = join(d, name);
        // The editable files are writable through d; a writable path in there keeps its bind.
        if (files.includes(p) || writable.some((w) => within(w, p))) continue;
        readOnly.push(p);
      }
    }
    readOnly = [...new Set(readOnly)];
  }
  const logDir = resolve(opts.logDir);
  if (!writable.some((w) => within(logDir, w))) writable.push(logDir);
  readOnly = [...new Set([...readOnly, ...(opts.reads ?? [])])];
  return { ...spec, writable, readOnly, env: opts.env, ...(opts.egress ? { egress: opts.egress } : {}) };
}

/**
 * What a CLI's executable needs to be readable where the home or the checkout is hidden: the
 * node_modules holding it (node_modules/.bin/x, its dependencies beside it), else the directory
 * of the file it really is (~/.local/bin/claude links into ~/.local/share/claude/versions/):
 * never all of ~/.local, which holds keyrings and other programs' data.
 */
export function installDir(executable: string): string {
  const dir = dirname(executable);
  if (dir.endsWith("/node_modules/.bin")) return dirname(dir);
  try {
    return dirname(realpathSync(executable));
  } catch {
    return dir;
  }
}

function isFile(p: string): boolean {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
}

/**
 * Where autolab's own pinned agent CLIs are, after PATH: its node_modules/.bin, and agent-clis/
 * (`npm run setup:agent-clis`: kept out of the default install, 1.5 GB a demo user never needs).
 */
const OWN_BIN_DIRS = [
  join(AUTOLAB_ROOT, "node_modules", ".bin"),
  join(AUTOLAB_ROOT, "agent-clis", "node_modules", ".bin"),
];

/**
 * How to install a preset's CLI: its pinned version (agent-clis/package.json's, which the agent
 * tests run), and in autolab's checkout all six at once.
 */
export function installHint(preset: Pick<CliPreset, "install" | "docs">): string {
  const checkout = existsSync(join(AUTOLAB_ROOT, "agent-clis", "package.json"));
  return (
    `Install it: ${preset.install}${preset.docs ? ` (${preset.docs})` : ""}` +
    (checkout ? ", or all six pinned versions into autolab's checkout: npm run setup:agent-clis" : "")
  );
}

/** Absolute path of `name` on PATH, then among autolab's pinned CLIs (OWN_BIN_DIRS); undefined if absent. */
export function findExecutable(name: string, path = process.env.PATH ?? ""): string | undefined {
  const candidates =
    isAbsolute(name) || name.includes("/")
      ? [resolve(name)]
      : [...path.split(delimiter).filter(Boolean), ...OWN_BIN_DIRS].map((d) => join(d, name));
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

function usageOf(
  parsed: ParsedOutput | undefined,
  wallS: number,
  /** program.md's agent.price: a cost for a CLI that reports tokens but no cost. */
  price?: { input: number; output: number },
) {
  const u = parsed?.usage ?? {};
  const costUsd =
    u.costUsd ??
    (price && u.inputTokens !== undefined && u.outputTokens !== undefined
      ? (u.inputTokens * price.input + u.outputTokens * price.output) / 1e6
      : undefined);
  return {
    ...(u.inputTokens !== undefined ? { inputTokens: u.inputTokens } : {}),
    ...(u.outputTokens !== undefined ? { outputTokens: u.outputTokens } : {}),
    ...(costUsd !== undefined ? { costUsd } : {}),
    wallS: Math.round(wallS * 1000) / 1000,
  };
}

/** A log the researcher could have replaced: its text (the end, when over the cap), or why it was refused. */
function readLog(path: string): { text: string; refused?: string } {
  const r = readUntrustedText(path, { maxBytes: LOG_CAP_BYTES, keep: "tail" });
  if (r.ok) return { text: r.text };
  // Never written (the process did not start): nothing to read, nothing refused.
  if (r.missing) return { text: "" };
  return { text: "", refused: `${basename(path)} as ${r.reason}` };
}

function lastLines(text: string, lines = 20, chars = 4000): string {
  const t = text.trimEnd().split("\n").slice(-lines).join("\n");
  return t.length > chars ? t.slice(-chars) : t;
}
