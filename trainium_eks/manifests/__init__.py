"""Charts: the in-cluster add-ons and the jobs as Kubernetes objects (``chart.LibraryChart``), by role: ``addons/``,
``jobs/``, ``storage/``, ``access/``; applied to a cluster by ``AppliedChart`` (``ClusterAddons``, ``JobSequence``)."""

from trainium_eks.manifests.access.system_network_policy import SystemNetworkPolicyChart
from trainium_eks.manifests.access.training_namespace import TrainingNamespaceChart
from trainium_eks.manifests.access.training_network_policy import TrainingNetworkPolicyChart
from trainium_eks.manifests.chart import LibraryChart
from trainium_eks.manifests.jobs.dataset_staging import DatasetStagingChart
from trainium_eks.manifests.jobs.distributed_workload import Launcher
from trainium_eks.manifests.jobs.gang_capacity import GangCapacity
from trainium_eks.manifests.jobs.graceful_stop import GracefulStop
from trainium_eks.manifests.jobs.job_chart import JobChart
from trainium_eks.manifests.jobs.progress_watch import ProgressWatch
from trainium_eks.manifests.jobs.pytorch_job import PyTorchJobChart
from trainium_eks.manifests.jobs.topology import NodeGroupTopology
from trainium_eks.manifests.jobs.train_job import TrainJobChart
from trainium_eks.manifests.jobs.volcano_job import VolcanoJobChart
from trainium_eks.manifests.storage.efs_volume import EfsVolumeChart
from trainium_eks.manifests.storage.lustre_volume import LustreVolumeChart

__all__ = [
    "DatasetStagingChart",
    "EfsVolumeChart",
    "GangCapacity",
    "GracefulStop",
    "JobChart",
    "Launcher",
    "LibraryChart",
    "LustreVolumeChart",
    "NodeGroupTopology",
    "ProgressWatch",
    "PyTorchJobChart",
    "SystemNetworkPolicyChart",
    "TrainJobChart",
    "TrainingNamespaceChart",
    "TrainingNetworkPolicyChart",
    "VolcanoJobChart",
]
