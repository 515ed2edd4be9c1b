import { type Document, LineCounter, parseDocument } from "yaml";
import type { ErrorCode } from "../core/error-codes.ts";
import { AutolabError } from "../core/errors.ts";

/**
 * Splits program.md into its YAML frontmatter and markdown body. The frontmatter is the block
 * between a first line `---` and the next line `---` (or `...`); line numbers are kept so
 * that errors in the YAML can point at lines of the file.
 */

export type FrontmatterSplit =
  | {
      ok: true;
      yaml: string;
      /** 1-based line of the file on which the YAML text starts (2 for a file that begins with `---`). */
      yamlStartLine: number;
      body: string;
    }
  | { ok: false; problem: "missing" | "unclosed"; line: number };

const OPEN = /^---\s*$/;
const CLOSE = /^(?:---|\.\.\.)\s*$/;

export function splitFrontmatter(text: string): FrontmatterSplit {
  const lines = text.replace(/^\uFEFF/, "").split(/\r?\n/);
  // Blank lines before the opening `---` are tolerated (editors and generators add them).
  let open = 0;
  while (open < lines.length && (lines[open] ?? "").trim() === "") open++;
  if (open >= lines.length || !OPEN.test(lines[open] ?? "")) {
    return { ok: false, problem: "missing", line: open + 1 };
  }
  let close = open + 1;
  while (close < lines.length && !CLOSE.test(lines[close] ?? "")) close++;
  if (close >= lines.length) return { ok: false, problem: "unclosed", line: open + 1 };
  return {
    ok: true,
    yaml: lines.slice(open + 1, close).join("\n"),
    yamlStartLine: open + 2,
    body: lines
      .slice(close + 1)
      .join("\n")
      .replace(/^\s*\n/, "")
      .trimEnd(),
  };
}

/** Parsed frontmatter YAML with what error reports need: the document, its line counter, and file lines. */
export interface FrontmatterYaml {
  doc: Document.Parsed;
  lineCounter: LineCounter;
  /** A 1-based line of the YAML text → the line of the file. */
  toFileLine: (yamlLine: number | undefined) => number;
  /** The YAML as plain data (an empty frontmatter is an empty map); `agent: x` expanded to `{ backend: x }`. */
  raw: unknown;
}

/**
 * Parses the frontmatter of a program.md or role file. Invalid YAML throws AutolabError `code`
 * listing every error as file:line:col with the offending source line quoted once.
 */
export function parseFrontmatterYaml(
  split: Extract<FrontmatterSplit, { ok: true }>,
  path: string,
  code: ErrorCode,
): FrontmatterYaml {
  const lineCounter = new LineCounter();
  const doc = parseDocument(split.yaml, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const toFileLine = (yamlLine: number | undefined) => (yamlLine ?? 1) + split.yamlStartLine - 1;
  if (doc.errors.length > 0) {
    const sourceLines = split.yaml.split("\n");
    let shownLine = 0;
    const blocks = doc.errors.map((err) => {
      const pos = lineCounter.linePos(err.pos[0]);
      const source = sourceLines[pos.line - 1];
      const head = `  ${path}:${toFileLine(pos.line)}:${pos.col}  YAML: ${err.message}`;
      // Quote the offending source line once, under the first error on it.
      if (source === undefined || source.trim() === "" || pos.line === shownLine) return head;
      shownLine = pos.line;
      return `${head}\n      ${source}`;
    });
    throw new AutolabError(
      code,
      `${path}: the frontmatter is not valid YAML:\n${blocks.join("\n")}`,
      "check indentation (spaces, not tabs), closing brackets and quotes",
    );
  }
  const raw: unknown = doc.toJS() ?? {};
  // `agent: claude` is shorthand for `agent: { backend: claude }`: expanded before validation so
  // a misspelt backend is reported (and suggested) like any other enum value.
  if (raw && typeof raw === "object" && typeof (raw as { agent?: unknown }).agent === "string") {
    const r = raw as { agent: unknown };
    r.agent = { backend: r.agent };
  }
  return { doc, lineCounter, toFileLine, raw };
}
