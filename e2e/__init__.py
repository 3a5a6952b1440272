"""The real control plane for the tests: Kubernetes, etcd, kwok, Karpenter, Volcano, JobSet and Trainer built from
their Go modules (:mod:`e2e.build`) and run on loopback inside the test run's network namespace
(:mod:`e2e.cluster`), with the stacks' objects applied through aws-eks-v2's own kubectl handler (:mod:`e2e.deploy`).
"""
