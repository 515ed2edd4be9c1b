/**
 * The hub's own git repository (docs/hub.md "The hub's API"): a bare repository in the hub's
 * data directory holding the root commit (the project's HEAD when the hub first started) and
 * every candidate a claim brought, each under `refs/hub/c/<commit>`.
 *
 * A contributor's bundle is untrusted bytes. It is only ever read by `git bundle list-heads`
 * and `git fetch` into a temporary ref (fetch checks the prerequisites, as `git bundle verify`
 * would, and the pack: one git call fewer per claim), always through
 * src/workspace/git.ts (SAFE_GIT_CONFIG: no hooks, no fsmonitor; a bare repository has no work
 * tree, so no filter or checkout ever runs). Admission refuses what is not one clean step from
 * the parent: a file that is not a bundle, prerequisites the hub lacks, zero or several heads,
 * a head that is not a commit descending from the parent, more than `MAX_COMMITS` commits, a
 * submodule (gitlink) or a symbolic link pointing outside the project among the changed paths;
 * then the scope: every changed path editable, protected files byte-identical (blob ids and
 * modes). A refused bundle leaves no ref behind.
 */
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, readFile, rename, rm } from "node:fs/promises";
import { join, posix } from "node:path";
import { AutolabError } from "../core/errors.ts";
import { fileRules } from "../core/file-patterns.ts";
import type { Program } from "../core/types.ts";
import { parseProgram } from "../program/index.ts";
import { git, gitRaw } from "../workspace/git.ts";

/** A candidate may bring at most this many commits after its parent. */
export const MAX_COMMITS = 100;
/** At most this many paths are named in a refusal (the count says how many more). */
const NAMED = 20;

export interface Admitted {
  commit: string;
  tree: string;
  subject: string;
  changed: string[];
}
export type Admission =
  | { ok: true; value: Admitted }
  | { ok: false; code: "bundle" | "scope" | "protected"; reason: string };

const OID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
/** A ref name a bundle may carry that we pass on to git fetch (nothing that looks like an option). */
const REF_NAME = /^(?:HEAD|refs\/[A-Za-z0-9._/-]{1,200})$/;

function named(paths: readonly string[]): string {
  const shown = paths.slice(0, NAMED).map((p) => JSON.stringify(p));
  return paths.length > NAMED ? `${shown.join(", ")} and ${paths.length - NAMED} more` : shown.join(", ");
}

function firstLine(text: string): string {
  return (
    text
      .split("\n")
      .find((l) => l.trim() !== "")
      ?.trim() ?? ""
  );
}

function lastLine(text: string): string {
  return (
    text
      .trim()
      .split("\n")
      .filter((l) => l.trim() !== "")
      .at(-1)
      ?.trim() ?? ""
  );
}

/** At most this many characters of a commit's subject are kept (it is untrusted text). */
export const SUBJECT_CHARS = 200;

/**
 * A commit subject as the hub stores and shows it: control characters (NUL included, which
 * PostgreSQL text cannot hold) replaced by U+FFFD, at most SUBJECT_CHARS characters.
 */
export function cleanSubject(raw: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it removes
  const text = raw.replace(/\n$/, "").replace(/[\u0000-\u001f\u007f]/g, "\ufffd");
  const chars = [...text];
  return chars.length > SUBJECT_CHARS ? `${chars.slice(0, SUBJECT_CHARS - 1).join("")}…` : text;
}

/** The project a hub starts from: a git repository with a commit. */
async function checkProject(projectDir: string): Promise<void> {
  const inside = await gitRaw(projectDir, ["rev-parse", "--is-inside-work-tree"]);
  if (inside.code !== 0 || inside.stdout.trim() !== "true")
    throw new AutolabError(
      "NOT_A_GIT_REPO",
      `${projectDir} is not in a git repository.`,
      "A hub serves a project under git: run `git init && git add -A && git commit -m init` there first.",
    );
  if ((await gitRaw(projectDir, ["rev-parse", "--verify", "-q", "HEAD^{commit}"])).code !== 0)
    throw new AutolabError(
      "NO_COMMITS",
      `the repository of ${projectDir} has no commits.`,
      "Commit the project (with its program.md) before starting the hub.",
    );
}

export class HubRepo {
  readonly gitDir: string;
  readonly rootCommit: string;
  readonly program: Program;
  /** program.md's name within the project directory. */
  readonly programFile: string;
  /** The project's directory within the repository ("" at the top, else "sub/dir/"). */
  readonly prefix: string;
  readonly programText: string;
  readonly #bundleCache = new Map<string, Promise<Buffer>>();
  readonly #outDir: string;

