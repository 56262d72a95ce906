"""Planted one-line bugs in the TorchOpt adapter's calls: what its claims must catch.

Each builds the adapter as its registry entry does and changes one argument of the library call
(one solver iteration fewer, a step doubled, one unrolled step fewer), the size of bug a
translation layer makes. They are data, ``planted_bugs.toml`` beside this module (each bug, the
field it changes and how, the claims that catch it); ``integrations/test_library_adapters.py``
shows each claim catches its bug.
"""

from __future__ import annotations

from pathlib import Path

from theory_checks.planted_bugs import load_planted_bugs

PLANTED = load_planted_bugs(Path(__file__).with_name("planted_bugs.toml"))
#: the perturbation of torchopt.normal_cg.exact_after_dim_y (claims.toml)
SHORT_NORMAL_CG = PLANTED["SHORT_NORMAL_CG"].perturbation
