"""The hypergradient testbed's adapter of the HGP authors' code (``testbed verify hgp-authors``
with ``HGP_AUTHORS_REPO`` naming a checkout of hitachi-rd-cv/pdbo-hgp)."""
