# timing-smooth: the smoke test (the trial's command). PROTECTED.
# Runs kernel.py on a few small public inputs and fails (exit 1) on a wrong shape or a clearly
# wrong answer: a quick guard, not the evaluator (which checks every entry of larger batches).
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

import kernel  # noqa: E402

rng = np.random.default_rng(0)
for n, w in [(1, 1), (10, 3), (500, 101)]:
    x = rng.normal(size=n)
    want = np.array([x[i : i + w].mean() for i in range(n - w + 1)])
    got = np.asarray(kernel.moving_average(x, w))
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-4, atol=1e-4):
        print(f"check: wrong answer for {n} values, window {w}", file=sys.stderr)
        sys.exit(1)
print("check: ok")
