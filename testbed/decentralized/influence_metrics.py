"""How well estimated influences match actual ones: HGP's Table 4 metrics (R^2 and F1)."""

from __future__ import annotations

import math

import numpy as np


def r_squared(actual: np.ndarray, predicted: np.ndarray) -> float:
    """``1 - SS_res / SS_tot`` of ``predicted`` against ``actual`` (Table 4's R^2); NaN for
    fewer than two points or no spread (undefined)."""
    actual, predicted = np.asarray(actual, float), np.asarray(predicted, float)
    ss_tot = float(((actual - actual.mean()) ** 2).sum()) if actual.size else 0.0
    if actual.size < 2 or ss_tot == 0.0:
        return math.nan
    return 1.0 - float(((actual - predicted) ** 2).sum()) / ss_tot


def negative_influence_f1(actual: np.ndarray, predicted: np.ndarray) -> float:
    """F1 of detecting negative-influence instances (removal lowers F: ``Delta < 0``), Table 4;
    NaN when neither side has a positive."""
    truth, guess = np.asarray(actual) < 0, np.asarray(predicted) < 0
    tp = int((truth & guess).sum())
    fp, fn = int((~truth & guess).sum()), int((truth & ~guess).sum())
    return math.nan if tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)
