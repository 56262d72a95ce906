"""The authors' FedNest code (ucr-optml/FedNest, core/ClientManage_hr.py): FedIHGP's
``global_batch`` mode is not the Neumann series of Alg. 3.

``fedIHGP`` creates ``p_locals`` once (line 79) and appends every client's vector in every
Neumann round (line 84), so round k averages the vectors of all rounds 1..k (line 85); each
client's ``hvp_iter`` keeps its own running power ``counter <- (I - hlr H_i) counter``
(core/Client_hr.py:104-117). Worked out, the server's vector after N rounds is

    p_N = p_0 + sum_{k=1..N} (1/k) mean_i (I - hlr H_i)^k p_0,

where Alg. 3 (deterministic, the code's round count) has p_0 + sum_{k=1..N} (I - hlr H)^k p_0,
H the mean Hessian. One client suffices: the 1/k weights alone change every term k >= 2.

This drives their unmodified ``ClientManageHR.fedIHGP`` and ``Client`` on quadratic clients
``g_i = 1/2 y'A_i y - y'B_i x``, ``f_i = c_i'y`` (their two loss attributes set to these, as
their hyper-representation code sets cross-entropy), and compares its ``p`` with both sums,
computed with NumPy. Run ``python repro_fedihgp.py /path/to/FedNest`` (a checkout of
https://github.com/ucr-optml/FedNest); it imports nothing else of the testbed.
"""

import contextlib
import io
import sys
import types

import numpy as np
import torch

torch.set_default_dtype(torch.float64)


def their_modules(repo):
    for name, attr in (("cv2", "log"), ("importlib_metadata", "requires")):  # unused imports
        try:
            __import__(name)
        except ImportError:
            sys.modules[name] = types.ModuleType(name)
            setattr(sys.modules[name], attr, None)
    if repo not in sys.path:
        sys.path.insert(0, repo)
    from core.Client_hr import Client
    from core.ClientManage_hr import ClientManageHR
    from utils.options import args_parser

    return Client, ClientManageHR, args_parser


class Net(torch.nn.Module):
    """body = x (their hyper-parameter), header = y; forward(ids) = rows [x, y, id]."""

    def __init__(self, x, y):
        super().__init__()
        self.body = torch.nn.Parameter(torch.as_tensor(x).clone())
        self.header = torch.nn.Parameter(torch.as_tensor(y).clone())

    def forward(self, ids):
        n = ids.shape[0]
        return torch.cat([self.body.expand(n, -1), self.header.expand(n, -1), ids.reshape(n, 1)], 1)


def their_p(repo, A, B, c, x, y, neumann, hlr):
    Client, ClientManageHR, args_parser = their_modules(repo)
    m, dx = len(A), len(x)
    A, B, c = (torch.as_tensor(a) for a in (A, B, c))
    sys.argv = [
        "main_hr.py",
        "--gpu",
        "-1",
        "--local_bs",
        "1",
        "--neumann",
        str(neumann),
        "--hlr",
        repr(hlr),
    ]
    args = args_parser()
    net = Net(x, y)
    data = [(torch.tensor([float(i)]), torch.tensor(0)) for i in range(m)]
    users = {k: [i] for i in range(m) for k in (i, -i - 1)}

    def rows(out):
        return out[:, :dx], out[:, dx:-1], out[:, -1].long()

    def inner(out, labels, params=None):
        xs, ys, i = rows(out)
        return (
            0.5 * torch.einsum("ci,cij,cj->c", ys, A[i], ys)
            - torch.einsum("ci,cij,cj->c", ys, B[i], xs)
        ).mean()

    def outer(out, labels):
        xs, ys, i = rows(out)
        return (c[i] * ys).sum(1).mean()

    with contextlib.redirect_stdout(io.StringIO()):
        clients = []
        for i in range(m):
            client = Client(args, i, net, data, users, [net.body])
            client.loss_func, client.val_loss = inner, outer
            clients.append(client)
        manager = ClientManageHR(args, net, list(range(m)), data, users, [net.body])
        return manager.fedIHGP(clients).detach().numpy()


def main():
    repo = sys.argv[1]
    print("clients  N   |their p - Alg. 3|/|Alg. 3|  |their p - accumulated sum|/|their p|")
    for seed, m in [(0, 1), (1, 1), (2, 3), (3, 3)]:
        rng = np.random.default_rng(seed)
        dy, dx, hlr = 3, 2, 0.1
        A = []
        for _ in range(m):
            Q, _ = np.linalg.qr(rng.standard_normal((dy, dy)))
            A.append(Q @ np.diag(rng.uniform(1.0, 8.0, dy)) @ Q.T)
        A = np.stack(A)
        B, c = rng.standard_normal((m, dy, dx)), rng.standard_normal((m, dy))
        x, y = rng.standard_normal(dx), rng.standard_normal(dy)
        p0 = c.mean(0)  # grad_y f
        eye = np.eye(dy)
        for neumann in (1, 2, 5):
            theirs = their_p(repo, A, B, c, x, y, neumann, hlr)
            alg3 = sum(
                np.linalg.matrix_power(eye - hlr * A.mean(0), k) @ p0 for k in range(neumann + 1)
            )
            accumulated = p0 + sum(
                np.mean([np.linalg.matrix_power(eye - hlr * a, k) @ p0 for a in A], axis=0) / k
                for k in range(1, neumann + 1)
            )
            off_alg3 = np.linalg.norm(theirs - alg3) / np.linalg.norm(alg3)
            off_sum = np.linalg.norm(theirs - accumulated) / np.linalg.norm(theirs)
            print(f"{m:7d} {neumann:2d}   {off_alg3:26.3e}   {off_sum:36.3e}")


if __name__ == "__main__":
    main()
