/**
 * `autolab doctor [dir]`: what this machine and this project need, one check at a time, each
 * failure with its fix. The checks are functions of a `DoctorEnv` (PATH, environment, Node's
 * version, how to run a program, the sandbox probe, a TCP connect), so tests give them fake
 * machines; src/cli/doctor-command.ts renders them. Nothing here writes to the project, and the
 * only network traffic is a TCP connect to a `base_url` program.md configures (never a vendor's
 * default endpoint: for those it only says whether the key is set).
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { connect } from "node:net";
import { dirname, join, resolve } from "node:path";
import { findExecutable, installHint } from "../agents/cli/cli-agent.ts";
import { loadPreset } from "../agents/cli/register.ts";
import { resolveModel } from "../agents/llm/provider.ts";
import { AutolabError } from "../core/errors.ts";
import type { AgentConfig, Program } from "../core/types.ts";
import { damagedNotebook, isDamaged, maskUrl, openNotebook } from "../ledger/open-notebook.ts";
import { loadRoles } from "../org/roles.ts";
import { loadProgram } from "../program/index.ts";
import { findOnPath, probeSandbox, type SandboxProbe } from "../runner/sandbox.ts";
import { PACKAGE_ROOT } from "./init.ts";
import { assertNotEmptied, locateNotebook, notebookExists, programPath } from "./lab.ts";

export type CheckStatus = "ok" | "warn" | "fail";

export interface Check {
  /** What was checked: git, node, sandbox, program, researcher <backend>, notebook, gpu. */
  name: string;
  status: CheckStatus;
  /** What was found (one line). */
  detail: string;
  /** What to do about it (warn and fail). */
  fix?: string;
}

