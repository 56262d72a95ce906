"""MLP/CNN workloads on real data that satisfy the :class:`problems.Problem` contract.

Data loading (``data``), client splits (``splits``), models over flat parameter vectors
(``models``) and the paper workloads built from them.
"""
