"""What every closed-form problem family shares: its recipe (spec), id, repr and arrays.

A family declares, as class attributes, the id templates of its recipes (``str.format`` over the
spec, then the problem's attributes: ``"quad.bilevel.m{n_clients}...seed{seed}"``), the id of a
problem given inline (formatted over its attributes) and the names of the arrays that define it;
:class:`ProblemFamily` turns them into :attr:`id`, :meth:`spec`, :meth:`to_arrays` (for saving a
counterexample exactly) and ``repr``. A family with arrays that are not plain attributes
overrides :meth:`to_arrays`.

A recipe is the call that drew the problem: ``{"family": "X.random", **its arguments}`` in the
order of the signature. :func:`recipe_rng` checks its knobs by the rules every family shares
(clients, condition number, non-negative spreads, positive scales, dimensions, sample count,
seed) and returns the one generator the draw may use.

:class:`ClientArrayFamily` adds what the families defined by stacked per-client arrays share:
client rows of an array or their minibatch means over its per-sample twin ``<name>_samples``,
the client means, and the starting point ``(0, 0)``.
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any
from typing import ClassVar
from typing import Self

import numpy as np
import torch

from problems import _spectra
from problems._base import Batch
from problems._base import OracleParts
from problems._base import ProblemConstants
from problems._base import ProblemError
from problems._rows import ClientRows
from problems._rows import draw_indices
from problems._rows import gather_mean
from problems._rows import rmatvec
from problems._rows import rows
from problems.checks import check_arrays
from problems.checks import check_clients
from problems.checks import check_condition_number
from problems.checks import check_int
from problems.checks import check_nonnegative
from problems.checks import check_positive
from problems.checks import check_positive_definite
from problems.checks import check_samples
from problems.checks import check_seed
from problems.checks import check_size
from problems.checks import chunk_size
from problems.checks import operator_of
from problems.checks import spectral_norms
from problems.checks import symmetric_operator


class _Attributes(dict[str, Any]):
    """``str.format_map`` over ``first`` (a spec), then an object's attributes."""

    def __init__(self, owner: object, first: dict[str, Any] | None = None) -> None:
        super().__init__(first or {})
        self.owner = owner

    def __missing__(self, key: str) -> Any:
        return getattr(self.owner, key)


#: The knobs of a client Hessian spread ``S_i`` and of the sample noise ``N_ij`` on it, in the
#: families that draw ``H^{1/2} (I + S_i + N_ij) H^{1/2}``: their sum must stay below 1.
HESSIAN_SPREADS = ("hessian_heterogeneity", "hessian_noise")
#: The knobs of :meth:`QuadraticFamily.random` with which every family starts its ``KNOBS``:
#: the Hessian and gradient spreads (default: the ``heterogeneity`` shorthand) ...
SPREAD_KNOBS: dict[str, float | None] = {
    "hessian_heterogeneity": None,
    "gradient_heterogeneity": None,
}
#: ... and the sample sets of the stochastic oracle (default: none), with which it ends them
#: (before its scale knobs).
SAMPLE_KNOBS: dict[str, float | None] = {
    "n_samples": 0,
    "gradient_noise": 0.0,
    "hessian_noise": 0.0,
}
#: The knobs of :meth:`QuadraticFamily.random` that must be finite and >= 0.
NONNEGATIVE_KNOBS = (
    "hessian_heterogeneity",
    "gradient_heterogeneity",
    "gradient_noise",
    "hessian_noise",
)


