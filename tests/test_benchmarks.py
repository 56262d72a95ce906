"""Smoke test of ``benchmarks/``: the quick mode of every benchmark writes BENCH_SCHEMA files.

No timing is asserted (speed is measured by ``tox -e bench``, never tested). What is checked: the
entry point runs every benchmark, each file has the schema the report renders, the batched and
looped closed-form rounds agree, and the oracle calls per hypergradient equal the papers'
minimum (a count, not a time).
"""

from __future__ import annotations

import copy
import importlib
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from results_format import BENCH_SCHEMA

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
NAMES = ("closed_form_rounds", "closed_form_scale", "hvp_cost", "workload_round", "authors_fednest")


@pytest.fixture(scope="module")
def bench_modules():
    """The benchmark scripts, imported in-process (their folder is a script folder, not a
    package: its modules import each other by top-level name)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCHMARKS))
        patch.delenv("FEDNEST_AUTHORS_REPO", raising=False)  # the run without the authors' code
        yield importlib.import_module("run"), importlib.import_module("_common")


@pytest.fixture(scope="module")
def quick_results(bench_modules, tmp_path_factory) -> dict[str, dict]:
    from testbed.precision import set_precision

    run, _ = bench_modules
    out = tmp_path_factory.mktemp("bench")
    set_precision(tf32=True)  # the entry point must set the policy whatever it finds
    assert run.main(["--quick", "--out", str(out)]) == 0
    return {path.stem: json.loads(path.read_text()) for path in out.glob("*.json")}


def test_every_benchmark_writes_a_schema_valid_file(bench_modules, quick_results):
    _, common = bench_modules
    assert sorted(quick_results) == sorted(NAMES)
    for name, payload in quick_results.items():
        assert tuple(payload) == BENCH_SCHEMA
        common.validate(payload)
        assert payload["benchmark"] == name
        assert payload["machine"]["quick"] is True
        # the precision policy (testbed.precision) recorded: TF32 off, matmul "highest"
        assert payload["machine"]["tf32"] is False
        assert "float32_matmul_precision=highest" in payload["machine"]["precision"]
        if not torch.cuda.is_available():
            assert "no CUDA GPU available" in payload["machine"]["device"]
        for row in payload["rows"]:
            numbers = [v for v in row.values() if isinstance(v, float)]
            assert all(math.isfinite(v) for v in numbers), row


def test_closed_form_rounds_compare_both_algorithms_and_agree(quick_results):
    rows = quick_results["closed_form_rounds"]["rows"]
    assert {row["algorithm"] for row in rows} == {"fednest", "fbo-aggitd"}
    baselines = ("replica", "closed_form_loop", "autograd_loop", "per_client_loop", "stream_bound")
    for row in rows:
        assert row["batched_s"] > 0
        for side in baselines:  # every ratio is the two times measured in this run
            assert row[f"{side}_s"] > 0, (row["algorithm"], side)
            assert row[f"{side}_over_batched"] == pytest.approx(row[f"{side}_s"] / row["batched_s"])
        # FedNest at T = tau = 5, N = 10: 78 oracle calls and 145 matrix reads per client
        if row["algorithm"] == "fednest":
            assert row["oracle_calls_per_client"] == 78 and row["matrix_reads"] == 145
    # agreement of every baseline with the batched iterate is asserted inside the benchmark
    # (AGREE_RTOL), which would have raised above
    targets = quick_results["closed_form_rounds"]["targets"]
    assert {t["direction"] for t in targets} == {"at_least", "at_most"}
    assert len(targets) == 4 * len(rows)


def test_closed_form_scale_measures_each_m_in_its_own_process(quick_results):
    payload = quick_results["closed_form_scale"]
    rows = payload["rows"]
    assert {(r["algorithm"], r["clients"]) for r in rows} == {
        (a, m) for a in ("fednest", "fbo-aggitd") for m in (4, 8)
    }
    for row in rows:
        assert row["round_ms_per_client"] == pytest.approx(1e3 * row["round_s"] / row["clients"])
        # a fresh interpreter with torch loaded holds far more than a few kB of arrays
        assert row["peak_rss_gb"] > row["array_gb"] > 0
    names = [t["name"] for t in payload["targets"]]
    assert sum("time per client" in n for n in names) == 2 and "peak resident" in names[-1]


def test_oracle_calls_per_hypergradient_equal_the_papers_minimum(quick_results):
    rows = [r for r in quick_results["hvp_cost"]["rows"] if r["part"] == "calls"]
    assert {row["estimator"] for row in rows} == {"fedihgp", "aggitd", "hgp"}
    for row in rows:
        for kind in ("grad_f", "grad_g", "hvp", "jvp"):
            assert row[f"{kind}_per_client"] == row[f"minimum_{kind}"], (row["estimator"], kind)
    timed = [r for r in quick_results["hvp_cost"]["rows"] if r["part"] == "time"]
    assert {row["workload"] for row in timed} >= {
        "closed-form quadratic",
        "hyper-representation MLP",
        "hyper-representation CNN",
    }


def test_workload_round_times_mlp_and_cnn_on_every_device(quick_results):
    rows = quick_results["workload_round"]["rows"]
    devices = {"cpu", "cuda"} if torch.cuda.is_available() else {"cpu"}
    assert {(r["workload"], r["device"]) for r in rows} == {
        (w, d) for w in ("hyper-representation MLP", "hyper-representation CNN") for d in devices
    }
    for row in rows:
        assert row["max_abs_step_x"] > 0  # the timed iteration did move x
        # both per-client loops take the batched step: float32 round-off (measured 4e-9 against
        # a step of 3e-4), far below a mixed-up client's O(step) difference
        assert row["max_abs_difference_x"] <= 1e-3 * row["max_abs_step_x"]
        assert row["row_loop_iteration_s"] > 0
        assert row["batched_round_s"] == pytest.approx(
            row["batched_iteration_s"] / row["rounds_per_iteration"]
        )
    # targets only where a GPU was timed (no target claim on the CPU)
    assert len(quick_results["workload_round"]["targets"]) == (
        2 if torch.cuda.is_available() else 0
    )


def test_without_the_authors_code_the_testbed_side_is_timed_and_the_way_to_add_theirs_said(
    quick_results,
):
    rows = quick_results["authors_fednest"]["rows"]
    assert [row["clients_per_round"] for row in rows] == [2, 4]
    for row in rows:
        assert row["testbed_iteration_s"] > 0
        assert row["testbed_rounds"] == 2 * 1 + 2 + 3  # 2T + N + 3 at quick T = 1, N = 2
        assert "--authors-repo" in row["authors_code"] and "speedup" not in row
    assert quick_results["authors_fednest"]["targets"] == []


# A stand-in with the authors' module API (written here, not their code): the four modules the
# benchmark imports, with their unused ``cv2`` import, so the driver and the comparison are
# tested where their repository is absent. Their fed_out returns its rounds (N + 3).
AUTHORS_API = {
    "core/__init__.py": "",
    "models/__init__.py": "",
    "utils/__init__.py": "",
    "core/function.py": (
        "def assign_hyper_gradient(params, gradient):\n"
        "    start = 0\n"
        "    for p in params:\n"
        "        p.grad = gradient[start:start + p.numel()].view_as(p).clone()\n"
        "        start += p.numel()\n"
    ),
    "models/ModelBuilder.py": (
        "import torch\n"
        "class MLP(torch.nn.Module):\n"
        "    def __init__(self, args):\n"
        "        super().__init__()\n"
        "        self.layer_input = torch.nn.Linear(784, 200)\n"
        "        self.header = torch.nn.Linear(200, args.num_classes)\n"
        "def build_model(args):\n"
        "    return MLP(args)\n"
    ),
    "utils/options.py": (
        "import argparse\n"
        "def args_parser():\n"
        "    parser = argparse.ArgumentParser()\n"
        "    for name, kind, default in [('num_users', int, 100), ('frac', float, 0.1),\n"
        "            ('local_bs', int, 10), ('gpu', int, 0), ('optim', str, 'svrg'),\n"
        "            ('model', str, 'mlp'), ('dataset', str, 'mnist'), ('hvp_method', str, ''),\n"
        "            ('inner_ep', int, 1), ('neumann', int, 5), ('local_ep', int, 5),\n"
        "            ('outer_tau', int, 5), ('lr', float, 0.003), ('hlr', float, 0.01),\n"
        "            ('num_classes', int, 10)]:\n"
        "        parser.add_argument('--' + name, type=kind, default=default)\n"
        "    parser.add_argument('--iid', action='store_true')\n"
        "    return parser.parse_args()\n"
    ),
    "core/ClientManage_hr.py": (
        "from cv2 import log\n"
        "import torch\n"
        "class ClientManageHR:\n"
        "    def __init__(self, args, net, client_idx, dataset, dict_users, hyper_param):\n"
        "        self.args, self.net, self.hyper_param = args, net, hyper_param\n"
        "        assert len(client_idx) == max(int(args.frac * args.num_users), 1)\n"
        "        assert all(len(dict_users[-i - 1]) == args.local_bs for i in client_idx)\n"
        "    def fed_in(self):\n"
        "        return self.net.state_dict(), 0.0\n"
        "    def fed_out(self):\n"
        "        size = sum(p.numel() for p in self.hyper_param)\n"
        "        return torch.zeros(size), self.args.neumann + 3\n"
    ),
}


def test_the_comparison_drives_the_authors_module_api(tmp_path):
    repo = tmp_path / "FedNest"
    for name, text in AUTHORS_API.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    out = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "authors_fednest.py"),
            "--quick",
            "--out",
            str(out),
            "--authors-repo",
            str(repo),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads((out / "authors_fednest.json").read_text())["rows"]
    for row in rows:
        assert row["authors_rounds"] == row["testbed_rounds"] == 7  # same rounds per iteration
        assert row["speedup"] == pytest.approx(
            row["authors_iteration_s"] / row["testbed_iteration_s"]
        )
        assert row["authors_code"] == str(repo.resolve())


def test_a_folder_without_the_authors_code_is_refused_by_name(tmp_path):
    (tmp_path / "core").mkdir()
    done = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "authors_fednest.py"),
            "--quick",
            "--out",
            str(tmp_path / "out"),
            "--authors-repo",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    assert "not a checkout of ucr-optml/FedNest" in done.stderr
    assert "core/ClientManage_hr.py" in done.stderr
    assert not (tmp_path / "out").exists()


def test_the_validator_rejects_malformed_files(bench_modules, quick_results):
    _, common = bench_modules
    good = quick_results["hvp_cost"]
    broken = []
    missing = copy.deepcopy(good)
    del missing["targets"]
    broken.append(missing)
    wrong_met = copy.deepcopy(good)
    wrong_met["targets"][0]["met"] = not wrong_met["targets"][0]["met"]
    broken.append(wrong_met)
    nested = copy.deepcopy(good)
    nested["rows"][0]["nested"] = {"a": 1}
    broken.append(nested)
    no_cpu = copy.deepcopy(good)
    del no_cpu["machine"]["cpu"]
    broken.append(no_cpu)
    for payload in broken:
        with pytest.raises(ValueError):
            common.validate(payload)


def test_the_seed_cost_benchmark_runs_every_claim_named(monkeypatch):
    """``--claim A B`` and ``--claim A --claim B`` name the same two claims (a repeated flag
    once kept only the last one); none named is every statistical claim."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    seeds = importlib.import_module("calibration_seeds")
    together = seeds.parse_arguments(["--claim", "a", "b"])
    repeated = seeds.parse_arguments(["--claim", "a", "--claim", "b"])
    assert together.claim == repeated.claim == ["a", "b"]
    assert seeds.parse_arguments([]).claim is None


def test_the_seed_cost_benchmark_keeps_each_sizes_fastest_run(monkeypatch):
    """``--repeats N``: the two sizes run in turn N times, each keeps its fastest time and
    records them all; fewer than one repeat is refused."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    seeds = importlib.import_module("calibration_seeds")
    times = iter([5.0, 30.0, 4.0, 33.0, 6.0, 27.0])
    order = []

    def run(name, count, attempt):
        order.append((name, count, attempt))
        return next(times)

    rows = seeds.fastest_of(3, {"small": 10, "large": 300}, run)
    assert order == [(n, c, a) for a in range(3) for n, c in (("small", 10), ("large", 300))]
    assert rows["small"]["seconds"] == 4.0 and rows["large"]["seconds"] == 27.0
    assert rows["small"]["all_seconds"] == [5.0, 4.0, 6.0]
    assert rows["large"]["seeds"] == 300
    with pytest.raises(SystemExit):
        seeds.parse_arguments(["--repeats", "0"])
