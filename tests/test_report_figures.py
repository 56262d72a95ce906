"""Figures that say what they show: a theory line beside every measured rate, bound
and exponent (from values in the results files, never invented), log axes for power laws, y
labels naming the quantity, counts against their formula, panels titled by the problem, and a
figure drawn again only when its inputs changed."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from reports import plots
from reports.build import build_report
from reports.case_titles import case_title
from reports.figure_cache import MANIFEST
from reports.figure_spec import Curve
from reports.figure_spec import quantity_label
from reports.figure_spec import slope_guide
from results_format.claim_record import FitRecord
from tests._claim_files import case_record
from tests._claim_files import claim_record
from tests._claim_files import refutation
from tests._claim_files import write_claim_file
from tests._claim_files import write_series

THEORY_ROLES = set(plots.THEORY_ROLES)
SPEC = {
    "family": "QuadraticBilevel.random",
    "n_clients": 6,
    "dim_x": 3,
    "dim_y": 2,
    "condition_number": 2.36358,
    "seed": 228041,
    "hessian_heterogeneity": 0.105375,
    "gradient_heterogeneity": 1.28481e-277,
    "mu": 1.0,
    "n_samples": 0,
    "gradient_noise": 0.0,
    "hessian_noise": 0.0,
}
PID = "quad.bilevel.m6.dx3.dy2.k2.36358.hh0.105375.gh1.28481e-277.n0.seed228041"

RATE = "classical.toy.rate_without_theory_series"
POWER = "hgp.toy.noise_exponent_b"
OTHER_VARIABLE = "aggitd.toy.participation"
COUNT = "fednest.toy.rounds"
BOUND_NO_SERIES = "fednest.toy.bound_without_series"
NO_THEORY = "fedmsa.toy.exponent_without_theory"
FITTED_BAND = "fednest.toy.variance_linear_in_n"  # measured + fitted series, three cases
ORIGIN_FAIL = "fednest.toy.per_client_bias"  # the failing case at the origin, under the others


def _fit(
    estimate: float, theory: float, quantity: str, half_width: float = 1e-3, tolerance: float = 0.05
) -> dict:
    return {
        "quantity": quantity,
        "estimate": estimate,
        "ci_low": estimate - half_width,
        "ci_high": estimate + half_width,
        "theory": theory,
        "tolerance": tolerance,
        "confidence": 0.95,
    }


def _fitted_claim(cid: str, paper: str, kind: str, fit: dict, relation: str) -> dict:
    """A claim that holds on one case (problem PID), its fit measured against its theory."""
    case = case_record(PID, fit["estimate"], fit["theory"], True, relation, fit)
    return claim_record(
        cid,
        paper,
        kind,
        "holds",
        [case | {"spec": SPEC, "outcome": "holds"}],
        fits=[fit | {"problem_id": PID}],
    )


#: A claim's record and its series: (estimator, rows) as :func:`write_series` takes them, or
#: None for a series file of a header only.
Figure = tuple[dict, tuple[str, list[tuple]] | None]


def _rate() -> Figure:
    fit = _fit(math.log(0.5), math.log(0.5) * 1.01, "log error per inner iteration")
    record = _fitted_claim(RATE, "Classical", "linear_rate", fit, "|fit - theory| <= 5% |theory|")
    return record, ("aid-cg", [(PID, "measured", "iteration", t, 2 * 0.5**t, 0) for t in range(10)])


def _power() -> Figure:
    fit = _fit(-0.5, -0.5, "exponent of the exact noise floor RMS in b")
    record = _fitted_claim(POWER, "HGP", "scaling_exponent", fit, "|exact exponent + 1/2| <= 0.1")
    rows = [
        (PID, name, "batch_size", b, scale * 3 * b**-0.5, 0)
        for b in (2, 4, 8, 16)
        for name, scale in (("measured", 1.0), ("bound", 1.01))
    ]
    return record, ("hgp-stochastic", rows)


def _other_variable() -> Figure:
    # the exponent is in (M-S)/(S(M-1)), not in the plotted S: no slope on the S axis
    fit = _fit(1.0, 1.0, "exponent of Var[h] in (M-S)/(S(M-1))", tolerance=0.02)
    record = _fitted_claim(
        OTHER_VARIABLE, "AggITD", "scaling_exponent", fit, "|exponent - 1| <= 0.02"
    )
    rows = [
        (PID, "measured", "sampled_clients", s, 0.01 * (5 - s) / (s * 4), 0) for s in (1, 2, 3, 4)
    ]
    return record, ("aggitd", rows)


def _count() -> Figure:
    cases = [
        case_record(f"p.{n}", 2 * n + 3.0, 2 * n + 3.0, True, "== at every iteration")
        for n in (1, 3, 5, 8)
    ]
    record = claim_record(COUNT, "FedNest", "communication_count", "holds", cases)
    rows = [(f"p.{n}", "measured", "outer_iteration", 1, 2 * n + 3, 0) for n in (1, 3, 5, 8)]
    return record, ("fednest", rows)


def _bound_no_series() -> Figure:
    cases = [case_record(f"p.{i}", 0.1 * i, 1.0, True) for i in (1, 2, 3)]
    return claim_record(BOUND_NO_SERIES, "FedNest", "bias_bound", "holds", cases), None


def _no_theory() -> Figure:
    cases = [case_record(PID, 0.5, math.inf, True, "monotone") | {"spec": SPEC}]  # no bound: inf
    record = claim_record(NO_THEORY, "FedMSA", "scaling_exponent", "holds", cases)
    return record, ("fedmsa", [(PID, "measured", "rounds R", r, 1.0 / r, 0) for r in (1, 2, 4, 8)])


def _fitted_band() -> Figure:
    # like fednest.ihgp.variance_linear_in_n: each case records its fitted rate as a series
    # (a pale band) and no theory series; the theory line showed in one panel of four
    pids = [f"{PID}.{i}" for i in range(3)]
    fits = [
        _fit(1.0 + 0.01 * i, 1.0, "exponent of Var(p) in N") | {"problem_id": pid}
        for i, pid in enumerate(pids)
    ]
    cases = [
        case_record(pid, fit["estimate"], 1.0, True, "|exponent - 1| <= 0.05", fit) | {"spec": SPEC}
        for pid, fit in zip(pids, fits, strict=True)
    ]
    record = claim_record(FITTED_BAND, "FedNest", "scaling_exponent", "holds", cases, fits=fits)
    rows = [
        (pid, name, "neumann_terms", n, (3 + i) * n ** (1.0 + 0.01 * i), 0)
        for i, pid in enumerate(pids)
        for n in (8, 16, 32, 64)
        for name in ("measured", "fitted")
    ]
    return record, ("fedihgp", rows)


def _origin_fail() -> Figure:
    # like fednest.lemma22.per_client_bias: passing cases at the origin, the failing one too
    cases = [
        case_record("p.0", 0.0, 0.0, True),
        case_record("p.1", 0.0, 0.0, True),
        case_record("p.2", 0.0, 0.0, False),
        case_record("p.3", 0.5, 1.0, True),
    ]
    record = refutation(ORIGIN_FAIL, "FedNest", "bias_bound", cases)
    return record, None


FIGURES = (
    _rate,
    _power,
    _other_variable,
    _count,
    _bound_no_series,
    _no_theory,
    _fitted_band,
    _origin_fail,
)


def make_figure_results(root: Path) -> Path:
    """One claim per figure kind (:data:`FIGURES`), in the runner's layout."""
    (root / "claims").mkdir(parents=True)
    (root / "metadata.json").write_text(json.dumps({"profile": {"name": "fast"}}))
    for figure in FIGURES:
        data, series = figure()
        cid = data["id"]
        estimator, rows = series or (data["estimators"][0], [])  # [] : a header only
        write_series(root / "series" / f"{cid}.csv", cid, estimator, rows)
        write_claim_file(root, data)
    return root


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str]:
    root = tmp_path_factory.mktemp("figures")
    index = build_report(make_figure_results(root / "results"), root / "out")
    manifest = json.loads((index.parent / "figures" / MANIFEST).read_text())["figures"]
    return index, manifest, index.read_text(encoding="utf-8")


