# cancer-linear: a linear model trained by minibatch SGD. THE ONLY EDITABLE FILE.
#
# Reads data/train_x.npy and data/train_y.npy (100 rows), standardises the features, fits
# the model by minibatch SGD with momentum and weight decay on the cross-entropy, and writes
# its predictions for the validation and test rows to out/preds.npz (arrays "val" and "test":
# one row of 2 class probabilities per row) for evaluate.py. AUTOLAB_SEED draws the initial weights
# and the order of the minibatches; with few rows that moves the result about as much as a
# good change of knobs does.
import os

# One core per trial, so that trials side by side do not slow each other down.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

# ---------------------------------------------------------------------------------------
# Knobs (`NAME = value`, rewritten by the built-in optimizer; ranges in program.md).
HIDDEN = 0
LEARNING_RATE = 0.5
EPOCHS = 5
BATCH_SIZE = 8
MOMENTUM = 0.9
WEIGHT_DECAY = 0.0001
INIT_SCALE = 1.0
# ---------------------------------------------------------------------------------------
TASK = "classify"  # softmax output, cross-entropy (not a knob)


def trial_seed():
    """AUTOLAB_SEED as numpy takes it: any integer, reduced mod 2^32 (the harness's seeds are large)."""
    raw = os.environ.get("AUTOLAB_SEED", "0").strip()
    try:
        return int(raw) % 2**32
    except ValueError:
        return sum(raw.encode()) % 2**32


def main():
    rng = np.random.default_rng(trial_seed())
    data = lambda f: np.load(os.path.join("data", f), allow_pickle=False)  # noqa: E731
    x, y = data("train_x.npy"), data("train_y.npy")
    mu, sd = x.mean(axis=0), x.std(axis=0)
    sd[sd == 0] = 1
    norm = lambda a: (a - mu) / sd  # noqa: E731
    x = norm(x)
    n, d = x.shape
    if TASK == "classify":
        k = int(y.max()) + 1
        target = np.eye(k)[y.astype(int)]
        prior = target.mean(axis=0)
    else:
        k = 1
        y_mu, y_sd = float(y.mean()), float(y.std()) or 1.0
        target = ((y - y_mu) / y_sd)[:, None]
    h = max(0, int(round(HIDDEN)))
    width = h if h > 0 else d
    params = {}
    if h > 0:
        params["W1"] = rng.normal(0, INIT_SCALE / np.sqrt(d), (d, h))
        params["b1"] = np.zeros(h)
    params["W2"] = rng.normal(0, INIT_SCALE / np.sqrt(width), (width, k))
    params["b2"] = np.zeros(k)
    velocity = {name: np.zeros_like(p) for name, p in params.items()}

    def forward(a):
        hidden = np.tanh(a @ params["W1"] + params["b1"]) if h > 0 else a
        out = hidden @ params["W2"] + params["b2"]
        if TASK == "classify":
            out = out - out.max(axis=1, keepdims=True)
            e = np.exp(out)
            out = e / e.sum(axis=1, keepdims=True)
        return hidden, out

    batch = max(1, min(n, int(round(BATCH_SIZE))))
    loss = float("nan")
    for _ in range(max(1, int(round(EPOCHS)))):
        order = rng.permutation(n)
        total = 0.0
        for start in range(0, n, batch):
            rows = order[start : start + batch]
            a, t = x[rows], target[rows]
            hidden, out = forward(a)
            if TASK == "classify":
                total -= float(np.sum(t * np.log(np.clip(out, 1e-12, 1))))
            else:
                total += float(np.sum((out - t) ** 2)) / 2
            g_out = (out - t) / len(rows)  # d loss / d output (softmax + cross-entropy, or squares)
            grads = {"W2": hidden.T @ g_out, "b2": g_out.sum(axis=0)}
            if h > 0:
                g_hidden = (g_out @ params["W2"].T) * (1 - hidden**2)
                grads["W1"] = a.T @ g_hidden
                grads["b1"] = g_hidden.sum(axis=0)
            for name, p in params.items():
                decay = WEIGHT_DECAY * p if name.startswith("W") else 0
                velocity[name] = MOMENTUM * velocity[name] - LEARNING_RATE * (grads[name] + decay)
                p += velocity[name]
        loss = total / n

    def predict(a):
        with np.errstate(all="ignore"):
            _, out = forward(norm(a))
        if TASK == "classify":
            bad = ~np.all(np.isfinite(out), axis=1)
            out[bad] = prior  # a diverged network predicts the class frequencies
            return out
        out = out[:, 0] * y_sd + y_mu
        out[~np.isfinite(out)] = y_mu  # ... or the mean
        return out

    os.makedirs("out", exist_ok=True)
    with open(os.path.join("out", "preds.tmp.npz"), "wb") as f:
        np.savez(f, val=predict(data("val_x.npy")), test=predict(data("test_x.npy")))
    os.replace(os.path.join("out", "preds.tmp.npz"), os.path.join("out", "preds.npz"))
    print(f"train_loss: {loss:.5f}")


if __name__ == "__main__":
    main()
