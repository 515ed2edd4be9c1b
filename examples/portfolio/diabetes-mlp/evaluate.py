# diabetes-mlp (portfolio): the evaluator. PROTECTED: experiments may not edit this file.
#
# Reads the predictions train.py wrote to out/preds.npz ("val" and "test": one number per
# row of val_x.npy and test_x.npy) and scores them against the targets, which only this
# script reads (holdout files):
#   val_rmse: 55.123     root mean squared error on the validation rows
#   val_mae: 44.321      mean absolute error
#   test_rmse, test_mae  the same on the test rows (holdout metrics: never shown to agents)
# Predictions of the wrong shape or not finite fail the evaluation (exit 1, no metrics).
import os
import sys

import numpy as np


def fail(message):
    print(f"evaluate: {message}", file=sys.stderr)
    sys.exit(1)


def score(p, y, name):
    if not isinstance(p, np.ndarray) or p.shape != (len(y),) or p.dtype.kind not in "fi":
        fail(f'out/preds.npz: "{name}" must be {len(y)} numbers, not {getattr(p, "shape", p)}')
    if not np.all(np.isfinite(p)):
        fail(f'out/preds.npz: "{name}" holds values that are not finite')
    e = p.astype(np.float64) - y
    return float(np.sqrt(np.mean(e**2))), float(np.mean(np.abs(e)))


path = os.path.join(os.getcwd(), "out", "preds.npz")
if not os.path.isfile(path):
    fail(f"no {path}: run `python3 train.py` first")
try:
    with np.load(path, allow_pickle=False) as f:
        preds = {key: f[key] for key in ("val", "test") if key in f.files}
except Exception as err:  # noqa: BLE001 (anything unreadable fails the evaluation)
    fail(f"out/preds.npz is not readable: {err}")
label = lambda f: np.load(os.path.join("data", f), allow_pickle=False)  # noqa: E731
val = score(preds.get("val"), label("val_y.npy"), "val")
test = score(preds.get("test"), label("test_y.npy"), "test")
print(f"val_rmse: {val[0]:.5f}")
print(f"val_mae: {val[1]:.5f}")
print(f"test_rmse: {test[0]:.5f}")
print(f"test_mae: {test[1]:.5f}")
