import { mkdirSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { DatabaseSync, type SQLInputValue } from "node:sqlite";
import type {
  KnowledgeEntry,
  KnowledgeHit,
  KnowledgeSearchOptions,
  KnowledgeStats,
  KnowledgeStore,
} from "../core/knowledge.ts";
import { queryTerms } from "../core/knowledge.ts";
import { redactSecretsDeep } from "../core/secrets.ts";
import type { DecisionAction, Direction } from "../core/types.ts";

/**
 * Where this machine's knowledge store lives: $AUTOLAB_KNOWLEDGE (tests point it at a
 * temporary file; `off` turns prior work off everywhere), else
 * $XDG_DATA_HOME/autolab/knowledge.db, else ~/.local/share/autolab/knowledge.db.
 * Undefined when it is off.
 */
export function knowledgePath(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const given = env.AUTOLAB_KNOWLEDGE;
  if (given !== undefined && given !== "") return given === "off" ? undefined : given;
  const data = env.XDG_DATA_HOME || join(homedir(), ".local", "share");
  return join(data, "autolab", "knowledge.db");
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS entries (
  id INTEGER PRIMARY KEY,
  project TEXT NOT NULL,
  project_name TEXT NOT NULL,
  run TEXT NOT NULL,
  n INTEGER NOT NULL,
  date TEXT NOT NULL,
  hypothesis TEXT NOT NULL,
  mechanism TEXT,
  action TEXT NOT NULL,
  reason TEXT NOT NULL,
  metric TEXT NOT NULL,
  direction TEXT NOT NULL,
  value REAL,
  parent_value REAL,
  gain REAL,
  shared INTEGER NOT NULL DEFAULT 0,
  UNIQUE (project, run, n)
);`;

const FTS = `CREATE VIRTUAL TABLE IF NOT EXISTS entries_fts USING fts5(
  hypothesis, mechanism, reason, project_name, metric,
  content='entries', content_rowid='id', tokenize='porter unicode61')`;

/** The store's schema version (PRAGMA user_version). 2: `shared` (program.md `prior_work: machine`). */
const VERSION = 2;
/** Entries the fallback scan reads (the newest). */
const SCAN_LIMIT = 5000;

interface EntryRow {
  id: number;
  project: string;
  project_name: string;
  run: string;
  n: number;
  date: string;
  hypothesis: string;
  mechanism: string | null;
  action: string;
  reason: string;
  metric: string;
  direction: string;
  value: number | null;
  parent_value: number | null;
  gain: number | null;
  shared?: number;
  score?: number;
}

function toEntry(r: EntryRow): KnowledgeEntry {
  return {
    project: r.project,
    projectName: r.project_name,
    run: r.run,
    n: r.n,
    date: r.date,
    hypothesis: r.hypothesis,
    ...(r.mechanism !== null ? { mechanism: r.mechanism } : {}),
    action: r.action as DecisionAction,
    reason: r.reason,
    metric: r.metric,
    direction: r.direction as Direction,
    ...(r.value !== null ? { value: r.value } : {}),
    ...(r.parent_value !== null ? { parentValue: r.parent_value } : {}),
    ...(r.gain !== null ? { gain: r.gain } : {}),
    ...(r.shared ? { shared: true } : {}),
  };
}

export interface SqliteKnowledgeStoreOptions {
  /** false: never use FTS5 (the fallback scan, as on a SQLite built without it; the contract tests both). */
  fts?: boolean;
  /** Milliseconds to wait for another process's write lock (default 2000). */
  busyTimeoutMs?: number;
}

/**
 * The knowledge store in one SQLite file shared by every run on the machine: a table of
 * entries (unique by project, run, n) and, where SQLite has FTS5, a full-text index over
 * hypothesis, mechanism, reason, project name and metric ranked by bm25. Without FTS5 a
 * search scans the newest 5000 entries and ranks them by how many query words they contain.
 */
export class SqliteKnowledgeStore implements KnowledgeStore {
  private readonly db: DatabaseSync;
  private readonly fts: boolean;
  readonly path: string;

  constructor(path: string, opts: SqliteKnowledgeStoreOptions = {}) {
    this.path = path;
    if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
    this.db = new DatabaseSync(path, { timeout: opts.busyTimeoutMs ?? 2000 });
    try {
      this.db.exec("PRAGMA journal_mode = WAL");
      const version = (this.db.prepare("PRAGMA user_version").get() as { user_version: number }).user_version;
      if (version > VERSION) {
        throw new Error(`it has schema version ${version}, newer than this autolab understands (${VERSION})`);
      }
      this.db.exec(SCHEMA);
      // Version 1 stores lack `shared`: their entries stay with their project.
      const columns = this.db.prepare("PRAGMA table_info(entries)").all() as Array<{ name: string }>;
      if (!columns.some((c) => c.name === "shared")) {
        this.db.exec("ALTER TABLE entries ADD COLUMN shared INTEGER NOT NULL DEFAULT 0");
      }
      this.fts = opts.fts !== false && tryFts(this.db);
      if (version < VERSION) this.db.exec(`PRAGMA user_version = ${VERSION}`);
    } catch (err) {
      this.db.close();
      throw err;
    }
  }

  /**
   * Texts are the researchers': every string of an entry passes the secret redactor
   * (src/core/secrets.ts) first, so no key a researcher wrote reaches the store.
   */
  record(given: readonly KnowledgeEntry[]): number {
    if (!given.length) return 0;
    const entries = given.map((e) => redactSecretsDeep(e));
    const insert = this.db.prepare(
      `INSERT OR IGNORE INTO entries (project, project_name, run, n, date, hypothesis, mechanism, action,
         reason, metric, direction, value, parent_value, gain, shared) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    const index = this.fts
      ? this.db.prepare(
          "INSERT INTO entries_fts (rowid, hypothesis, mechanism, reason, project_name, metric) VALUES (?, ?, ?, ?, ?, ?)",
        )
      : undefined;
    let added = 0;
    this.db.exec("BEGIN IMMEDIATE");
    try {
      for (const e of entries) {
        const res = insert.run(
          e.project,
          e.projectName,
          e.run,
          e.n,
          e.date,
          e.hypothesis,
          e.mechanism ?? null,
          e.action,
          e.reason,
          e.metric,
          e.direction,
          num(e.value),
          num(e.parentValue),
          num(e.gain),
          e.shared ? 1 : 0,
        );
        if (Number(res.changes) !== 1) continue;
        added++;
        index?.run(res.lastInsertRowid, e.hypothesis, e.mechanism ?? "", e.reason, e.projectName, e.metric);
      }
      this.db.exec("COMMIT");
    } catch (err) {
      this.db.exec("ROLLBACK");
      throw err;
    }
    return added;
  }

  search(query: string, k: number, opts: KnowledgeSearchOptions = {}): KnowledgeHit[] {
    const terms = queryTerms(query);
    if (!terms.length || k <= 0) return [];
    const ex = opts.exclude;
    const sc = opts.scope;
    const notRun =
      (ex ? "AND NOT (e.project = ? AND e.run = ?) " : "") +
      (sc
        ? `AND e.metric = ? AND e.direction = ? AND (e.project = ?${sc.shared ? " OR e.shared = 1" : ""})`
        : "");
    const exArgs: SQLInputValue[] = [
      ...(ex ? [ex.project, ex.run] : []),
      ...(sc ? [sc.metric, sc.direction, sc.project] : []),
    ];
    if (this.fts) {
      // Each word quoted (FTS5 query syntax never sees the user's text), any of them matching.
      const match = terms.map((t) => `"${t.replace(/"/g, '""')}"`).join(" OR ");
      const rows = this.db
        .prepare(
          `SELECT e.*, -bm25(entries_fts, 3.0, 2.0, 1.0, 1.0, 2.0) AS score
             FROM entries_fts JOIN entries e ON e.id = entries_fts.rowid
            WHERE entries_fts MATCH ? ${notRun}
            ORDER BY score DESC, e.id DESC LIMIT ?`,
        )
        .all(match, ...exArgs, k) as unknown as EntryRow[];
      return rows.map((r) => ({ ...toEntry(r), score: r.score ?? 0 }));
    }
    const rows = this.db
      .prepare(`SELECT e.* FROM entries e WHERE 1 ${notRun} ORDER BY e.id DESC LIMIT ?`)
      .all(...exArgs, SCAN_LIMIT) as unknown as EntryRow[];
    const scored: KnowledgeHit[] = [];
    for (const r of rows) {
      const words = new Set(
        queryTerms([r.hypothesis, r.mechanism ?? "", r.reason, r.project_name, r.metric].join(" ")),
      );
      const score = terms.filter((t) => words.has(t)).length;
      if (score > 0) scored.push({ ...toEntry(r), score });
    }
    // Stable: among equal scores the newest (rows come newest first).
    return scored.sort((a, b) => b.score - a.score).slice(0, k);
  }

  stats(): KnowledgeStats {
    const row = this.db
      .prepare(
        "SELECT COUNT(*) AS entries, COUNT(DISTINCT project) AS projects, COUNT(DISTINCT project || char(0) || run) AS runs FROM entries",
      )
      .get() as { entries: number; projects: number; runs: number };
    return {
      path: this.path,
      entries: row.entries,
      projects: row.projects,
      runs: row.runs,
      search: this.fts ? "fts5" : "scan",
    };
  }

  close(): void {
    if (this.db.isOpen) this.db.close();
  }
}

const num = (v: number | undefined) => (v !== undefined && Number.isFinite(v) ? v : null);

/**
 * Whether this SQLite has FTS5: the index is made if it does, and rebuilt when it does not
 * cover every entry (entries a SQLite without FTS5 added, or an index made on a full store).
 */
function tryFts(db: DatabaseSync): boolean {
  try {
    db.exec(FTS);
  } catch (err) {
    if (/no such module: fts5/i.test((err as Error).message)) return false;
    throw err;
  }
  // Both counts in one statement, so one snapshot: two would let another process's record()
  // land between them and set off a rebuild for nothing.
  const { entries, indexed } = db
    .prepare(
      "SELECT (SELECT COUNT(*) FROM entries) AS entries, (SELECT COUNT(*) FROM entries_fts_docsize) AS indexed",
    )
    .get() as { entries: number; indexed: number };
  if (entries !== indexed) {
    db.exec("INSERT INTO entries_fts (entries_fts) VALUES ('rebuild')");
  }
  return true;
}

/** Opens the machine's knowledge store at `path` (created if missing). */
export function openKnowledgeStore(path: string, opts: SqliteKnowledgeStoreOptions = {}): KnowledgeStore {
  return new SqliteKnowledgeStore(path, opts);
}