/** A program's outcome, or undefined when it could not be run (not installed). */
export interface ProgramOutput {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The machine the checks look at; `realEnv()` is this one. */
export interface DoctorEnv {
  env: NodeJS.ProcessEnv;
  /** process.versions.node */
  nodeVersion: string;
  /** package.json's engines.node, e.g. ">=24". */
  engines: string;
  /** Runs `file args` (found on env.PATH) in `cwd`; undefined when it is not installed. */
  run(file: string, args: string[], cwd?: string): ProgramOutput | undefined;
  probeSandbox(): SandboxProbe;
  /** An agent CLI's executable (PATH, then autolab's own pinned CLIs). */
  findExecutable(name: string): string | undefined;
  /** Opens a TCP connection and closes it: undefined when it connected, else why not. */
  connect(host: string, port: number): Promise<string | undefined>;
}

const CONNECT_TIMEOUT_MS = 3000;

export function realEnv(): DoctorEnv {
  const pkg = JSON.parse(readFileSync(join(PACKAGE_ROOT, "package.json"), "utf8")) as {
    engines?: { node?: string };
  };
  return {
    env: process.env,
    nodeVersion: process.versions.node,
    engines: pkg.engines?.node ?? ">=24",
    run(file, args, cwd) {
      const exe = findOnPath(file, process.env.PATH);
      if (!exe) return undefined;
      const r = spawnSync(exe, args, { cwd, encoding: "utf8", timeout: 10_000 });
      if (r.error) return undefined;
      return { code: r.status, stdout: r.stdout, stderr: r.stderr };
    },
    probeSandbox: () => probeSandbox(),
    findExecutable: (name) => findExecutable(name),
    connect: (host, port) =>
      new Promise((done) => {
        const socket = connect({ host, port });
        const finish = (why: string | undefined) => {
          socket.destroy();
          done(why);
        };
        socket.setTimeout(CONNECT_TIMEOUT_MS, () => finish(`no answer within ${CONNECT_TIMEOUT_MS / 1000}s`));
        socket.once("connect", () => finish(undefined));
        socket.once("error", (err) => finish(err.message));
      }),
  };
}

/** git: installed, its version, and who commits (autolab's own commits do not need it). */
export function checkGit(env: DoctorEnv, dir: string): Check[] {
  const v = env.run("git", ["--version"]);
  if (v?.code !== 0) {
    return [
      {
        name: "git",
        status: "fail",
        detail: v ? `git does not run: ${firstLine(v.stderr)}` : "git is not installed",
        fix: "Install git: `apt-get install git` (Debian, Ubuntu), `dnf install git` (Fedora), `brew install git` (macOS).",
      },
    ];
  }
  const version = /\d+(?:\.\d+)+/.exec(v.stdout)?.[0] ?? v.stdout.trim();
  const cwd = existsSync(dir) ? dir : undefined;
  const name = env.run("git", ["config", "user.name"], cwd)?.stdout.trim();
  const email = env.run("git", ["config", "user.email"], cwd)?.stdout.trim();
  const checks: Check[] = [{ name: "git", status: "ok", detail: `git ${version}` }];
  checks.push(
    name && email
      ? { name: "git identity", status: "ok", detail: `${name} <${email}>` }
      : {
          name: "git identity",
          status: "warn",
          detail: "no git identity (user.name, user.email): autolab's commits use its own, yours need one",
          fix: 'git config --global user.name "Your Name" && git config --global user.email you@example.com',
        },
  );
  return checks;
}

/** Node: the running version against package.json's engines (">=24"). */
export function checkNode(env: DoctorEnv): Check {
  const min = /(\d+)(?:\.(\d+))?/.exec(env.engines);
  const [major = 0, minor = 0] = env.nodeVersion.split(".").map(Number);
  const needMajor = Number(min?.[1] ?? 0);
  const needMinor = Number(min?.[2] ?? 0);
  const ok = major > needMajor || (major === needMajor && minor >= needMinor);
  return ok
    ? { name: "node", status: "ok", detail: `Node.js ${env.nodeVersion} (autolab needs ${env.engines})` }
    : {
        name: "node",
        status: "fail",
        detail: `Node.js ${env.nodeVersion}, but autolab needs ${env.engines}`,
        fix: "Install Node.js 24 LTS (https://nodejs.org/, or `nvm install 24`) and run autolab with it.",
      };
}

/** bubblewrap: a sandbox can be made here. Without one, runs go unsandboxed (or refuse, when required). */
export function checkSandbox(env: DoctorEnv, program: Program | undefined): Check {
  if (program && !program.sandbox.enabled) {
    return {
      name: "sandbox",
      status: "warn",
      detail: "sandbox: off in program.md: trials and researchers run unconfined",
      fix: "Remove `sandbox: off` from program.md once bubblewrap works here (docs/security.md).",
    };
  }
  const probe = env.probeSandbox();
  if (probe.ok)
    return { name: "sandbox", status: "ok", detail: `bubblewrap ${probe.version} (${probe.bwrap})` };
  const required = program?.sandbox.required === true;
  return {
    name: "sandbox",
    status: required ? "fail" : "warn",
    detail: `${probe.reason}${required ? " (program.md requires a sandbox)" : ": runs would go unsandboxed"}`,
    fix: probe.hint,
  };
}

/** program.md in `dir`: present and valid. Returns the program for the checks that need it. */
export function checkProgram(dir: string): { check: Check; program?: Program } {
  const file = programPath(dir);
  if (!existsSync(file)) {
    return {
      check: {
        name: "program",
        status: "fail",
        detail: `no program.md at ${file}`,
        fix: "Create one: `autolab init` (a template) or `autolab init --example tiny-lm`; or pass the project's directory: `autolab doctor <dir>`.",
      },
    };
  }
  try {
    const program = loadProgram(file);
    return { check: { name: "program", status: "ok", detail: `${file} (${program.name})` }, program };
  } catch (err) {
    if (!(err instanceof AutolabError)) throw err;
    return { check: { name: "program", status: "fail", detail: err.message, ...fixOf(err) } };
  }
}

/** The researchers a run of `program` uses: program.md's agent, its advisor's, and each org role's. */
export function researchersOf(program: Program): { who: string; config: AgentConfig }[] {
  const out = [{ who: "agent", config: program.agent }];
  if (program.advisor) out.push({ who: "advisor", config: program.advisor.agent });
  if (program.org) {
    const roles = loadRoles(resolve(dirname(program.path), program.org.roles));
    for (const role of roles) out.push({ who: `role ${role.name}`, config: role.agent });
  }
  return out;
}

/** One researcher: installed? its key or base URL set? the base URL reachable? */
export async function checkResearcher(
  env: DoctorEnv,
  program: Program,
  who: string,
  config: AgentConfig,
): Promise<Check[]> {
  const name = `researcher ${config.backend} (${who})`;
  if (config.backend === "builtin") {
    return [{ name, status: "ok", detail: "the built-in optimizer: nothing to install, no key" }];
  }
  const checks: Check[] = [];
  if (config.backend === "llm") {
    try {
      const model = resolveModel(config, env.env);
      checks.push({ name, status: "ok", detail: `provider ${model.provider}, model ${model.modelId}` });
    } catch (err) {
      if (!(err instanceof AutolabError)) throw err;
      return [{ name, status: "fail", detail: err.message, ...fixOf(err) }];
    }
  } else {
    const preset = await loadPreset(config.backend);
    try {
      preset.validate?.(config, program);
    } catch (err) {
      if (!(err instanceof AutolabError)) throw err;
      return [{ name, status: "fail", detail: err.message, ...fixOf(err) }];
    }
    if (preset.executable) {
      const exe = env.findExecutable(preset.executable);
      if (!exe) {
        return [
          {
            name,
            status: "fail",
            detail: `\`${preset.executable}\` is not installed (not on PATH)`,
            fix: installHint(preset),
          },
        ];
      }
      checks.push({ name, status: "ok", detail: `installed: ${exe}` });
    } else {
      checks.push({ name, status: "ok", detail: "runs agent.command" });
    }
    if (!config.apiKeyEnv && !config.baseUrl) checks.push(hostKeyCheck(name, preset.hostKeys, env.env));
  }
  if (config.apiKeyEnv) {
    checks.push(
      env.env[config.apiKeyEnv]
        ? { name, status: "ok", detail: `key: ${config.apiKeyEnv} is set` }
        : {
            name,
            status: "fail",
            detail: `key: agent.api_key_env names ${config.apiKeyEnv}, which is not set`,
            fix: `export ${config.apiKeyEnv}=… before \`autolab run\`.`,
          },
    );
  }
  if (config.baseUrl) checks.push(await reachable(env, name, config.baseUrl));
  return checks;
}

/** Without base_url or api_key_env, a CLI talks to its vendor with a host key or its own login. */
function hostKeyCheck(
  name: string,
  hostKeys: "all" | "none" | readonly string[],
  env: NodeJS.ProcessEnv,
): Check {
  if (!Array.isArray(hostKeys)) {
    return { name, status: "ok", detail: "key: the CLI's own configuration (not checked)" };
  }
  const set = hostKeys.filter((k) => env[k]);
  return set.length
    ? { name, status: "ok", detail: `key: ${set.join(", ")} set` }
    : {
        name,
        status: "warn",
        detail: `key: none of ${hostKeys.join(", ")} is set (fine if the CLI is logged in)`,
        fix: `export ${hostKeys[0]}=…, or log the CLI in, or set agent.base_url / agent.api_key_env in program.md.`,
      };
}

async function reachable(env: DoctorEnv, name: string, baseUrl: string): Promise<Check> {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    return {
      name,
      status: "fail",
      detail: `base_url ${baseUrl} is not a URL`,
      fix: "Fix agent.base_url in program.md (e.g. http://127.0.0.1:8000/v1).",
    };
  }
  const port = Number(url.port || (url.protocol === "https:" ? 443 : 80));
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const why = await env.connect(host, port);
  return why === undefined
    ? { name, status: "ok", detail: `base_url ${url.origin} accepts connections` }
    : {
        name,
        status: "fail",
        detail: `base_url ${url.origin} is not reachable: ${why}`,
        fix: "Start the model server, or fix agent.base_url in program.md.",
      };
}

