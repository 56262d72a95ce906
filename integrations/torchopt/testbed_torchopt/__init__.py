"""The hypergradient testbed's adapter of TorchOpt (``testbed verify torchopt-...``)."""