def knob_spec(
    label: str,
    given: dict[str, Any],
    knobs: dict[str, Any],
    table: dict[str, float | None],
    *,
    shorthand: float = 0.0,
    scales: Sequence[str] = (),
) -> dict[str, Any]:
    """The recipe of a family's ``random`` that takes its keyword knobs by a table:
    ``{"family": label, **given}``, then every knob of ``table`` in the table's order, its value
    in ``knobs`` or else the table's default (a default ``None`` is the ``heterogeneity``
    ``shorthand``, :func:`either`); a knob in ``scales`` joins the recipe only when not 1. A knob
    the table does not have raises ``TypeError``, as Python does for an unknown argument."""
    unknown = [knob for knob in knobs if knob not in table]
    if unknown:
        raise TypeError(f"{label}() got an unexpected keyword argument {unknown[0]!r}")
    spec = {"family": label, **given}
    for knob, default in table.items():
        value = knobs.get(knob, default)
        value = either(value, shorthand) if default is None else value
        if knob not in scales or value != 1.0:
            spec[knob] = value
    return spec


def sample_arguments(family: type[ProblemFamily], given: dict[str, Any]) -> dict[str, Any]:
    """A constructor's per-sample arrays, given by name (``A_samples=...``), keyed by the client
    array they sample (``"A"``; ``None`` where not given) for
    :func:`~problems.checks.check_samples`, which wants all or none; a name not in the family's
    ``SAMPLE_NAMES`` raises ``TypeError``, as Python does for an unknown argument."""
    unknown = [key for key in given if key not in family.SAMPLE_NAMES]
    if unknown:
        raise TypeError(f"{family.__name__}(): got an unexpected keyword argument {unknown[0]!r}")
    return {key.removesuffix("_samples"): given.get(key) for key in family.SAMPLE_NAMES}


def inner_hessians(rng: np.random.Generator, spec: dict[str, Any]) -> _spectra.SpectralStack:
    """The first draw of :meth:`QuadraticFamily.random` for its checked ``spec``: the client
    inner Hessians (:func:`problems._spectra.spectral_stack`, built in place chunk by chunk, no
    stack-sized temporaries) of ``n_clients`` clients in ``dim_y`` dimensions, spectrum of the
    mean log-spaced in ``[mu, condition_number mu]``, relative spread
    ``hessian_heterogeneity``; the spread is kept for the sample sets when ``n_samples > 0``."""
    return _spectra.spectral_stack(
        rng,
        spec["n_clients"],
        spec["dim_y"],
        spec["mu"],
        spec["condition_number"],
        spec["hessian_heterogeneity"],
        keep_spread=spec["n_samples"] > 0,
    )


def _moved(value: Any, device: torch.device) -> Any:
    """``value`` with every tensor in it (in dicts, lists and tuples too) on ``device``."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: _moved(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_moved(v, device) for v in value)
    return value


def either(knob: float | None, shorthand: float) -> float:
    """A knob of a family's ``random``, or its ``heterogeneity`` shorthand when not given."""
    return shorthand if knob is None else knob


def recipe_rng(
    spec: dict[str, Any],
    *,
    nonnegative: Sequence[str] = (),
    positive: Sequence[str] = (),
    dims: Sequence[str] = (),
    below_one: Sequence[str] = (),
    size: tuple[Callable[[dict[str, Any]], int], str] | None = None,
) -> np.random.Generator:
    """Check a recipe's knobs and return ``np.random.default_rng(spec["seed"])``, the only
    randomness of the draw.

    Every recipe needs ``n_clients >= 1`` and a seed numpy accepts; a ``condition_number`` in
    the spec must lie in ``[1, 1e12]`` and an ``n_samples`` be an integer ``>= 0``. The knobs
    named in ``nonnegative`` must be finite and ``>= 0``, those in ``positive`` ``> 0``, those in
    ``dims`` integers ``>= 1``; the knobs in ``below_one`` (a Hessian spread and the sample noise
    on it) must add up to less than 1, which keeps every client and sample Hessian
    ``H^{1/2} (I + S_i + N_ij) H^{1/2}`` positive definite. ``size`` (the number of float64
    numbers the draw's arrays hold, as a function of the checked spec, and that formula in
    words) must stay within :data:`~problems.checks.MAX_FLOATS`. Errors name ``spec["family"]``.
    """
    label = str(spec["family"])
    check_clients(label, spec["n_clients"])
    if "condition_number" in spec:
        check_condition_number(label, spec["condition_number"])
    for knob in nonnegative:
        check_nonnegative(label, knob, spec[knob])
    total = sum(spec[knob] for knob in below_one)
    if total >= 1.0:
        raise ProblemError(
            f"{label}: {' + '.join(below_one)} = {total:.3g} >= 1 would make an "
            "inner Hessian not positive definite"
        )
    for knob in positive:
        check_positive(label, knob, spec[knob])
    for knob in dims:
        check_int(label, knob, spec[knob], None)
    if any(spec[knob] < 1 for knob in dims):
        got = ", ".join(str(spec[knob]) for knob in dims)
        raise ProblemError(f"{label}: dimensions must be >= 1, got ({got})")
    if "n_samples" in spec:
        check_int(label, "n_samples", spec["n_samples"], None)
        if spec["n_samples"] < 0:
            raise ProblemError(f"{label}: n_samples must be >= 0, got {spec['n_samples']}")
    check_seed(label, spec["seed"])
    if size is not None:  # before any array is allocated
        floats, what = size
        check_size(label, int(floats(spec)), what)
    return np.random.default_rng(spec["seed"])


