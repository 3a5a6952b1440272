"""trainium-eks: AWS CDK constructs for distributed deep-learning training on Amazon EKS, Trainium first.

The package by kind: ``stacks/`` (the default app's stacks), ``constructs/`` (the AWS resources), ``manifests/``
(the in-cluster charts: ``addons/``, ``jobs/``, ``storage/``, ``access/``), ``workloads/`` (the seed runs),
``facts/`` (instances, prices, versions, regions, with sources), ``core/`` (checks, shared names, cost lines),
``commands/`` (``python -m trainium_eks``). Modules that moved keep their old import path for one release
(:mod:`trainium_eks.moved`).
"""

from trainium_eks import moved as _moved

_moved.install()
