# classify-noisy (portfolio): the data. PROTECTED: experiments may not edit this file.
#
# Writes a fixed split of scikit-learn's make_classification (20 features, 6 informative, 15% of labels flipped) under ./data, the same rows on every
# machine (the split's own seed, never the trial's):
#   train_x.npy, train_y.npy   300 training rows: few, so training is noisy
#   val_x.npy                  1000 validation rows (features)    val_y.npy: their targets
#   test_x.npy                 2000 test rows (features)         test_y.npy: their targets
# val_y.npy and test_y.npy are holdout files: only evaluate.py reads them.
import os

import numpy as np

DATA_DIR = os.path.join(os.getcwd(), "data")
VERSION = "classify-noisy-1"
ROWS = {"train": 300, "val": 1000, "test": 2000}


def load():
    """The whole data set as (features, targets), from scikit-learn (bundled or generated)."""
    from sklearn.datasets import make_classification
    return make_classification(n_samples=3300, n_features=20, n_informative=6, n_redundant=4, flip_y=0.15, class_sep=0.8, random_state=11)


def prepare():
    stamp = os.path.join(DATA_DIR, "version.txt")
    if os.path.exists(stamp) and open(stamp).read() == VERSION:
        return False
    x, y = load()
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    order = np.random.default_rng(111).permutation(len(x))
    a, b = ROWS["train"], ROWS["train"] + ROWS["val"]
    parts = {"train": order[:a], "val": order[a:b], "test": order[b : b + ROWS["test"]]}
    os.makedirs(DATA_DIR, exist_ok=True)
    for part, idx in parts.items():
        np.save(os.path.join(DATA_DIR, f"{part}_x.npy"), x[idx])
        np.save(os.path.join(DATA_DIR, f"{part}_y.npy"), y[idx])
    with open(stamp, "w") as f:
        f.write(VERSION)
    return True


if __name__ == "__main__":
    print(f"prepare: {'wrote' if prepare() else 'up to date'} {DATA_DIR}")
