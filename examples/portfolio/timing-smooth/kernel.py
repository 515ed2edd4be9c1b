# timing-smooth: a moving average. THE ONLY EDITABLE FILE.
#
# moving_average(x, w) takes a float64 array x and a window w and returns the len(x) − w + 1
# means of x[i : i + w]. evaluate.py times it (the median of three calls, each in a fresh
# process) and checks every entry to 1e-9 of the largest.
import numpy as np

# ---------------------------------------------------------------------------------------
# Knobs (`NAME = value`, rewritten by the built-in optimizer; ranges in program.md).
METHOD = "windows"  # windows: a mean per window; convolve: np.convolve; cumsum: differences of a running sum
CHUNK = 4096  # windows: outputs per chunk
FLOAT32 = False  # compute in single precision (faster, and wrong to 1e-9)
COPY_INPUT = False  # copy x into fresh contiguous memory first
# ---------------------------------------------------------------------------------------


def moving_average(x, w):
    x = np.array(x, dtype=np.float32 if FLOAT32 else np.float64, copy=COPY_INPUT)
    w = int(w)
    n = len(x) - w + 1
    if METHOD == "cumsum":
        c = np.concatenate([[0.0], np.cumsum(x)])
        return (c[w:] - c[:-w]) / w
    if METHOD == "convolve":
        return np.convolve(x, np.full(w, 1.0 / w, dtype=x.dtype), mode="valid")
    view = np.lib.stride_tricks.sliding_window_view(x, w)
    out = np.empty(n, dtype=x.dtype)
    chunk = max(1, int(CHUNK))
    for s in range(0, n, chunk):
        out[s : s + chunk] = view[s : s + chunk].mean(axis=1)
    return out
