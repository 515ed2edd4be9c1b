/**
 * Class 1 of issue #34: the harness opens files where the researcher can write. A researcher may
 * write its own log directory (`.autolab/logs/<tag>/<n>/agent*`: its stdout/stderr logs, prompt,
 * command file), and the harness opens those paths by name, as the user who runs it. Each test
 * plants something there through the `command` researcher (a real, sandboxed process) and runs
 * the real CLI in a child process: a harness blocked for good on a FIFO is killed by the test's
 * timer, not left hanging the test runner. Written before the defense (src/core/untrusted-file.ts):
 * each failed on the code before it.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { runCli, spawnCli } from "../helpers/toy-project.ts";
import {
  BETTER,
  BETTER_STILL,
  cleanupProjects,
  describeNotebook,
  exp,
  expectIntact,
  expectKeptHonestly,
  expectNotKept,
  HOLDOUT_MARKER,
  killLeftovers,
  notebook,
  pyProject,
  SANDBOX_TESTS,
  setShrink,
  summary,
  TAG,
  uniqueSleep,
  waitFor,
} from "./fixture.ts";

afterEach(() => killLeftovers());
afterAll(() => cleanupProjects());

/** shell: the researcher's log directory (where the harness put its prompt file). */
const LOG = `LOG=$(dirname "$AUTOLAB_PROMPT_FILE")`;
/** shell: the user's checkout, seen from the run's worktree (<checkout>/.autolab/worktrees/<tag>). */
const CHECKOUT = `CHECKOUT="$AUTOLAB_WORKDIR/../../.."`;

describe("class 1: the harness opens files where the researcher can write", () => {
  it("a FIFO for the researcher's stderr log: the run does not hang, the proposal is rejected with the reason, the run goes on", async () => {
    const p = pyProject({
      researcher: [
        `${setShrink(BETTER)}
${LOG}
rm -f "$LOG/agent.stderr.log" && mkfifo "$LOG/agent.stderr.log"
${summary("SHRINK 0.8, and a FIFO for a log")}`,
        `${setShrink(BETTER)}\n${summary("SHRINK 0.8")}`,
      ],
    });
    // Today's harness blocks its main thread for good opening the FIFO: the timer kills it.
    const r = await runCli(["run", "--tag", TAG, "-n", "2"], { cwd: p.dir, timeoutMs: 90_000 });
    expect(r.signal, `the harness hung on the FIFO and was killed\n${r.stdout}${r.stderr}`).toBeNull();
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const nb = expectIntact(p);
    expectNotKept(nb, 1);
    expect(exp(nb, 1).action, describeNotebook(nb)).toBe("reject");
    expect(exp(nb, 1).reason, describeNotebook(nb)).toMatch(/agent\.stderr\.log.*not a regular file.*FIFO/i);
    expectKeptHonestly(nb, 2, BETTER);
  }, 200_000);

  describe.skipIf(!SANDBOX_TESTS)(
    "with a sandbox (without one the researcher writes the checkout itself)",
    () => {
      it("symlinks into the checkout and a FIFO left in the log directory: a resumed run writes through none of them", async () => {
        // Experiment 1's researcher replaces the files the harness writes by name when it proposes
        // #1 again (after the kill below) with symlinks to protected files of the user's checkout,
        // and its command file with a FIFO (opening it for writing blocks without a reader), then
        // waits to be killed with the harness. Proposed again (the test has then put a file
        // RESUMED in the checkout, which the sandbox shows read-only), it makes an honest change.
        const asleep = uniqueSleep();
        const p = pyProject({
          researcher: [
            `${LOG}
${CHECKOUT}
if [ -e "$CHECKOUT/RESUMED" ]; then
${setShrink(BETTER)}
${summary("SHRINK 0.8")}
exit 0
fi
rm -f "$LOG/prompt.md" "$LOG/agent.command.txt" "$LOG/agent.stderr.log"
ln -s "$CHECKOUT/evaluate.py" "$LOG/prompt.md"
ln -s "$CHECKOUT/data/val.csv" "$LOG/agent.stderr.log"
mkfifo "$LOG/agent.command.txt"
sleep ${asleep}`,
            `${setShrink(BETTER_STILL)}\n${summary("SHRINK 0.9")}`,
          ],
        });
        const first = spawnCli(["run", "--tag", TAG, "-n", "2"], { cwd: p.dir, timeoutMs: 90_000 });
        await waitFor(asleep);
        first.child.kill("SIGKILL");
        expect((await first.done).signal).toBe("SIGKILL");
        killLeftovers();
        writeFileSync(join(p.dir, "RESUMED"), "");
        const resumed = await runCli(["run", "--tag", TAG, "-n", "2"], { cwd: p.dir, timeoutMs: 90_000 });
        expect(
          resumed.signal,
          `the resumed harness hung and was killed\n${resumed.stdout}${resumed.stderr}`,
        ).toBeNull();
        expect(resumed.code, resumed.stdout + resumed.stderr).toBe(0);
        // The checkout's protected files byte-identical (expectIntact), and the run went on.
        const nb = expectIntact(p);
        // The researcher cannot see the checkout any more (class 5 hides it), so it cannot tell it
        // was resumed and plants its links again in its fresh directory: the door refuses them.
        const one = nb.exps.find((e) => e.n === 1);
        if (one?.action !== "keep")
          expect(one?.reason).toMatch(/left its log agent\.stderr\.log as a symbolic link/);
        else expectKeptHonestly(nb, 1, BETTER);
        expectKeptHonestly(nb, 2, BETTER_STILL);
      }, 240_000);
    },
  );

  it("export --format trajectories: a transcript symlinked to the holdout file is refused, the holdout is not exported", async () => {
    const p = pyProject({
      researcher: [
        `${setShrink(BETTER)}
${LOG}
${CHECKOUT}
ln -s "$CHECKOUT/data/test.csv" "$LOG/llm-transcript.jsonl"
${summary("SHRINK 0.8")}`,
      ],
    });
    const r = await runCli(["run", "--tag", TAG, "-n", "1"], { cwd: p.dir, timeoutMs: 90_000 });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expectIntact(p);
    const ex = await runCli(["export", "--format", "trajectories"], { cwd: p.dir });
    expect(ex.code, ex.stderr).toBe(0);
    expect(ex.stdout, "the holdout file in the exported training data").not.toContain(HOLDOUT_MARKER);
    const records = ex.stdout
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { n: number; output: { file: string; text: string } | null });
    const one = records.find((x) => x.n === 1);
    expect(one, `export of #1\n${describeNotebook(notebook(p))}`).toBeDefined();
    // The read yields the refusal, not the file.
    expect(one?.output?.file).toBe("llm-transcript.jsonl");
    expect(one?.output?.text).toMatch(/refused: .*symbolic link/);
  }, 200_000);
});
