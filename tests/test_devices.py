"""Closed-form problems on a device: ``problem.to(device)``, ``--device cpu|cuda`` of check,
calibrate, regress and verify (``testbed.devices``).

There is no GPU on the machines that run the default tests, so what can be shown here is shown
by construction: every family moves every one of its arrays (to torch's ``meta`` device, which
has no data but refuses to be mixed with CPU tensors: a starting point or a client index left
on the CPU would raise), no code copies a tensor to numpy without ``.cpu()``, ``--device cpu``
gives the same numbers as no option, and ``--device cuda`` without CUDA is one line. The tests
marked ``gpu`` (run by ``tox -e gpu``) compare CUDA with the CPU where a GPU is present.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from problems import PROBLEM_DB
from problems import QuadraticBilevel
from problems import all_clients
from problems import from_spec
from testbed import get_estimator
from testbed.devices import check_device
from testbed.federation.context import FederatedContext
from testbed.federation.sampling import ClientSampler
from testbed_app.cli import main
from theory_checks.claim import Case
from theory_checks.exact_quantities import sign_fixed
from theory_checks.registry import get_claim
from theory_checks.runner import measure
from theory_checks.settings import ExecutorSettings
from theory_checks.settings import RunSettings
from theory_checks.settings import use_settings

ROOT = Path(__file__).resolve().parents[1]
NO_CUDA = "needs a CUDA GPU (torch.cuda.is_available() is False); run by tox -e gpu"


def _tensors(value: object, path: str = "") -> list[tuple[str, torch.Tensor]]:
    if isinstance(value, torch.Tensor):
        return [(path, value)]
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in _tensors(v, f"{path}.{k}")]
    if isinstance(value, (list, tuple)):
        return [t for i, v in enumerate(value) for t in _tensors(v, f"{path}[{i}]")]
    return []


@pytest.mark.parametrize("info", PROBLEM_DB, ids=[p.name for p in PROBLEM_DB])
def test_every_family_moves_every_array_to_the_device(info) -> None:
    problem = info.build()
    assert problem.device == torch.device("cpu") and problem.to("cpu") is problem
    moved = problem.to("meta")
    held = _tensors(vars(moved))
    assert held and all(t.device.type == "meta" for _, t in held), [
        name for name, t in held if t.device.type != "meta"
    ]
    assert moved.device.type == "meta" and moved.id == problem.id
    assert problem.device.type == "cpu"  # a copy: the CPU problem is untouched
    if hasattr(moved, "initial_point"):
        assert all(v.device.type == "meta" for v in moved.initial_point())


@pytest.mark.parametrize("participation", [None, 0.5, 2])
def test_the_clients_of_a_round_are_on_the_commands_device(participation) -> None:
    """On an H100 (2026-11-26), ``testbed check --device cuda`` stopped in ``index_select``:
    "index is on cpu, different from other tensors on cuda:0". The shared ``arange(M)`` of
    full participation was made on the CPU whatever the default device. Every tensor of client
    indices a round hands out (participants, all clients, minibatch indices) is on the device
    that ``--device`` or ``with torch.device(...)`` sets; ``meta`` stands in for CUDA."""
    problem = QuadraticBilevel.random(4, 3, 3, 10.0, 0.3, seed=1, n_samples=3)
    with torch.device("meta"):
        ctx = FederatedContext(problem.to("meta"), np.random.default_rng(0), participation, 2)
        clients = ctx.participants()
        handed = {
            "participants": clients,
            "all clients": ctx.all_clients(),
            "problems.all_clients": all_clients(4),
            "sampler": ClientSampler(4, participation).sample(np.random.default_rng(1)),
            "batch": ctx.draw(clients).indices,
        }
    assert {name: t.device.type for name, t in handed.items()} == dict.fromkeys(handed, "meta")
    on_cpu = FederatedContext(problem, np.random.default_rng(0), participation, 2)
    assert on_cpu.participants().device.type == on_cpu.all_clients().device.type == "cpu"


#: Cases whose checks start from a singular vector, where the H100 run of 2026-11-26 measured
#: other numbers than the CPU (same verdicts): cuSOLVER returned the vector with the other sign,
#: or round-off chose another of several equal largest singular values.
SINGULAR_VECTOR_CASES = [
    (
        "hgp.theorem2.corrected",  # error at y* + Delta: 0.6036 on the CPU, 0.6318 on CUDA
        # (every client's P_i^T Q_i has the top singular value 0.5876: round-off chose the client)
        {
            "family": "PerClientQuadratic.random",
            "n_clients": 4,
            "dim_hyper": 2,
            "dim_y": 1,
            "condition_number": 1.0,
            "seed": 1,
            "hessian_heterogeneity": 0.44453194491202785,
            "cross_scale": 0.38108441191251163,
            "outer_coupling": 0.5876389661079793,
            "target_heterogeneity": 2.0,
            "rho": 0.7857725321917909,
            "mu": 1.0,
            "n_samples": 0,
            "hessian_noise": 0.0,
            "cross_noise": 0.0,
            "gradient_noise": 0.0,
        },
        {"point_seed": 67920},
    ),
    (
        "fedmsa.lemma_b1.contraction_corrected",  # -0.0038393 on the CPU, -0.0038416 on CUDA
        {
            "family": "QuadraticBilevel.random",
            "n_clients": 2,
            "dim_x": 1,
            "dim_y": 3,
            "condition_number": 6.896260511901779,
            "seed": 3752800,
            "hessian_heterogeneity": 0.4263316135029306,
            "gradient_heterogeneity": 1.0,
            "mu": 1.5,
            "n_samples": 0,
            "gradient_noise": 0.0,
            "hessian_noise": 0.0,
        },
        {"seed": 404},
    ),
]


@pytest.mark.parametrize(
    ("claim_id", "spec", "params"), SINGULAR_VECTOR_CASES, ids=[c[0] for c in SINGULAR_VECTOR_CASES]
)
def test_a_check_from_a_singular_vector_measures_the_same_whatever_its_sign(
    claim_id, spec, params, monkeypatch
) -> None:
    """Another solver is emulated on the CPU by a ``torch.linalg.svd`` that returns
    ``(-U, S, -Vh)`` (the same factorisation, the other signs) with the last matrix's singular
    values 4 ulps larger (round-off that makes the last of several equal ones the largest): the
    measurement must not change."""
    claim = get_claim(claim_id)
    make = get_estimator(claim.estimators[0]).build
    as_lapack = measure(claim, Case(from_spec(spec), params), make)
    lapack_svd = torch.linalg.svd

    def other_signs(matrix, *args, **kwargs):
        U, S, Vh = lapack_svd(matrix, *args, **kwargs)
        if S.ndim == 2:  # a stack: the last matrix's values up by 4 ulps
            S = torch.cat([S[:-1], S[-1:] * (1.0 + 4 * torch.finfo(S.dtype).eps)])
        return -U, S, -Vh

    monkeypatch.setattr(torch.linalg, "svd", other_signs)
    as_other = measure(claim, Case(from_spec(spec), params), make)
    assert as_other.passed == as_lapack.passed
    # float64 round-off of the same runs (the two signs' runs are both made either way)
    assert as_other.measured == pytest.approx(as_lapack.measured, rel=1e-12, abs=1e-15)


def test_sign_fixed_picks_one_of_the_two_signs_whatever_it_is_given() -> None:
    vector = torch.tensor([0.3, -0.9, 0.9, 0.1], dtype=torch.float64)
    fixed = sign_fixed(vector)
    assert torch.equal(fixed, -vector) and torch.equal(sign_fixed(-vector), fixed)
    assert float(fixed[1]) == 0.9  # the first of the largest entries, made positive


def test_a_moved_problem_computes_the_same_numbers_and_rebuilds_its_caches() -> None:
    problem = QuadraticBilevel.random(4, 3, 3, 10.0, 0.3, seed=1)
    x = torch.linspace(-1.0, 1.0, 3, dtype=torch.float64)
    before = problem.exact_hypergradient(x)  # fills the cached client means
    moved = problem.to("meta")
    assert "means" not in vars(moved) or vars(moved)["means"]["A"].device.type == "meta"
    assert torch.equal(problem.exact_hypergradient(x), before)
    assert from_spec(problem.spec(), device="meta").device.type == "meta"


def test_no_tensor_goes_to_numpy_without_cpu() -> None:
    """``tensor.numpy()`` raises for a CUDA tensor; numpy arrays have no ``.numpy()``, so every
    ``.numpy()`` in the code that computes is a tensor's and must follow ``.cpu()``. The one other
    kind with a ``.numpy()`` is Flower's ``Array`` (bytes on the host), marked where it is used."""
    bare = re.compile(r"(?<!\.cpu\(\))\.numpy\(\)")
    # a method chain split over lines (ruff format's style) is read as one line: ".cpu()" at the
    # end of one line and ".numpy()" at the start of the next are ".cpu().numpy()"
    chained = re.compile(r"\)\n\s*\.")
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for package in ("problems", "testbed", "theory_checks", "testbed_app")
        for path in sorted((ROOT / package).rglob("*.py"))
        for number, line in enumerate(chained.sub(").", path.read_text()).splitlines(), start=1)
        if bare.search(line) and "# flwr Array" not in line
    ]
    assert not offenders


