"""What every closed-form problem family shares: its recipe (spec), id, repr and arrays.

A family declares, as class attributes, the id templates of its recipes (``str.format`` over the
spec, then the problem's attributes: ``"quad.bilevel.m{n_clients}...seed{seed}"``), the id of a
problem given inline (formatted over its attributes) and the names of the arrays that define it;
:class:`ProblemFamily` turns them into :attr:`id`, :meth:`spec`, :meth:`to_arrays` (for saving a
counterexample exactly) and ``repr``. A family with arrays that are not plain attributes
overrides :meth:`to_arrays`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np


class _Attributes(dict[str, Any]):
    """``str.format_map`` over ``first`` (a spec), then an object's attributes."""

    def __init__(self, owner: object, first: dict[str, Any] | None = None) -> None:
        super().__init__(first or {})
        self.owner = owner

    def __missing__(self, key: str) -> Any:
        return getattr(self.owner, key)


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
        out = {k: getattr(self, k).numpy().copy() for k in self.ARRAY_NAMES}
        if getattr(self, "n_samples", 0):
            out.update({k: getattr(self, k).numpy().copy() for k in self.SAMPLE_NAMES})
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r})"


__all__ = ["ProblemFamily"]
