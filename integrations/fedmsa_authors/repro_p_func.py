"""The FedMSA authors' code (ucr-optml/FedMSA, core/Client.py): p_func drops the direct term of
FedMSA's hypergradient map P^m = grad_x f^m - grad^2_xw g^m v (paper eq. (10b)).

``Client.hyper_grad`` (p_func's body, core/Client.py:181-196) takes the direct term from
``grad_d_out_d_x`` inside a bare ``try``/``except``. ``grad_d_out_d_x`` (lines 159-179) meant to
default its argument with ``hyper_param = self.hyper_param`` but compares instead (``==``, line
161), so it differentiates with respect to ``None``, which raises; the ``except`` returns ``-J
v``. Their imbalance experiment's outer loss does not depend on x (its direct term is zero), so
it never showed; with any outer loss that does, the fixed point of their FedMSA is a zero of
``-J_bar v*`` instead of the hypergradient.

This drives their unmodified ``BLOClient`` (p_func, s_func) on quadratic clients
``g_i = 1/2 w'A_i w - w'B_i x``, ``f_i = 1/2 |w - t_i|^2 + c_i'x + 1/2 x'x`` (their two loss
attributes set to these, as their code sets cross-entropy), and compares with the exact maps
and the exact hypergradient computed with NumPy. Run ``python repro_p_func.py /path/to/FedMSA``
(a checkout of https://github.com/ucr-optml/FedMSA); it imports nothing of the testbed.
"""

import contextlib
import copy
import io
import sys
import types

import numpy as np
import torch

torch.set_default_dtype(torch.float64)


def their_modules(repo):
    try:
        __import__("cv2")
    except ImportError:  # core/ClientManage_blo.py imports cv2.log and never uses it
        sys.modules["cv2"] = types.ModuleType("cv2")
        sys.modules["cv2"].log = None
    if repo not in sys.path:
        sys.path.insert(0, repo)
    from core.BLOClient import BLOClient
    from utils.options import args_parser

    return BLOClient, args_parser


class Net(torch.nn.Module):
    """The inner variable w; forward(ids) = rows [w, id]."""

    def __init__(self, w):
        super().__init__()
        self.w = torch.nn.Parameter(torch.as_tensor(w).clone())

    def forward(self, ids):
        n = ids.shape[0]
        return torch.cat([self.w.expand(n, -1), ids.reshape(n, 1)], 1)


def main(repo, seeds=range(10), n=3, dx=2, dw=3):
    BLOClient, args_parser = their_modules(repo)
    saved = sys.argv
    sys.argv = ["main_imbalance_blo.py", "--gpu", "-1", "--local_bs", "1"]
    args = args_parser()
    sys.argv = saved
    for seed in seeds:
        rng = np.random.default_rng(seed)
        A = [(lambda q: q @ q.T + np.eye(dw))(rng.standard_normal((dw, dw))) for _ in range(n)]
        B = [rng.standard_normal((dw, dx)) for _ in range(n)]
        t = [rng.standard_normal(dw) for _ in range(n)]
        c = [rng.standard_normal(dx) for _ in range(n)]
        x, w, v = rng.standard_normal(dx), rng.standard_normal(dw), rng.standard_normal(dw)
        dataset = [(torch.tensor([float(i)]), torch.tensor(0)) for i in range(n)]
        dict_users = {k: [i] for i in range(n) for k in (i, -i - 1)}
        hyper = {"x": torch.nn.Parameter(torch.tensor(x))}
        worst_p, worst_s, worst_indirect = 0.0, 0.0, 0.0
        p_all = []
        for i in range(n):
            with contextlib.redirect_stdout(io.StringIO()):
                client = BLOClient(args, i, copy.deepcopy(Net(w)), dataset, dict_users, hyper)
            Ai, Bi, ti, ci = (torch.tensor(a) for a in (A[i], B[i], t[i], c[i]))

            def g(logits, labels, client=client, Ai=Ai, Bi=Bi):
                ww, xx = logits[0, :dw], client.hyper_param["x"]
                return 0.5 * ww @ Ai @ ww - ww @ Bi @ xx

            def f(logits, labels, hyper_param=None, client=client, ti=ti, ci=ci):
                ww, xx = logits[0, :dw], client.hyper_param["x"]
                return 0.5 * (ww - ti) @ (ww - ti) + ci @ xx + 0.5 * xx @ xx

            client.loss_func, client.val_loss = g, f
            p = client.p_func(torch.tensor(v)).numpy()
            s_w, s_v = (part.detach().numpy() for part in client.s_func(torch.tensor(v)))
            direct = c[i] + x  # grad_x f_i
            J_v = -B[i].T @ v  # grad^2_xw g_i v
            P = direct - J_v  # (10b)
            S_w, S_v = A[i] @ w - B[i] @ x, A[i] @ v - (w - t[i])  # (10a)
            worst_p = max(worst_p, np.linalg.norm(p - P) / np.linalg.norm(P))
            worst_indirect = max(worst_indirect, np.linalg.norm(p + J_v) / np.linalg.norm(P))
            worst_s = max(worst_s, np.linalg.norm(s_w - S_w) + np.linalg.norm(s_v - S_v))
            p_all.append(p)
        # the fixed point: w* = A_bar^{-1} B_bar x, v* = A_bar^{-1} grad_w f_bar(w*)
        A_bar, B_bar = np.mean(A, 0), np.mean(B, 0)
        w_star = np.linalg.solve(A_bar, B_bar @ x)
        v_star = np.linalg.solve(A_bar, w_star - np.mean(t, 0))
        hypergradient = np.mean(c, 0) + x + B_bar.T @ v_star
        print(
            f"seed {seed}: p_func vs P^m (10b) {worst_p:.1%} off; vs P^m without grad_x f^m "
            f"{worst_indirect:.1e}; s_func vs S^m (10a) {worst_s:.1e}; the true "
            f"hypergradient {hypergradient.round(3)} has direct term "
            f"{(np.mean(c, 0) + x).round(3)}, which their fixed point leaves out"
        )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python repro_p_func.py /path/to/FedMSA")
    main(sys.argv[1])
