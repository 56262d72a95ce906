"""The hypergradient testbed's adapter of Betty (``testbed verify betty-...``)."""