/**
 * The judges of rubric-graded evaluation (program.md `run.evaluate: { rubric: … }`): each one's
 * key set where its provider needs one, its base_url reachable (a TCP connect, like a researcher's).
 */
export async function checkJudges(env: DoctorEnv, program: Program): Promise<Check[]> {
  const judges = program.run.rubric?.judges ?? [];
  const checks: Check[] = [];
  for (const j of judges) {
    const name = `judge ${j.name}`;
    const keyEnv =
      j.apiKeyEnv ??
      (j.provider === "anthropic"
        ? "ANTHROPIC_API_KEY"
        : j.provider === "openai"
          ? "OPENAI_API_KEY"
          : undefined);
    if (keyEnv && !env.env[keyEnv]?.trim()) {
      checks.push({
        name,
        status: "fail",
        detail: `${j.provider} judge ${j.model} needs an API key in ${keyEnv}, which is not set`,
        fix: `export ${keyEnv}=…${j.apiKeyEnv ? "" : ", or name another variable with api_key_env on the judge in program.md"}`,
      });
      continue;
    }
    if (j.baseUrl) {
      const c = await reachable(env, name, j.baseUrl);
      checks.push(
        c.status === "ok"
          ? { ...c, detail: `${j.model}: ${c.detail}` }
          : {
              ...c,
              fix: "Start the judge's model server, or fix the judge's base_url under run.evaluate.judges in program.md.",
            },
      );
    } else
      checks.push({
        name,
        status: "ok",
        detail: `${j.provider} ${j.model}${keyEnv ? ` (key in ${keyEnv})` : ""}`,
      });
  }
  return checks;
}

