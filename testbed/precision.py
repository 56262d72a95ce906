"""One numerical precision policy for every command that computes: no TF32 unless asked for.

On Ampere and later NVIDIA GPUs torch may run float32 matrix products (cuBLAS) and convolutions
(cuDNN) in TF32, a 10-bit mantissa: cuDNN convolutions do so by default. That moved the CNN
influence experiment's curvature enough for its Nesterov refinement at ``1/lambda_max`` to
diverge on an H200 (``||grad G||`` 4793 instead of the CPU's 2.46e-3, test accuracy at chance),
while the same run with TF32 off equals the CPU's figures. So every entry point of the testbed
(``testbed check``, ``calibrate``, ``regress``, ``run``, ``verify``, the benchmarks, the
executors' worker processes) calls :func:`set_precision` before it computes:

- ``tf32=False`` (the policy): float32 matmul precision ``"highest"``, and IEEE float32 (no
  TF32) for cuBLAS matrix products, cuDNN convolutions and cuDNN RNNs;
- ``tf32=True`` (only where a config says ``[run] tf32 = true`` or a command line asks with
  ``--tf32``): matmul precision ``"high"`` and TF32 for all three.

:func:`precision_record` reads the flags back from torch, and the results files record it
(``metadata.json`` of a run and of ``testbed check``, the benchmark files), so a figure says
under which policy it was computed. float64 never uses TF32: the closed-form claims are
unaffected either way, the policy matters to float32 workloads on a GPU.

torch >= 2.9 has one flag per backend and operator (``torch.backends.cudnn.conv.fp32_precision
= "ieee" | "tf32"``) and raises when its legacy booleans (``allow_tf32``) are read after the new
flags were set; both the setter and the reader use the new flags where they exist and the
legacy booleans otherwise. The flags are settable, and read back, without a GPU, so a test on
the CPU shows that every entry point sets them.
"""

from __future__ import annotations

from typing import Any

import torch

#: torch's name of IEEE float32 and of TF32 in the per-backend flags (torch >= 2.9).
_IEEE, _TF32 = "ieee", "tf32"


def _backend_flags() -> dict[str, Any]:
    """The per-operator precision flags of torch >= 2.9, by record key (empty before 2.9)."""
    cudnn = torch.backends.cudnn
    conv, rnn = getattr(cudnn, "conv", None), getattr(cudnn, "rnn", None)
    if not hasattr(conv, "fp32_precision"):
        return {}
    return {"cuda_matmul": torch.backends.cuda.matmul, "cudnn_conv": conv, "cudnn_rnn": rnn}


def set_precision(tf32: bool = False) -> dict[str, Any]:
    """Apply the policy (module docstring) to this process; return :func:`precision_record`.

    Args:
        tf32: allow TF32 (only where a config or option asks for it).
    """
    if not isinstance(tf32, bool):
        raise TypeError(f"tf32 must be a bool, got {tf32!r}")
    flags = _backend_flags()
    # the matmul precision first: in torch >= 2.9 it also sets cuBLAS's flag, which the
    # per-backend flags below then set again to the same value
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    if flags:
        for backend in flags.values():
            backend.fp32_precision = _TF32 if tf32 else _IEEE
    else:  # torch < 2.9: the legacy booleans
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    return precision_record()


def precision_record() -> dict[str, Any]:
    """The precision flags as torch reports them now: ``{"tf32": bool, "float32_matmul_precision":
    ..., "cuda_matmul": "ieee" | "tf32", "cudnn_conv": ..., "cudnn_rnn": ...}`` (before torch
    2.9: ``cuda_matmul_allow_tf32`` and ``cudnn_allow_tf32`` booleans). ``tf32`` is true when
    any backend may use TF32."""
    record: dict[str, Any] = {"float32_matmul_precision": torch.get_float32_matmul_precision()}
    flags = _backend_flags()
    if flags:
        record.update({key: str(backend.fp32_precision) for key, backend in flags.items()})
        tf32 = any(record[key] == _TF32 for key in flags)
    else:
        record["cuda_matmul_allow_tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)
        record["cudnn_allow_tf32"] = bool(torch.backends.cudnn.allow_tf32)
        tf32 = record["cuda_matmul_allow_tf32"] or record["cudnn_allow_tf32"]
    tf32 = tf32 or record["float32_matmul_precision"] != "highest"
    return {"tf32": tf32, **record}


def is_policy(record: dict[str, Any], tf32: bool = False) -> bool:
    """Whether ``record`` (a :func:`precision_record`) is what :func:`set_precision` with
    ``tf32`` leaves."""
    if record.get("tf32") != tf32:
        return False
    want = _TF32 if tf32 else _IEEE
    keys = [k for k in ("cuda_matmul", "cudnn_conv", "cudnn_rnn") if k in record]
    return all(record[k] == want for k in keys) and record.get("float32_matmul_precision") == (
        "high" if tf32 else "highest"
    )


__all__ = ["is_policy", "precision_record", "set_precision"]
