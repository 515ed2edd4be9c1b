import type { LoopEvent } from "./events.ts";
import type { Ledger } from "./ledger.ts";

/** A loop event as another process sees it in the notebook: which run it belongs to, and when. */
export type NotebookEvent = LoopEvent & { run: string; at: string };

/**
 * What viewers in another process than the loop (the dashboard, its SSE stream, `autolab
 * watch`) read from a notebook besides the Ledger's records: a change token to poll, the
 * size of each run, and the loop's events derived from the rows. With `Ledger` it is the
 * whole read path: the app, server and CLI read a notebook through these two interfaces only,
 * so a second notebook (PostgreSQL) implements both and runs both contract suites
 * (test/contracts/ledger-contract.ts, test/contracts/notebook-reader-contract.ts).
 */
export interface NotebookReader {
  /**
   * Opaque; changes whenever a write commits, by this instance or by another one on the same
   * notebook. Equal tokens mean equal records, so a viewer may reuse what it derived. Cheap:
   * viewers call it on every request and poll.
   */
  version(): string;
  /** How many experiments each run holds (run id → count; runs without any are absent). */
  experimentCounts(): Map<number, number>;
  /** A new feed of this notebook's events, starting from nothing seen (call `prime` first). */
  eventFeed(): EventFeed;
  /**
   * Where the store can push (PostgreSQL's LISTEN/NOTIFY): calls `listener` soon after any write
   * commits, by any process — a wake-up, never data (read with a feed or version()). Returns the
   * unsubscribe. Absent (SQLite): viewers poll on a timer.
   */
  onChange?(listener: () => void): () => void;
}

/**
 * The notebook's rows as loop events: runs → run_started, experiments → experiment_created,
 * trial starts → trial_started, trial results → trial_finished, decisions → decision (with the
 * best right after it). Progress metrics and run_finished are never written, so never seen.
 * One feed per consumer: it remembers what it has already reported.
 */
export interface EventFeed {
  /** Marks everything the notebook holds now as seen; later polls report only what is new. */
  prime(): void;
  /** Events for every row written since the last poll (or prime), in the order they were written. */
  poll(): NotebookEvent[];
}

/** A notebook viewers can read: its records and what changes in them. */
export type ReadableNotebook = Ledger & NotebookReader;
