"""Kubeflow job charts rendered outside a stack: three node groups (CPU, Trainium, GPU) and a job of each kind on
them."""

from trainium_eks.core.conventions import Taint
from trainium_eks.manifests.jobs.pytorch_job import PyTorchJobChart
from trainium_eks.manifests.jobs.topology import NodeGroupTopology
from trainium_eks.manifests.jobs.train_job import TrainJobChart

CPU = NodeGroupTopology("m5.xlarge", 6, 6, 0, (), frozenset({"efs-sc-claim"}))
TRN1 = NodeGroupTopology(
    "trn1.32xlarge", 2, 2, 8, (Taint("aws.amazon.com/neuron", "true", "NoSchedule"),), frozenset({"fsx-claim"})
)
P4D = NodeGroupTopology("p4d.24xlarge", 2, 2, 4, (Taint("nvidia.com/gpu", "true", "NoSchedule"),), frozenset({"c"}))
BASE = dict(name="cifar", image="example.com/cifar:1", node_group=CPU, script="/opt/cifar10/train_cifar10.py")


def trainjob(**overrides):
    """A TrainJobChart of :data:`BASE` with ``overrides``, and its one manifest."""
    chart = TrainJobChart(**{**BASE, **overrides})
    (manifest,) = chart.manifests()
    return chart, manifest


def patched_pod(manifest):
    """The pod spec of a TrainJob's one runtime patch."""
    (patch,) = manifest["spec"]["runtimePatches"]
    (replicated,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    return replicated["template"]["spec"]["template"]["spec"]


def pytorchjob(**overrides):
    """A PyTorchJobChart of :data:`BASE` with ``overrides``, and its one manifest."""
    chart = PyTorchJobChart(**{**BASE, **overrides})
    (manifest,) = chart.manifests()
    return chart, manifest
