"""FedMSA's exact moments: the rate claims decided in float64, with no sampling error.

Exact moments of Theorem 3.1's output-rule criterion

.. math::  E\\|P(\\tilde x)\\|^2 + \\|\\tilde Z - Z^*(\\tilde x)\\|^2
           = O\\big(\\tau/R + 1/(\\sqrt K R) + \\sigma^2/(MKR) + (\\sigma/(MKR))^{2/3}\\big)
           \\qquad \\text{(Thm 3.1, eq. (49))},

the expectation over the minibatches, the local client ``m~ ~ Unif[M]`` of every round and
the output index ``(r, k) ~ Unif([R] x [K])`` (Algorithm 1 line 13). On the closed-form
families with additive sample noise (finite per-client sample sets, ``hessian_noise = 0``)
one FedMSA round is, for each local client ``m``, an affine map of the state ``s = (x, Z, h,
q, x_prev, Z_prev)`` plus a sum over the round's minibatch slots of a term that depends only
on that slot's sample:

.. math::  s_{r+1} = T_m s_r + c_m + \\sum_{j} \\delta_{m,j}(i_j), \\qquad
           i_j \\sim \\mathrm{Unif}\\{0..n-1\\} \\text{ independent},

(eqs. (5)-(6) are linear in the maps, the maps are affine in the point and in the sample's
noise, and the same sample enters both points of a difference). :func:`identify_round` reads
``T_m``, ``c_m`` and every ``delta_{m,j}`` off the *registered algorithm* (built by ``make``),
running single rounds in a :func:`scripted_round_context` that fixes the local client and
each minibatch slot's sample; :func:`validate_round` then checks the identified model against
a round with a random state, client and draws (to round-off, else the case is not
measurable). The mean and covariance of the state then follow exactly, round by round (a
mixture over ``m`` with probability 1/M), and so does ``E`` of the criterion, a quadratic form
(:func:`criterion_form`, :func:`expected_criteria`). The rate claims are therefore decided in
float64, deterministically: there is no sampling error to control, and a refutation is a
computation, not a fluke;
:func:`~theory_checks.fedmsa.common.exponent_measurement` fits their exponents.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from problems import Batch
from testbed.algorithms.fedmsa import FedMSAState
from testbed.federation.context import FederatedContext
from testbed.federation.sampling import FixedParticipants
from theory_checks.claim import NotMeasurable
from theory_checks.fedmsa.common import affine_matrix
from theory_checks.fedmsa.common import fixed_point_Z
from theory_checks.fedmsa.common import mean_maps
from theory_checks.fedmsa.common import state_sizes


@dataclasses.dataclass
class ScriptedBatches:
    """Minibatches the caller sets: call ``c`` (in the order the algorithm draws) returns
    ``draws[c]`` when given, else sample 0 in every slot except ``overrides``
    ``{(call, row, col): sample}``; ``shapes`` records each call's ``(clients, batch)``."""

    overrides: dict[tuple[int, int, int], int] = dataclasses.field(default_factory=dict)
    draws: Sequence[np.ndarray] | None = None
    shapes: list[tuple[int, int]] = dataclasses.field(default_factory=list)

    def draw(self, problem: Any, rng: Any, clients: torch.Tensor, batch_size: int) -> Batch:
        call = len(self.shapes)
        shape = (int(clients.shape[0]), int(batch_size))
        self.shapes.append(shape)
        if self.draws is not None:
            return Batch(torch.as_tensor(self.draws[call], dtype=torch.long))
        idx = torch.zeros(shape, dtype=torch.long)
        for (c, row, col), sample in self.overrides.items():
            if c == call:
                idx[row, col] = sample
        return Batch(idx)


def scripted_round_context(
    problem: Any, batch_size: int | None, choice: int, batches: ScriptedBatches | None = None
) -> FederatedContext:
    """A federated context whose randomness the caller sets: the local phase runs on client
    ``choice`` and the minibatches are ``batches``' (sample 0 everywhere by default)."""
    return FederatedContext(
        problem,
        np.random.default_rng(0),
        None,
        batch_size,
        sampler=FixedParticipants(torch.tensor([choice]), problem.n_clients),
        batches=batches or ScriptedBatches(),
    )


