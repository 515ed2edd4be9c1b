// The published package as a user gets it: `npm pack` (prepack builds dist/), the tarball
// installed into an empty project from the registry (one `npm install`: minutes on a slow
// network), then the installed `autolab`. It must run compiled JavaScript only — Node does not
// strip types inside node_modules — and must not pull in the six agent CLIs.
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findOnPath } from "../src/runner/sandbox.ts";
import { REPO_ROOT } from "./helpers/toy-project.ts";

const work = mkdtempSync(join(tmpdir(), "autolab-package-"));
const project = join(work, "project");
const installed = join(project, "node_modules", "autolab");
// The Node running the tests (24) first, as a user's own Node would be; npm and npx beside it.
const PATH = `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ""}`;
const env = { ...process.env, PATH, npm_config_update_notifier: "false", NO_COLOR: "1" };
const AGENT_CLI_PACKAGES = Object.keys(
  (
    JSON.parse(readFileSync(join(REPO_ROOT, "agent-clis", "package.json"), "utf8")) as {
      dependencies: Record<string, string>;
    }
  ).dependencies,
);

function sh(cmd: string, args: string[], cwd: string, extra: NodeJS.ProcessEnv = {}) {
  const r = spawnSync(cmd, args, { cwd, env: { ...env, ...extra }, encoding: "utf8", timeout: 540_000 });
  return { code: r.status, out: `${r.stdout}${r.stderr}`, stdout: r.stdout };
}

