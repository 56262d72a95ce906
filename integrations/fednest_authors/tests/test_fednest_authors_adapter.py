"""The authors'-code adapter, driven against stand-ins of their module API (written here, not
their code; as benchmarks/authors_fednest.py's test does): a stand-in that implements Alg. 3's
deterministic FedIHGP meets every claim, one that accumulates ``p_locals`` as a reading of
their code (core/Client_hr.py) gives fails the two FedIHGP claims, the claims hold on the testbed's
own deterministic FedIHGP, a planted bug is caught, and a missing checkout gives one line. With
``FEDNEST_AUTHORS_REPO`` naming a checkout of ucr-optml/FedNest, the recorded verdicts of its
commit are checked too."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest
from testbed_authors_stand_ins import IN_SETTINGS
from testbed_authors_stand_ins import last_json
from testbed_authors_stand_ins import recorded_verdicts_check
from testbed_authors_stand_ins import run_with_checkout
from testbed_authors_stand_ins import verdicts_code
from testbed_authors_stand_ins import verify_without_checkout
from testbed_authors_stand_ins import write_stand_in

HERE = Path(__file__).resolve().parents[1]
RECORD = HERE / "expected_verdicts.toml"

CLIENT = '''
import copy
import torch
from torch.autograd import grad


class Client:
    """The API the adapter calls: hvp_iter, hyper_grad, grad_d_out_d_y, hyper_svrg_update and
    the loss attributes loss_func / val_loss, on a net whose 'header' parameters are y."""

    def __init__(self, args, client_id, net, dataset=None, idxs=None, hyper_param=None):
        self.args = args
        self.net = copy.deepcopy(net)
        self.init_net = copy.deepcopy(net)
        self.sample = torch.stack([dataset[i][0] for i in idxs[client_id]])
        self.loss_func = self.val_loss = None
        self.hyper_param = [w for n, w in self.net.named_parameters() if "header" not in n]
        self.hyper_optimizer = torch.optim.SGD(self.hyper_param, lr=args.hlr)
        self.hyper_iter = 0

    def _split(self, net):
        return ([w for n, w in net.named_parameters() if "header" not in n],
                [w for n, w in net.named_parameters() if "header" in n])

    def _inner_grad(self, net):
        hyper, params = self._split(net)
        loss = self.loss_func(net(self.sample), None, params)
        return torch.cat([g.reshape(-1) for g in grad(loss, params, create_graph=True)])

    def _direct(self, net):
        hyper, _ = self._split(net)
        return torch.cat([g.reshape(-1) for g in grad(self.val_loss(net(self.sample), None),
                                                      hyper)])

    def grad_d_out_d_y(self):
        _, params = self._split(self.net)
        loss = self.val_loss(self.net(self.sample), None)
        return torch.cat([g.reshape(-1) for g in grad(loss, params)]), None

    def hessian_product(self, v):
        _, params = self._split(self.net)
        return torch.cat([h.reshape(-1) for h in grad(self._inner_grad(self.net), params,
                                                      grad_outputs=v)])

    def hvp_iter(self, p, lr):
        {HVP_ITER}

    def hyper_grad(self, p):
        hyper, _ = self._split(self.net)
        indirect = torch.cat([g.reshape(-1) for g in grad(self._inner_grad(self.net), hyper,
                                                          grad_outputs=p)])
        return self._direct(self.net) - self.args.hlr * indirect

    def hyper_svrg_update(self, hg):
        h = (self._direct(self.net) - self._direct(self.init_net) + hg).detach()
        for w, g in zip(self.hyper_param, [h]):
            w.grad = g.view_as(w).clone()
        self.hyper_optimizer.step()
        return (torch.cat([w.reshape(-1) for w in self._split(self.init_net)[0]])
                - torch.cat([w.reshape(-1) for w in self.hyper_param])).detach()
'''
# Alg. 3: the client applies (I - lr H_i) to the server's current power
ALG3_HVP = "return p - lr * self.hessian_product(p)"
# as we read their Client_hr.hvp_iter (core/Client_hr.py of ucr-optml/FedNest): a running local
# power added to the given p
AS_READ_HVP = textwrap.dedent("""\
    if self.hyper_iter == 0:
                self.counter = p.clone()
            self.counter = self.counter - lr * self.hessian_product(self.counter)
            self.hyper_iter += 1
            return p + self.counter""")
MANAGER = """
from utils.Fed import FedAvgP


