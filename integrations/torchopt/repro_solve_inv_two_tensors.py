"""TorchOpt 0.7.3: implicit differentiation with ``linear_solve.solve_inv()`` ignores the
coupling between the tensors of the inner parameters.

For a strongly convex quadratic inner problem ``g(x, y) = 1/2 y'Ay - y'Bx`` and outer loss
``f(x, y) = c'y + 1/2 |x|^2``, the hypergradient is ``x + B'A^{-1}c`` (implicit function
theorem). Handing ``y`` to ``custom_root`` as two tensors (as a layer's weight and bias are),
``solve_inv()`` returns a wrong hypergradient; ``solve_cg`` on the same call is exact, and so is
``solve_inv`` when ``y`` is one tensor. The reason: ``materialize_matvec``
(torchopt/linear_solve/utils.py:116-119) keeps only the diagonal blocks of the Jacobian
(``jacobian_diag = [jacobian_flat[i + i * nargs] ...]``), and ``_solve_inv``
(torchopt/linear_solve/inv.py:90-91) solves each block alone.

Plain TorchOpt and NumPy, no other package; run ``python repro_solve_inv_two_tensors.py``.
"""

import warnings

import numpy as np
import torch
import torchopt

warnings.filterwarnings("ignore", category=FutureWarning)  # torchopt's functorch calls
torch.set_default_dtype(torch.float64)


def problem(seed, dim_x=3, dim_y=6, kappa=10.0):
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((dim_y, dim_y)))
    A = Q @ np.diag(np.geomspace(1.0, kappa, dim_y)) @ Q.T
    return (
        A,
        rng.standard_normal((dim_y, dim_x)),
        rng.standard_normal(dim_y),
        rng.standard_normal(dim_x),
    )


def torchopt_hypergradient(A, B, c, x, solve, split):
    A, B, c = (torch.as_tensor(a) for a in (A, B, c))

    def g(x, *ys):
        y = torch.cat(ys)
        return 0.5 * y @ A @ y - y @ B @ x

    grad_y = torch.func.grad(g, argnums=tuple(range(1, len(split) + 1)))

    @torchopt.diff.implicit.custom_root(lambda ys, x: grad_y(x, *ys), argnums=1, solve=solve)
    def inner_solver(ys, x):
        y = torch.linalg.solve(A, B @ x)  # the exact inner solution
        return tuple(torch.split(y, split))

    x = torch.as_tensor(x).clone().requires_grad_(True)
    ys = inner_solver(tuple(torch.zeros(n) for n in split), x)
    outer = c @ torch.cat(ys) + 0.5 * x @ x
    return torch.autograd.grad(outer, x)[0].numpy()


def main():
    print("seed  solve_inv 2 tensors  solve_inv 1 tensor  solve_cg 2 tensors   (relative errors)")
    for seed in range(10):
        A, B, c, x = problem(seed)
        exact = x + B.T @ np.linalg.solve(A, c)  # independent: NumPy's solve

        def error(solve, split, A=A, B=B, c=c, x=x, exact=exact):
            value = torchopt_hypergradient(A, B, c, x, solve, split)
            return np.linalg.norm(value - exact) / np.linalg.norm(exact)

        inv = torchopt.linear_solve.solve_inv()
        cg = torchopt.linear_solve.solve_cg(maxiter=6, rtol=0.0)
        print(
            f"{seed:4d}  {error(inv, [3, 3]):19.3e}  {error(inv, [6]):18.3e}  "
            f"{error(cg, [3, 3]):18.3e}"
        )


if __name__ == "__main__":
    main()
