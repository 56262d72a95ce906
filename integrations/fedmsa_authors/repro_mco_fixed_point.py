"""The FedMSA authors' FedMCO notebook (ucr-optml/FedMSA, fedMCO_stochastic_final.ipynb): its
maps are FedMSA's eq. (11) exactly, and so, at their fixed point, the direction its x-update
follows is not the gradient of the risk-averse objective when the clients' data differ.

At the fixed point Z*(x) of the averaged maps (z^1 = (x, u), u = mean U; z^2 = (u, v), v = mean
max(0, U - u)^2), the notebook's ``p_func`` on client m is eq. (11b),

    P^m = gU_m + c (mean_m 2 e gradU - gU_m mean_m 2 e),   c = lam / (2 sqrt(v + delta)),

(means over client m's examples, e = max(0, U - u), gU_m = mean_m gradU), and the server
averages them. The objective's gradient is the same expression with every mean over all the
examples, so

    mean_m P^m - grad f(x) = c (gU mean 2 e - mean_m [gU_m mean_m 2 e]),

c times minus the covariance across clients of gU_m and mean_m 2 e: zero with one client or
identical clients, not otherwise. This takes ``func_*``, ``s_func`` and ``p_func`` by name from
the notebook's JSON, runs them unmodified (JAX in float64), and computes the rest with NumPy.
Run ``python repro_mco_fixed_point.py /path/to/FedMSA`` (a checkout of
https://github.com/ucr-optml/FedMSA; needs ``jax``); it imports nothing of the testbed.
"""

import ast
import json
import sys

import numpy as np

NAMES = ("func_g", "func_U", "func_f2", "func_f1", "func_f0", "s_func", "p_func")


def their_functions(repo):
    import jax

    jax.config.update("jax_enable_x64", True)
    with open(f"{repo}/fedMCO_stochastic_final.ipynb", encoding="utf-8") as file:
        cells = [c for c in json.load(file)["cells"] if c["cell_type"] == "code"]
    found = {}
    for cell in cells:
        source = "".join(cell["source"])
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and node.name in NAMES:
                found[node.name] = ast.get_source_segment(source, node)
    namespace = {}
    # their cell 1 imports jax.numpy as jnp and jacfwd, which these functions use
    prelude = "import jax.numpy as jnp\nfrom jax import jacfwd\n"
    exec(prelude + "\n".join(found[name] for name in NAMES), namespace)
    return namespace


def instance(seed, clients=2, per_client=5, d=3):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((clients, per_client, d))
    b = (a @ rng.standard_normal(d)) ** 2 + rng.normal(0.0, 1e-3, (clients, per_client))
    return a, b, rng.standard_normal(d)


def exact(a, b, x, lam, delta):
    """Z*(x), grad f(x) and the average of the clients' (11b) products, by NumPy."""
    s = a @ x
    U = (b - s**2) ** 2
    gradU = (-4 * (b - s**2) * s)[..., None] * a  # (M, n, d)
    u = U.mean()
    e = np.maximum(0.0, U - u)
    v = (e**2).mean()
    c = lam / (2 * np.sqrt(v + delta))
    grad_f = gradU.mean((0, 1)) + c * (
        (2 * e[..., None] * gradU).mean((0, 1)) - gradU.mean((0, 1)) * (2 * e).mean()
    )
    per_client = gradU.mean(1) + c * (
        (2 * e[..., None] * gradU).mean(1) - gradU.mean(1) * (2 * e).mean(1)[:, None]
    )
    Z = [[x], [x, u], [u, v], [u + lam * np.sqrt(v + delta)]]
    return Z, grad_f, per_client.mean(0)


def main(repo):
    import jax.numpy as jnp

    nb = their_functions(repo)
    lam = delta = 0.1  # the notebook's cell 11
    print("seed  |theirs - avg of (11b) products|  |theirs - grad f| / |grad f|")
    for seed in range(5):
        a, b, x = instance(seed)
        Z, grad_f, products = exact(a, b, x, lam, delta)
        Zj = [[jnp.asarray(part) for part in level] for level in Z]
        theirs = np.mean(
            [
                np.asarray(nb["p_func"](Zj, jnp.asarray(a[m]), jnp.asarray(b[m]), lam, delta)[0])
                for m in range(len(a))
            ],
            axis=0,
        )
        gap = np.linalg.norm(theirs - grad_f) / np.linalg.norm(grad_f)
        print(
            f"{seed:4d}  {np.linalg.norm(theirs - products):.2e}                          {gap:.3e}"
        )
    a, b, x = instance(0, clients=1)
    Z, grad_f, _ = exact(a, b, x, lam, delta)
    Zj = [[jnp.asarray(part) for part in level] for level in Z]
    one = np.asarray(nb["p_func"](Zj, jnp.asarray(a[0]), jnp.asarray(b[0]), lam, delta)[0])
    gap = np.linalg.norm(one - grad_f) / np.linalg.norm(grad_f)
    print(f"one client: |theirs - grad f| / |grad f| = {gap:.1e}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
