"""Where a command computes: ``--device cpu|cuda`` of ``testbed check``, ``calibrate``,
``regress`` and ``verify``.

The closed-form problems, estimators and claim checks create their tensors without naming a
device (the arrays of a drawn problem, a starting point, client indices, a check's own vectors),
so :func:`use_device` makes the device torch's default device
(``torch.set_default_device``) for the rest of the command: every problem a claim draws is
built there in float64 and every oracle, estimate and exact answer computed there; numpy sees
only what is copied back (``.cpu().numpy()``). The CPU is torch's own default, so ``--device
cpu`` changes nothing (no default-device mode is installed: the CPU runs as before, number for
number). Worker processes of ``--jobs N`` inherit the choice through ``TESTBED_DEVICE``
(:func:`use_device_of_environment`). A single problem moves with ``problem.to(device)``
(:meth:`problems.family.ProblemFamily.to`).
"""

from __future__ import annotations

import os

import torch

#: The environment variable through which worker processes learn the driver's device.
DEVICE_ENV = "TESTBED_DEVICE"
DEVICES = ("cpu", "cuda")


def use_device(name: str) -> torch.device:
    """Make ``name`` (``"cpu"`` or ``"cuda"``) torch's default device in this process and for
    the worker processes it starts; raise ValueError for an unknown name or a CUDA device that
    torch does not see."""
    if name not in DEVICES:
        raise ValueError(f"--device must be one of {list(DEVICES)}, got {name!r}")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            "--device cuda: torch sees no CUDA device on this machine "
            "(torch.cuda.is_available() is False); use --device cpu"
        )
    torch.set_default_device(None if name == "cpu" else name)
    os.environ[DEVICE_ENV] = name
    return torch.device(name)


def use_device_of_environment() -> None:
    """In a worker process: the driver's device (``TESTBED_DEVICE``), if it set one."""
    name = os.environ.get(DEVICE_ENV)
    if name:
        use_device(name)


__all__ = ["DEVICES", "DEVICE_ENV", "use_device", "use_device_of_environment"]