class ProblemFamily:
    """Identity and serialisation of a closed-form problem family (module docstring).

    Attributes a family sets:
        ID_TEMPLATES: id template per spec ``family`` (a recipe such as ``"X.random"``).
        INLINE_ID: id template over the problem's attributes, for arrays given inline.
        ARRAY_NAMES: the arrays that define the problem.
        SAMPLE_NAMES: the per-sample arrays, saved when the problem has samples.
    """

    ID_TEMPLATES: ClassVar[dict[str, str]] = {}
    INLINE_ID: ClassVar[str] = ""
    ARRAY_NAMES: ClassVar[tuple[str, ...]] = ()
    SAMPLE_NAMES: ClassVar[tuple[str, ...]] = ()
    _spec: dict[str, Any]
    name: str
    n_samples: int

    @property
    def id(self) -> str:
        template = self.ID_TEMPLATES.get(str(self._spec.get("family")))
        if template is not None:
            return template.format_map(_Attributes(self, self._spec))
        return self.INLINE_ID.format_map(_Attributes(self))

    def spec(self) -> dict[str, Any]:
        """The recipe that rebuilds this problem (see :func:`problems.from_spec`)."""
        return dict(self._spec)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Every array that defines the problem, for saving a counterexample exactly."""
        out = {k: getattr(self, k).cpu().numpy().copy() for k in self.ARRAY_NAMES}
        if getattr(self, "n_samples", 0):
            out.update({k: getattr(self, k).cpu().numpy().copy() for k in self.SAMPLE_NAMES})
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r})"

    @property
    def device(self) -> torch.device:
        """Where the problem's arrays live: its oracles, exact answers and starting point
        compute there (float64 on a GPU too)."""
        for value in vars(self).values():
            if isinstance(value, torch.Tensor):
                return value.device
        return torch.device("cpu")

    def to(self, device: str | torch.device) -> Any:
        """This problem with every array on ``device`` (a copy; dtypes kept, float64): the same
        problem, the same id and recipe, its oracles and exact answers computed there. Caches
        (``functools.cached_property``: client means, gathered rows) are dropped and rebuilt on
        the device when first used."""
        device = torch.device(device)
        if device == self.device:
            return self
        out = copy.copy(self)
        for key, value in vars(self).items():
            if isinstance(getattr(type(self), key, None), functools.cached_property):
                del vars(out)[key]
            else:
                vars(out)[key] = _moved(value, device)
        return out

    def sample_batch(
        self, rng: np.random.Generator, clients: torch.Tensor, batch_size: int
    ) -> Batch:
        """``batch_size`` sample indices per evaluated client, uniform with replacement over the
        client's ``n_samples`` (:func:`problems._rows.draw_indices`)."""
        return draw_indices(rng, clients, self.n_samples, batch_size, self.name)