def _panels(manifest: dict, cid: str) -> list[dict]:
    return manifest[f"{cid}.png"]["artists"]


def _roles(manifest: dict, cid: str) -> set[str]:
    return {role for panel in _panels(manifest, cid) for role in panel["roles"]}


def test_every_rate_exponent_and_bound_figure_draws_a_theory_line(built):
    _, manifest, _ = built
    for cid in (RATE, POWER, OTHER_VARIABLE, COUNT, BOUND_NO_SERIES):
        assert _roles(manifest, cid) & THEORY_ROLES, cid


def test_rate_without_theory_series_gets_the_fits_slope_and_interval(built):
    _, manifest, _ = built
    series_panel, fit_panel = _panels(manifest, RATE)
    assert {"measured", "theory-slope", "fitted-interval"} <= set(series_panel["roles"])
    assert series_panel["yscale"] == "log" and series_panel["xscale"] == "linear"
    assert {"theory-level", "allowed-region", "fit-estimate"} <= set(fit_panel["roles"])


def test_power_law_on_log_log_axes_with_the_quantity_as_y_label(built):
    _, manifest, _ = built
    first = _panels(manifest, POWER)[0]
    assert first["xscale"] == first["yscale"] == "log"
    assert "exact noise floor RMS" in first["ylabel"] and "error" not in first["ylabel"]
    assert first["xlabel"].startswith("batch size")
    assert {"bound", "theory-slope", "fitted-interval"} <= set(first["roles"])


