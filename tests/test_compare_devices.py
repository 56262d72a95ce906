"""``benchmarks/compare_devices.py``: the claim-by-claim comparison of a CPU and a CUDA ``testbed
check`` (``tox -e gpu``). Shown here on two CPU results folders, one of them edited and resealed
the way a device's different numbers would be written: equal folders agree, a difference in a
verdict, a power check or a drawn case is reported with exit 1, round-off is measured (on the
scale of the numbers and the bound) and not counted, the CUDA side may be one folder per
paper, and a file that fails its check is refused (exit 2), not compared.
"""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path

import pytest

from results_format.validation import seal
from testbed_app.cli import main

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
CLAIM = "classical.cg.exact_after_dim_y"


@pytest.fixture(scope="module")
def compare_devices():
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCHMARKS))
        yield importlib.import_module("compare_devices")


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> Path:
    results = tmp_path_factory.mktemp("cpu")
    assert (
        main(["check", "--claim", CLAIM, "--quiet", "--claims-only", "--results", str(results)])
        == 0
    )
    return results


def _edited(checked: Path, tmp_path: Path, edit, *, reseal: bool = True) -> Path:
    other = tmp_path / "cuda"
    shutil.copytree(checked, other)
    path = other / "claims" / f"{CLAIM}.json"
    record = json.loads(path.read_text())
    edit(record)
    path.write_text(json.dumps(seal(record) if reseal else record))
    return other


def test_the_same_results_agree(compare_devices, checked, tmp_path, capsys) -> None:
    other = tmp_path / "copy"
    shutil.copytree(checked, other)
    assert compare_devices.main([str(checked), str(other), "--json", str(tmp_path / "c.json")]) == 0
    assert "1 claim files compared, 0 differ" in capsys.readouterr().out
    written = json.loads((tmp_path / "c.json").read_text())
    assert written["verdicts"] == {CLAIM: ["holds", "holds"]}
    assert written["max_difference"] == 0.0


def test_round_off_is_measured_not_counted(compare_devices, checked, tmp_path) -> None:
    def nudge(record):
        case = record["cases"][0]
        case["measured"] = case["measured"] + 0.25 * case["bound"]

    result = compare_devices.compare(checked, _edited(checked, tmp_path, nudge))
    assert result["differing"] == {}
    # the CPU's measurement is exactly 0: the difference is on the bound's scale
    assert result["max_difference"] == pytest.approx(0.25)


def test_a_case_drawn_differently_is_a_difference(
    compare_devices, checked, tmp_path, capsys
) -> None:
    def redraw(record):
        record["cases"][1]["params"] = {"point_seed": 99}

    assert compare_devices.main([str(checked), str(_edited(checked, tmp_path, redraw))]) == 1
    out = capsys.readouterr().out
    assert f"{CLAIM}: case 1: drawn differently" in out
    assert "1 claim files compared, 1 differ" in out


def test_a_power_verdict_that_differs_is_a_difference(compare_devices, checked, tmp_path) -> None:
    def missed(record):
        # as a device whose run missed the perturbation records it (the file re-derives)
        record["power"].update(verdict="holds", caught=False, counterexample=None)

    result = compare_devices.compare(checked, _edited(checked, tmp_path, missed))
    assert result["differing"] == {CLAIM: ["power verdict: cpu 'fails as stated', cuda 'holds'"]}


def test_a_verdict_that_differs_is_a_difference(compare_devices) -> None:
    cpu = {"verdict": "holds", "n_cases": 8, "cases": []}
    cuda = {"verdict": "undecided", "n_cases": 8, "cases": []}
    assert compare_devices.compare_claim(cpu, cuda)["differences"] == [
        "verdict: cpu 'holds', cuda 'undecided'"
    ]


def test_a_file_that_fails_its_check_is_refused(compare_devices, checked, tmp_path, capsys) -> None:
    def tamper(record):
        record["cases"][0]["measured"] = 1.0  # above its bound, the verdict still "holds"

    other = _edited(checked, tmp_path, tamper, reseal=False)
    assert compare_devices.main([str(checked), str(other)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("compare_devices: ") and f"{CLAIM}.json: not trusted" in err
    assert len(err.strip().splitlines()) == 1


def test_a_folder_without_claims_is_one_line(compare_devices, checked, tmp_path, capsys) -> None:
    assert compare_devices.main([str(checked), str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no claims/ folder (not a testbed check results folder)" in err
    assert len(err.strip().splitlines()) == 1


def test_the_cuda_side_may_be_several_folders_but_not_overlapping(
    compare_devices, checked, tmp_path, capsys
) -> None:
    empty = tmp_path / "other-paper"
    (empty / "claims").mkdir(parents=True)
    copy = tmp_path / "copy"
    shutil.copytree(checked, copy)
    assert compare_devices.compare(checked, [copy, empty])["compared"] == 1
    assert compare_devices.main([str(checked), str(copy), str(checked)]) == 2
    assert "is also in another folder of the same side" in capsys.readouterr().err
