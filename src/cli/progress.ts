import { adviceLine } from "../core/advisor.ts";
import type { LoopEvent } from "../core/events.ts";
import { formatCount, formatMetric, formatSeconds } from "../core/format.ts";
import { redactSecrets } from "../core/secrets.ts";
import { safeText } from "./safe-text.ts";

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
  interface Running {
    n: number;
    hypothesis: string;
    startedAt: number;
    budgetMs: number;
    progress?: string;
    slot?: number;
  }
  // Experiments with a trial under way (several at once with parallel slots), and hypotheses by n.
  const running = new Map<number, Running>();
  const hypotheses = new Map<number, string>();
  let timer: NodeJS.Timeout | undefined;
  let live = false;

  const clear = () => {
    if (tty && live) out.write("\r\x1b[2K");
    live = false;
  };
  // Event text (hypotheses, reasons, warnings) comes from researchers and trials: made safe here.
  const print = (line: string) => {
    clear();
    out.write(`${safeText(redactSecrets(line))}\n`);
    draw();
  };
  const bar = (r: Running, width: number) => {
    const filled = Math.min(width, Math.round(((Date.now() - r.startedAt) / r.budgetMs) * width));
    return `▕${"█".repeat(filled)}${"░".repeat(width - filled)}▏`;
  };
  const draw = () => {
    if (!tty || running.size === 0) return;
    const bestText = best ? `best ${metric} ${formatMetric(best.metric)} (#${best.n})` : "measuring baseline";
    const cols = out.columns ?? 100;
    const all = [...running.values()];
    let line: string;
    if (all.length === 1) {
      const r = all[0] as Running;
      const elapsed = (Date.now() - r.startedAt) / 1000;
      line = `#${r.n} ${bar(r, 20)} ${formatSeconds(elapsed)}/${r.budgetMs / 1000}s  ${bestText}  ${r.progress ?? ""} ${r.hypothesis}`;
    } else {
      line = `${all.map((r) => `#${r.n}${bar(r, 6)}`).join(" ")}  ${bestText}`;
    }
    line = safeText(redactSecrets(line), { oneLine: true });
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
            ? `Resuming run ${e.tag} (${formatCount(e.experiments, "experiment")} so far) on branch ${e.branch}`
            : `Starting run ${e.tag} on branch ${e.branch}`,
        );
        if (e.sandbox?.startsWith("unsandboxed")) {
          // Said once per session: the run's trials and researchers have the harness's privileges.
          print(
            `warning: trials and researchers run UNSANDBOXED (${e.sandbox.slice("unsandboxed: ".length)})${e.sandboxHint ? ` — ${e.sandboxHint}` : ""}`,
          );
        }
        break;
      case "alarm":
        print(`ALARM ${e.kind}: ${e.reason}`);
        break;
      case "setup_started":
        print(`setup: ${e.command}`);
        break;
      case "setup_finished":
        print(e.ok ? `setup done in ${formatSeconds(e.wallS)}` : `setup failed: ${e.reason ?? ""}`);
        break;
      case "proposal_started":
        // The tree frontier chose a kept node other than the best to build on.
        if (e.parent !== undefined) print(`#${e.n} builds on #${e.parent} (frontier)`);
        break;
      case "experiment_created":
        hypotheses.set(e.n, e.hypothesis);
        break;
      case "trial_started":
        hypotheses.set(e.n, e.hypothesis);
        running.set(e.n, {
          n: e.n,
          hypothesis: e.hypothesis,
          startedAt: e.startedAt,
          budgetMs: e.budgetMs,
          ...(e.slot !== undefined ? { slot: e.slot } : {}),
        });
        if (!tty) {
          print(
            `#${e.n} trial ${e.attempt} started (${e.against !== undefined ? `the incumbent re-measured for #${e.against}; ` : ""}budget ${e.budgetMs / 1000}s, seed ${e.seed}${e.slot !== undefined ? `, slot ${e.slot}` : ""})`,
          );
        }
        if (tty && !timer) timer = setInterval(draw, 250);
        draw();
        break;
      case "progress": {
        const r = running.get(e.n);
        if (r) r.progress = `${e.name}=${formatMetric(e.value)}`;
        break;
      }
      case "trial_finished":
        running.delete(e.n);
        // A pruned trial is explained by its decision line.
        if (e.status !== "ok" && e.status !== "pruned") {
          print(`#${e.n} trial ${e.attempt}: ${e.status}${e.reason ? ` — ${e.reason}` : ""}`);
        }
        if (e.overrunS !== undefined)
          print(
            `#${e.n} trial ${e.attempt}: ran ${formatSeconds(e.overrunS)} past its budget, inside the grace window (accepted; the budget is not enforced until budget + grace)`,
          );
        break;
      case "decision": {
        if (!Number.isNaN(e.best.metric)) best = e.best;
        const hyp = hypotheses.get(e.n) ?? "";
        hypotheses.delete(e.n);
        running.delete(e.n);
        const value = e.metric !== undefined ? `${metric} ${formatMetric(e.metric)}` : "";
        print(`#${e.n} ${ACTION_LABEL[e.action]} ${value.padEnd(metric.length + 10)} ${hyp}  (${e.reason})`);
        // A failed researcher: the end of its output, one safe line each, and the likely cause.
        for (const l of e.failure?.lines ?? []) print(`    | ${safeText(l, { oneLine: true })}`);
        if (e.failure?.hint) print(`    hint: ${e.failure.hint}`);
        break;
      }
      case "advice_started":
        print(`advisor (${e.agent}) asked: ${e.trigger}`);
        break;
      case "advice":
        print(adviceLine(e));
        break;
      case "warning":
        print(`warning: ${e.message}`);
        break;
      case "run_finished":
        running.clear();
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
