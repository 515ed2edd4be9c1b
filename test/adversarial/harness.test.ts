/**
 * Attacks on the harness process itself, run through the real CLI in a child process (so that a
 * SIGKILL, or a trial that kills the harness, takes down that process and not the test runner).
 * Written before the defenses: a test that fails here is an attack that works. Skipped without
 * bubblewrap (never in CI).
 */
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { runCli, spawnCli } from "../helpers/toy-project.ts";
import {
  BETTER,
  cleanupProjects,
  escapePy,
  expectIntact,
  expectKeptHonestly,
  expectNotKept,
  killLeftovers,
  processesIn,
  pyProject,
  SANDBOX_TESTS,
  setShrink,
  summary,
  TAG,
  trainPy,
  uniqueSleep,
  WORSE,
  waitFor,
  waitGone,
  writeFileSh,
} from "./fixture.ts";

afterEach(() => killLeftovers());
afterAll(() => cleanupProjects());

describe.skipIf(!SANDBOX_TESTS)("the harness killed, or attacked, mid-trial", () => {
  it("attack 7: after kill -9 of the harness mid-trial no process of the trial remains, also after a resume", async () => {
    const plain = uniqueSleep();
    const escaped = uniqueSleep();
    // Every trial starts an ordinary child and an escaped one, then trains slowly.
    const spawnBoth = `
import subprocess, time
subprocess.Popen(["sleep", "${plain}"])
${escapePy(["/bin/sleep", escaped])}
time.sleep(1.5)
`;
    const p = pyProject({
      train: trainPy({ before: spawnBoth }),
      researcher: [`${setShrink(BETTER)}\n${summary("SHRINK 0.8")}`],
    });
    const cli = spawnCli(["run", "--tag", TAG, "-n", "1"], { cwd: p.dir, timeoutMs: 60_000 });
    await waitFor(plain);
    await waitFor(escaped);
    cli.child.kill("SIGKILL");
    const killed = await cli.done;
    expect(killed.signal).toBe("SIGKILL");
    expect.soft(await waitGone(plain, 3000), "the trial's child after kill -9 of the harness").toEqual([]);
    expect.soft(await waitGone(escaped, 3000), "the trial's escaped process after kill -9").toEqual([]);

    const resumed = await runCli(["run", "--tag", TAG, "-n", "1"], { cwd: p.dir, timeoutMs: 60_000 });
    expect(resumed.code, resumed.stdout + resumed.stderr).toBe(0);
    expect(await waitGone(plain, 3000), "the trial's child after the resumed run").toEqual([]);
    expect(await waitGone(escaped, 3000), "the trial's escaped process after the resumed run").toEqual([]);
    const nb = expectIntact(p);
    expectKeptHonestly(nb, 1, BETTER);
  });

  it("a trial that kills the harness (SIGKILL to its ancestors) cannot stop the run", async () => {
    // The trial looks for autolab processes working in this project (its user checkout) and kills them.
    const killer = trainPy({
      shrink: WORSE,
      before: `
import signal
_checkout = os.path.realpath(os.path.join(os.getcwd(), "..", "..", ".."))
for _pid in os.listdir("/proc"):
    if not _pid.isdigit():
        continue
    try:
        _cmd = open(f"/proc/{_pid}/cmdline", "rb").read().decode("latin1")
        _cwd = os.path.realpath(f"/proc/{_pid}/cwd")
    except Exception:
        continue
    if "main.ts" in _cmd and _cwd == _checkout:
        try:
            os.kill(int(_pid), signal.SIGKILL)
            print("KILLED", _pid)
        except Exception as e:
            print("could not kill", _pid, e)
`,
    });
    const p = pyProject({
      researcher: [
        `${writeFileSh("train.py", killer)}\n${summary("stop the clock")}`,
        `${setShrink(BETTER)}\n${summary("SHRINK 0.8")}`,
      ],
    });
    const r = await runCli(["run", "--tag", TAG, "-n", "2"], { cwd: p.dir, timeoutMs: 60_000 });
    expect(r.signal, "the harness was killed by its trial").toBeNull();
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(processesIn(p.root)).toEqual([]);
    const nb = expectIntact(p);
    expectNotKept(nb, 1);
    expectKeptHonestly(nb, 2, BETTER);
  });
});
