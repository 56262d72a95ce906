"""How a run runs, said once: :class:`RunSettings` (profile, device, dtype, threads, precision,
executor, plugins), made by an entry point and passed down explicitly.

An entry point makes one value: the command line (``testbed_app.run_settings.settings_of``
from the parsed options), a test session (the repository's ``conftest.py``), a researcher's
test (``testbed_app.testing.assert_claims_hold``), a Flower app. It puts the value in force in
its process with :func:`use_settings`, and passes it on: the profile to the claim runner,
calibration, mutation and regression (a :class:`~theory_checks.profiles.Profile`, never its
name), the whole value to the executor, whose worker processes (local or Ray) call
:func:`use_settings` with it at their own entry.

:func:`use_settings` is the one place in the packages that sets torch's default dtype and
device (``tests/test_settings.py`` greps for any other), and the one call that loads the
installed plugins (:func:`load_plugins`): importing a registry loads none, so what a process
registers depends on the settings it was given, not on what it happened to import.

Seeds are not a setting: a claim's cases are drawn from a seed derived from its id
(``runner.claim_seed``), a statistical check's streams from that seed and the calibration seed
the command names (``testbed calibrate --seeds``), so the same settings give the same numbers.
"""

from __future__ import annotations

import dataclasses

import torch

from testbed import registry as estimator_registry
from testbed.defaults import TASK_RETRIES
from testbed.devices import check_device
from testbed.plugins import PluginProblem
from testbed.precision import set_precision
from theory_checks import registry as claim_registry
from theory_checks.profiles import PROFILES
from theory_checks.profiles import Profile

#: The torch default dtypes a run may compute in (the closed-form claims: float64).
DTYPES = ("float64", "float32")
EXECUTORS = ("local", "ray")


@dataclasses.dataclass(frozen=True)
class ExecutorSettings:
    """Where the units of work run (``--executor``, ``--jobs``, ``--address``,
    ``--cpus-per-task``, ``--max-retries``; ``testbed_app.executors.make_executor``)."""

    name: str = "local"
    jobs: int = 1
    address: str | None = None
    cpus_per_task: int = 1
    max_retries: int = TASK_RETRIES

    def __post_init__(self) -> None:
        if self.name not in EXECUTORS:
            raise ValueError(f"unknown executor {self.name!r}: local or ray")


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """Everything about a run that is not the claims it checks (module docstring).

    Attributes:
        profile: how hard to look (``fast`` or ``thorough``, with its case cap).
        device: where torch creates the tensors of the closed-form problems (``cpu`` or
            ``cuda``; float64 on a GPU too).
        dtype: torch's default dtype (``float64``: the claims compare exact answers; ``None``
            leaves the process's own: ``testbed run`` and ``deploy``, whose configs name theirs).
        threads: torch intra-op threads of this process (``None``: torch's own choice).
        tf32: allow TF32 on a GPU (:mod:`testbed.precision`; off unless asked for).
        executor: where the units of work run.
        plugins: load the installed plugins' estimators, algorithms and claims.
    """

    profile: Profile = PROFILES["fast"]
    device: str = "cpu"
    dtype: str | None = "float64"
    threads: int | None = None
    tf32: bool = False
    executor: ExecutorSettings = ExecutorSettings()
    plugins: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.profile, Profile):
            raise TypeError(f"profile must be a Profile, got {self.profile!r}")
        if self.device != "cpu" and self.executor.name != "local":
            raise ValueError(
                "--device cuda runs on this machine's GPU: use it with the "
                "local executor (--jobs N), not --executor ray"
            )
        check_device(self.device)
        if self.dtype is not None and self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {list(DTYPES)}, got {self.dtype!r}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"--threads must be >= 1, got {self.threads}")

    def with_threads(self, threads: int) -> RunSettings:
        """The same settings with ``threads`` torch threads (a worker's own share)."""
        return dataclasses.replace(self, threads=threads)


#: Whether this process has loaded the installed plugins (:func:`use_settings` loads them once:
#: a Ray worker runs many tasks, a test session many commands).
_PLUGINS_LOADED: list[bool] = []


def load_plugins() -> list[PluginProblem]:
    """Load the installed plugins' entries and claims into the registries (each entry point
    left out, with its reason, is in the list and in ``testbed list``'s warnings)."""
    _PLUGINS_LOADED[:] = [True]
    return estimator_registry.refresh_plugins() + claim_registry.refresh_claim_plugins()


def use_settings(settings: RunSettings) -> RunSettings:
    """Put ``settings`` in force in this process: torch's default dtype and device, the
    precision policy, the thread count, and the plugins (loaded once per process: an entry a
    test or ``testbed verify module:object`` registers afterwards stays); returns ``settings``.

    The CPU is torch's own default device, so ``device="cpu"`` installs no default-device mode
    and computes number for number as before; ``cuda`` makes every tensor a claim creates
    without naming a device (a drawn problem's arrays, a starting point) a GPU tensor."""
    if settings.dtype is not None:
        torch.set_default_dtype(getattr(torch, settings.dtype))
    torch.set_default_device(None if settings.device == "cpu" else settings.device)
    set_precision(settings.tf32)
    if settings.threads is not None:
        torch.set_num_threads(settings.threads)
    use_plugins(settings)
    return settings


def use_plugins(settings: RunSettings) -> None:
    """The plugins of ``settings`` alone, loaded once per process (:func:`use_settings` without
    torch's defaults: ``testbed list`` reads, it does not compute)."""
    if settings.plugins and not _PLUGINS_LOADED:
        load_plugins()


__all__ = [
    "DTYPES",
    "EXECUTORS",
    "ExecutorSettings",
    "RunSettings",
    "load_plugins",
    "use_plugins",
    "use_settings",
]
