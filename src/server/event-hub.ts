import type { EventFeed, NotebookEvent, NotebookReader } from "../core/notebook-reader.ts";

export type EventListener = (event: NotebookEvent) => void;

/**
 * Fans the notebook's events out to every open SSE stream. One poller for all subscribers: it
 * starts with the first subscriber (primed at the notebook as it is then, so a stream carries
 * what happens after it opened) and stops with the last. Where the notebook pushes
 * (NotebookReader.onChange: PostgreSQL's LISTEN/NOTIFY) it polls when woken, and the timer is
 * only a slow backstop (BACKSTOP_MS) for a wake-up lost while the listening connection was down.
 */
const BACKSTOP_MS = 5000;

export class EventHub {
  private readonly notebook: NotebookReader;
  private readonly pollMs: number;
  private readonly listeners = new Set<EventListener>();
  private feed: EventFeed | undefined;
  private timer: NodeJS.Timeout | undefined;
  private unlisten: (() => void) | undefined;
  private failed = false;

  constructor(notebook: NotebookReader, pollMs: number) {
    this.notebook = notebook;
    this.pollMs = pollMs;
  }

  subscribe(fn: EventListener): () => void {
    if (this.listeners.size === 0) this.start();
    this.listeners.add(fn);
    return () => {
      this.listeners.delete(fn);
      if (this.listeners.size === 0) this.stop();
    };
  }

  /** Polls now, outside the timer's rhythm. */
  pollNow(): void {
    if (!this.feed) return;
    let events: NotebookEvent[];
    try {
      events = this.feed.poll();
      this.failed = false;
    } catch (err) {
      // A busy or briefly locked notebook: try again next tick; say so once.
      if (!this.failed) process.stderr.write(`autolab serve: reading the notebook failed: ${String(err)}\n`);
      this.failed = true;
      return;
    }
    for (const e of events) for (const fn of this.listeners) fn(e);
  }

  close(): void {
    this.listeners.clear();
    this.stop();
  }

  private start(): void {
    this.feed = this.notebook.eventFeed();
    this.feed.prime();
    this.unlisten = this.notebook.onChange?.(() => this.pollNow());
    this.timer = setInterval(
      () => this.pollNow(),
      this.unlisten ? Math.max(this.pollMs, BACKSTOP_MS) : this.pollMs,
    );
    this.timer.unref();
  }

  private stop(): void {
    this.unlisten?.();
    this.unlisten = undefined;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.feed = undefined;
  }
}
