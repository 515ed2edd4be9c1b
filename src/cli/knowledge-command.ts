import { knowledgeStats, searchPriorWork } from "../app/prior-work.ts";
import { AutolabError } from "../core/errors.ts";
import { priorWorkLines } from "../core/views.ts";
import { safeJson, safeText } from "./safe-text.ts";

/** `autolab knowledge search <query…>`: the closest prior results of every run on this machine. */
export function knowledgeSearchCommand(words: string[], flags: { k?: number; json?: boolean }): void {
  const query = words.join(" ");
  if (!query.trim()) {
    throw new AutolabError(
      "BAD_FLAG",
      "knowledge search needs words to look for.",
      'autolab knowledge search "learning rate warmup"',
    );
  }
  const hits = searchPriorWork(query, flags.k ?? 10);
  if (flags.json) {
    process.stdout.write(`${safeJson(JSON.stringify(hits, null, 2))}\n`);
    return;
  }
  if (!hits.length) {
    process.stdout.write(`${safeText(`No prior results match "${query}" (${storeLine()}).`)}\n`);
    return;
  }
  // Texts are other runs' researchers': escaped by priorWorkLines, and by safeText for the terminal.
  process.stdout.write(`${safeText(priorWorkLines(hits).join("\n"))}\n`);
}

/** `autolab knowledge stats`: where the store is, and how much it holds. */
export function knowledgeStatsCommand(flags: { json?: boolean }): void {
  const s = knowledgeStats();
  if (flags.json) {
    process.stdout.write(`${safeJson(JSON.stringify(s, null, 2))}\n`);
    return;
  }
  if (!s.exists) {
    process.stdout.write(`${safeText(storeLine())}\n`);
    return;
  }
  process.stdout.write(
    `${safeText(`Knowledge store ${s.path}: ${s.entries} results from ${s.runs} run${s.runs === 1 ? "" : "s"} of ${s.projects} project${s.projects === 1 ? "" : "s"} (search: ${s.search === "fts5" ? "SQLite FTS5, bm25" : "a word scan: this SQLite has no FTS5"}).`)}\n`,
  );
}

function storeLine(): string {
  const s = knowledgeStats();
  if (!s.path) return "prior work is off: AUTOLAB_KNOWLEDGE=off";
  if (!s.exists) return `no knowledge store yet at ${s.path}: runs record their decided experiments there`;
  return `${s.entries} results in ${s.path}`;
}
