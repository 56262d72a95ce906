"""betty-ml 0.1.1: the ``cg`` hypergradient is not conjugate gradient.

``betty/hypergradient/cg.py:53`` builds the next search direction from the old residual,
``p_new = [rr + beta * pp for rr, pp in zip(r, p)]``, where conjugate gradient uses the new one
(``r_new``). So ``cg_iterations = dim(y)`` iterations do not solve ``H u = grad_y f`` on a
quadratic (CG would, to round-off), and more iterations do not converge. With no stopping test,
a residual that becomes exactly zero (``dim(y) = 1``) then gives ``0 / 0 = nan``
(lines 47 and 52). Reported upstream as leopard-ai/betty issue 15 and fixed on its main branch
(2023-11); betty-ml 0.1.1 (the newest release on PyPI) still has it.

The program: ``g(x, y) = 1/2 y'Ay - y'Bx``, ``f(x, y) = c'y + 1/2 |x|^2``, whose hypergradient
is ``x + B'A^{-1}c``; the lower problem starts at ``y*`` and takes one SGD step (betty needs
one); the hypergradient is read in the upper problem's ``custom_optimizer_step``. Plain betty,
torch and NumPy; run ``python repro_cg.py``.
"""

import logging

import numpy as np
import torch
from betty.configs import Config
from betty.configs import EngineConfig
from betty.engine import Engine
from betty.logging import get_logger
from betty.problems import ImplicitProblem

torch.set_default_dtype(torch.float64)
get_logger().setLevel(logging.WARNING)


class Vector(torch.nn.Module):
    def __init__(self, v):
        super().__init__()
        self.v = torch.nn.Parameter(torch.as_tensor(v).clone())


def betty_hypergradient(A, B, c, x, lower_config):
    A, B, c, x = (torch.as_tensor(a) for a in (A, B, c, x))

    class Upper(ImplicitProblem):
        def training_step(self, batch):
            return c @ self.lower.module.v + 0.5 * self.module.v @ self.module.v

        def custom_optimizer_step(self, *args, **kwargs):
            self.recorded = self.module.v.grad.detach().clone()

    class Lower(ImplicitProblem):
        def training_step(self, batch):
            y = self.module.v
            return 0.5 * y @ A @ y - y @ B @ self.upper.module.v

    upper_module = Vector(x)
    lower_module = Vector(torch.linalg.solve(A, B @ x))
    batch = [(torch.zeros(1),)]
    upper = Upper(
        name="upper",
        config=Config(first_order=True, retain_graph=True),
        module=upper_module,
        optimizer=torch.optim.SGD(upper_module.parameters(), lr=0),
        train_data_loader=batch,
        device="cpu",
    )
    lower = Lower(
        name="lower",
        config=lower_config,
        module=lower_module,
        optimizer=torch.optim.SGD(
            lower_module.parameters(), lr=float(1 / torch.linalg.eigvalsh(A).max())
        ),
        train_data_loader=batch,
        device="cpu",
    )
    Engine(
        config=EngineConfig(train_iters=1),
        problems=[upper, lower],
        dependencies={"u2l": {upper: [lower]}, "l2u": {lower: [upper]}},
    ).run()
    return upper.recorded.numpy()


def problem(seed, dim_x=3, dim_y=5, kappa=10.0):
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((dim_y, dim_y)))
    A = Q @ np.diag(np.geomspace(1.0, kappa, dim_y)) @ Q.T
    return (
        A,
        rng.standard_normal((dim_y, dim_x)),
        rng.standard_normal(dim_y),
        rng.standard_normal(dim_x),
    )


def main():
    print("seed  cg, 5 iterations  cg, 50 iterations  neumann, 400 terms   (relative errors)")
    for seed in range(10):
        A, B, c, x = problem(seed)
        exact = x + B.T @ np.linalg.solve(A, c)  # independent: NumPy's solve

        def error(config, A=A, B=B, c=c, x=x, exact=exact):
            value = betty_hypergradient(A, B, c, x, config)
            return np.linalg.norm(value - exact) / np.linalg.norm(exact)

        step = float(1 / np.linalg.eigvalsh(A).max())
        print(
            f"{seed:4d}  {error(Config(type='cg', cg_iterations=5)):16.3e}  "
            f"{error(Config(type='cg', cg_iterations=50)):17.3e}  "
            f"{error(Config(type='neumann', neumann_iterations=399, neumann_alpha=step)):18.3e}"
        )
    A, B, c, x = problem(0, dim_y=1)
    print(
        "dim(y) = 1, cg_iterations = 10:",
        betty_hypergradient(A, B, c, x, Config(type="cg", cg_iterations=10)),
    )


if __name__ == "__main__":
    main()
