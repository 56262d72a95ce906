"""An example of a researcher's own estimator variant, verified by the testbed as a plugin."""
