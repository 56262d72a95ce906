"""Where a command computes: ``--device cpu|cuda`` of ``testbed check``, ``calibrate``,
``regress`` and ``verify``.

The closed-form problems, estimators and claim checks create their tensors without naming a
device (the arrays of a drawn problem, a starting point, client indices, a check's own vectors),
so the device a run's settings name (``theory_checks.settings.RunSettings.device``) becomes
torch's default device when the settings are put in force (``use_settings``, at the entry of
the command and of each of its worker processes): every problem a claim draws is built there in
float64 and every oracle, estimate and exact answer computed there; numpy sees only what is
copied back (``.cpu().numpy()``). The CPU is torch's own default, so ``--device cpu`` changes
nothing. A single problem moves with ``problem.to(device)``
(:meth:`problems.family.ProblemFamily.to`). This module only checks a name.
"""

from __future__ import annotations

import torch

DEVICES = ("cpu", "cuda")


def check_device(name: str) -> torch.device:
    """The device ``name`` (``"cpu"`` or ``"cuda"``); ValueError for an unknown name or a CUDA
    device that torch does not see."""
    if name not in DEVICES:
        raise ValueError(f"--device must be one of {list(DEVICES)}, got {name!r}")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            "--device cuda: torch sees no CUDA device on this machine "
            "(torch.cuda.is_available() is False); use --device cpu"
        )
    return torch.device(name)


__all__ = ["DEVICES", "check_device"]
