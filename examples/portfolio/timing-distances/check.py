# timing-distances: the smoke test (the trial's command). PROTECTED.
# Runs kernel.py on a few small public inputs and fails (exit 1) on a wrong shape or a clearly
# wrong answer: a quick guard, not the evaluator (which checks every entry of larger batches).
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

import kernel  # noqa: E402

rng = np.random.default_rng(0)
for n, m, d in [(1, 1, 1), (7, 5, 3), (40, 33, 8)]:
    a, b = rng.normal(size=(n, d)), rng.normal(size=(m, d))
    want = ((a[:, None, :] - b[None, :, :]) ** 2).sum(axis=2)
    got = np.asarray(kernel.sq_distances(a, b))
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-4, atol=1e-4):
        print(f"check: wrong answer for {n}×{d} against {m}×{d}", file=sys.stderr)
        sys.exit(1)
print("check: ok")