def test_device_cpu_is_torchs_own_default() -> None:
    """``--device cpu`` puts no default-device mode in force: torch's own default, the CPU; an
    unknown device is refused when the settings are made, and so is a GPU on Ray (a Ray
    task's device is its config's)."""
    assert check_device("cpu") == torch.device("cpu")
    assert use_settings(RunSettings(device="cpu")).device == "cpu"
    assert torch.empty(0).device.type == "cpu"
    with pytest.raises(ValueError, match="one of"):
        RunSettings(device="tpu")
    with pytest.raises(ValueError, match="not --executor ray"):
        RunSettings(device="cuda", executor=ExecutorSettings("ray"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
@pytest.mark.parametrize(
    "command",
    [
        ["check", "--claim", "classical.neumann.error_identity"],
        ["calibrate", "--claim", "hgp.noise.sqrt_eta"],
        ["regress", "--estimator", "aid-neumann"],
        ["verify", "aid-neumann", "--no-report"],
    ],
)
def test_device_cuda_without_cuda_is_one_line(command, tmp_path, capsys) -> None:
    assert main([*command, "--device", "cuda", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "testbed: error: --device cuda: torch sees no CUDA device on this machine "
        "(torch.cuda.is_available() is False); use --device cpu"
    ]


def _without_times(value: object) -> object:
    """A claim record without its wall-clock times (``seconds``, at any depth)."""
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value


def _claim_files(results: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    for path in sorted((results / "claims").iterdir()):
        out[path.name] = (
            _without_times(json.loads(path.read_text()))
            if path.suffix == ".json"
            else path.read_bytes()
        )
    return out


def test_check_on_device_cpu_gives_the_numbers_of_no_option(tmp_path) -> None:
    claim = ["--claim", "classical.neumann.error_identity", "--quiet"]
    assert main(["check", *claim, "--results", str(tmp_path / "plain")]) == 0
    assert main(["check", *claim, "--results", str(tmp_path / "cpu"), "--device", "cpu"]) == 0
    assert _claim_files(tmp_path / "plain") == _claim_files(tmp_path / "cpu")
    meta = json.loads((tmp_path / "cpu" / "metadata.json").read_text())
    assert meta["device"] == "cpu"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
def test_a_problem_on_cuda_gives_the_cpus_exact_answers_to_float64_rounding() -> None:
    problem = QuadraticBilevel.random(50, 20, 20, 100.0, 0.3, seed=2, n_samples=4)
    on_gpu = problem.to("cuda")
    x = torch.linspace(-1.0, 1.0, 20, dtype=torch.float64)
    cpu, gpu = problem.exact_hypergradient(x), on_gpu.exact_hypergradient(x.cuda())
    assert gpu.device.type == "cuda" and gpu.dtype == torch.float64
    # kappa 100, d = 20: float64 solves agree to ~kappa * d * 1e-16; 1e-10 is the testbed's
    # closed-form tolerance (theory_checks/tolerances.py)
    assert torch.allclose(gpu.cpu(), cpu, rtol=1e-10, atol=1e-12)
