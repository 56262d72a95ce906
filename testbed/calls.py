"""What an estimate cost: oracle calls and communication, as one immutable record."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Calls:
    """Counters of one estimate (or of a whole run).

    Oracle counts are per-client evaluations: one client evaluating one gradient (or one
    Hessian-vector product) on one batch counts 1, so a global gradient over M clients counts M.

    Attributes:
        grad_f: outer-gradient evaluations (``grad_x f_i`` and ``grad_y f_i`` come from one
            backward pass and count once).
        grad_g: inner-gradient evaluations ``grad_y g_i``.
        hvp: inner Hessian-vector products ``grad^2_y g_i v``.
        jvp: mixed products ``grad^2_xy g_i v``.
        comm_rounds: communication rounds (aggregations at the server).
        floats_up: floats sent from clients to the server (or along graph edges).
        floats_down: floats sent from the server to clients.
    """

    grad_f: int = 0
    grad_g: int = 0
    hvp: int = 0
    jvp: int = 0
    comm_rounds: int = 0
    floats_up: int = 0
    floats_down: int = 0

    @property
    def floats_sent(self) -> int:
        return self.floats_up + self.floats_down

    @property
    def oracle_calls(self) -> int:
        return self.grad_f + self.grad_g + self.hvp + self.jvp

    def __add__(self, other: Calls) -> Calls:
        return Calls(
            **{
                f.name: getattr(self, f.name) + getattr(other, f.name)
                for f in dataclasses.fields(self)
            }
        )

    def as_dict(self) -> dict[str, int]:
        out = dataclasses.asdict(self)
        out["floats_sent"] = self.floats_sent
        out["oracle_calls"] = self.oracle_calls
        return out


class CallCounter:
    """Mutable tally that oracles and the ledger add to; :meth:`snapshot` freezes it."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {f.name: 0 for f in dataclasses.fields(Calls)}

    def add(self, field: str, amount: int) -> None:
        if field not in self._counts:
            raise KeyError(f"unknown counter {field!r}; known: {sorted(self._counts)}")
        self._counts[field] += int(amount)

    def snapshot(self) -> Calls:
        return Calls(**self._counts)