@dataclasses.dataclass(frozen=True)
class Layout:
    """The flat state ``s = (x, Z, h, q, x_prev, Z_prev)`` (``D = 3 (d_x + d_Z)``) of FedMSA
    after a round, and a round's outputs: the next ``s`` then its local iterates ``(x_{r+1,k},
    Z_{r+1,k})``, ``k = 1..K`` (the output rule's candidates)."""

    dx: int
    dz: int

    @property
    def du(self) -> int:
        return self.dx + self.dz

    @property
    def D(self) -> int:
        return 3 * self.du

    def state(self, s: np.ndarray) -> FedMSAState:
        t = torch.tensor(np.asarray(s, dtype=np.float64))
        dx, du = self.dx, self.du
        return FedMSAState(
            x=t[:dx].clone(),
            Z=t[dx:du].clone(),
            h=t[du : du + dx].clone(),
            q=t[du + dx : 2 * du].clone(),
            x_prev=t[2 * du : 2 * du + dx].clone(),
            Z_prev=t[2 * du + dx :].clone(),
            round=1,
        )

    def outputs(self, st_: FedMSAState) -> np.ndarray:
        fields = (st_.x, st_.Z, st_.h, st_.q, st_.x_prev, st_.Z_prev)
        parts = [t for t in fields if t is not None]
        if len(parts) != len(fields):
            raise NotMeasurable("a round left the state without h, q or the previous point")
        for it in st_.local:
            parts += [it.x[0], it.Z[0]]
        return torch.cat(parts).cpu().numpy().copy()

    def iterates(self, n_out: int) -> list[slice]:
        return [
            slice(self.D + k * self.du, self.D + (k + 1) * self.du)
            for k in range((n_out - self.D) // self.du)
        ]


@dataclasses.dataclass(frozen=True)
class Branch:
    """One round with the local phase on one client, identified from the algorithm:
    ``outputs = T s + c + sum over slots j and columns of responses[j][sample]``.

    ``T`` is None for round 0 (which starts from a given point). ``slots`` are the ``(call,
    row)`` of every minibatch row the round draws, ``rows[call]`` and ``widths[call]`` the shape
    of each call; ``responses[j][i]`` is the change of the outputs when column 0 of slot j draws
    sample ``i`` instead of sample 0 (so ``responses[j][0] = 0``). Every column of a row
    contributes the same way: a minibatch is the mean of exchangeable draws.
    """

    T: np.ndarray | None
    c: np.ndarray
    slots: tuple[tuple[int, int], ...]
    responses: tuple[np.ndarray, ...]
    rows: tuple[int, ...]
    widths: tuple[int, ...]

    def noise(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and covariance of the slots' sum, every column drawing its sample uniformly and
        independently (``width`` independent columns per slot)."""
        n_out = self.c.shape[0]
        shift, cov = np.zeros(n_out), np.zeros((n_out, n_out))
        for (call, _), resp in zip(self.slots, self.responses, strict=True):
            mean = resp.mean(0)
            shift += self.widths[call] * mean
            cov += self.widths[call] * (resp.T @ resp / resp.shape[0] - np.outer(mean, mean))
        return shift, cov

    def moments(
        self, mu: np.ndarray, sigma: np.ndarray, noise: tuple[np.ndarray, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Mean and covariance of the outputs when the state has mean ``mu``, covariance
        ``sigma`` (independent of this round's draws)."""
        shift, cov = noise
        if self.T is None:
            return self.c + shift, cov
        return self.T @ mu + self.c + shift, self.T @ sigma @ self.T.T + cov

    def predict(self, s: np.ndarray | None, draws: Sequence[np.ndarray]) -> np.ndarray:
        out = self.c.copy() if self.T is None or s is None else self.T @ s + self.c
        for (call, row), resp in zip(self.slots, self.responses, strict=True):
            for sample in np.asarray(draws[call])[row]:
                out = out + resp[int(sample)]
        return out

    def rebatched(self, width: int) -> Branch:
        """The same round with minibatches of ``width`` draws: each column's response is
        ``old width / width`` times the identified one (a minibatch is a mean)."""
        resp = tuple(
            r * (self.widths[call] / width)
            for (call, _), r in zip(self.slots, self.responses, strict=True)
        )
        return dataclasses.replace(self, responses=resp, widths=tuple(width for _ in self.widths))

    @staticmethod
    def mix(a: Branch, b: Branch, w: float) -> Branch:
        """``(1 - w) a + w b`` entry by entry: the round at an intermediate value of a parameter
        the round is affine in (rho: eq. (5) is affine in rho)."""
        if a.slots != b.slots or a.widths != b.widths or a.c.shape != b.c.shape:
            raise NotMeasurable("the round's minibatch calls differ between two momenta")
        T = None if a.T is None or b.T is None else (1.0 - w) * a.T + w * b.T
        resp = tuple(
            (1.0 - w) * ra + w * rb for ra, rb in zip(a.responses, b.responses, strict=True)
        )
        return dataclasses.replace(a, T=T, c=(1.0 - w) * a.c + w * b.c, responses=resp)


def run_round(
    alg: Any,
    problem: Any,
    layout: Layout,
    state: FedMSAState,
    choice: int,
    overrides: dict[tuple[int, int, int], int] | None = None,
    draws: Sequence[np.ndarray] | None = None,
) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """One round of ``alg`` from ``state`` with client ``choice`` sampled and the minibatches
    scripted (``overrides`` by call, else ``draws``): the round's outputs in ``layout``'s order
    and the shapes of the minibatches it asked for."""
    batches = ScriptedBatches(overrides or {}, draws)
    ctx = scripted_round_context(problem, alg.batch_size, choice, batches)
    return layout.outputs(alg.step(ctx, state)), batches.shapes


def identify_round(
    alg: Any,
    problem: Any,
    layout: Layout,
    n_samples: int,
    start: FedMSAState | None = None,
    clients: Sequence[int] | None = None,
) -> list[Branch]:
    """One :class:`Branch` per local client (``clients``, default all) of one round of
    ``alg``: round 0 from ``start`` when given (1 run), else a round >= 1 as an affine map of
    the state vector (``D + 1`` runs at the unit vectors), plus ``n_samples - 1`` runs per
    minibatch row for its responses. Every run draws sample 0 except where stated."""
    branches = []
    for m in range(problem.n_clients) if clients is None else clients:
        base = start if start is not None else layout.state(np.zeros(layout.D))
        c, shapes = run_round(alg, problem, layout, base, m)
        T = None
        if start is None:
            eye = np.eye(layout.D)
            T = np.stack(
                [
                    run_round(alg, problem, layout, layout.state(eye[k]), m)[0] - c
                    for k in range(layout.D)
                ],
                axis=1,
            )
        slots, responses = [], []
        for call, (rows, _) in enumerate(shapes):
            for row in range(rows):
                resp = np.zeros((n_samples, c.shape[0]))
                for i in range(1, n_samples):
                    resp[i] = (
                        run_round(alg, problem, layout, base, m, overrides={(call, row, 0): i})[0]
                        - c
                    )
                slots.append((call, row))
                responses.append(resp)
        branches.append(
            Branch(
                T,
                c,
                tuple(slots),
                tuple(responses),
                tuple(r for r, _ in shapes),
                tuple(w for _, w in shapes),
            )
        )
    return branches


# Why 1e-8 relative to the outputs' size: the model adds D + (number of slots) identified
# columns, each carrying float64 round-off ~1e-15 relative; an algorithm that is not affine in
# the state and the samples' noise (Hessian noise, a nonlinearity) misses by O(1) relative.
AFFINE_RTOL = 1e-8


def validate_round(
    alg: Any,
    problem: Any,
    layout: Layout,
    branches: list[Branch],
    n_samples: int,
    rng: np.random.Generator,
    start: FedMSAState | None = None,
    client: int | None = None,
) -> float:
    """Run one round of ``alg`` with a random (or the given) local client, random draws in
    every slot and column and (round >= 1) a random state: the identified model must predict
    its outputs to round-off. Raises NotMeasurable otherwise (the moments would not be exact).
    Returns the misfit."""
    m = int(rng.integers(len(branches))) if client is None else client
    branch = branches[m]
    s = None if start is not None else rng.standard_normal(layout.D)
    state = layout.state(s) if s is not None else start
    assert state is not None
    draws = [
        rng.integers(0, n_samples, size=(rows, width))
        for rows, width in zip(branch.rows, branch.widths, strict=True)
    ]
    out, shapes = run_round(alg, problem, layout, state, m, draws=draws)
    if out.shape != branch.c.shape or tuple(r for r, _ in shapes) != branch.rows:
        raise NotMeasurable("the round's outputs or minibatch calls changed between runs")
    pred = branch.predict(s, draws)
    err = float(np.abs(out - pred).max()) / (1.0 + float(np.abs(out).max()))
    if not err <= AFFINE_RTOL:
        raise NotMeasurable(
            f"the round is not affine in the state and the samples' noise "
            f"(relative misfit {err:.3g}): exact moments do not apply"
        )
    return err


def criterion_form(problem: Any, layout: Layout) -> tuple[np.ndarray, np.ndarray]:
    """``(G, g)`` with Theorem 3.1's criterion ``||P(x, Z*(x))||^2 + ||Z - Z*(x)||^2 =
    ||G u + g||^2`` at ``u = (x, Z)``; both parts are affine in ``u`` on these families (the
    reference maps :func:`reference_maps`, read off the problem's arrays)."""
    dx = layout.dx

    def parts(u: torch.Tensor) -> torch.Tensor:
        x, Z = u[:, :dx], u[:, dx:]
        Z_star = fixed_point_Z(problem, x)
        return torch.cat([mean_maps(problem, x, Z_star)[0], Z - Z_star], dim=-1)

    G = affine_matrix(parts, layout.du).cpu().numpy()
    g = parts(torch.zeros(1, layout.du, dtype=torch.float64))[0].cpu().numpy()
    return G, g


def expected_criteria(
    first: list[Branch], rest: list[Branch], R: int, G: np.ndarray, g: np.ndarray, layout: Layout
) -> np.ndarray:
    """Exact ``E`` of the output-rule criterion after each of rounds 1..R: the mean over every
    local iterate of rounds ``0..R-1`` of ``E||G u + g||^2 = tr(G'G Cov u) + ||G E u + g||^2``,
    the local client of each round uniform over the branches.

    The state's mean ``mu`` and covariance ``Sigma`` go round by round through the mixture:
    branch m gives ``mean_m = T_m mu + c_m + shift_m`` and ``cov_m = T_m Sigma T_m' + N_m``.
    """
    H = G.T @ G
    D = layout.D
    noise_first = [b.noise() for b in first]
    noise_rest = [b.noise() for b in rest]
    mu, sigma = np.zeros(D), np.zeros((D, D))
    total, count, out = 0.0, 0, []
    for r in range(R):
        branches, noises = (first, noise_first) if r == 0 else (rest, noise_rest)
        moments = [b.moments(mu, sigma, n) for b, n in zip(branches, noises, strict=True)]
        rows = layout.iterates(moments[0][0].shape[0])
        crit = 0.0
        for mean, cov in moments:
            for sl in rows:
                crit += float(np.sum(H * cov[sl, sl])) + float(np.sum((G @ mean[sl] + g) ** 2))
        total += crit / len(moments)
        count += len(rows)
        out.append(total / count)
        mu = np.mean([mean[:D] for mean, _ in moments], axis=0)
        second = np.mean(
            [cov[:D, :D] + np.outer(mean[:D], mean[:D]) for mean, cov in moments], axis=0
        )
        sigma = second - np.outer(mu, mu)
    return np.array(out)


@dataclasses.dataclass(frozen=True)
class _Exact:
    """A problem's identified FedMSA rounds: round 0 from the start (``first``) and rounds >= 1
    (``rest``), with what :func:`expected_criteria` needs."""

    first: list[Branch]
    rest: list[Branch]
    layout: Layout
    G: np.ndarray
    g: np.ndarray

    def criteria(self, R: int) -> np.ndarray:
        return expected_criteria(self.first, self.rest, R, self.G, self.g, self.layout)


def exact_run(
    alg: Any,
    problem: Any,
    x0: torch.Tensor,
    Z0: torch.Tensor,
    n_samples: int,
    seed: int,
    initial_batch: int | None = None,
    iid: bool = False,
) -> _Exact:
    """Identify and validate ``alg``'s rounds on ``problem`` from ``(x0, Z0)``; round 0 with
    ``initial_batch`` draws per minibatch when given (the proof's ``b_0``).

    ``iid``: the clients are copies of one client (data included), so a round on any local
    client is the round on client 0 with the clients relabelled, and the branches have equal
    moments: client 0 is identified and every other client is validated against it (one random
    round each) instead of being identified.
    """
    dx, dz = state_sizes(problem)
    layout = Layout(dx, dz)
    rng = np.random.default_rng(seed)
    start = alg.state_at(problem, x0, Z0)
    clients = (0,) if iid else None
    M = problem.n_clients

    def check(branches: list[Branch], algorithm: Any, at: FedMSAState | None) -> list[Branch]:
        if not iid:
            validate_round(algorithm, problem, layout, branches, n_samples, rng, at)
            return branches
        shared = branches * M
        for m in range(M):
            validate_round(algorithm, problem, layout, shared, n_samples, rng, at, client=m)
        return shared

    first = check(
        identify_round(alg, problem, layout, n_samples, start=start, clients=clients), alg, start
    )
    if initial_batch is not None:
        first = [b.rebatched(initial_batch) for b in first]
        alg0 = dataclasses.replace(alg, batch_size=initial_batch)
        validate_round(alg0, problem, layout, first, n_samples, rng, alg0.state_at(problem, x0, Z0))
    rest = check(identify_round(alg, problem, layout, n_samples, clients=clients), alg, None)
    G, g = criterion_form(problem, layout)
    return _Exact(first, rest, layout, G, g)
