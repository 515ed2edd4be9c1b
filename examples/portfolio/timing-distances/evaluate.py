# timing-distances (portfolio): the evaluator. PROTECTED: experiments may not edit this file.
#
# Times kernel.py's `sq_distances` on 3 batches of inputs that no researcher sees (drawn from
# AUTOLAB_SEED), each in a fresh child process, and checks every entry against a reference of
# its own:
#   time_ms: 12.345     median wall time of one call over the batches
#   correct: 1          1 when every entry matched to 1e-9 (relative to the largest), else 0
#   max_error: 1e-15    the largest relative error seen
# A wrong entry makes `correct: 0`, and program.md's constraint `correct == 1` rejects the trial
# whatever its speed. An answer of the wrong shape, or a crash, fails the evaluation (exit 1).
#
# The clock runs in this process, from telling the child to start (its input already made) to
# reading its whole answer: importing kernel.py is inside it, so work moved to import time still
# counts. The child's stdout is reserved for the answer: what kernel.py prints goes to stderr.
# The noise of time_ms is the machine's, and it is multiplicative: a share of the time.
import io
import os
import statistics
import subprocess
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

BATCHES = 3
TOLERANCE = 1e-9
WORKER = "--worker"


def problem(seed):
    """The inputs of one batch, from its seed (the same in the child and here)."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(800, 32))
    b = rng.normal(size=(600, 32)) + rng.normal(size=32)
    return a, b


def reference(inputs):
    a, b = inputs
    return np.array([((b - row) ** 2).sum(axis=1) for row in a])


def fail(message):
    print(f"evaluate: {message}", file=sys.stderr)
    sys.exit(1)


def worker(seed):
    inputs = problem(seed)
    answer = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # from here on, fd 1 is stderr: kernel.py cannot write into the answer
    sys.stdout = sys.stderr
    answer.write(b"ready\n")
    answer.flush()
    sys.stdin.readline()
    sys.path.insert(0, os.getcwd())
    import kernel

    out = np.asarray(kernel.sq_distances(*inputs))
    buf = io.BytesIO()
    np.save(buf, out, allow_pickle=False)
    answer.write(buf.getvalue())
    answer.close()


def run_batch(seed):
    child = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), WORKER, str(seed)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    if child.stdout.readline() != b"ready\n":
        child.kill()
        fail("the worker did not start")
    start = time.perf_counter()
    child.stdin.write(b"go\n")
    child.stdin.flush()
    data = child.stdout.read()
    elapsed = time.perf_counter() - start
    if child.wait() != 0:
        fail(f"kernel.py failed (exit {child.returncode})")
    try:
        out = np.load(io.BytesIO(data), allow_pickle=False)
    except Exception as err:  # noqa: BLE001 (anything unreadable fails the evaluation)
        fail(f"the answer is not an array: {err}")
    return elapsed, out


def main():
    raw = os.environ.get("AUTOLAB_SEED", "0").strip()
    base = int(raw) % 2**32 if raw.lstrip("-").isdigit() else sum(raw.encode()) % 2**32
    times, worst, correct = [], 0.0, True
    for b in range(BATCHES):
        seed = (base * 1000003 + b) % 2**32
        elapsed, out = run_batch(seed)
        want = reference(problem(seed))
        if out.shape != want.shape:
            fail(f"batch {b}: the answer has shape {out.shape}, not {want.shape}")
        scale = max(float(np.max(np.abs(want))), 1e-300)
        with np.errstate(all="ignore"):
            err = float(np.max(np.abs(out.astype(np.float64) - want))) / scale
        if not np.isfinite(err) or err > TOLERANCE:
            correct = False
            print(f"evaluate: WRONG ENTRIES in batch {b}: relative error {err:.3g}", file=sys.stderr)
        worst = max(worst, err if np.isfinite(err) else float("inf"))
        times.append(elapsed * 1000)
    print(f"time_ms: {statistics.median(times):.3f}")
    print(f"correct: {1 if correct else 0}")
    print(f"max_error: {worst:.3g}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == WORKER:
        worker(int(sys.argv[2]))
    else:
        main()
