import type { LoopEvent } from "../core/events.ts";
import { formatMetric } from "../core/format.ts";

export interface ProgressOptions {
  out?: NodeJS.WriteStream;
  /** Live line redrawn in place (a terminal); otherwise one plain line per event. */
  tty?: boolean;
}

const ACTION_LABEL = { keep: "keep   ", discard: "discard", crash: "crash  ", reject: "reject " } as const;

/**
 * Renders loop events. In a terminal: a live line (experiment n, a budget bar, best so far)
 * plus a permanent line per decision. Elsewhere (CI, pipes): plain lines, no control codes.
 */
export function createProgress(opts: ProgressOptions): { onEvent: (e: LoopEvent) => void; stop: () => void } {
  const out = opts.out ?? process.stdout;
  const tty = opts.tty ?? out.isTTY === true;
  let metric = "metric";
  let best: { n: number; metric: number } | undefined;
  let current:
    | { n: number; hypothesis: string; startedAt: number; budgetMs: number; progress?: string }
    | undefined;
  let timer: NodeJS.Timeout | undefined;
  let live = false;

  const clear = () => {
    if (tty && live) out.write("\r\x1b[2K");
    live = false;
  };
  const print = (line: string) => {
    clear();
    out.write(`${line}\n`);
    draw();
  };
  const draw = () => {
    if (!tty || !current) return;
    const elapsed = (Date.now() - current.startedAt) / 1000;
    const budget = current.budgetMs / 1000;
    const width = 20;
    const filled = Math.min(width, Math.round((elapsed / budget) * width));
    const bar = `${"█".repeat(filled)}${"░".repeat(width - filled)}`;
    const bestText = best ? `best ${metric} ${formatMetric(best.metric)} (#${best.n})` : "measuring baseline";
    const cols = out.columns ?? 100;
    let line = `#${current.n} ▕${bar}▏ ${elapsed.toFixed(1)}s/${budget}s  ${bestText}  ${current.progress ?? ""} ${current.hypothesis}`;
    if (line.length > cols - 1) line = `${line.slice(0, cols - 2)}…`;
    out.write(`\r\x1b[2K${line}`);
    live = true;
  };

  const onEvent = (e: LoopEvent) => {
    switch (e.type) {
      case "run_started":
        metric = e.metric;
        print(
          e.resumed
            ? `Resuming run ${e.tag} (${e.experiments} experiments so far) on branch ${e.branch}`
            : `Starting run ${e.tag} on branch ${e.branch}`,
        );
        break;
      case "setup_started":
        print(`setup: ${e.command}`);
        break;
      case "setup_finished":
        print(e.ok ? `setup done in ${e.wallS.toFixed(1)}s` : `setup failed: ${e.reason ?? ""}`);
        break;
      case "experiment_created":
        current = { n: e.n, hypothesis: e.hypothesis, startedAt: Date.now(), budgetMs: 1 };
        break;
      case "trial_started":
        current = {
          n: e.n,
          hypothesis: e.hypothesis,
          startedAt: e.startedAt,
          budgetMs: e.budgetMs,
        };
        if (!tty) print(`#${e.n} trial ${e.attempt} started (budget ${e.budgetMs / 1000}s, seed ${e.seed})`);
        if (tty && !timer) timer = setInterval(draw, 250);
        draw();
        break;
      case "progress":
        if (current && current.n === e.n) current.progress = `${e.name}=${formatMetric(e.value)}`;
        break;
      case "trial_finished":
        // A pruned trial is explained by its decision line.
        if (e.status !== "ok" && e.status !== "pruned") {
          print(`#${e.n} trial ${e.attempt}: ${e.status}${e.reason ? ` — ${e.reason}` : ""}`);
        }
        break;
      case "decision": {
        if (!Number.isNaN(e.best.metric)) best = e.best;
        const hyp = current?.n === e.n ? current.hypothesis : "";
        current = undefined;
        const value = e.metric !== undefined ? `${metric} ${formatMetric(e.metric)}` : "";
        print(`#${e.n} ${ACTION_LABEL[e.action]} ${value.padEnd(metric.length + 10)} ${hyp}  (${e.reason})`);
        break;
      }
      case "warning":
        print(`warning: ${e.message}`);
        break;
      case "run_finished":
        current = undefined;
        clear();
        if (timer) clearInterval(timer);
        timer = undefined;
        break;
      default:
        break;
    }
  };
  const stop = () => {
    if (timer) clearInterval(timer);
    timer = undefined;
    clear();
  };
  return { onEvent, stop };
}
