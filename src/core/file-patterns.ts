/**
 * The one matcher for program.md's `files:` lists (editable, protected, holdout): every place
 * that checks a path against them — the scope check of a candidate, protected-file hashing and
 * tamper checks, the sandbox's binds, the agents' file lists — asks this module.
 *
 * An entry is a path relative to the project root, a directory, or a glob. A glob is anchored
 * at the project root, as in a shell (not as in .gitignore): `*` and `?` stay within one path
 * segment, `**` spans any number of segments, `[abc]` / `[!abc]` is one character of a class,
 * `{a,b}` is either alternative. An entry that matches a directory covers everything under it:
 * `data`, `data/` and `data/*` all cover `data/train/x.csv`.
 *
 * Hostile by default: nothing matches a path outside the project (`../x`, an absolute path) or
 * under `.git` or `.autolab`, whatever the pattern; a file matched by `protected` or `holdout`
 * is never editable, even when an editable glob matches it too.
 */
import { type Dirent, lstatSync, readdirSync } from "node:fs";
import { join, posix } from "node:path";

/** Directories no pattern ever matches: git's and the notebook's. */
const OFF_LIMITS = new Set([".git", ".autolab"]);

/** Whether an entry is a glob (as opposed to a plain path: a file or a directory). */
export function isGlob(pattern: string): boolean {
  return /[*?[{]/.test(pattern);
}

/**
 * "./src/train.ts" → "src/train.ts", "data/" → "data", "./" → ".": one spelling per path, for
 * comparisons. The schema gives every `files:` entry this spelling; the matchers apply it again
 * for callers that built a Program themselves.
 */
export function normalizePath(p: string): string {
  const n = posix.normalize(p.trim().replace(/\\/g, "/")).replace(/^(?:\.\/)+/, "");
  return (n.length > 1 ? n.replace(/\/+$/, "") : n) || ".";
}

/** "a/{b,c}/d" → ["a/b/d", "a/c/d"] (one level of braces, as validated by patternProblem). */
function expandBraces(pattern: string): string[] {
  const open = pattern.indexOf("{");
  if (open < 0) return [pattern];
  const close = pattern.indexOf("}", open);
  if (close < 0) return [pattern];
  const head = pattern.slice(0, open);
  const tail = pattern.slice(close + 1);
  return pattern
    .slice(open + 1, close)
    .split(",")
    .flatMap((alt) => expandBraces(`${head}${alt}${tail}`));
}

/**
 * Why an entry cannot be a pattern, or undefined. Expects a normalized, relative path (the
 * schema rejects absolute paths and `..` before this): checks the glob syntax and the brace
 * alternatives (`{..,x}` would leave the project), and refuses `.git` and `.autolab`.
 */
export function patternProblem(pattern: string): string | undefined {
  const quoted = JSON.stringify(pattern);
  let depth = 0;
  let inClass = false;
  for (const c of pattern) {
    if (inClass) {
      if (c === "]") inClass = false;
      else if (c === "/")
        return `${quoted} has a "/" inside [...]: a character class matches one character of a name`;
      continue;
    }
    if (c === "[") inClass = true;
    else if (c === "{") {
      if (depth > 0) return `${quoted} nests braces: write {a,b} without another { inside`;
      depth++;
    } else if (c === "}") {
      if (depth === 0) return `${quoted} has a "}" without its "{"`;
      depth--;
    }
  }
  if (inClass) return `${quoted} has a "[" without its "]"`;
  if (depth > 0) return `${quoted} has a "{" without its "}"`;
  for (const alt of expandBraces(pattern)) {
    const segments = alt.split("/");
    if (alt.startsWith("/") || segments.includes("..")) {
      return `${quoted} leaves the project: every alternative must stay inside it`;
    }
    const special = segments.find((s) => OFF_LIMITS.has(s));
    if (special)
      return `${quoted} names ${special}/, which autolab keeps to itself: no file under it can be listed`;
    if (segments.some((s) => s.includes("**") && s !== "**")) {
      return `${quoted}: ** must be a whole path segment (src/**/*.py), not part of a name`;
    }
  }
  return undefined;
}

function segmentSource(segment: string): string {
  let out = "";
  for (let i = 0; i < segment.length; i++) {
    const c = segment[i] as string;
    if (c === "*") out += "[^/]*";
    else if (c === "?") out += "[^/]";
    else if (c === "[") {
      const end = segment.indexOf("]", i + 1);
      let body = segment.slice(i + 1, end);
      const negate = body.startsWith("!") || body.startsWith("^");
      if (negate) body = body.slice(1);
      out += `[${negate ? "^/" : ""}${body.replace(/[\\\]^]/g, "\\$&")}]`;
      i = end;
    } else out += c.replace(/[.+^${}()|\\]/g, "\\$&");
  }
  return out;
}

/** The regular expression of one brace-free pattern: the path itself or anything under it. */
function patternSource(pattern: string): string {
  const segments = pattern === "." ? ["**"] : pattern.split("/");
  let src = "";
  segments.forEach((s, i) => {
    const last = i === segments.length - 1;
    if (s === "**") src += last ? ".*" : "(?:[^/]+/)*";
    else src += segmentSource(s) + (last ? "" : "/");
  });
  return `^${src}(?:/.*)?$`;
}

/** Whether a project-relative path may be matched at all: inside the project, not under .git or .autolab. */
export function inProject(path: string): boolean {
  if (path === "" || path.startsWith("/")) return false;
  const segments = path.split("/");
  return !segments.some((s) => s === ".." || s === "." || s === "" || OFF_LIMITS.has(s));
}

/** A predicate over project-relative paths ("src/a.py"): true when some entry covers the path. */
export type PathMatcher = (path: string) => boolean;

/** One matcher for a list of entries (paths, directories, globs). */
export function fileMatcher(patterns: readonly string[]): PathMatcher {
  if (patterns.length === 0) return () => false;
  const re = new RegExp(patterns.map(normalizePath).flatMap(expandBraces).map(patternSource).join("|"), "s");
  return (path) => inProject(path) && re.test(path);
}

/** The three lists, with their precedence: protected and holdout beat editable. */
export interface FileRules {
  editable: PathMatcher;
  protected: PathMatcher;
  holdout: PathMatcher;
}

export function fileRules(files: {
  editable: readonly string[];
  protected: readonly string[];
  holdout: readonly string[];
}): FileRules {
  const editable = fileMatcher(files.editable);
  const prot = fileMatcher(files.protected);
  const holdout = fileMatcher(files.holdout);
  return { editable: (p) => editable(p) && !prot(p) && !holdout(p), protected: prot, holdout };
}

/**
 * The leading directories of a pattern that hold no glob ("src" for `src/**\/*.py`, "" for
 * `*.py`): where a search for its files starts (a git pathspec, a directory walk).
 */
export function literalBase(pattern: string): string {
  const segments = pattern.split("/");
  const i = segments.findIndex((s) => isGlob(s));
  return i < 0 ? pattern : segments.slice(0, i).join("/");
}

/**
 * The paths the patterns stand for under `root`, project-relative: a plain path as written
 * (whether or not it exists yet: a holdout file that setup makes later), and what a glob matches
 * right now. Each entry once, the outermost one (a matched directory stands for everything in
 * it and is not entered). Symbolic links are matched but never followed. For sandbox binds.
 */
export function matchedPaths(root: string, patterns: readonly string[]): string[] {
  const matches = fileMatcher(patterns);
  const found = new Set<string>();
  for (const pattern of patterns.map(normalizePath).flatMap(expandBraces)) {
    if (!isGlob(pattern)) {
      if (pattern === ".") found.add(pattern);
      else if (inProject(pattern)) found.add(pattern);
      continue;
    }
    // A pattern names its directory: the search starts there, and stays where it can match.
    const walk = (rel: string, isDir: boolean): void => {
      if (rel !== "" && matches(rel)) {
        found.add(rel);
        return;
      }
      if (!isDir || (rel !== "" && !mayDescend(pattern, rel))) return;
      let entries: Dirent[];
      try {
        entries = readdirSync(join(root, rel), { withFileTypes: true });
      } catch {
        return;
      }
      for (const e of entries) {
        const p = rel ? `${rel}/${e.name}` : e.name;
        if (inProject(p)) walk(p, e.isDirectory());
      }
    };
    const base = literalBase(pattern);
    if (base === "" || base === ".") walk("", true);
    else if (inProject(base)) {
      try {
        walk(base, lstatSync(join(root, base)).isDirectory());
      } catch {
        // Nothing there (yet).
      }
    }
  }
  if (found.has(".")) return ["."];
  const all = [...found];
  return all.filter((p) => !all.some((o) => p.startsWith(`${o}/`))).sort();
}

/** Whether entries under `dir` can match the pattern (its leading segments fit dir's, or it has a ** in time). */
function mayDescend(pattern: string, dir: string): boolean {
  const segs = pattern.split("/");
  const parts = dir.split("/");
  for (let i = 0; i < parts.length; i++) {
    const s = segs[i];
    if (s === undefined) return false;
    if (s === "**") return true;
    if (!new RegExp(`^${segmentSource(s)}$`, "s").test(parts[i] as string)) return false;
  }
  return true;
}

/** The regular files the patterns cover under `root`, project-relative (matched directories entered; links skipped). */
export function matchedFiles(
  root: string,
  patterns: readonly string[],
  keep: PathMatcher = () => true,
): string[] {
  const out: string[] = [];
  const visit = (rel: string): void => {
    let st: ReturnType<typeof lstatSync>;
    try {
      st = lstatSync(join(root, rel));
    } catch {
      return;
    }
    if (st.isFile()) {
      if (keep(rel)) out.push(rel);
    } else if (st.isDirectory()) {
      for (const name of readdirSync(join(root, rel)).sort()) {
        const p = rel === "." ? name : `${rel}/${name}`;
        if (inProject(p)) visit(p);
      }
    }
  };
  for (const p of matchedPaths(root, patterns)) visit(p);
  return out;
}
