# moons-mlp (portfolio): the evaluator. PROTECTED: experiments may not edit this file.
#
# Reads the class probabilities train.py wrote to out/preds.npz ("val" and "test": one row
# of 2 probabilities per row of val_x.npy and test_x.npy) and scores them against the
# labels, which only this script reads (holdout files):
#   val_logloss: 0.51234     mean negative log-likelihood, probabilities clipped to [1e-6, 1]
#   val_accuracy: 0.7510     the most probable class
#   test_logloss, test_accuracy   the same on the test rows (holdout metrics: never shown to agents)
# Predictions of the wrong shape, not finite, outside [0, 1] or rows not summing to 1 fail the
# evaluation (exit 1, no metrics).
import os
import sys

import numpy as np


def fail(message):
    print(f"evaluate: {message}", file=sys.stderr)
    sys.exit(1)


def score(p, y, name):
    k = 2
    if not isinstance(p, np.ndarray) or p.shape != (len(y), k) or p.dtype.kind != "f":
        fail(f'out/preds.npz: "{name}" must be {len(y)} rows of {k} probabilities (floats), not {getattr(p, "shape", p)}')
    if not np.all(np.isfinite(p)) or p.min() < 0 or p.max() > 1:
        fail(f'out/preds.npz: "{name}" holds values that are not probabilities')
    if np.max(np.abs(p.sum(axis=1) - 1)) > 1e-3:
        fail(f'out/preds.npz: "{name}": a row does not sum to 1')
    q = np.clip(p[np.arange(len(y)), y.astype(int)], 1e-6, 1)
    return float(-np.mean(np.log(q))), float(np.mean(p.argmax(axis=1) == y))


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
print(f"val_logloss: {val[0]:.5f}")
print(f"val_accuracy: {val[1]:.4f}")
print(f"test_logloss: {test[0]:.5f}")
print(f"test_accuracy: {test[1]:.4f}")
