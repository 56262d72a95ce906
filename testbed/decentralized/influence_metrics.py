"""How well estimated influences match actual ones: HGP's Table 4 metrics (R^2 and F1), and
the influence protocol's Pearson correlation and sign agreement."""

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


def pearson_r(actual: np.ndarray, predicted: np.ndarray) -> float:
    """Pearson's correlation of ``predicted`` with ``actual``; NaN for fewer than two points or
    no spread. Its square is the R^2 of the best affine fit, an upper bound of
    :func:`r_squared` (which also charges a wrong slope or offset)."""
    a, p = np.asarray(actual, float), np.asarray(predicted, float)
    if a.size < 2 or float(a.std()) == 0.0 or float(p.std()) == 0.0:
        return math.nan
    return float(np.corrcoef(a, p)[0, 1])


def sign_agreement(actual: np.ndarray, predicted: np.ndarray) -> float:
    """Fraction of instances whose predicted change has the actual change's sign (NaN: none)."""
    a, p = np.asarray(actual, float), np.asarray(predicted, float)
    return math.nan if a.size == 0 else float((np.sign(a) == np.sign(p)).mean())
