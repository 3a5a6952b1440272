"""TrainingRuntimeChart: the ClusterTrainingRuntime that the library's TrainJobs run on."""

from __future__ import annotations

from trainium_eks import versions
from trainium_eks.manifests.chart import LibraryChart
from trainium_eks.manifests.distributed_workload import START_GATE_SOURCE
from trainium_eks.validation import Problems, check_bool, check_dns_label, check_text

DEFAULT_RUNTIME = "trainium-eks-torch"
TRAINER_API_VERSION = "trainer.kubeflow.org/v1alpha1"
NODE_JOB = "node"
"""The replicated job (and its container) that the Trainer fills from a TrainJob's ``spec.trainer``."""
START_GATE = "start-gate"
START_GATE_JOBS = "START_GATE_JOBS"
"""Environment variable of the start gate: the jobs to wait for, separated by spaces (set per TrainJob)."""


class TrainingRuntimeChart(LibraryChart):
    """A ``ClusterTrainingRuntime`` for torch jobs, the one ``TrainJobChart`` refers to.

    - ``mlPolicy: {numNodes: 1, torch: {}}``: the Trainer injects ``PET_NNODES``, ``PET_NPROC_PER_NODE``,
      ``PET_NODE_RANK``, ``PET_MASTER_ADDR``, ``PET_MASTER_PORT`` into the container ``node`` of the replicated job
      ``node``; a TrainJob gives the image, command, nodes, processes per node and resources;
    - a memory-backed ``/dev/shm``;
    - the start gate as an init container (a runtime cannot know each job's image, so the gate runs on a pinned Python
      image, :data:`trainium_eks.versions.START_GATE_IMAGE`): it waits for the jobs a TrainJob names in
      ``START_GATE_JOBS`` (set by the TrainJob's runtime patch) and passes at once when there are none;
    - with ``volcano``, ``podGroupPolicy.volcano``: the Trainer creates a Volcano PodGroup, so every node of a job is
      scheduled together or none (gang scheduling; needs Volcano in the cluster).

    Source: kubeflow/trainer v2.3.0, ``manifests/base/runtimes`` (torch-distributed) and the ClusterTrainingRuntime
    CRD; the schema is ``../shared/k8s-schemas/schemas/trainer.kubeflow.org``.

    :param name: Default: :data:`DEFAULT_RUNTIME`.
    :param volcano: Gang scheduling through Volcano. Default: true.
    :param gate_image: Default: :data:`trainium_eks.versions.START_GATE_IMAGE`.
    """

    def __init__(
        self, *, name: str = DEFAULT_RUNTIME, volcano: bool = True, gate_image: str = versions.START_GATE_IMAGE.image
    ) -> None:
        problems = Problems("training runtime chart")
        check_dns_label(problems, "name", name)
        check_bool(problems, "volcano", volcano)
        check_text(problems, "gate_image", gate_image, allowed="a container image reference with Python 3")
        problems.raise_if_any()
        super().__init__("training-runtime")
        self.runtime_name = name
        gate = {
            "name": START_GATE,
            "image": gate_image,
            "command": ["python3", "-c", START_GATE_SOURCE, "$(POD_NAMESPACE)", f"$({START_GATE_JOBS})"],
            "env": [
                {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": START_GATE_JOBS, "value": ""},
            ],
            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        }
        pod = {
            "initContainers": [gate],
            "containers": [
                {"name": NODE_JOB, "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]},
            ],
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
        }
        spec = {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": NODE_JOB,
                            "template": {
                                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                "spec": {"template": {"spec": pod}},
                            },
                        }
                    ]
                }
            },
        }
        if volcano:
            spec["podGroupPolicy"] = {"volcano": {}}
        self.add_object(
            {
                "apiVersion": TRAINER_API_VERSION,
                "kind": "ClusterTrainingRuntime",
                "metadata": self.metadata(
                    name, cluster_scoped=True, labels={"trainer.kubeflow.org/framework": "torch"}
                ),
                "spec": spec,
            }
        )
