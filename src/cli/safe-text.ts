/**
 * Text for the terminal (or a file a terminal will show): every renderer of the CLI passes
 * what it prints through here. Hypotheses, mechanisms, reasons, findings, log tails and agent
 * output are written by researchers and trials — untrusted — and an escape sequence in them
 * (ESC ] 0 ; title BEL, ESC [ 2 J, a C1 CSI) would otherwise retitle, clear or reprogram the
 * terminal of whoever reads the lab. Control characters become visible escapes (`\x1b`);
 * the CLI's own control codes (the live line, `watch`'s screen) are added after this.
 */

// C0 controls except tab and newline, DEL, and the C1 controls (U+0080–U+009F).
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const CONTROL_OR_NEWLINE = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f]/g;

function visible(c: string): string {
  return `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`;
}

/**
 * `text` with its control characters shown as `\xNN`. Newlines and tabs stay (multi-line
 * fields shown deliberately: `show`'s hypothesis, a log tail, a diff), and CRLF becomes LF;
 * with `oneLine` a newline is escaped too (a table cell, the live progress line).
 */
export function safeText(text: string, opts: { oneLine?: boolean } = {}): string {
  const s = text.replace(/\r\n/g, "\n");
  return s.replace(opts.oneLine ? CONTROL_OR_NEWLINE : CONTROL, visible);
}

/**
 * JSON text for the terminal: JSON.stringify already escapes C0 controls inside strings, but
 * not DEL or the C1 controls; they are written as `\u00NN`, the same string to a JSON parser.
 * (Outside strings JSON.stringify's output holds no such character.)
 */
export function safeJson(json: string): string {
  return json.replace(/[\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}
