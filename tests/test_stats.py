"""Statistics helpers: sample sizes, stated false-failure rates, fitted rates and intervals."""

import math

import numpy as np
import pytest

from theory_checks import stats


def test_hoeffding_sample_size_gives_the_requested_half_width():
    n = stats.min_num_samples_for_hoeffding(0.1, value_range=1.0, false_fail_rate=1e-3)
    assert stats.hoeffding_half_width(n, 1.0, 1e-3) <= 0.05 + 1e-12
    assert stats.hoeffding_half_width(n - 1, 1.0, 1e-3) > 0.05


def test_chebyshev_sample_size_gives_the_requested_half_width():
    n = stats.min_num_samples_for_chebyshev(0.2, variance=2.0, false_fail_rate=0.01)
    assert stats.chebyshev_half_width(n, 2.0, 0.01) <= 0.1 + 1e-12


def test_chebyshev_assertion_false_failure_rate_is_below_the_stated_rate():
    rng = np.random.default_rng(0)
    rate, trials, n = 0.05, 2000, 20
    failures = 0
    for _ in range(trials):
        samples = rng.standard_normal((n, 3))  # E||X - EX||^2 = 3
        try:
            stats.assert_mean_within_by_chebyshev(samples, np.zeros(3), 3.0, rate)
        except stats.StatisticalAssertionError:
            failures += 1
    # Chebyshev is conservative: the observed rate must not exceed the stated one. Why the
    # 4-sigma allowance: binomial noise of 2000 trials at p = 0.05 has sd ~0.005.
    assert failures / trials <= rate + 4 * math.sqrt(rate * (1 - rate) / trials)


def test_chebyshev_assertion_detects_a_biased_mean():
    rng = np.random.default_rng(1)
    n = stats.min_num_samples_for_chebyshev(0.5, variance=1.0, false_fail_rate=1e-3)
    samples = rng.standard_normal((n, 1)) + 0.5
    with pytest.raises(stats.StatisticalAssertionError, match="Chebyshev half width"):
        stats.assert_mean_within_by_chebyshev(samples, np.zeros(1), 1.0, 1e-3)


def test_hoeffding_one_sided_assertion():
    rng = np.random.default_rng(2)
    samples = rng.uniform(0.0, 1.0, size=4000)
    stats.assert_mean_below_by_hoeffding(samples, 0.5, 1.0, 1e-6)
    with pytest.raises(stats.StatisticalAssertionError, match="exceeds the bound"):
        stats.assert_mean_below_by_hoeffding(samples, 0.4, 1.0, 1e-6)


def test_fit_rate_recovers_an_exact_geometric_rate():
    steps = np.arange(50)
    fit = stats.fit_rate(steps, 3.0 * 0.9**steps)
    assert fit.slope == pytest.approx(math.log(0.9), rel=1e-12)
    assert fit.ci_low <= fit.slope <= fit.ci_high


def test_fit_interval_covers_the_true_slope_at_its_level():
    rng = np.random.default_rng(3)
    x = np.linspace(0, 1, 20)
    covered = 0
    for _ in range(1000):
        fit = stats.fit_slope(x, 2.0 * x + rng.standard_normal(20) * 0.3, confidence=0.9)
        covered += fit.ci_low <= 2.0 <= fit.ci_high
    # Why 0.86: coverage is Binomial(1000, 0.9), sd ~0.0095; 4 sd below 0.9.
    assert covered / 1000 > 0.86


def test_fit_exponent_recovers_a_power_law():
    sizes = np.array([1, 2, 4, 8, 16, 32])
    fit = stats.fit_exponent(sizes, 5.0 * sizes**-0.5)
    assert fit.slope == pytest.approx(-0.5, rel=1e-12)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: stats.fit_slope(np.arange(2), np.arange(2)), "at least 3 points"),
        (lambda: stats.fit_rate(np.arange(4), np.array([1.0, 0.0, 1.0, 1.0])), "positive"),
        (lambda: stats.fit_slope(np.ones(4), np.arange(4.0)), "distinct x"),
        (lambda: stats.hoeffding_half_width(10, 1.0, 0.0), "false_fail_rate"),
        (lambda: stats.bonferroni(0.1, 0), "num_checks"),
    ],
)
def test_bad_input_is_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_fit_slope_std_error_stays_accurate_on_near_perfect_lines_where_linregress_cancels():
    """Why fit_slope keeps its residual form of the slope's standard error instead of
    scipy.stats.linregress: linregress computes it from ``1 - r^2``, which cancels on the
    near-perfect lines of the deterministic rate claims (float64 curves)."""
    from scipy import stats as scipy_stats

    from theory_checks.stats import fit_slope

    rng = np.random.default_rng(0)
    x = np.arange(12.0)
    noise = 1e-8 * rng.standard_normal(12)
    y = 5.0 - 3.0 * x + noise
    fit = fit_slope(x, y)
    # reference: the residual variance over Sxx, in extended precision
    xc = (x - x.mean()).astype(np.longdouble)
    slope = (xc @ (y - y.mean())) / (xc @ xc)
    residual = (y - y.mean()) - slope * xc
    reference = float(np.sqrt((residual @ residual) / (len(x) - 2) / (xc @ xc)))
    assert abs(fit.std_error - reference) <= 1e-6 * reference
    # linregress's 1 - r^2 form rounds r to 1 on the same line: a zero standard error, which
    # would make every interval a point (measured 0.0 against 6.2e-10)
    assert scipy_stats.linregress(x, y).stderr < 0.5 * reference
