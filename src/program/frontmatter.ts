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