/** The notebook (.autolab/lab.db): absent is fine; present, it must open and read. */
export function checkNotebook(dir: string): Check {
  const { stateDir, db: where } = locateNotebook(dir);
  const db = maskUrl(where); // shown: a postgres:// password never is
  if (!notebookExists(where)) {
    return { name: "notebook", status: "ok", detail: `none yet (${db}: \`autolab run\` creates it)` };
  }
  try {
    assertNotEmptied(stateDir);
    const notebook = openNotebook(where);
    try {
      const runs = notebook.listRuns();
      return {
        name: "notebook",
        status: "ok",
        detail: `${db}: ${runs.length} run${runs.length === 1 ? "" : "s"}`,
      };
    } finally {
      notebook.close();
    }
  } catch (err) {
    const e = isDamaged(err) ? damagedNotebook(db, err) : err;
    if (!(e instanceof AutolabError)) throw e;
    return { name: "notebook", status: "fail", detail: e.message, ...fixOf(e) };
  }
}

/** GPUs: `nvidia-smi -L`. None is fine (CPU runs); slots.gpus without any is not. */
export function checkGpus(env: DoctorEnv, program: Program | undefined): Check {
  const wanted = program?.slots?.gpus;
  const r = env.run("nvidia-smi", ["-L"]);
  const gpus = r?.code === 0 ? r.stdout.split("\n").filter((l) => /^GPU \d+/.test(l)) : [];
  if (gpus.length) {
    const missing = (wanted ?? []).filter((i) => i >= gpus.length);
    if (missing.length) {
      return {
        name: "gpu",
        status: "fail",
        detail: `${gpus.length} GPU${gpus.length === 1 ? "" : "s"}, but slots.gpus names ${missing.join(", ")}`,
        fix: `Use GPU indices below ${gpus.length} in program.md's slots.gpus.`,
      };
    }
    return {
      name: "gpu",
      status: "ok",
      detail: gpus.map((l) => l.replace(/\s*\(UUID:.*\)$/, "")).join("; "),
    };
  }
  const detail = r
    ? `nvidia-smi finds no GPU (${firstLine(r.stderr || r.stdout) || `exit code ${r.code}`})`
    : "no NVIDIA GPU found (CPU runs only)";
  if (wanted?.length) {
    return {
      name: "gpu",
      status: "fail",
      detail: `${detail}, but program.md's slots.gpus names GPUs ${wanted.join(", ")}`,
      fix: "Install the NVIDIA driver (nvidia-smi -L lists the GPUs), or remove slots.gpus from program.md.",
    };
  }
  return r
    ? {
        name: "gpu",
        status: "warn",
        detail,
        fix: "Check the NVIDIA driver: `nvidia-smi` should list the GPUs.",
      }
    : { name: "gpu", status: "ok", detail };
}

/** Every check, in order: git, node, sandbox, program, researchers, judges, notebook, GPUs. */
export async function runDoctor(dirArg: string | undefined, env: DoctorEnv = realEnv()): Promise<Check[]> {
  const dir = resolve(dirArg ?? ".");
  const { check: programCheck, program } = checkProgram(dir);
  const checks: Check[] = [...checkGit(env, dir), checkNode(env), checkSandbox(env, program), programCheck];
  if (program) {
    let researchers: { who: string; config: AgentConfig }[] = [];
    try {
      researchers = researchersOf(program);
    } catch (err) {
      if (!(err instanceof AutolabError)) throw err;
      checks.push({ name: "org", status: "fail", detail: err.message, ...fixOf(err) });
      researchers = [{ who: "agent", config: program.agent }];
    }
    for (const r of researchers) checks.push(...(await checkResearcher(env, program, r.who, r.config)));
    checks.push(...(await checkJudges(env, program)));
  }
  checks.push(checkNotebook(dir), checkGpus(env, program));
  return checks;
}

function fixOf(err: AutolabError): { fix?: string } {
  return err.hint ? { fix: err.hint } : {};
}

function firstLine(s: string): string {
  return s.trim().split("\n")[0] ?? "";
}
