"""The hypergradient testbed's adapter of the authors' FedNest code (``testbed verify
fednest-authors`` with ``FEDNEST_AUTHORS_REPO`` naming a checkout of ucr-optml/FedNest)."""
