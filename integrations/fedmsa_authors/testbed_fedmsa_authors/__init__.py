"""The hypergradient testbed's adapter of the FedMSA authors' code (``testbed verify
fedmsa-authors`` with ``FEDMSA_AUTHORS_REPO`` naming a checkout of ucr-optml/FedMSA)."""
