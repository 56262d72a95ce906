"""A client work as text for a message, and back: settings inline, vectors by the name under which
the client holds them.

A :class:`~testbed.federation.client_work.ClientWork` travels as JSON. Its settings (numbers,
flags, strings, tuples of them, and :func:`~testbed.federation.client_work.portable` objects such
as a local direction, FedMSA's maps or its configuration) are written out; each tensor field is
written as ``{"held": NAME}``, the name under which the destination client holds that vector
(``resolve``, given by the server's transport, which refuses a vector the client was never sent).
So a message carries no float that the ledger did not count: the floats travel as the ledger's
deliveries, the work only points at them.

Only registered classes are rebuilt (``WORK_KINDS``, ``PORTABLE``): a message cannot make a client
construct anything else.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

import torch

from testbed.federation.client_work import PORTABLE
from testbed.federation.client_work import WORK_KINDS
from testbed.federation.client_work import ClientWork
from testbed.federation.client_work import portable_name


class NotDeployable(ValueError):
    """A work or an algorithm that cannot run on deployed clients as it is (the message says
    why and what to change)."""


def encode_work(work: ClientWork, resolve: Callable[[torch.Tensor], str]) -> str:
    """``work`` as JSON; ``resolve(tensor)`` names the client's copy of each tensor field."""
    return json.dumps(_encode(work, resolve, f"{type(work).__name__}"), allow_nan=True)


def decode_work(text: str, held: Mapping[str, torch.Tensor]) -> ClientWork:
    """The work :func:`encode_work` wrote, with each vector taken from ``held`` (the client's
    copies by name).

    Raises:
        NotDeployable: an unknown kind or class, or a vector the client does not hold.
    """
    work = _decode(json.loads(text), held)
    if not isinstance(work, ClientWork):
        raise NotDeployable(f"a message's work is a {type(work).__name__}, not a client work")
    return work


def _encode(value: Any, resolve: Callable[[torch.Tensor], str], where: str) -> Any:
    if isinstance(value, torch.Tensor):
        return {"held": resolve(value)}
    if isinstance(value, ClientWork):
        if WORK_KINDS.get(value.kind) is not type(value):
            raise NotDeployable(
                f"{where}: {type(value).__name__} is not the registered client "
                f"work of kind {value.kind!r} (a subclass of one does not "
                "travel: its own code would not run on the clients)"
            )
        return {"work": value.kind, "fields": _fields(value, resolve, where)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = portable_name(type(value))
        if PORTABLE.get(name) is not type(value):
            raise NotDeployable(
                f"{where}: a {type(value).__name__} cannot travel to the "
                "clients (register it with testbed.federation.client_work."
                "portable; a subclass of a portable class is not portable)"
            )
        return {"portable": name, "fields": _fields(value, resolve, where)}
    if isinstance(value, (tuple, list)):  # a list setting (a config's tau_i) comes back a tuple
        return {"tuple": [_encode(item, resolve, f"{where}[{i}]") for i, item in enumerate(value)]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise NotDeployable(
        f"{where}: a {type(value).__name__} cannot travel in a message (only "
        "numbers, flags, strings, sequences, portable objects and sent vectors)"
    )


def _fields(value: Any, resolve: Callable[[torch.Tensor], str], where: str) -> dict[str, Any]:
    return {
        field.name: _encode(getattr(value, field.name), resolve, f"{where}.{field.name}")
        for field in dataclasses.fields(value)
        if field.init
    }


def _decode(value: Any, held: Mapping[str, torch.Tensor]) -> Any:
    if isinstance(value, list):
        raise NotDeployable("a message's work holds a bare list (tuples travel as {'tuple': ...})")
    if not isinstance(value, dict):
        return value
    if "held" in value:
        name = value["held"]
        if name not in held:
            raise NotDeployable(
                f"the work uses the vector {name!r}, which this client was "
                f"never sent (it holds {sorted(held)})"
            )
        return held[name]
    if "tuple" in value:
        return tuple(_decode(item, held) for item in value["tuple"])
    fields = {key: _decode(item, held) for key, item in value.get("fields", {}).items()}
    if "work" in value:
        cls: type | None = WORK_KINDS.get(value["work"])
        what = f"client work kind {value['work']!r}"
    elif "portable" in value:
        cls = PORTABLE.get(value["portable"])
        what = f"class {value['portable']!r}"
    else:
        raise NotDeployable(f"a message's work holds an unknown entry {sorted(value)}")
    if cls is None:
        raise NotDeployable(
            f"unknown {what}: the client's testbed does not register it (the "
            "same testbed version must run on the server and every client)"
        )
    return cls(**fields)


__all__ = ["NotDeployable", "decode_work", "encode_work"]