  private constructor(o: {
    gitDir: string;
    rootCommit: string;
    program: Program;
    programFile: string;
    prefix: string;
    programText: string;
    outDir: string;
  }) {
    this.gitDir = o.gitDir;
    this.rootCommit = o.rootCommit;
    this.program = o.program;
    this.programFile = o.programFile;
    this.prefix = o.prefix;
    this.programText = o.programText;
    this.#outDir = o.outDir;
  }

  /**
   * DIR/repo.git (bare); on first open imports `projectDir`'s HEAD (a plain fetch into
   * `refs/hub/root`) and returns it as rootCommit; later opens get rootCommit from the caller
   * (hub_meta). The project's directory within its repository is recorded in the bare
   * repository's config (`autolab.hubPrefix`).
   */
  static async open(o: { dataDir: string; projectDir?: string; rootCommit?: string }): Promise<HubRepo> {
    const gitDir = join(o.dataDir, "repo.git");
    await mkdir(o.dataDir, { recursive: true });
    let rootCommit = o.rootCommit;
    if (rootCommit === undefined && o.projectDir) await checkProject(o.projectDir);
    if (!existsSync(join(gitDir, "HEAD"))) {
      if (!o.projectDir)
        throw new Error(`HubRepo.open: ${gitDir} does not exist and no projectDir was given`);
      const format = (await git(o.projectDir, ["rev-parse", "--show-object-format"])).trim() || "sha1";
      await git(o.dataDir, ["init", "-q", "--bare", `--object-format=${format}`, gitDir]);
    }
    if (rootCommit === undefined) {
      if (!o.projectDir)
        throw new Error("HubRepo.open: give rootCommit (hub_meta) or projectDir (first start)");
      const top = (await git(o.projectDir, ["rev-parse", "--show-toplevel"])).trim();
      const prefix = (await git(o.projectDir, ["rev-parse", "--show-prefix"])).trim();
      const head = (await git(o.projectDir, ["rev-parse", "--verify", "HEAD^{commit}"])).trim();
      await git(gitDir, ["fetch", "-q", "--no-tags", top, `+${head}:refs/hub/root`]);
      await git(gitDir, ["config", "autolab.hubPrefix", prefix === "" ? "/" : prefix]);
      rootCommit = head;
    }
    if (!OID.test(rootCommit))
      throw new Error(`HubRepo.open: ${JSON.stringify(rootCommit)} is not a commit id`);
    await git(gitDir, ["update-ref", `refs/hub/c/${rootCommit}`, rootCommit]);
    const recorded = (await gitRaw(gitDir, ["config", "--get", "autolab.hubPrefix"])).stdout.trim();
    const prefix = recorded === "/" || recorded === "" ? "" : recorded;
    const programFile = "program.md";
    const shown = await gitRaw(gitDir, ["show", `${rootCommit}:${prefix}${programFile}`]);
    if (shown.code !== 0)
      throw new AutolabError(
        "PROGRAM_UNCOMMITTED",
        `the hub's root commit ${rootCommit} has no ${prefix}${programFile}.`,
        "Commit program.md in the project (git add program.md && git commit) before starting the hub: the hub serves the committed program.",
      );
    const programText = shown.stdout;
    const program = parseProgram(programText, join(o.projectDir ?? gitDir, programFile));
    const outDir = join(o.dataDir, "out");
    await mkdir(outDir, { recursive: true });
    return new HubRepo({ gitDir, rootCommit, program, programFile, prefix, programText, outDir });
  }

  async has(commit: string): Promise<boolean> {
    if (!OID.test(commit)) return false;
    return (await gitRaw(this.gitDir, ["cat-file", "-e", `${commit}^{commit}`])).code === 0;
  }