def test_no_slope_on_an_axis_the_fit_is_not_in(built):
    index, manifest, text = built
    series_panel, fit_panel = _panels(manifest, OTHER_VARIABLE)
    assert "theory-slope" not in series_panel["roles"]
    assert "theory-level" in fit_panel["roles"]
    assert "its theory is shown in the right-hand panel only" in text


def test_counts_are_measured_against_the_formula_across_configurations(built):
    _, manifest, _ = built
    (panel,) = _panels(manifest, COUNT)  # one panel for all configurations, not one dot each
    assert {"case-measured", "case-bound"} <= set(panel["roles"])
    assert panel["xlabel"] == "the formula's value"
    assert panel["ylabel"].startswith("rounds measured")


def test_no_theory_line_is_invented(built):
    _, manifest, _ = built
    assert not _roles(manifest, NO_THEORY) & THEORY_ROLES


def test_panel_titles_describe_the_problem_not_its_id(built):
    _, manifest, _ = built
    title = _panels(manifest, POWER)[0]["title"]
    assert title.startswith("worst case: Quadratic bilevel: 6 clients, d_x 3, d_y 2, κ 2.36")
    assert "gradient het. ~0" in title and "e-277" not in title and PID not in title
    assert case_title("p.unknown", None) == "p.unknown"


def test_quantity_labels():
    assert quantity_label("exponent of Var[h] in (M-S)/(S(M-1))") == "Var[h]"
    assert quantity_label("log ||grad f(x_N)|| per Neumann term") == "||grad f(x_N)||"
    assert quantity_label("exponent of the exact noise floor RMS in b") == "exact noise floor RMS"
    assert quantity_label("something else") is None


def test_slope_guide_uses_the_recorded_theory_and_checks_the_axis():
    curve = Curve(
        "e",
        "measured",
        "b",
        (2.0, 4.0, 8.0, 16.0),
        tuple(3 * b**-0.5 for b in (2.0, 4.0, 8.0, 16.0)),
        (0.0,) * 4,
    )
    guide = slope_guide(curve, FitRecord.from_json(_fit(-0.5, -0.47, "q")), "power")
    assert guide is not None and guide.theory == -0.47 and guide.estimate == -0.5
    assert (guide.x_low, guide.x_high) == (2.0, 16.0)
    # a fit of another variable
    assert slope_guide(curve, FitRecord.from_json(_fit(1.0, 1.0, "q")), "power") is None


# --------------------------------------------------------------------------- the figure cache


def _pngs(out: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (out / "figures").glob("*.png")}


def test_rebuild_draws_only_the_figures_whose_inputs_changed(tmp_path, monkeypatch):
    results = make_figure_results(tmp_path / "results")
    out = tmp_path / "out"
    build_report(results, out)
    first = _pngs(out)
    assert len(first) >= 5

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("an unchanged figure was drawn again")

    monkeypatch.setattr(plots, "draw_figure", refuse)
    build_report(results, out)  # unchanged results: nothing is drawn
    assert _pngs(out) == first
    monkeypatch.undo()

    series = results / "series" / f"{RATE}.csv"
    series.write_text(series.read_text().replace(",0.5,", ",0.55,"))
    claim = json.loads((results / "claims" / f"{RATE}.json").read_text())
    claim.pop("files")  # the run that wrote the new series records its digest
    write_claim_file(results, claim)
    build_report(results, out)
    changed = {name for name, mtime in _pngs(out).items() if mtime != first[name]}
    assert changed == {f"{RATE}.png"}


