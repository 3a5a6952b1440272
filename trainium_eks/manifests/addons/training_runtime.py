"""TrainingRuntimeChart: the ClusterTrainingRuntime that the library's TrainJobs run on."""

from __future__ import annotations

from trainium_eks.core.validation import Problems, check_bool, check_dns_label, check_integer
from trainium_eks.manifests.addons.volcano_queue import DEFAULT_QUEUE
from trainium_eks.manifests.chart import LibraryChart
from trainium_eks.manifests.jobs.progress_watch import liveness_probe
from trainium_eks.moved import removed_props

DEFAULT_RUNTIME = "trainium-eks-torch"
TRAINER_API_VERSION = "trainer.kubeflow.org/v1alpha1"
NODE_JOB = "node"
"""The replicated job (and its container) that the Trainer fills from a TrainJob's ``spec.trainer``."""
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
"""Where the Trainer's Volcano plugin reads a TrainJob's queue: the runtime's or a runtime patch's template metadata
(kubeflow/trainer v2.3.0 ``pkg/runtime/core/trainingruntime.go`` ``newRuntimeInfo``), never ``TrainJob.metadata``."""
DEFAULT_MAX_RESTARTS = 2
"""Restarts of a whole TrainJob after a failed pod: 2, so a TrainJob runs at most three times, as a Volcano job of the
library does (``maxRetry: 3``). JobSet fails once a failure comes after ``maxRestarts`` restarts (kubernetes-sigs/jobset
v0.12.0 ``pkg/controllers/failure_policy.go``: ``maxRestarts + 1`` attempts); Volcano fails a job whose retry count
has reached ``maxRetry`` (volcano v1.15.1 ``pkg/controllers/job/state/restarting.go``: ``maxRetry`` attempts)."""


class TrainingRuntimeChart(LibraryChart):
    """A ``ClusterTrainingRuntime`` for torch jobs, the one ``TrainJobChart`` refers to.

    - ``mlPolicy: {numNodes: 1, torch: {}}``: the Trainer injects ``PET_NNODES``, ``PET_NPROC_PER_NODE``,
      ``PET_NODE_RANK``, ``PET_MASTER_ADDR``, ``PET_MASTER_PORT`` into the container ``node`` of the replicated job
      ``node``; a TrainJob gives the image, command, nodes, processes per node and resources;
    - the progress watch's liveness probe on the container ``node``
      (:mod:`~trainium_eks.manifests.jobs.progress_watch`: a TrainJob's patches cannot add a probe); it acts only on
      TrainJobs given ``progress`` (their environment names the progress file and the bounds) and passes on others;
    - a memory-backed ``/dev/shm``; no service-account token (a runtime patch cannot set
      ``automountServiceAccountToken``: the TrainJob CRD's patch schema allows only ``securityContext``,
      ``serviceAccountName``, placement and volumes), the runtime's default seccomp profile; pods that are never
      restarted in place (``restartPolicy: Never``, the child
      Job's ``backoffLimit: 0``): a failed pod fails the JobSet, which ``failurePolicy.maxRestarts`` then restarts
      whole, every node at once, as torchrun's rendezvous needs and as a Volcano job's ``RestartJob`` does (without
      a failure policy, JobSet fails at the first failed Job: kubernetes-sigs/jobset v0.12.0
      ``pkg/controllers/failure_policy.go``);
    - with ``volcano``, gang scheduling: ``podGroupPolicy.volcano`` (the Trainer creates a PodGroup of all the job's
      pods), ``schedulerName: volcano`` in the pod template (the Trainer never sets it, and a runtime patch cannot:
      without it the default scheduler places the pods one by one and ignores the PodGroup), and the queue as the
      annotation ``scheduling.volcano.sh/queue-name`` of the template metadata (the Trainer's Volcano plugin reads it
      there; a TrainJob's own patch may name another). Volcano must be installed before the Trainer's controller
      starts: a controller that finds no PodGroup kind at start never watches PodGroups (v2.3.0
      ``pkg/runtime/framework/plugins/volcano/volcano.go`` ``ReconcilerBuilders``).

    Source: kubeflow/trainer v2.3.0, ``manifests/base/runtimes`` (torch-distributed) and the ClusterTrainingRuntime
    CRD; the schema is ``../shared/k8s-schemas/schemas/trainer.kubeflow.org``. A runtime's ``failurePolicy`` cannot be
    changed once set (JobSet's CEL rule in the CRD): to change ``max_restarts``, give the runtime another name.

    :param name: Default: :data:`DEFAULT_RUNTIME`.
    :param volcano: Gang scheduling through Volcano. Default: true.
    :param queue: The Volcano queue of TrainJobs that do not name one. Default: ``training``.
    :param max_restarts: Restarts of a whole TrainJob after a failure. Default: 2 (three attempts).
    """

    @removed_props(
        "TrainingRuntimeChart",
        {
            "gate_image": "jobs no longer wait behind a start gate in their own pods: a job that waits is created by "
            "its release Job (JobSequence) once the jobs it waits for completed, so the runtime runs no gate image",
        },
    )
    def __init__(
        self,
        *,
        name: str = DEFAULT_RUNTIME,
        volcano: bool = True,
        queue: str = DEFAULT_QUEUE,
        max_restarts: int = DEFAULT_MAX_RESTARTS,
    ) -> None:
        problems = Problems("training runtime chart")
        check_dns_label(problems, "name", name)
        check_bool(problems, "volcano", volcano)
        check_dns_label(problems, "queue", queue)
        check_integer(problems, "max_restarts", max_restarts, minimum=0, maximum=100)
        problems.raise_if_any()
        super().__init__("training-runtime")
        self.runtime_name = name
        pod = {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": NODE_JOB,
                    "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
                    "livenessProbe": liveness_probe(),
                },
            ],
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
        }
        template = {"spec": {"replicatedJobs": [], "failurePolicy": {"maxRestarts": max_restarts}}}
        if volcano:
            pod["schedulerName"] = "volcano"
            template["metadata"] = {"annotations": {VOLCANO_QUEUE_ANNOTATION: queue}}
        template["spec"]["replicatedJobs"].append(
            {
                "name": NODE_JOB,
                "template": {
                    "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                    "spec": {"backoffLimit": 0, "template": {"spec": pod}},
                },
            }
        )
        spec = {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": template}
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
