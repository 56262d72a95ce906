"""Experiments on MLP/CNN workloads: configs, the ``testbed run`` runner, replication rows."""
