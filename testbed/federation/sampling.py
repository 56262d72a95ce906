"""Client participation: all clients, or a seeded uniform subset per round."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from problems import all_clients


@dataclasses.dataclass(frozen=True)
class ClientSampler:
    """Chooses the participating clients of a round.

    Args:
        n_clients: M.
        participation: ``None`` or ``1.0`` for full participation; a fraction in ``(0, 1)``
            (FedNest's and AggITD's experiments use 0.1) gives ``max(1, round(fraction * M))``
            clients; an integer ``>= 1`` gives that many clients. Subsets are drawn uniformly
            without replacement and returned sorted.
    """

    n_clients: int
    participation: float | int | None = None

    def __post_init__(self) -> None:
        if self.n_clients < 1:
            raise ValueError(f"ClientSampler needs at least one client, got {self.n_clients}")
        p = self.participation
        if p is None:
            return
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p):
            raise ValueError(f"participation must be a fraction or a count, got {p!r}")
        if isinstance(p, int) and not 1 <= p <= self.n_clients:
            raise ValueError(f"participation count must be in [1, {self.n_clients}], got {p}")
        if isinstance(p, float) and not 0.0 < p <= 1.0:
            raise ValueError(f"participation fraction must be in (0, 1], got {p}")

    @property
    def per_round(self) -> int:
        p = self.participation
        if p is None:
            return self.n_clients
        if isinstance(p, int):
            return p
        return max(1, int(round(p * self.n_clients)))

    @property
    def is_full(self) -> bool:
        return self.per_round == self.n_clients

    def all_clients(self) -> torch.Tensor:
        """``arange(M)``: the shared tensor of :func:`problems._rows.all_clients`, which the
        problems recognise by identity and use their stacked arrays as they are (no gather)."""
        return all_clients(self.n_clients)

    def sample(self, rng: np.random.Generator) -> torch.Tensor:
        """Participating clients of one round (all of them under full participation)."""
        if self.is_full:
            return self.all_clients()
        chosen = rng.choice(self.n_clients, size=self.per_round, replace=False)
        return torch.as_tensor(np.sort(chosen), dtype=torch.long)


@dataclasses.dataclass
class ScriptedParticipants:
    """Participants given in advance, one subset per round (exact enumeration of client
    sampling); when the script runs out, ``then`` draws as usual."""

    script: list[torch.Tensor]
    then: ClientSampler

    def sample(self, rng: np.random.Generator) -> torch.Tensor:
        return self.script.pop(0) if self.script else self.then.sample(rng)

    def all_clients(self) -> torch.Tensor:
        return self.then.all_clients()


@dataclasses.dataclass(frozen=True)
class FixedParticipants:
    """The same clients in every round."""

    clients: torch.Tensor
    n_clients: int

    def sample(self, rng: np.random.Generator) -> torch.Tensor:
        return self.clients

    def all_clients(self) -> torch.Tensor:
        return all_clients(self.n_clients)
