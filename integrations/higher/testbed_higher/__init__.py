"""The hypergradient testbed's adapter of higher (``testbed verify higher-unrolled``)."""