def test_a_damaged_figure_is_drawn_again_and_a_removed_claim_pruned(tmp_path):
    results = make_figure_results(tmp_path / "results")
    out = tmp_path / "out"
    build_report(results, out)
    damaged = out / "figures" / f"{POWER}.png"
    damaged.write_bytes(b"not a png")
    (results / "claims" / f"{COUNT}.json").unlink()
    build_report(results, out)
    assert damaged.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (out / "figures" / f"{COUNT}.png").exists()
    manifest = json.loads((out / "figures" / MANIFEST).read_text())["figures"]
    assert f"{COUNT}.png" not in manifest
    assert not list((out / "figures").glob("*.tmp"))


def test_a_fitted_band_gets_the_theory_slope_in_every_panel(built):
    """fednest.ihgp.variance_linear_in_n showed the theory line in one panel of four (the
    fit summary): each series panel now draws the theory's slope through its points."""
    _, manifest, text = built
    *series_panels, summary = _panels(manifest, FITTED_BAND)
    assert len(series_panels) == 3
    for panel in series_panels:
        assert {"measured", "series:fitted", "theory-slope"} <= set(panel["roles"]) or {
            "measured",
            "fitted",
            "theory-slope",
        } <= set(panel["roles"]), panel
    assert "theory-level" in summary["roles"]
    assert "95% interval" in text  # the fits record 0.95, and the caption says so


def test_a_single_panel_caption_has_no_right_and_a_bound_says_where_holding_cases_lie(built):
    _, manifest, text = built
    assert len(_panels(manifest, ORIGIN_FAIL)) == 1
    caption = re.search(
        r'id="claim-fednest-toy-per_client_bias-figure">.*?<figcaption>(.*?)<', text, re.S
    )
    assert caption and not caption.group(1).startswith("Right")
    assert "on or below the line y = x, and one above it fails" in caption.group(1)
    assert "agreeing points lie on the line" not in text


def test_a_failing_case_is_drawn_on_top_of_passing_ones_at_the_same_place():
    """fednest.lemma22.per_client_bias's failing case sat at the origin under the passing
    points: it is drawn last, larger, as a cross."""
    import matplotlib.pyplot as plt

    from reports.figure_spec import CasePoint

    points = [
        CasePoint("1", 0.0, 0.0, "holds"),
        CasePoint("2", 0.0, 0.0, "fails"),
        CasePoint("3", 0.0, 0.0, "holds"),
    ]
    fig, ax = plt.subplots()
    try:
        plots.draw_case_points(ax, [0.0, 0.0, 0.0], points)
        drawn = [c for c in ax.collections if c.get_gid() == "case-measured"]
        top = max(drawn, key=lambda c: c.get_zorder())
        assert top is drawn[-1] and top.get_sizes()[0] > 3 * drawn[0].get_sizes()[0]
        assert tuple(top.get_facecolor()[0][:3]) == pytest.approx(
            tuple(int(plots.OUTCOME_COLORS["fails"][i : i + 2], 16) / 255 for i in (1, 3, 5))
        )
    finally:
        plt.close(fig)


def test_rounds_to_error_figure_is_readable_and_colour_blind_safe(tmp_path):
    """It had 7 px tick labels (an 18.6-inch figure scaled to the page) and two hard-to-tell
    colours: at most 13.5 inches wide at 10 pt ticks, each algorithm its own Okabe-Ito colour
    and line style."""
    from PIL import Image

    from reports import comparison_figure as cf
    from reports.figure_spec import Trace

    styles = [cf.algorithm_style(name) for name in cf.ALGORITHM_STYLES]
    assert len({s["color"] for s in styles}) == len(styles)
    assert len({str(s["linestyle"]) for s in styles}) == len(styles)
    okabe_ito = {
        "#000000",
        "#E69F00",
        "#56B4E9",
        "#009E73",
        "#F0E442",
        "#0072B2",
        "#D55E00",
        "#CC79A7",
    }
    assert {s["color"] for s in styles} <= okabe_ito
    assert cf.FONT_SIZES["xtick.labelsize"] >= 10 and cf.FONT_SIZES["ytick.labelsize"] >= 10
    metrics = ["aggitd", "fedmsa", "lfednest", "fedmsa_vs_fednest_n5", "lfednest_heterogeneous"]
    curves = {
        name: [
            Trace("0", (1.0, 2.0, 3.0), (10.0, 20.0, 30.0), {m: (1.0, 0.1, 0.01) for m in metrics})
        ]
        for name in cf.ALGORITHM_STYLES
    }
    path = tmp_path / "r.png"
    cf.plot_rounds_to_error(curves, {m: 0.1 for m in metrics}, path)
    with Image.open(path) as image:
        assert image.size[0] <= cf.WIDTH_INCHES * 100 + 1  # shown about 1:1 on a 1400 px page