  /**
   * Checks the bundle at `bundlePath` as a candidate on `parent` and, when it passes, fetches its
   * head into `refs/hub/c/<commit>`. Never throws for anything the bundle holds.
   */
  async admit(bundlePath: string, parent: string): Promise<Admission> {
    const refuse = (reason: string): Admission => ({ ok: false, code: "bundle", reason });
    if (!OID.test(parent) || !(await this.has(parent)))
      return refuse(`the parent ${parent} is not in the hub's repository`);
    const listed = await gitRaw(this.gitDir, ["bundle", "list-heads", bundlePath]);
    if (listed.code !== 0)
      return refuse(
        `not a git bundle the hub can read: ${firstLine(listed.stderr) || "git bundle list-heads failed"}`,
      );
    const heads = listed.stdout
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map((l) => {
        const sp = l.indexOf(" ");
        return sp < 0 ? { oid: l.trim(), ref: "" } : { oid: l.slice(0, sp), ref: l.slice(sp + 1).trim() };
      });
    const distinct = new Set(heads.map((h) => h.oid));
    if (heads.length === 0 || distinct.size !== 1)
      return refuse(
        `the bundle must hold exactly one head (the candidate commit), it holds ${distinct.size}; bundle one branch: git bundle create <file> ${parent}..HEAD`,
      );
    const head = heads.find((h) => REF_NAME.test(h.ref));
    if (!head || !OID.test(head.oid))
      return refuse("the bundle's head has no usable ref name (use refs/heads/<name> or HEAD)");
    const tmp = `refs/hub/incoming/${randomBytes(8).toString("hex")}`;
    try {
      return await this.#examine(bundlePath, parent, head, tmp);
    } catch (err) {
      // git failing on what a bundle holds (output past its buffer, a repository it cannot
      // read) refuses the bundle: nothing a contributor sends makes the hub fail.
      return refuse(
        `the hub could not examine the bundle: ${err instanceof Error ? lastLine(err.message) : String(err)}`,
      );
    } finally {
      await gitRaw(this.gitDir, ["update-ref", "-d", tmp]);
    }
  }

