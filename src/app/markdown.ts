/**
 * Text the harness did not write (hypotheses, mechanisms, reasons, role and metric names, the
 * program's name) put into Markdown. Markdown viewers render inline HTML and follow links, so
 * such text goes through exactly one of these two before it is written into a .md file:
 *
 * - `mdText`: inline text, in a paragraph, a list item or a table cell. One line (newlines
 *   would end a table row or a list item, or start a heading); HTML special characters become
 *   entities (`<img onerror=…>` shows as text); the characters of Markdown's syntax that change
 *   what text becomes are backslash-escaped, so `[x](javascript:…)`, `![](…)`, a backtick
 *   opening a code span and a `|` ending a table cell all show as typed. Emphasis (`*`, `_`) is
 *   left alone: it changes no structure, and knob names are full of underscores.
 * - `mdCode`: a code span. Nothing inside one is parsed, so it needs no escaping, only a
 *   fence of backticks longer than any run of backticks in the text.
 */

/**
 * Links and images (`[`, `]`), code spans, table cells, and the backslash itself (so no escape
 * here can be undone by the text). CommonMark lets any ASCII punctuation be backslash-escaped.
 */
const MD_PUNCTUATION = /[\\`[\]|]/g;
const HTML: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function mdText(s: string): string {
  return oneLine(s)
    .replace(MD_PUNCTUATION, (c) => `\\${c}`)
    .replace(/[&<>"']/g, (c) => HTML[c] as string);
}

export function mdCode(s: string): string {
  const text = oneLine(s);
  let longest = 0;
  for (const run of text.match(/`+/g) ?? []) longest = Math.max(longest, run.length);
  const fence = "`".repeat(longest + 1);
  // A space each side keeps a backtick at either end out of the fence (CommonMark strips one).
  const pad = text.startsWith("`") || text.endsWith("`") ? " " : "";
  return `${fence}${pad}${text}${pad}${fence}`;
}

/** Line breaks of any kind (and other control characters) as single spaces. */
function oneLine(s: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it removes
  return s.replace(/[\u0000-\u001f\u007f\u2028\u2029]+/g, " ");
}
