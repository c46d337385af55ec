"""Inputs for sampling programs (top-p) whose discontinuous outputs are well conditioned."""
import numpy as np


def top_p_threshold(x, top_p):
    """A threshold for the kept set (exclusive cumsum of the sorted probabilities < it) halfway between
    the two exclusive sums around top_p (float64), so that rounding cannot move a token across it."""
    s = np.sort(np.asarray(x, np.float64).reshape(-1))[::-1]
    p = np.exp(s - s[0])
    p /= p.sum()
    c = np.cumsum(p) - p
    k = int(np.searchsorted(c, top_p))
    return float((c[k - 1] + c[k]) / 2)
