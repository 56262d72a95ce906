"""The HGP authors' code (hitachi-rd-cv/pdbo-hgp) from the checkout ``HGP_AUTHORS_REPO`` names,
located, checked and imported unmodified by the authors'-code loader
(:func:`testbed_authors_checkout.load`, ``integrations/authors_checkout``). Nothing of theirs is
copied into this package.

What importing it on Python 3.11, torch 2.x, numpy 2.x and networkx 3.x needs (their container
is CUDA 10.2 with torch 1.10.1, ``docker/Dockerfile``):

- **torch shim**: ``lib_common/torch/autograd.py:86`` imports ``Tuple`` and ``List`` from
  ``torch.autograd.functional``, which re-exported the ``typing`` names in torch 1.x and no
  longer does; the loader gives that module ``tuple`` and ``list`` (subscriptable, as the
  ``typing`` names were) while their modules are imported and removes them after (their
  ``myjvp``, which the adapter reaches, uses neither; ``myjacobian`` uses them in local
  annotations only, which Python never evaluates);
- **stand-ins for imports the adapter never reaches**, only when the package is absent:
  ``torchvision`` (``fedem/models.py:9``, used by ``get_mobilenet`` only), ``cvxpy``
  (``fedem/utils/decentralized.py:7``, used by ``compute_mixing_matrix`` for the Erdos-Renyi
  graph only) and ``prettytable`` (``module_torch/client.py:3``, used by
  ``print_parameters_info`` only); their luigi/gokart/sacred stack (``main.py``, ``task/``,
  ``lib_common/luigi``) is not imported.
"""

from __future__ import annotations

from testbed_authors_checkout import Codebase
from testbed_authors_checkout import load

HGP = Codebase(
    "hitachi-rd-cv/pdbo-hgp",
    "HGP_AUTHORS_REPO",
    ("constants", "lib_common", "lib_task", "module_torch", "fedem"),
    unused_imports={
        "torchvision": ("models",),
        "torchvision.models": (),
        "cvxpy": (),
        "prettytable": ("PrettyTable",),
    },
    import_shims={"torch.autograd.functional": {"Tuple": tuple, "List": list}},
)
#: The authors' objects the adapter uses, by module (relative to their repository root).
AUTHORS_OBJECTS = {
    "HyperGradEstimator": "module_torch.hgp:HyperGradEstimator",
    "hyper_gradient_push": "lib_task.hyper_gradient_push:hyper_gradient_push",
    "GossipNormalize": "module_torch.gossip_protocol:GossipNormalize",
    "GossipGivenWeights": "module_torch.gossip_protocol:GossipGivenWeights",
    "DynamicGraphBase": "module_torch.communication_graph:DynamicGraphBase",
    "GraphFullyConnected": "module_torch.communication_graph:GraphFullyConnected",
    "KeysOptionHGP": "constants:KeysOptionHGP",
    "KeysOptionEval": "constants:KeysOptionEval",
    "KeysOptionHGPInsig": "constants:KeysOptionHGPInsig",
}
CODE = load(AUTHORS_OBJECTS, HGP)