class ClientManageHR:
    def __init__(self, args, net_glob, client_idx, dataset, dict_users, hyper_param):
        self.args = args

    def fedIHGP(self, client_locals):
        p = FedAvgP([c.grad_d_out_d_y()[0] for c in client_locals], self.args)
{FED_IHGP}
"""
# Alg. 3: the server averages the clients' powers each round and sums them
ALG3_FED_IHGP = """\
        total = p
        for _ in range(self.args.neumann):
            p = FedAvgP([c.hvp_iter(p, self.args.hlr) for c in client_locals], self.args)
            total = total + p
        return total"""
# as we read their ClientManage_hr.fedIHGP: p_locals accumulated over the rounds
AS_READ_FED_IHGP = """\
        p_locals = []
        for _ in range(self.args.neumann):
            for c in client_locals:
                p_locals.append(c.hvp_iter(p, self.args.hlr))
            p = FedAvgP(p_locals, self.args)
        return p"""
COMMON = {
    "core/__init__.py": "",
    "utils/__init__.py": "",
    "utils/Fed.py": (
        "import torch\ndef FedAvgP(w, args):\n    return (sum(w) / len(w)).detach()\n"
    ),
    "utils/options.py": (
        "import argparse\nimport torch\n"
        "def args_parser():\n"
        "    parser = argparse.ArgumentParser()\n"
        "    for name, kind, default in [('gpu', int, 0), ('local_bs', int, 10),\n"
        "            ('hvp_method', str, 'global_batch'), ('neumann', int, 5),\n"
        "            ('hlr', float, 0.01), ('outer_tau', int, 5)]:\n"
        "        parser.add_argument('--' + name, type=kind, default=default)\n"
        "    args = parser.parse_args()\n"
        "    args.device = torch.device('cpu')\n"
        "    return args\n"
    ),
}


def stand_in(folder: Path, faithful: bool) -> Path:
    files = {
        **COMMON,
        "core/Client_hr.py": CLIENT.replace("{HVP_ITER}", ALG3_HVP if faithful else AS_READ_HVP),
        "core/ClientManage_hr.py": MANAGER.replace(
            "{FED_IHGP}", ALG3_FED_IHGP if faithful else AS_READ_FED_IHGP
        ),
    }
    return write_stand_in(folder, files)


def run(code: str, repo: Path | None) -> subprocess.CompletedProcess[str]:
    return run_with_checkout("FEDNEST_AUTHORS_REPO", code, repo, timeout=600)


def verdicts_with(repo: Path, results: Path) -> dict[str, str]:
    return last_json(run(verdicts_code(["fednest-authors"], results), repo))["fednest-authors"]


@pytest.mark.parametrize(
    "stand_in_kind, fedihgp", [("alg3", "holds"), ("as_read", "fails as stated")]
)
def test_the_fedihgp_claims_tell_alg3_from_accumulating_p_locals(tmp_path, stand_in_kind, fedihgp):
    """A faithful Alg. 3 stand-in meets every claim; one accumulating ``p_locals`` (as we read
    their code) fails the two FedIHGP claims, and FedOut's holds on both."""
    repo = stand_in(tmp_path / stand_in_kind, faithful=stand_in_kind == "alg3")
    assert verdicts_with(repo, tmp_path / "out") == {
        "fednest_authors.fedout.alg2_identity": "holds",
        "fednest_authors.ihgp.deterministic_identity": fedihgp,
        "fednest_authors.lemma22.averaged_bias": fedihgp,
    }


CONTROLS = (
    "import json, torch\n"
    + IN_SETTINGS
    + """from testbed import FedIHGP
from testbed_fednest_authors import perturbations
from theory_checks.profiles import get_profile
from theory_checks.registry import get_claim
from theory_checks.runner import run_claim

def testbed_deterministic(inner_steps, neumann_terms, neumann_step_size, **unused):
    return FedIHGP(inner_steps=inner_steps, neumann_terms=neumann_terms,
                   neumann_step_size=neumann_step_size, truncation="deterministic")

fast = get_profile("fast")
out = {claim: run_claim(get_claim(claim), fast, make=testbed_deterministic).verdict
       for claim in ("fednest_authors.ihgp.deterministic_identity",
                     "fednest_authors.lemma22.averaged_bias")}
out["planted"] = run_claim(get_claim("fednest_authors.fedout.alg2_identity"), fast,
                           make=perturbations.FEDOUT_ONE_STEP_SHORT.build).verdict
print(json.dumps(out))
"""
)


def test_the_fedihgp_claims_hold_on_the_testbeds_deterministic_fedihgp_and_a_bug_is_caught(
    tmp_path,
):
    """The claims say what a correct deterministic FedIHGP does: the testbed's own (deterministic
    truncation) holds both; an adapter handing their code one outer step fewer is caught."""
    repo = stand_in(tmp_path / "alg3", faithful=True)
    assert last_json(run(CONTROLS, repo)) == {
        "fednest_authors.ihgp.deterministic_identity": "holds",
        "fednest_authors.lemma22.averaged_bias": "holds",
        "planted": "fails as stated",
    }


def test_without_a_checkout_the_verify_command_says_how_to_name_one(tmp_path):
    done = run(verify_without_checkout("fednest-authors", tmp_path), None)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "FEDNEST_AUTHORS_REPO" in lines[0]


@pytest.mark.skipif(
    not os.environ.get("FEDNEST_AUTHORS_REPO"),
    reason="no checkout of ucr-optml/FedNest named (FEDNEST_AUTHORS_REPO)",
)
def test_the_authors_checkout_gets_the_verdicts_recorded_for_its_commit(tmp_path):
    repo = Path(os.environ["FEDNEST_AUTHORS_REPO"])
    done = run(recorded_verdicts_check("testbed_fednest_authors", RECORD, tmp_path), repo)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