/** Every file under `dir` (relative), following no links. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)));
}

beforeAll(() => {
  const pack = sh("npm", ["pack", "--pack-destination", work, "--loglevel=error"], REPO_ROOT);
  expect(pack.code, pack.out).toBe(0);
  const tgz = readdirSync(work).find((f) => f.endsWith(".tgz"));
  expect(tgz).toBeDefined();
  execFileSync("mkdir", ["-p", project]);
  writeFileSync(join(project, "package.json"), '{ "name": "user-project", "private": true }\n');
  const install = sh(
    "npm",
    ["install", join(work, tgz ?? ""), "--no-audit", "--no-fund", "--loglevel=error"],
    project,
  );
  expect(install.code, install.out).toBe(0);
}, 600_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("the package from the registry", () => {
  it("ships compiled JavaScript with declarations, no TypeScript sources but the examples", () => {
    const files = filesUnder(installed);
    expect(files).toContain("dist/cli/main.js");
    expect(files).toContain("dist/index.d.ts");
    expect(files).toContain("dist/server/assets/app.js");
    expect(files).toContain("examples/tiny-lm/gitignore");
    expect(existsSync(join(installed, "src"))).toBe(false);
    const ts = files.filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts") && !f.startsWith("examples/"));
    expect(ts).toEqual([]);
    const pkg = JSON.parse(readFileSync(join(installed, "package.json"), "utf8"));
    expect(pkg.engines.node).toBe(">=24");
    expect(pkg.exports["."].default).toBe("./dist/index.js");
  });

  it("type-checks a TypeScript program that imports it (the declarations resolve)", () => {
    const dir = join(project, "ts-user");
    execFileSync("mkdir", ["-p", dir]);
    writeFileSync(
      join(dir, "use.ts"),
      'import { type Agent, AutolabError, createRun } from "autolab";\n' +
        'const halver: Agent = { name: "h", async propose() { return { hypothesis: "h", mechanism: "m" }; } };\n' +
        "export const used = [createRun, halver, AutolabError];\n" +
        "// @ts-expect-error: not part of the library's surface\n" +
        'import { nothing } from "autolab";\n' +
        "export const bad = nothing;\n",
    );
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "es2024",
          module: "nodenext",
          moduleResolution: "nodenext",
          strict: true,
          noEmit: true,
          skipLibCheck: false,
          types: ["node"],
          typeRoots: [join(REPO_ROOT, "node_modules", "@types")],
        },
        files: ["use.ts"],
      }),
    );
    const tsc = sh(join(REPO_ROOT, "node_modules", ".bin", "tsc"), ["-p", dir], dir);
    expect(tsc.code, tsc.out).toBe(0);
  });

  it("does not install the agent CLIs (nor the pinned Node of the checkout)", () => {
    const all = readdirSync(join(project, "node_modules"), { recursive: true })
      .map(String)
      .filter((p) => p.split("/").length <= 3);
    for (const name of [...AGENT_CLI_PACKAGES, "node"]) {
      expect(
        all.filter((p) => p === name || p.endsWith(`node_modules/${name}`)),
        name,
      ).toEqual([]);
    }
  });

  it("npx autolab --version and init run the compiled code only (type stripping off)", () => {
    // With type stripping disabled, importing any .ts file would fail.
    const noTs = { NODE_OPTIONS: "--no-experimental-strip-types" };
    const v = sh("npx", ["--no-install", "autolab", "--version"], project, noTs);
    expect(v.code, v.out).toBe(0);
    expect(v.stdout.trim()).toBe(JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")).version);

    const init = sh("npx", ["--no-install", "autolab", "init", "lm", "--example", "tiny-lm"], project, noTs);
    expect(init.code, init.out).toBe(0);
    expect(init.stdout).toMatch(
      /Created .*\.gitignore.*program\.md.*\(new git repository, first commit made\)/,
    );
    const lm = join(project, "lm");
    // The example's .gitignore (shipped as gitignore) keeps the node_modules link out of git.
    expect(readFileSync(join(lm, ".gitignore"), "utf8")).toMatch(/node_modules/);
    const tracked = execFileSync("git", ["ls-files"], { cwd: lm, encoding: "utf8" }).split("\n");
    expect(tracked).toContain("train.ts");
    expect(tracked).not.toContain("node_modules");
    expect(existsSync(join(lm, "node_modules", "@stdlib", "datasets-moby-dick", "package.json"))).toBe(true);

    const doctor = sh("npx", ["--no-install", "autolab", "doctor", "lm"], project, noTs);
    expect(doctor.stdout).toMatch(/^ok {4}program: .*\(tiny-lm\)$/m);

    // An agent CLI preset loads from dist/ (presets/*.js) and, missing, names its pinned install.
    const program = join(lm, "program.md");
    writeFileSync(program, readFileSync(program, "utf8").replace(/^agent: builtin$/m, "agent: claude"));
    const bare = `${dirname(process.execPath)}${delimiter}/usr/bin${delimiter}/bin`;
    const claude = sh("npx", ["--no-install", "autolab", "doctor", "lm"], project, { ...noTs, PATH: bare });
    if (findOnPath("claude", bare)) {
      expect(claude.stdout).toMatch(/^ok {4}researcher claude \(agent\): installed/m);
    } else {
      expect(claude.code, claude.out).toBe(1);
      expect(claude.stdout).toMatch(
        /^FAIL {2}researcher claude \(agent\): `claude` is not installed.*\n {6}fix: Install it: npm install -g @anthropic-ai\/claude-code@\d+\.\d+\.\d+$/m,
      );
    }
  });

  // Debian's Node 20 where it is installed (CI's machines): the package has no Node of its own.
  const systemNode = "/usr/bin/node";
  const systemMajor = existsSync(systemNode)
    ? Number(
        spawnSync(systemNode, ["--version"], { encoding: "utf8" }).stdout.replace(/^v/, "").split(".")[0],
      )
    : 0;
  it.skipIf(!(systemMajor > 0 && systemMajor < 24))(
    "an older Node gets a message naming the fix, not a stack",
    () => {
      const r = sh(systemNode, [join(project, "node_modules", ".bin", "autolab"), "--version"], project);
      expect(r.code).toBe(1);
      expect(r.out).toMatch(
        /^autolab needs Node\.js 24 or newer; this is v\d+\.\d+\.\d+ \(\/usr\/bin\/node\)\.$/m,
      );
      expect(r.out).toMatch(
        /^Install Node\.js 24 LTS \(https:\/\/nodejs\.org\/, or `nvm install 24`\), then run autolab with it\.$/m,
      );
      expect(r.out).not.toMatch(/^\s{4}at /m);
    },
  );

  it("npx autolab demo runs tiny-lm to the end", () => {
    const demo = sh(
      "npx",
      ["--no-install", "autolab", "demo", "-n", "1", "-b", "2s", "--dir", join(work, "demo")],
      project,
    );
    expect(demo.code, demo.out).toBe(0);
    expect(demo.stdout).toMatch(/Run demo stopped: reached --max-experiments 1\./);
    expect(demo.stdout).toMatch(/val_bpb: baseline \d+\.\d+/);
  });
});