@functools.cache  # one per family: the same signature at every construction
def _arrays_signature(names: tuple[str, ...]) -> inspect.Signature:
    """The constructor's arguments: the client arrays ``names`` (by position or name), then the
    sample arrays (by name)."""
    parameter = inspect.Parameter
    return inspect.Signature(
        [parameter(key, parameter.POSITIONAL_OR_KEYWORD) for key in names]
        + [parameter("samples", parameter.VAR_KEYWORD)]
    )


class ClientArrayFamily(ProblemFamily):
    """A family defined by per-client arrays stacked on a leading client axis (``ARRAY_NAMES``),
    some with per-sample twins ``<name>_samples`` of shape ``(M, n_samples, ...)`` whose sample
    means are the client arrays.

    The losses read client rows through :meth:`_sampled` (a fresh gather); the closed-form
    oracles through :meth:`_term` and :meth:`_curvature`, which gather each array once per
    client set (:class:`problems._rows.ClientRows`) and apply a symmetric client array through
    its operator (:meth:`_prepare_oracles`).
    """

    dim_x: int
    dim_y: int
    _client_eigenvalues: torch.Tensor
    _operators: dict[str, torch.Tensor]
    _as_stored: dict[str, bool]
    _samples_symmetric: bool

    @functools.cached_property
    def _client_rows(self) -> ClientRows:
        return ClientRows()

    def _prepare_oracles(
        self,
        symmetric: Sequence[str],
        sampled: str | None = None,
        as_stored: dict[str, bool] | None = None,
    ) -> None:
        """The closed-form oracles apply each symmetric client array in ``symmetric`` as stored
        (or a symmetrised copy of input symmetric only to 1e-10: see
        :func:`problems.checks.symmetric_operator`; ``as_stored[name]``, when given, is that
        decision made already, :func:`problems.checks.symmetric_to_round_off`); ``sampled``
        names the one whose per-sample twin the oracles read (symmetrised per minibatch unless
        it is symmetric as stored)."""
        self._operators = {
            name: symmetric_operator(getattr(self, name))
            if as_stored is None
            else operator_of(getattr(self, name), as_stored[name])
            for name in symmetric
        }
        self._as_stored = {name: self._operators[name] is getattr(self, name) for name in symmetric}
        samples = None if sampled is None else getattr(self, f"{sampled}_samples")
        self._samples_symmetric = samples is None or symmetric_operator(samples) is samples

    def applied_as_stored(self, name: str) -> bool:
        """Whether the closed-form oracles apply the symmetric client array ``name`` as stored
        (not through a symmetrised copy: :func:`problems.checks.symmetric_operator`), as
        decided when the problem was built."""
        return self._as_stored[name]

    def _sampled(self, name: str, clients: torch.Tensor, batch: Batch | None) -> torch.Tensor:
        """Client array ``name`` of each evaluated client, or its minibatch mean; only the array
        asked for is read."""
        if batch is None:
            return rows(getattr(self, name), clients)
        samples = getattr(self, f"{name}_samples")
        assert samples is not None
        return gather_mean(samples, clients, batch)

    def _take(self, array: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        return self._client_rows.get(array, clients)

    def _term(self, name: str, clients: torch.Tensor, batch: Batch | None) -> torch.Tensor:
        """Client array ``name`` per evaluated client (gathered once per client set), or its
        minibatch mean."""
        if batch is None:
            return self._take(getattr(self, name), clients)
        return self._sampled(name, clients, batch)

    def _curvature(self, name: str, clients: torch.Tensor, batch: Batch | None) -> torch.Tensor:
        """The symmetric client matrices ``name`` per evaluated client, through their operator,
        or the (symmetrised) minibatch mean of their samples."""
        if batch is None:
            return self._take(self._operators[name], clients)
        matrices = self._sampled(name, clients, batch)
        return (
            matrices if self._samples_symmetric else 0.5 * (matrices + matrices.transpose(-1, -2))
        )

    def _sample_deviations(self, *names: str) -> list[torch.Tensor]:
        """``X_samples - X[:, None]`` for each client array ``X`` named: every sample's deviation
        from its client's array, ``(M, n, ...)``, from which a minibatch oracle's noise variance
        is exact; raises on a problem built without samples."""
        if not self.n_samples:
            raise ProblemError(f"{self.name}: built without samples, so it has no oracle noise")
        return [getattr(self, f"{name}_samples") - getattr(self, name)[:, None] for name in names]

    def initial_point(self) -> tuple[torch.Tensor, torch.Tensor]:
        return (
            torch.zeros(self.dim_x, dtype=torch.float64, device=self.device),
            torch.zeros(self.dim_y, dtype=torch.float64, device=self.device),
        )

    def _inner_constants(self, hessians: str, linear: str, **outer: float) -> ProblemConstants:
        """:class:`~problems._base.ProblemConstants` of an inner objective with client Hessians
        ``H_i`` (the array ``hessians``, with eigenvalues ``_client_eigenvalues``) and linear
        terms ``l_i`` (the array ``linear``: ``grad_y g_i = H_i y - l_i + ...``).

        ``mu, L``: the extreme eigenvalues of ``H_bar``; ``mu_clients, L_clients``: of every
        ``H_i``; ``hessian_heterogeneity = max_i ||H_i - H_bar||`` (a chunk of clients at a time:
        ``H - H_bar`` at once would double the memory); ``gradient_heterogeneity =
        sqrt(mean_i ||l_i - l_bar||^2)``; ``outer``: ``cross_norm`` and the outer gradients'
        Lipschitz constants, which the family gives.
        """
        stack = getattr(self, hessians)
        mean = self.means[hessians]
        eigenvalues = torch.linalg.eigvalsh(mean)
        step = chunk_size(stack)
        spread = max(
            float(spectral_norms(stack[s : s + step] - mean).max())
            for s in range(0, int(stack.shape[0]), step)
        )
        deviation = getattr(self, linear) - self.means[linear]
        client_eigenvalues: torch.Tensor = self._client_eigenvalues
        return ProblemConstants(
            mu=float(eigenvalues.min()),
            L=float(eigenvalues.max()),
            mu_clients=float(client_eigenvalues.min()),
            L_clients=float(client_eigenvalues.max()),
            hessian_heterogeneity=spread,
            gradient_heterogeneity=float(torch.sqrt((deviation**2).sum(-1).mean())),
            **outer,
        )

    @functools.cached_property
    def means(self) -> dict[str, torch.Tensor]:
        """Client means of every array (``A_bar`` is ``means['A']``, and so on)."""
        return {k: getattr(self, k).mean(dim=0) for k in self.ARRAY_NAMES}


class QuadraticFamily(ClientArrayFamily, OracleParts):
    """A family of client arrays whose inner objective is quadratic in ``y`` (the quadratic
    bilevel and minimax families): ``grad^2_y g_i = H_i``, the symmetric client array
    ``INNER_HESSIAN``, and ``grad^2_xy g_i = s X_i^T``, ``X`` the client array ``CROSS`` and
    ``s`` the sign ``CROSS_SIGN``, both constant in ``(x, y)``. It gives
    :class:`~problems._base.OracleParts` their products and the exact Hessians; the
    family gives the outer-gradient parts.

    It also gives the families' constructor and :meth:`random`, driven by the tables a family
    sets: ``SHAPES`` (the client arrays' axes, :func:`problems.checks.check_arrays`, in the
    constructor's order), ``SYMMETRIC`` (the arrays checked symmetric), ``OPERATORS`` (the
    symmetric arrays the oracles apply through an operator), and for :meth:`random` the
    ``KNOBS`` with their defaults, ``SCALE_KNOBS``, ``POSITIVE_KNOBS``, ``SIZE`` and ``DRAW``.
    """

    INNER_HESSIAN: ClassVar[str]
    CROSS: ClassVar[str]
    CROSS_SIGN: ClassVar[int]
    SHAPES: ClassVar[dict[str, str]]
    SYMMETRIC: ClassVar[tuple[str, ...]]
    OPERATORS: ClassVar[tuple[str, ...]]
    #: :meth:`random`'s keyword knobs in the recipe's order, with their defaults; a default
    #: ``None`` is the ``heterogeneity`` shorthand (:func:`either`).
    KNOBS: ClassVar[dict[str, float | None]]
    #: Knobs that scale arrays after the draw: non-negative, in the recipe (and the id) only when
    #: not 1, so a problem drawn without them keeps the spec, seed stream and id it had before.
    SCALE_KNOBS: ClassVar[tuple[str, ...]] = ()
    POSITIVE_KNOBS: ClassVar[tuple[str, ...]] = ("mu",)
    #: The float64 numbers a drawn problem holds, as a function of its spec, and that in words.
    SIZE: ClassVar[tuple[Callable[[dict[str, Any]], int], str]]
    #: The draws of :meth:`random` for its checked spec, in its stream's order: the
    #: constructor's arrays and its sample sets (by name).
    DRAW: ClassVar[Callable[[np.random.Generator, dict[str, Any]], tuple[tuple[Any, ...], dict]]]
    n_clients: int

    def __init__(
        self,
        *arrays: Any,
        name: str | None = None,
        spec: dict[str, Any] | None = None,
        **named: Any,
    ) -> None:
        """The client arrays ``ARRAY_NAMES`` (by position or name) and, all or none, their
        per-sample twins ``SAMPLE_NAMES`` (by name), checked (:mod:`problems.checks`; raises
        :class:`~problems._base.ProblemError`); ``name`` is used in error messages and in
        :attr:`id`, ``spec`` is the recipe that rebuilds the problem
        (:func:`problems.from_spec`)."""
        family = type(self).__name__
        self.name = family if name is None else name
        try:
            given = _arrays_signature(tuple(self.ARRAY_NAMES)).bind(*arrays, **named).arguments
        except TypeError as error:
            raise TypeError(f"{family}(): {error}") from None
        samples_given = sample_arguments(type(self), given.get("samples", {}))
        hessian = self.INNER_HESSIAN
        checked, sizes = check_arrays(
            self.name, {k: given[k] for k in self.ARRAY_NAMES}, self.SHAPES, self.SYMMETRIC
        )
        eigenvalues = check_positive_definite(hessian, self.name, checked[hessian])
        self._hold(checked, sizes, eigenvalues, samples_given, spec)

    def _hold(
        self,
        checked: dict[str, torch.Tensor],
        sizes: dict[str, int],
        eigenvalues: torch.Tensor,
        samples_given: dict[str, Any],
        spec: dict[str, Any] | None,
        as_stored: dict[str, bool] | None = None,
    ) -> None:
        """The rest of the constructor, on client arrays ``checked`` (shapes, finiteness,
        symmetry) whose inner Hessians are positive definite with ``eigenvalues``: the family's
        own condition, the sample arrays (checked here), the recipe and the oracles' operators
        (``as_stored``: whether each of ``OPERATORS`` is symmetric to round-off, when already
        known; :meth:`_prepare_oracles`). Also the end of a batch built at once
        (:meth:`problems.QuadraticBilevel.random_together` checks its arrays together)."""
        self._client_eigenvalues = eigenvalues
        self.n_clients, self.dim_x, self.dim_y = sizes["M"], sizes["dx"], sizes["dy"]
        for key in self.ARRAY_NAMES:
            setattr(self, key, checked[key])
        self._check_well_posed()
        hessian = self.INNER_HESSIAN
        self.n_samples, samples = check_samples(
            self.name, samples_given, checked, positive_definite=hessian
        )
        for key in self.SAMPLE_NAMES:
            setattr(self, key, samples.get(key))
        self._spec = spec or {"family": type(self).__name__, "arrays": "inline"}
        self._prepare_oracles(self.OPERATORS, sampled=hessian, as_stored=as_stored)

    def _check_well_posed(self) -> None:
        """Raise :class:`~problems._base.ProblemError` when the checked client arrays do not
        define a problem with a unique answer (a family's own condition); none by default."""

    @classmethod
    def random(
        cls,
        n_clients: int,
        dim_x: int,
        dim_y: int,
        condition_number: float,
        heterogeneity: float = 0.0,
        seed: int = 0,
        **knobs: float | None,
    ) -> Self:
        """Draw a problem whose mean inner Hessian has spectrum log-spaced in ``[mu, kappa mu]``
        (the family's docstring gives its knobs, ``KNOBS``, and what they draw).

        Args:
            n_clients: M >= 1.
            dim_x, dim_y: outer and inner dimensions.
            condition_number: kappa = L / mu >= 1 of the mean inner Hessian.
            heterogeneity: shorthand that sets ``hessian_heterogeneity`` and
                ``gradient_heterogeneity`` when they are not given.
            seed: seeds the only generator used (``np.random.default_rng(seed)``).
            knobs: the family's ``KNOBS`` by name; an unknown one raises ``TypeError``.
        """
        spec = cls.recipe(n_clients, dim_x, dim_y, condition_number, heterogeneity, seed, **knobs)
        arrays, samples = cls.DRAW(cls.recipe_generator(spec), spec)
        return cls(*arrays, name=spec["family"], spec=spec, **samples)

    @classmethod
    def recipe(
        cls,
        n_clients: int,
        dim_x: int,
        dim_y: int,
        condition_number: float,
        heterogeneity: float = 0.0,
        seed: int = 0,
        **knobs: float | None,
    ) -> dict[str, Any]:
        """The recipe (:meth:`spec`) of :meth:`random` with these arguments, unchecked."""
        sizes = {"n_clients": n_clients, "dim_x": dim_x, "dim_y": dim_y}
        return knob_spec(
            f"{cls.__name__}.random",
            {**sizes, "condition_number": condition_number, "seed": seed},
            knobs,
            cls.KNOBS,
            shorthand=heterogeneity,
            scales=cls.SCALE_KNOBS,
        )

    @classmethod
    def recipe_generator(cls, spec: dict[str, Any]) -> np.random.Generator:
        """The knobs of a recipe of :meth:`random` checked by the family's tables
        (:func:`recipe_rng`), and the one generator its draw uses."""
        return recipe_rng(
            spec,
            nonnegative=(*NONNEGATIVE_KNOBS, *(k for k in cls.SCALE_KNOBS if k in spec)),
            below_one=HESSIAN_SPREADS,
            positive=cls.POSITIVE_KNOBS,
            dims=("dim_x", "dim_y"),
            size=cls.SIZE,
        )

    def _hessian_rows(
        self, v: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``H_i v``, ``H_i`` through its operator or the (symmetrised) minibatch mean of its
        samples: ``(C, dy)``."""
        return rmatvec(self._curvature(self.INNER_HESSIAN, clients, batch), v)

    def _cross_rows(
        self, v: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``s X_i^T v``: ``(C, dx)``."""
        product = rmatvec(self._take(getattr(self, self.CROSS), clients), v)
        return -product if self.CROSS_SIGN < 0 else product

    def inner_hessian(self, client: int | None = None) -> torch.Tensor:
        """``grad^2_y g = H_bar`` (``client=None``) or client i's ``H_i``; constant in (x, y)."""
        if client is None:
            return self.means[self.INNER_HESSIAN]
        stack: torch.Tensor = getattr(self, self.INNER_HESSIAN)
        return stack[client]


__all__ = [
    "HESSIAN_SPREADS",
    "NONNEGATIVE_KNOBS",
    "SAMPLE_KNOBS",
    "SPREAD_KNOBS",
    "ClientArrayFamily",
    "ProblemFamily",
    "QuadraticFamily",
    "either",
    "inner_hessians",
    "knob_spec",
    "sample_arguments",
    "recipe_rng",
]