  async #examine(
    bundlePath: string,
    parent: string,
    head: { oid: string; ref: string },
    tmp: string,
  ): Promise<Admission> {
    const refuse = (reason: string): Admission => ({ ok: false, code: "bundle", reason });
    const fetched = await gitRaw(this.gitDir, [
      "fetch",
      "-q",
      "--no-tags",
      "--no-write-fetch-head",
      "--no-recurse-submodules",
      bundlePath,
      `+${head.ref}:${tmp}`,
    ]);
    if (fetched.code !== 0) {
      // git fetch checks the prerequisites (what `git bundle verify` would) and the pack.
      if (/lacks these prerequisite/i.test(fetched.stderr)) {
        const missing =
          fetched.stderr
            .match(/[0-9a-f]{40,64}/g)
            ?.slice(0, 3)
            .join(", ") ?? "?";
        return refuse(
          `the bundle needs commits the hub does not have (missing ${missing}); bundle the commits after the hub's parent (git bundle create <file> ${parent}..HEAD)`,
        );
      }
      return refuse(`the bundle could not be fetched: ${lastLine(fetched.stderr)}`);
    }
    // One call for the type, the tree and the subject: %H is the commit the head peels to, so a
    // head that is a tag (or no commit at all) shows as another id (or fails).
    const shown = await gitRaw(this.gitDir, [
      "log",
      "-1",
      "--no-show-signature",
      "--format=%H%x00%T%x00%s",
      head.oid,
    ]);
    const [peeled = "", tree = "", rawSubject = ""] = shown.stdout.split("\0");
    if (shown.code !== 0 || peeled !== head.oid) return refuse("the bundle's head is not a commit");
    const commit = head.oid;
    if (commit === parent) return refuse("the bundle's head is the parent itself: no change to claim");
    const ancestor = await gitRaw(this.gitDir, ["merge-base", "--is-ancestor", parent, commit]);
    if (ancestor.code !== 0)
      return refuse(`the bundle's head ${commit} does not descend from the parent ${parent}`);
    const count = Number((await git(this.gitDir, ["rev-list", "--count", `${parent}..${commit}`])).trim());
    if (!(count <= MAX_COMMITS))
      return refuse(
        `the bundle brings ${count} commits after the parent; at most ${MAX_COMMITS} (squash them)`,
      );
    const subject = cleanSubject(rawSubject);
    const scope = await this.#scope(parent, commit);
    if (!scope.ok) return scope;
    await git(this.gitDir, ["update-ref", `refs/hub/c/${commit}`, commit]);
    return { ok: true, value: { commit, tree, subject, changed: scope.changed } };
  }

  /** The paths changed from `parent` to `commit` against program.md's lists. */
  async #scope(
    parent: string,
    commit: string,
  ): Promise<
    { ok: true; changed: string[] } | { ok: false; code: "bundle" | "scope" | "protected"; reason: string }
  > {
    const out = await git(this.gitDir, [
      "-c",
      "diff.renames=false",
      "diff-tree",
      "-r",
      "-z",
      "--no-renames",
      "--no-ext-diff",
      "--no-textconv",
      "--raw",
      parent,
      commit,
    ]);
    // -z --raw: ":<old mode> <new mode> <old oid> <new oid> <status>\0<path>\0" per change.
    const parts = out.split("\0");
    const entries: { newMode: string; newOid: string; path: string }[] = [];
    for (let i = 0; i + 1 < parts.length; i += 2) {
      const meta = parts[i] as string;
      const path = parts[i + 1] as string;
      if (!meta.startsWith(":")) break;
      const [, newMode = "", , newOid = ""] = meta.slice(1).split(" ");
      entries.push({ newMode, newOid, path });
    }
    const changed = entries.map((e) => e.path);
    const gitlinks = entries.filter((e) => e.newMode === "160000").map((e) => e.path);
    if (gitlinks.length > 0)
      return {
        ok: false,
        code: "bundle",
        reason: `the candidate adds submodules (gitlinks): ${named(gitlinks)}`,
      };
    const outside: string[] = [];
    for (const e of entries.filter((x) => x.newMode === "120000")) {
      const size = Number((await gitRaw(this.gitDir, ["cat-file", "-s", e.newOid])).stdout.trim());
      if (!(size <= 4096)) {
        outside.push(`${e.path} -> (${size} bytes)`);
        continue;
      }
      const target = (await gitRaw(this.gitDir, ["cat-file", "blob", e.newOid])).stdout;
      if (!this.#linkInside(e.path, target)) outside.push(`${e.path} -> ${target}`);
    }
    if (outside.length > 0)
      return {
        ok: false,
        code: "bundle",
        reason: `the candidate has symbolic links pointing outside the project: ${named(outside)}`,
      };
    const rules = fileRules(this.program.files);
    const protectedPaths: string[] = [];
    const outOfScope: string[] = [];
    for (const path of changed) {
      if (this.prefix !== "" && !path.startsWith(this.prefix)) {
        outOfScope.push(path);
        continue;
      }
      const rel = path.slice(this.prefix.length);
      if (rel === this.programFile || rules.protected(rel) || rules.holdout(rel)) protectedPaths.push(rel);
      else if (!rules.editable(rel)) outOfScope.push(rel);
    }
    if (protectedPaths.length > 0)
      return {
        ok: false,
        code: "protected",
        reason: `protected files differ from the parent's: ${named(protectedPaths)}; they must stay byte-identical`,
      };
    if (outOfScope.length > 0)
      return {
        ok: false,
        code: "scope",
        reason: `files outside program.md's editable list changed: ${named(outOfScope)}; only ${this.program.files.editable.map((p) => JSON.stringify(p)).join(", ") || "(nothing)"} may change`,
      };
    return { ok: true, changed };
  }

  /** Whether a link at `path` (repository-relative) with `target` resolves inside the project. */
  #linkInside(path: string, target: string): boolean {
    if (target === "" || target.startsWith("/") || target.includes("\0")) return false;
    const resolved = posix.normalize(posix.join(posix.dirname(path), target));
    if (resolved === ".." || resolved.startsWith("../") || resolved.startsWith("/")) return false;
    if (this.prefix !== "" && !`${resolved}/`.startsWith(this.prefix)) return false;
    const segments = resolved.split("/");
    return !segments.includes(".git") && !segments.includes(".autolab");
  }

  /**
   * A bundle of the commit's whole history, its one ref `refs/hub/c/<commit>`. Made once per
   * commit and kept in DIR/out (a commit never changes).
   */
  bundleOf(commit: string): Promise<Buffer> {
    if (!OID.test(commit)) return Promise.reject(new Error(`not a commit id: ${commit}`));
    let p = this.#bundleCache.get(commit);
    if (!p) {
      p = this.#makeBundle(commit);
      this.#bundleCache.set(commit, p);
      p.catch(() => this.#bundleCache.delete(commit));
      if (this.#bundleCache.size > 64) {
        const first = this.#bundleCache.keys().next().value;
        if (first !== undefined && first !== commit) this.#bundleCache.delete(first);
      }
    }
    return p;
  }

  async #makeBundle(commit: string): Promise<Buffer> {
    const file = join(this.#outDir, `${commit}.bundle`);
    if (existsSync(file)) return readFile(file);
    const ref = `refs/hub/c/${commit}`;
    if ((await gitRaw(this.gitDir, ["rev-parse", "--verify", "-q", ref])).code !== 0)
      throw new Error(`commit ${commit} is not one the hub admitted`);
    const tmp = `${file}.${randomBytes(6).toString("hex")}.tmp`;
    try {
      await git(this.gitDir, ["bundle", "create", "-q", tmp, ref]);
      await rename(tmp, file);
    } finally {
      await rm(tmp, { force: true });
    }
    return readFile(file);
  }
}
